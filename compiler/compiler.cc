#include "compiler/compiler.h"

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

// kcache resolves includes and picks the arch itself; these would let NVRTC
// read files the key does not cover, or compile a target other than the one
// keyed.
struct Forbidden {
  const char* prefix;
  const char* instead;
};
constexpr Forbidden kForbidden[] = {
    {"-I", "pass -I to kcache: it resolves includes itself so the key covers them"},
    {"--include-path", "pass -I to kcache: it resolves includes itself so the key covers them"},
    {"-include", "include the header from the source instead"},
    {"--pre-include", "include the header from the source instead"},
    {"-arch", "use --arch (cubins) and --ptx (PTX)"},
    {"--gpu-architecture", "use --arch (cubins) and --ptx (PTX)"},
    {"-std", "use --std"},
    {"--std", "use --std"},
    {"-D", "use -D"},
    {"--define-macro", "use -D"},
    {"-U", "use -U"},
    {"--undefine-macro", "use -U"},
};

void check_nvrtc_option(const std::string& option) {
  for (const Forbidden& f : kForbidden) {
    std::string p = f.prefix;
    if (option.compare(0, p.size(), p) == 0 &&
        (option.size() == p.size() || p.size() == 2 || option[p.size()] == '=')) {
      throw InvalidArgument("--nvrtc-opt " + option + " is not allowed: " + f.instead);
    }
  }
}

// Keys __DATE__ and finds __TIME__ in what prepare() hands (time_macros.h):
// the source, the headers, and the options and name expressions, which NVRTC
// expands as well (-D X=__TIME__, a name expression k<__DATE__[5]>).
void check_time_macros(bool sloppy, const std::string& source, const IncludeGraph& includes,
                       const std::vector<std::string>& option_texts, cache::CompileRequest* request,
                       std::string* today, bool* uses_time) {
  if (sloppy) return;
  *today = date_macro_value(std::time(nullptr));
  auto any_text = [&](bool (*uses)(std::string_view)) {
    return std::any_of(option_texts.begin(), option_texts.end(),
                       [&](const std::string& t) { return uses(t); });
  };
  *uses_time = uses_time_macros(source) || parts::any_uses_time_macros(includes.headers) ||
               any_text(uses_time_macros);
  if (uses_date_macro(source) || parts::any_uses_date_macro(includes.headers) ||
      any_text(uses_date_macro)) {
    request->date = *today;
  }
}

}  // namespace

Target parse_target(const std::string& arch, cache::TargetKind kind) {
  const std::string prefix = kind == cache::TargetKind::cubin ? "sm_" : "compute_";
  auto bad = [&](const std::string& why) {
    return InvalidArgument(
        "\"" + arch + "\" " + why + did_you_mean_arch(arch) +
        (kind == cache::TargetKind::cubin
             ? ": --arch takes real architectures such as sm_80, sm_90, sm_90a (one cubin each)"
             : ": --ptx takes a virtual architecture such as compute_90"));
  };
  if (arch.compare(0, prefix.size(), prefix) != 0) {
    if (kind == cache::TargetKind::cubin && arch.compare(0, 8, "compute_") == 0) {
      throw InvalidArgument("\"" + arch + "\" is a virtual architecture: use --ptx " + arch +
                            " for PTX, and --arch sm_" + arch.substr(8) + " for a cubin");
    }
    if (kind == cache::TargetKind::ptx && arch.compare(0, 3, "sm_") == 0) {
      throw InvalidArgument("\"" + arch + "\" is a real architecture: use --arch " + arch +
                            " for a cubin, and --ptx compute_" + arch.substr(3) + " for PTX");
    }
    throw bad("is not an architecture name");
  }
  std::optional<Arch> parsed = parse_arch(arch);  // the grammar bundles are checked against
  if (!parsed) throw bad("is not an architecture name");
  Target t;
  t.kind = kind;
  t.arch = arch;
  t.number = parsed->number();
  return t;
}

int CompileResult::hits() const {
  return static_cast<int>(
      std::count_if(targets.begin(), targets.end(), [](const TargetResult& t) { return t.hit; }));
}
int CompileResult::misses() const { return static_cast<int>(targets.size()) - hits(); }

std::vector<std::string> canonical_options(const CompileOptions& options) {
  std::vector<std::string> out;
  if (!options.std.empty()) out.push_back("-std=" + options.std);
  for (const std::string& d : options.defines) {
    if (d.empty() || d.front() == '=')
      throw InvalidArgument("-D needs a macro name: -D NAME[=VALUE]");
    out.push_back("-D" + d);
  }
  for (const std::string& m : options.macros) {
    // NVRTC takes -D= and -U= too (measured): the one spelling keyed is -DNAME / -UNAME.
    bool define = m.compare(0, 2, "-D") == 0;
    if ((!define && m.compare(0, 2, "-U") != 0) || m.size() == 2 || m[2] == '=' ||
        (!define && m.find('=') != std::string::npos)) {
      throw InvalidArgument("\"" + m + "\" is no macro option: -DNAME[=VALUE] or -UNAME");
    }
    out.push_back(m);
  }
  for (const std::string& o : options.nvrtc_options) {
    check_nvrtc_option(o);
    out.push_back(o);
  }
  return out;
}

void Compiler::Slots::acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return free_ > 0; });
  --free_;
}

void Compiler::Slots::release() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++free_;
  }
  cv_.notify_one();
}

Compiler::Compiler(Toolkit toolkit, cache::Storage* storage, int max_parallel,
                   std::vector<std::string> worker_command)
    : toolkit_(std::move(toolkit)),
      identity_(toolkit_.identity()),
      storage_(storage),
      slots_(max_parallel > 0 ? max_parallel
                              : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))),
      worker_command_(std::move(worker_command)) {
  // NVRTC writes the toolkit's folders into its output (__FILE__ in CCCL's
  // assertions, -G and -lineinfo line tables), so they are keyed, by the
  // name a link resolves to: the same toolkit reached as /usr/local/cuda or
  // /usr/local/cuda-13.0, or through Bazel's links, gives one name.
  for (const std::string& d : toolkit_.include_dirs) {
    char real[PATH_MAX];
    std::string dir = parts::absolute_path(d);
    probe_context_.toolkit_dirs.push_back(::realpath(dir.c_str(), real) ? std::string(real) : dir);
  }
  keyed_identity_ = identity_ + "; include folders";
  for (const std::string& d : probe_context_.toolkit_dirs) keyed_identity_ += " " + d;
  size_t slash = toolkit_.nvrtc.path.rfind('/');
  if (slash != std::string::npos) {
    probe_context_.own_dirs.push_back(toolkit_.nvrtc.path.substr(0, slash));
    probe_context_.nvrtc_library_dir = toolkit_.nvrtc.path.substr(0, slash);
  }
}

Compiler::Prepared Compiler::prepare(const CompileOptions& options) const {
  Prepared p = prepare_head(options);
  resolve(options, &p);
  return p;
}

Compiler::Prepared Compiler::prepare_head(const CompileOptions& options) const {
  Prepared p;
  // Targets first: a typo in --arch must not wait for anything.
  for (const std::string& a : options.archs) {
    p.targets.push_back(parse_target(a, cache::TargetKind::cubin));
  }
  if (!options.ptx_arch.empty()) {
    p.targets.push_back(parse_target(options.ptx_arch, cache::TargetKind::ptx));
  }
  if (p.targets.empty()) {
    throw InvalidArgument("nothing to compile: give --arch sm_XX and/or --ptx compute_XX");
  }
  for (size_t i = 0; i < p.targets.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (p.targets[i].arch == p.targets[j].arch) {
        throw InvalidArgument(p.targets[i].arch + " is given twice");
      }
    }
  }
  if (options.program && p.targets.size() != 1) {
    throw InvalidArgument("an NVRTC program compiles one target");
  }
  if (options.program && (!worker_command_.empty() || !pch_dir_.empty())) {
    // A program's answers are NVRTC's own: in this process or a pool's
    // children (which never use a PCH for them), not through a PCH here.
    throw InvalidArgument("an NVRTC program compiles in this process or a pool: no PCH");
  }
  p.recipe = recipe_for(options);
  p.folder = compile_folder(options.working_folder);
  p.spelling = folder_spelling(p.folder);
  p.key_options = canonical_options(options);
  if (options.source_text) {
    if (options.logical_name().empty()) {
      throw InvalidArgument("a kernel source given as text needs a name (source_name)");
    }
    p.source = *options.source_text;
  } else {
    if (options.source_path.empty()) throw InvalidArgument("no kernel source given");
    std::optional<std::string> source;
    try {
      source = read_input_file(options.source_path);
    } catch (const IoError& e) {
      throw IoError(std::string(e.what()) + " (the kernel source)");
    }
    if (!source) throw NotFound("kernel source " + options.source_path + " does not exist");
    p.source = std::move(*source);
  }
  return p;
}

IncludeGraph Compiler::scan(const CompileOptions& options, const KeyRecipe& recipe,
                            const std::string& source) const {
  std::set<std::string> in_memory;
  for (const cache::Header& h : options.memory_headers) in_memory.insert(h.include_name);
  // Served, NVRTC looks for the source's quoted includes next to its name.
  std::string root = recipe.scans_from_name ? options.logical_name() : options.source_path;
  if (recipe.scans_from_name && !options.working_folder.empty() && !root.empty() &&
      root.front() != '/') {
    root = compile_folder(options.working_folder) + "/" + root;  // where NVRTC looks
  }
  IncludeGraph g =
      resolve_includes(root, source,
                       {options.include_dirs, toolkit_.include_dirs, options.may_read, -1,
                        parts::scan_options(options), in_memory});
  // NVRTC's own "cannot open source file" must reach the program's log.
  for (MissingInclude& m : g.missing) m.stub.clear();
  return g;
}

std::vector<MissingInclude> Compiler::missing_includes(const CompileOptions& options,
                                                       const Prepared& p) const {
  try {
    return scan(options, p.recipe, p.source).missing;
  } catch (const Error&) {
    return {};  // the hints are a courtesy: NVRTC's answer stands
  }
}

void Compiler::resolve(const CompileOptions& options, Prepared* prepared) const {
  Prepared& p = *prepared;
  // No key needs a scan: every file NVRTC reads is keyed by its bytes
  // through the manifest (docs/KEYS.md), so a lookup reads the source and
  // stats what the manifest names. The scanner runs only for a failed
  // compile's hints (missing_includes). A program's in-memory headers are
  // keyed by name and bytes.
  for (const cache::Header& h : options.memory_headers) {
    p.includes.headers.push_back({h.include_name, h.include_name, h.content});
  }
  std::stable_sort(
      p.includes.headers.begin(), p.includes.headers.end(),
      [](const ResolvedHeader& a, const ResolvedHeader& b) { return a.name < b.name; });

  p.request.compiler_identity = keyed_identity_;
  p.request.options = p.key_options;
  p.request.source_name = options.logical_name();
  p.request.source = p.source;
  for (const ResolvedHeader& h : p.includes.headers) p.request.headers.push_back({h.name, h.content});
  p.request.name_expressions = options.name_expressions;
  std::vector<std::string> option_texts = p.key_options;
  option_texts.insert(option_texts.end(), options.name_expressions.begin(),
                      options.name_expressions.end());
  p.request.sloppy_time_macros = storage_ && storage_->sloppy_time_macros();
  check_time_macros(p.request.sloppy_time_macros, p.source, p.includes, option_texts, &p.request,
                    &p.today, &p.uses_time);
  // The namespace's name (a program's entries hold a record, not an image:
  // never the same key). NVRTC's -I as written reach its output (__FILE__ of
  // a header there is "<-I>/name"); the working folder is keyed where the
  // recipe says it reaches the output or the files found, and -G and
  // -lineinfo write $PWD's spelling and the toolkit's folders there too.
  p.request.image_pass = p.recipe.image_pass;
  for (const std::string& d : options.include_dirs) p.request.options.push_back("-I" + d);
  if (p.recipe.keys_working_folder(options, p.key_options, p.folder)) {
    p.request.options.push_back(kWorkingFolderOption + p.folder);
  }
  if (writes_working_folder(p.key_options)) key_folders_named_in_outputs(p, &p.request);
  if (options.lean) {
    const LibraryFingerprint& link = toolkit_.nvjitlink;
    p.request.image_pass += (p.request.image_pass.empty() ? "" : "; ") +
                            std::string(kLeanPassVersion) + "; " +
                            (link.path.empty() ? "no nvJitLink" : link.describe());
  }
}

// Where an option writes file names into the output (writes_working_folder):
// the working folder as NVRTC spells it ($PWD through a link: link/ and
// link2/ are two outputs) and the toolkit's folders.
void Compiler::key_folders_named_in_outputs(const Prepared& p,
                                            cache::CompileRequest* request) const {
  if (p.spelling != p.folder) request->options.push_back(kWorkingFolderSpellingOption + p.spelling);
  for (const std::string& d : probe_context_.toolkit_dirs) {
    request->options.push_back(kToolkitFolderOption + d);
  }
}

std::vector<Hash128> Compiler::keys(const CompileOptions& options) const {
  Prepared p = prepare(options);
  std::vector<Hash128> out;
  for (const Target& t : p.targets) {
    p.request.target = t.kind;
    p.request.arch = t.arch;
    out.push_back(cache::compute_key(p.request));
  }
  return out;
}

void Compiler::use_pch(std::string pch_dir) {
  pch_dir_ = std::move(pch_dir);
  if (!pch_dir_.empty()) probe_context_.own_dirs.push_back(parts::absolute_path(pch_dir_));
  const char* tmp = env::read(env::Var::tmpdir);
  if (!pch_dir_.empty() && (!tmp || pch_dir_ != tmp)) ::setenv("TMPDIR", pch_dir_.c_str(), 1);
}

CompileResult Compiler::compile(const CompileOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  auto lookup_done = [&started](CompileResult* r) {
    r->lookup_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
  };
  CompileResult result;
  result.source_name = options.logical_name();
  result.compiler_identity = identity_;
  Prepared prepared = prepare_head(options);
  const bool recorded = records_apply(options);
  // The lookup record first (lookup_record.h): no include is resolved on its hit.
  if (recorded && record_hit(options, prepared, &result.targets)) {
    count_lookups(result.targets);
    lookup_done(&result);
    return finish(options, std::move(result));
  }
  {
    // What this lookup looks at on the disk, for the next one.
    std::optional<DiskObservations> seen;
    if (recorded) seen.emplace();
    resolve(options, &prepared);
    look_up(options, prepared, &result.targets);
    count_lookups(result.targets);
    lookup_done(&result);
    bool all_hit = std::all_of(result.targets.begin(), result.targets.end(),
                               [](const TargetResult& r) { return r.hit; });
    if (seen && all_hit) {
      std::vector<TargetResult> found;
      for (const TargetResult& r : result.targets) {
        TargetResult light;  // the record needs no payload
        light.target = r.target;
        light.key = r.key;
        light.any_name = r.any_name;
        found.push_back(std::move(light));
      }
      write_lookup_record(options, prepared, *seen, found);
    }
  }
  compile_misses(options, prepared, recorded, &result);
  return finish(options, std::move(result));
}

CompileResult Compiler::finish(const CompileOptions& options, CompileResult result) const {
  result.lowered_names = result.targets.front().entry->lowered_names();
  if (recipe_for(options).keeps_program_answers)
    return result;  // its answers are in the entry's record
  for (const TargetResult& r : result.targets) {
    const std::string& log = r.entry->log();
    if (r.hit && !log.empty() && result.warnings.find(log) == std::string::npos) {
      result.warnings += log;
    }
  }
  bundle::Bundle b;
  b.source_name = result.source_name;
  b.compiler_identity = result.compiler_identity;
  std::vector<std::string> keys;
  keys.reserve(result.targets.size());
  for (const TargetResult& r : result.targets) keys.push_back(r.key.hex());
  for (size_t i = 0; i < result.targets.size(); ++i) {
    const TargetResult& r = result.targets[i];
    b.images.push_back({r.target.kind == cache::TargetKind::ptx ? bundle::ImageKind::ptx
                                                                : bundle::ImageKind::cubin,
                        r.target.arch, keys[i], r.entry->payload(), r.entry->lean()});
  }
  for (const cache::LoweredName& n : result.lowered_names) {
    b.lowered_names.push_back({n.name_expression, n.lowered_name});
  }
  result.bundle = bundle::serialize(b);
  return result;
}

}  // namespace kcache::compiler
