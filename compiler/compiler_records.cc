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

bool Compiler::records_apply(const CompileOptions& o) const {
  static const bool off = [] {
    const char* v = env::read(env::Var::kcache_lookup_records);
    return v && std::string(v) == "off";
  }();
  return storage_ && !o.may_read && !off;
}

std::string Compiler::record_inputs(const CompileOptions& o, const Prepared& p) const {
  // Everything the lookup reads other than the disk and the program's name
  // (lookup_record.h). A new field of CompileOptions that a lookup reads
  // belongs here.
  ByteWriter w;
  w.str("kcache-lookup-record v1");
  w.str(keyed_identity_);
  w.str(kLeanPassVersion);
  w.u32(cache::kProgramRecordVersion);
  w.str(toolkit_.nvjitlink.path.empty() ? "no nvJitLink" : toolkit_.nvjitlink.describe());
  // The toolkit's folders (resolve, probes_hold). Not the probe context's
  // own folders: only a compile's classification reads them, and prewarm's
  // PCH folder among them is new in every process.
  for (const std::vector<std::string>* list :
       std::initializer_list<const std::vector<std::string>*>{&toolkit_.include_dirs,
                                                              &probe_context_.toolkit_dirs}) {
    w.u32(static_cast<uint32_t>(list->size()));
    for (const std::string& d : *list) w.str(d);
  }
  for (const char* name : {"CUDA_CACHE_PATH", "HOME"}) {  // probes_nvrtc_own.cc's driver cache
    const char* v = env::read(name);
    w.u8(v ? 1 : 0);
    w.str(v ? v : "");
  }
  w.u8(storage_->sloppy_time_macros() ? 1 : 0);
  // Today as __DATE__ gives it (time_macros.h): a header a manifest's ask
  // brings may use it, and the key the lookup computes then holds the day
  // (the second review's wrong hit). A record lasts a day at most.
  w.str(storage_->sloppy_time_macros() ? "" : date_macro_value(std::time(nullptr)));
  w.str(p.folder);
  // resolve keys $PWD's spelling for these (whether it does follows from
  // p.key_options, hashed below).
  if (writes_working_folder(p.key_options)) w.str(p.spelling);
  w.u32(static_cast<uint32_t>(p.targets.size()));
  for (const Target& t : p.targets) {
    w.u8(t.kind == cache::TargetKind::cubin ? 1 : 0);
    w.str(t.arch);
  }
  for (const std::vector<std::string>* list :
       std::initializer_list<const std::vector<std::string>*>{&p.key_options,
                                                              &o.name_expressions}) {
    w.u32(static_cast<uint32_t>(list->size()));
    for (const std::string& item : *list) w.str(item);
  }
  w.u32(static_cast<uint32_t>(o.include_dirs.size()));
  for (const std::string& d : o.include_dirs) {
    char real[PATH_MAX];
    w.str(d);
    w.str(::realpath(d.c_str(), real) ? real : "");  // includes.cc: is it the toolkit's?
  }
  w.u8(o.lean ? 1 : 0);
  w.u8(o.program ? 1 : 0);
  w.u8(o.source_text ? 1 : 0);
  w.u8(o.name_free ? 1 : 0);
  w.str(o.shared_name);
  w.u32(static_cast<uint32_t>(o.memory_headers.size()));
  for (const cache::Header& h : o.memory_headers) {
    w.str(h.include_name);
    w.str(h.content);
  }
  w.str(p.source);
  return w.take();
}

Hash128 Compiler::record_key(const std::string& inputs, const CompileOptions& o, bool any_name) {
  ByteWriter w;
  w.bytes(inputs);
  w.u8(any_name ? 1 : 0);
  if (any_name) {
    // Its folder is in the record's paths (kSourceFolderPrefix), not here.
    const std::string& path = o.source_path;
    w.str(path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1));
  } else {
    w.str(o.source_path);
    w.str(o.logical_name());
  }
  return xxh3_128(w.data());
}

bool Compiler::record_hit(const CompileOptions& options, const Prepared& p,
                          std::vector<TargetResult>* out) {
  const std::string inputs = record_inputs(options, p);
  for (bool any_name : {true, false}) {
    if (any_name && !options.name_free) continue;
    const Hash128 key = record_key(inputs, options, any_name);
    std::optional<std::string> bytes = storage_->get_lookup_record_bytes(key);
    if (!bytes) continue;
    std::optional<std::vector<cache::ManifestResult>> results;
    try {
      results = record_holds(*bytes, key, "lookup record " + key.hex(),
                             any_name ? parts::program_folder(options) : "");
    } catch (const Error&) {
      continue;  // damaged, or a newer kcache's: the long way writes it again
    }
    if (!results || results->size() != p.targets.size()) continue;
    std::vector<TargetResult> found;
    for (size_t i = 0; i < p.targets.size(); ++i) {
      const Target& t = p.targets[i];
      const cache::ManifestResult& recorded = (*results)[i];
      if (recorded.cubin != (t.kind == cache::TargetKind::cubin) || recorded.arch != t.arch) break;
      std::optional<cache::Entry> e = storage_->get(recorded.key, cache::Store::Access::uncounted);
      if (!e) break;  // evicted: the long way decides
      if (!parts::entry_answers(options, t, recorded.key, *e)) break;
      TargetResult r;
      r.target = t;
      r.any_name = recorded.any_name;
      parts::take_entry(recorded.key, std::move(*e), &r);
      found.push_back(std::move(r));
    }
    if (found.size() == p.targets.size()) {
      for (TargetResult& r : found) r.found_by = FoundBy::lookup_record;
      *out = std::move(found);
      return true;
    }
  }
  return false;
}

void Compiler::write_lookup_record(const CompileOptions& options, const Prepared& p,
                                   const DiskObservations& seen,
                                   const std::vector<TargetResult>& found) {
  if (!p.request.date.empty() || p.uses_time) return;  // keyed by the day, or never stored
  bool any_name =
      options.name_free &&
      std::all_of(found.begin(), found.end(), [](const TargetResult& r) { return r.any_name; });
  std::string folder = any_name ? parts::program_folder(options) : "";
  if (any_name) {
    // Paths beneath the folder are recorded relative to it: only where
    // nothing the lookup read names the folder itself, so that in another
    // folder the lookup would look at the same places beneath that one.
    const std::string& cwd = p.folder;
    bool named = folder.empty() || folder == "/" || cwd == folder ||
                 cwd.compare(0, folder.size() + 1, folder + "/") == 0 ||
                 names_folder(p.source, folder);
    for (const std::vector<std::string>* list :
         std::initializer_list<const std::vector<std::string>*>{
             &options.include_dirs, &p.key_options, &options.name_expressions,
             &probe_context_.toolkit_dirs}) {
      for (const std::string& item : *list) named = named || names_folder(item, folder);
    }
    for (const cache::Header& h : options.memory_headers) {
      named = named || names_folder(h.content, folder);
    }
    for (const ResolvedHeader& h : p.includes.headers) {
      named = named || names_folder(h.content, folder);
    }
    if (named) {
      any_name = false;
      folder.clear();
    }
  }
  // The toolkit's folders, as named and as links resolve: no program writes
  // into them, so a name NVRTC found absent there is checked by its folder.
  std::vector<std::string> quiet = probe_context_.toolkit_dirs;
  for (const std::string& d : toolkit_.include_dirs) quiet.push_back(parts::absolute_path(d));
  std::optional<std::vector<cache::ManifestProbe>> probes =
      seen.probes(folder, p.keyed_absolutely, quiet);
  if (!probes && any_name) {
    any_name = false;  // it holds for this folder only (lookup_record.h)
    probes = seen.probes("", {}, quiet);
  }
  if (!probes) return;
  cache::ManifestSet set;
  set.probes = std::move(*probes);
  for (const TargetResult& r : found) {
    set.results.push_back(
        {r.target.kind == cache::TargetKind::cubin, r.target.arch, r.any_name, r.key});
  }
  cache::Manifest record(record_key(record_inputs(options, p), options, any_name));
  try {
    record.add(std::move(set));
  } catch (const InvalidArgument&) {
    return;  // a path a manifest cannot hold: no record for this one
  }
  storage_->put_lookup_record(record);
}

void Compiler::record_after_store(const CompileOptions& options, const Prepared& made) {
  Prepared p;
  p.targets = made.targets;
  p.key_options = made.key_options;
  p.source = made.source;
  p.recipe = made.recipe;
  p.folder = made.folder;
  p.spelling = made.spelling;
  std::vector<TargetResult> found;
  DiskObservations seen;
  resolve(options, &p);
  look_up(options, p, &found);
  if (!std::all_of(found.begin(), found.end(), [](const TargetResult& r) { return r.hit; })) {
    return;
  }
  write_lookup_record(options, p, seen, found);
}

}  // namespace kcache::compiler
