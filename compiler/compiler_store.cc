#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <map>
#include <set>
#include <thread>

#include "bundle/bundle.h"
#include "cache/format/lookup_note.h"
#include "cache/format/manifest.h"
#include "cache/format/program_record.h"
#include "common/arch.h"
#include "common/bytes.h"
#include "common/environment.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/hash.h"
#include "compiler/compiler.h"
#include "compiler/compiler_parts.h"
#include "compiler/image/lean_image.h"
#include "compiler/includes.h"
#include "compiler/lookup_record.h"
#include "compiler/nvrtc/nvrtc.h"
#include "compiler/nvrtc/nvrtc_pool.h"
#include "compiler/nvrtc/nvrtc_worker.h"
#include "compiler/nvrtc/pch.h"
#include "compiler/seal/probes.h"
#include "compiler/seal/seal.h"
#include "compiler/served_keys.h"
#include "compiler/time_macros.h"
#include "compiler/undeclared.h"

namespace kcache::compiler {
namespace {

// The source's name an entry keeps for `kcache ls` (never keyed), where an
// entry may hold it.
std::string listed_name(const std::string& name) {
  return cache::Entry::keeps_source_name(name) ? name : std::string();
}

// Once per process: results are compiled but not cached without the seal.
void warn_unsealed(const std::string& why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr,
                 "kcache: warning: NVRTC cannot be sealed here (%s): kernels are compiled but "
                 "not cached (kcache -s counts them as uncached compiles)\n",
                 why.c_str());
  });
}

// Whether a compile must not be stored for its time macros: it uses __TIME__
// (the source, an option, a program's header), or __DATE__ where the date
// changed since it was keyed (at midnight).
bool time_macros_forbid_storing(const std::string& today, bool uses_time,
                                const std::string& keyed_date) {
  if (today.empty()) return false;  // sloppy
  if (uses_time) return true;
  return !keyed_date.empty() && date_macro_value(std::time(nullptr)) != today;
}

}  // namespace

void Compiler::add_to_manifest(const Hash128& key, cache::ManifestSet set) {
  // Read, add, replace: the last writer wins, and a set lost to a concurrent
  // writer is a lost hit, never a wrong one.
  std::optional<cache::Manifest> m = storage_->get_manifest(key);
  if (!m) m.emplace(key);
  try {
    m->add(std::move(set));
  } catch (const InvalidArgument&) {
    return;  // a name a manifest cannot hold (a control character): no direct-mode hit
  }
  storage_->put_manifest(*m);
}

namespace {

// What the program's text was, for the lean pass's class constants
// (class_constants.h): the source, the headers handed in memory and every
// file NVRTC opened from disk.
std::vector<std::string> program_texts(const NvrtcInput& in, const NvrtcOutput& out) {
  std::vector<std::string> texts{in.source};
  for (const NvrtcHeader& h : in.headers) texts.push_back(h.content);
  std::map<std::string, Hash128> served;
  for (const ServedFile& f : out.served) served[f.path] = f.content;
  std::set<std::string> paths(out.probes.begin(), out.probes.end());
  for (const ServedFile& f : out.served) paths.insert(f.path);
  for (const std::string& path : paths) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (16 << 20)) continue;
    std::optional<std::string> text = read_file(path);
    if (!text) continue;
    // Read again after NVRTC: where a served file's bytes are not the ones
    // NVRTC was served (changed since), the text decides nothing (lean-v2's
    // rule stands), as the entry is keyed by what NVRTC read.
    auto was = served.find(path);
    if (was != served.end() && xxh3_128(*text) != was->second) return {};
    texts.push_back(std::move(*text));
  }
  return texts;
}

}  // namespace

// The lean image (lean_image.h). A program's CUBIN is made lean from its
// PTX; the PTX it reads stays NVRTC's, and a compile that made no CUBIN is
// left alone.
void Compiler::make_lean(const Prepared& p, Miss* m) const {
  const Target& t = m->target;
  NvrtcOutput& out = *m->output;
  std::string* image = &out.image;
  std::string ptx = std::move(out.ptx);
  if (out.program) {
    cache::ProgramRecord& answers = *out.program;
    cache::ProgramRecord::Output& cubin = answers.output(cache::ProgramOutput::cubin);
    ptx = answers.output(cache::ProgramOutput::ptx).bytes;
    while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
    if (answers.compile_result != cache::kNvrtcSuccess || t.kind != cache::TargetKind::cubin ||
        cubin.size_result != cache::kNvrtcSuccess || cubin.bytes.empty()) {
      return;
    }
    image = &cubin.bytes;
  }
  LeanInput in{t.kind,        t.arch, std::move(*image),      std::move(ptx),
               p.key_options, {},     toolkit_.nvjitlink.path, program_texts(m->input, out)};
  for (const cache::LoweredName& n : out.lowered_names) in.keep.push_back(n.lowered_name);
  m->lean = make_lean_image(in);
  *image = std::move(m->lean.image);
}

void Compiler::store_misses(const CompileOptions& options, const Prepared& p,
                            std::vector<Miss>& misses, CompileResult* result) {
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (Miss& m : misses) {
    TargetResult& r = result->targets[m.index];
    settle_entry(options, p, now, &m, &r);
    if (!m.output->log.empty() && result->warnings.find(m.output->log) == std::string::npos) {
      result->warnings += m.output->log;
    }
  }
  if (!storage_) return;
  for (Miss& m : misses) {
    if (m.storable) {
      storage_->put(m.shared ? *m.shared : *result->targets[m.index].entry);
      if (m.manifest_key) add_to_manifest(*m.manifest_key, std::move(m.paths));
    } else {
      storage_->count(m.time_macros ? "uncached_time_macros" : "uncached_compiles", 1);
    }
  }
}

// A miss's key and entry, and whether it may be stored (and why not).
void Compiler::settle_entry(const CompileOptions& options, const Prepared& p, int64_t now, Miss* m,
                            TargetResult* r) {
  NvrtcOutput& out = *m->output;
  m->paths.probes = std::move(m->classified.keyed);
  std::string why = !p.recipe.keys_relative_to_working_folder
                        ? ""
                        : key_beneath_working_folder(p.request, out, p.folder, p.spelling,
                                                     &m->paths.probes);
  if (why.empty()) why = toolkit_named_unkeyed(p.request, out, probe_context_.toolkit_dirs);
  if (why.empty()) {
    const std::string hidden =
        driver_cache_in_folder(m->paths.probes, p.folder, &out.relative_names);
    if (!hidden.empty()) {
      why = "the driver's JIT cache, where NVRTC was answered \"no such file\" (" + hidden +
            "), lies in the working folder, which is keyed relative to itself";
    }
  }
  if (!why.empty() && m->classified.unkeyable.empty()) m->classified.unkeyable = std::move(why);
  // Keyed by everything NVRTC read; a lookup finds it through the manifest
  // of its scanner key (r->key until here).
  cache::CompileRequest full = p.request;
  full.target = r->target.kind;
  full.arch = r->target.arch;
  m->manifest_key = cache::manifest_key(cache::compute_key(full));
  r->key = parts::full_key(full, m->paths);
  // A compile NVRTC could not be sealed for may have read an unkeyed file;
  // one whose probes cannot be keyed may have answered from one.
  if (!out.sealed) warn_unsealed(out.unsealed_why);
  if (!m->classified.unkeyable.empty() && env::read(env::Var::kcache_debug_probes)) {
    std::fprintf(stderr, "unkeyable: %s\n", m->classified.unkeyable.c_str());
  }
  if (!m->classified.unkeyable.empty()) r->not_stored = m->classified.unkeyable;
  if (!out.sealed) r->not_stored = "NVRTC could not be sealed: " + out.unsealed_why;
  m->storable = out.sealed && m->classified.unkeyable.empty();
  if (time_macros_forbid_storing(p.today, p.uses_time, p.request.date)) {
    m->storable = false;
    m->time_macros = true;
    r->not_stored = "it uses __TIME__, __TIMESTAMP__ or a __DATE__ that changed";
  }
  r->compile_ms = static_cast<uint32_t>(out.ms + 0.5);
  const LeanRecord lean = options.lean ? m->lean.record() : LeanRecord{};  // before the move
  r->lean = m->lean.lean;
  r->lean_bytes_removed = m->lean.bytes_removed;
  r->lean_variables_removed = m->lean.variables_removed;
  r->lean_note = std::move(m->lean.note);
  std::string payload = out.program ? out.program->encode() : out.image;
  // A program whose answer does not name it (program.h) is stored under the
  // key of no name, for every name.
  r->name_dependent = options.name_free && m->storable && !m->name_checked;
  // Not shared where the driver's cache lies in the program's folder: its
  // `own:` lines name this folder's paths (driver_cache_in_folder).
  if (options.name_free && m->storable && m->name_checked &&
      driver_cache_in_folder(m->paths.probes, parts::program_folder(options), nullptr).empty()) {
    if (std::optional<std::string> shared = options.name_free(payload)) {
      cache::CompileRequest any = parts::any_name_request(p.request, options.shared_name);
      any.target = r->target.kind;
      any.arch = r->target.arch;
      Hash128 any_key = cache::compute_key(any);
      // What NVRTC found in the program's folder (its builtin names next
      // to the program, a quoted include) is keyed relative to that folder:
      // a lookup checks the same names in its own (probes_hold).
      relative_to_program_folder(parts::program_folder(options), m->not_the_folders,
                                 &m->paths.probes);
      m->manifest_key = cache::manifest_key(any_key);
      any_key = parts::full_key(any, m->paths);
      r->key = any_key;
      r->any_name = true;
      m->shared.emplace(r->key, r->target.kind, r->target.arch, r->compile_ms, now,
                        std::move(*shared), out.lowered_names, lean, std::string(),
                        listed_name(options.shared_name));
    }
  }
  // NVRTC's warnings, shown again on a hit (a program's are in its record).
  std::string log = !out.program && cache::Entry::keeps_log(out.log) ? out.log : "";
  r->entry.emplace(r->key, r->target.kind, r->target.arch, r->compile_ms, now, std::move(payload),
                   std::move(out.lowered_names), lean, std::move(log),
                   listed_name(options.logical_name()));
}

}  // namespace kcache::compiler
