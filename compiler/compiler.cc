#include "compiler/compiler.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <future>
#include <mutex>
#include <exception>
#include <functional>
#include <set>
#include <thread>

#include "bundle/bundle.h"
#include "cache/lookup_note.h"
#include "cache/manifest.h"
#include "cache/program_record.h"
#include "common/arch.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/hash.h"
#include "compiler/lookup_record.h"
#include "compiler/served_keys.h"
#include "compiler/includes.h"
#include "compiler/image/lean_image.h"
#include "compiler/nvrtc/nvrtc.h"
#include "compiler/nvrtc/nvrtc_pool.h"
#include "compiler/nvrtc/nvrtc_worker.h"
#include "compiler/nvrtc/pch.h"
#include "compiler/seal/probes.h"
#include "compiler/seal/seal.h"
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

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string describe_supported(const std::vector<int>& archs) {
  std::vector<std::string> names;
  for (int a : archs) names.push_back("sm_" + std::to_string(a));
  return join(names, ", ");
}

std::string folder_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string absolute_path(const std::string& path) {
  if (!path.empty() && path.front() == '/') return path;
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof cwd)) return path;
  return path.empty() ? std::string(cwd) : std::string(cwd) + "/" + path;
}

// A miss's reasons (TargetResult::miss_reason) that name no path: a set held
// but its entry is gone (evicted, cleared), or nothing was found at all.
constexpr char kNotInStore[] = "not in store";

// What `now` has that `before` has not: "-DN=4", "-DN=4; dropped -DN=3".
std::string options_changed(const std::vector<std::string>& before,
                            const std::vector<std::string>& now) {
  std::string added, dropped;
  for (const std::string& o : now) {
    if (std::find(before.begin(), before.end(), o) == before.end()) added += (added.empty() ? "" : " ") + o;
  }
  for (const std::string& o : before) {
    if (std::find(now.begin(), now.end(), o) == now.end()) dropped += (dropped.empty() ? "" : " ") + o;
  }
  if (added.empty() && dropped.empty()) return "their order";
  std::string out = added + (added.empty() || dropped.empty() ? "" : "; ") +
                    (dropped.empty() ? "" : "dropped " + dropped);
  constexpr size_t kMaxShown = 120;  // one line of a summary
  return out.size() > kMaxShown ? out.substr(0, kMaxShown - 3) + "..." : out;
}

// A path as a user reads it: beneath the working folder relative to it.
std::string as_user_reads(const std::string& path) {
  char cwd[PATH_MAX];
  const std::string here = ::getcwd(cwd, sizeof cwd) ? cwd : "";
  if (here.size() > 1 && path.compare(0, here.size() + 1, here + "/") == 0) {
    return path.substr(here.size() + 1);
  }
  return path;
}

// The first header (in `now`'s order) that differs from `before`:
// "inc/v.h changed", "inc/w.h is included now", "inc/x.h is no longer included".
std::string headers_changed(const std::vector<std::pair<std::string, uint64_t>>& before,
                            const std::vector<std::pair<std::string, uint64_t>>& now) {
  auto find = [](const std::vector<std::pair<std::string, uint64_t>>& in, const std::string& p) {
    return std::find_if(in.begin(), in.end(), [&p](const auto& h) { return h.first == p; });
  };
  for (const auto& [path, hash] : now) {
    auto was = find(before, path);
    if (was == before.end()) return as_user_reads(path) + " is included now";
    if (was->second != hash) return as_user_reads(path) + " changed";
  }
  for (const auto& [path, hash] : before) {
    if (find(now, path) == now.end()) return as_user_reads(path) + " is no longer included";
  }
  return "the headers' order";
}

// A miss's reason where nothing stored matched: what changed since the last
// stored compile of the source (`last`), whose lookup started from `now`.
std::string since_note(const std::optional<cache::LookupNote>& last, const cache::LookupNote& now,
                       const CompileOptions& options, const Target& t) {
  if (!last) return "new source";
  if (last->toolkit != now.toolkit) return "toolkit changed";
  if (last->source_hash != now.source_hash) {
    // NVRTC's name for an unnamed program (CuPy names none under `kcache
    // run`) is shared by unrelated programs: another source is a new one.
    if (options.logical_name() == "default_program") return "new source";
    return options.logical_name() + " changed";
  }
  if (last->headers != now.headers) return headers_changed(last->headers, now.headers);
  if (last->options != now.options) {
    return "options changed: " + options_changed(last->options, now.options);
  }
  if (std::find(last->targets.begin(), last->targets.end(), t.arch) == last->targets.end()) {
    return "new target " + t.arch;
  }
  return kNotInStore;
}

// How many times one target may go back to NVRTC with headers it asked for.
// Each round adds at least one header, so this bounds a runaway only; a
// manifest set records one ask per round.
constexpr int kMaxIncludeRounds = static_cast<int>(cache::kMaxManifestAsks);

// What resolving an asked include needs to know: the same for a compile and
// for a manifest replay, so both find the same files.
struct AskContext {
  const CompileOptions& options;
  const IncludeGraph& includes;       // the scanner's
  const std::set<std::string>& base;  // names handed before any ask (headers and stubs)
  const ProbeContext& probes;         // where the toolkit is, for recorded probes
  const std::vector<std::string>& toolkit_dirs;
  bool check_time_macros;  // not sloppy: a replay that hands __TIME__ is no hit
};

// ccache's rule for the time macros (time_macros.h), over handed headers.
bool any_uses_time_macros(const std::vector<ResolvedHeader>& headers) {
  return std::any_of(headers.begin(), headers.end(),
                     [](const ResolvedHeader& h) { return uses_time_macros(h.content); });
}
bool any_uses_date_macro(const std::vector<ResolvedHeader>& headers) {
  return std::any_of(headers.begin(), headers.end(),
                     [](const ResolvedHeader& h) { return uses_date_macro(h.content); });
}

// How the scanner reads a file compiled with these options: NVRTC 13
// replaces trigraphs with -std=c++03, c++11 and c++14 only (measured).
ScanOptions scan_options(const CompileOptions& options) {
  ScanOptions s;
  s.trigraphs = options.std == "c++03" || options.std == "c++11" || options.std == "c++14";
  return s;
}

// Where the file NVRTC names `includer` in a complaint was read, if known:
// the source or a handed header of that name, or one whose `#line`
// directives give that name (NVRTC names a file so after a #line, while it
// still searches the real file's folder). Several files in one folder are
// fine, only the folder matters; files in different folders are an error
// (InvalidArgument): the complaint does not say which one asked.
// `disk_name`: NVRTC's name for the includer found (includes.h, disk_name_next_to).
std::optional<std::string> find_includer(const AskContext& c, const std::string& includer,
                                         const std::vector<ResolvedHeader>& have,
                                         std::string* disk_name) {
  std::vector<std::string> exact, by_line;
  std::vector<std::string> exact_names, by_line_names;
  // `shown`: how NVRTC names the file in a complaint (its #line name, where
  // kcache hands it one); `disk`: its name on disk, whose folder a quoted
  // include continues from.
  auto consider = [&](const std::string& shown, const std::string& disk,
                      const std::vector<std::string>& line_names, const std::string& path) {
    if (shown == includer) {
      exact.push_back(path);
      exact_names.push_back(disk);
    } else if (std::find(line_names.begin(), line_names.end(), includer) != line_names.end()) {
      by_line.push_back(path);
      by_line_names.push_back(disk);
    }
  };
  const std::string& root = c.options.logical_name();
  consider(root, root, c.includes.root_line_names, c.options.source_path);
  for (const std::vector<ResolvedHeader>* list : {&c.includes.headers, &have}) {
    for (const ResolvedHeader& h : *list) {
      consider(nvrtc_name(h), h.disk_name.empty() ? h.name : h.disk_name, h.line_names, h.path);
    }
  }
  exact.insert(exact.end(), by_line.begin(), by_line.end());
  exact_names.insert(exact_names.end(), by_line_names.begin(), by_line_names.end());
  for (const std::string& path : exact) {
    if (folder_of(path) != folder_of(exact.front())) {
      throw InvalidArgument(
          "NVRTC names the includer of an include it asks for \"" + includer + "\", and both " +
          exact.front() + " and " + path +
          " are named so (one by a #line directive); they lie in different folders, so kcache "
          "cannot tell where a quoted include is searched. Give the #line another name.");
    }
  }
  if (exact.empty()) return std::nullopt;
  *disk_name = exact_names.front();
  return exact.front();
}

// Finds the header NVRTC asked for where NVRTC would have (quoted: the
// includer's folder, then -I in order; angled: -I in order; the toolkit's
// folders NVRTC searched itself), with the literal includes it makes that are
// not handed yet. Nullopt if it is nowhere (`searched` then lists the folders
// looked in, `refused` the first existing file may_read refused, if any);
// `includer_path` is where the includer was read, if known.
// Throws what resolve_includes throws.
std::optional<std::vector<ResolvedHeader>> resolve_ask(const AskContext& c, const AskedInclude& a,
                                                       const std::vector<ResolvedHeader>& have,
                                                       std::string* searched,
                                                       std::optional<std::string>* includer_path,
                                                       std::string* refused) {
  const CompileOptions& options = c.options;
  std::string includer_name;
  *includer_path = find_includer(c, a.includer, have, &includer_name);
  std::vector<std::string> dirs;
  if (!a.angled && *includer_path) dirs.push_back(folder_of(**includer_path));
  const size_t first_dash_i = dirs.size();
  dirs.insert(dirs.end(), options.include_dirs.begin(), options.include_dirs.end());
  for (size_t k = 0; k < dirs.size(); ++k) {
    const std::string& d = dirs[k];
    std::string path = d.empty() ? a.name : d + "/" + a.name;
    if (a.name.front() == '/') path = a.name;
    std::optional<std::string> content;
    if (!options.may_read || options.may_read(path)) {
      observe_path(path);  // a lookup record (lookup_record.h) holds it
      content = read_input_file(path);  // a regular file, bounded (issue 27)
    } else if (refused->empty()) {
      std::optional<FileInfo> info = FileSystem::real().stat(path);
      if (info && !info->is_directory) *refused = path;
    }
    if (!content) {
      *searched += (searched->empty() ? "" : ", ") + (d.empty() ? std::string(".") : d);
      continue;
    }
    std::set<std::string> handed = c.base;
    for (const ResolvedHeader& h : have) handed.insert(h.name);
    handed.insert(a.name);
    // Where its #include_next goes on (includes.h): after its -I folder.
    int next_from = a.name.front() == '/' ? -1
                    : k < first_dash_i    ? 0
                                          : static_cast<int>(k - first_dash_i) + 1;
    std::string disk_name = a.name.front() == '/' ? a.name
                            : k < first_dash_i    ? disk_name_next_to(includer_name, a.name)
                                                  : disk_name_in(d, a.name);
    IncludeGraph more = resolve_includes(path, *content,
                                         {options.include_dirs, c.toolkit_dirs, options.may_read,
                                          next_from, scan_options(options), {}, disk_name});
    std::vector<ResolvedHeader> out{{a.name, path,
                                     more.root_content ? *more.root_content : *content,
                                     more.root_line_names, disk_name}};
    for (ResolvedHeader& h : more.headers) {
      if (handed.insert(h.name).second) out.push_back(std::move(h));
    }
    return out;
  }
  return std::nullopt;
}

// The key of a result that needed asked headers: everything handed, with the
// contents given (read from disk now, never taken from a manifest).
// The asks themselves are keyed too (cache/key.h), so the entry a replay
// finds was made by a compile whose NVRTC asked for exactly these names from
// exactly these includers.
// `today`: __DATE__'s value, keyed where an asked header uses it (empty:
// sloppy about time macros).
Hash128 full_key(cache::CompileRequest request, const std::vector<ResolvedHeader>& asked,
                 const cache::ManifestSet& asks, const std::string& today) {
  request.probes = probe_key_lines(asks.probes);
  for (const ResolvedHeader& h : asked) request.headers.push_back({h.name, handed_text(h)});
  if (!today.empty() && request.date.empty() && any_uses_date_macro(asked)) request.date = today;
  for (const cache::ManifestAsk& a : asks) {
    request.asked_includes.push_back(a.spelling + "\n" + a.includer + "\n" +
                                     (a.angled ? "angled" : "quoted"));
  }
  std::sort(request.headers.begin(), request.headers.end(),
            [](const cache::Header& a, const cache::Header& b) {
              return a.include_name < b.include_name;
            });
  return cache::compute_key(request);
}

// Replays a manifest set against the disk: the headers it hands when every
// ask resolves to the recorded names and contents, else nullopt.
// `why`: what did not resolve the same, as a user reads it (a miss's reason).
std::optional<std::vector<ResolvedHeader>> replay(const AskContext& c,
                                                  const cache::ManifestSet& set, std::string* why) {
  std::vector<ResolvedHeader> have;
  try {
    for (const cache::ManifestAsk& recorded : set) {
      AskedInclude a;
      a.name = recorded.spelling;
      a.includer = recorded.includer;
      a.angled = recorded.angled;
      std::string searched, refused;
      std::optional<std::string> includer_path;
      std::optional<std::vector<ResolvedHeader>> got =
          resolve_ask(c, a, have, &searched, &includer_path, &refused);
      if (!got || got->size() != recorded.headers.size()) {
        *why = "the headers \"" + a.name + "\" brings changed";
        return std::nullopt;
      }
      for (size_t i = 0; i < got->size(); ++i) {
        const ResolvedHeader& h = (*got)[i];
        if (h.name != recorded.headers[i].name ||
            xxh3_64(h.content) != recorded.headers[i].content_hash) {
          *why = h.path + " changed";
          return std::nullopt;
        }
      }
      for (ResolvedHeader& h : *got) have.push_back(std::move(h));
    }
  } catch (const Error& e) {
    *why = e.what();
    return std::nullopt;  // unreadable, ambiguous: the compile will say so
  }
  if (!probes_hold(set.probes, c.probes, why)) return std::nullopt;
  // Such a compile is never stored, but a sloppy one may have been.
  if (c.check_time_macros && any_uses_time_macros(have)) {
    *why = "a header it includes uses __TIME__ or __TIMESTAMP__";
    return std::nullopt;
  }
  return have;
}

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

// Compile targets and a free slot; released on every path.
class SlotGuard {
 public:
  template <typename S>
  explicit SlotGuard(S& s) : release_([&s] { s.release(); }) {
    s.acquire();
  }
  ~SlotGuard() { release_(); }

 private:
  std::function<void()> release_;
};

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
    std::string dir = absolute_path(d);
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

struct Compiler::Prepared {
  std::vector<Target> targets;
  std::vector<std::string> key_options;
  std::string source;
  // What NVRTC is handed as the source (and the key hashes): `source` with
  // the scanner's rewrites (an alias, an #include_next; includes.h) applied.
  std::string handed_source;
  IncludeGraph includes;
  cache::CompileRequest request;  // target and arch left to fill
  // Time macros (time_macros.h), unless sloppy: `today` is __DATE__'s value
  // when prepared (empty: sloppy), `uses_time` whether the source or a
  // scanned header uses __TIME__ / __TIMESTAMP__ (nothing looked up or stored).
  std::string today;
  bool uses_time = false;
  // Absolute names the manifests that answered keyed (look_up): a lookup
  // record keys them absolutely too, wherever they lie.
  std::set<std::string> keyed_absolutely;
};

namespace {

// Keys __DATE__ and finds __TIME__ in what prepare() hands (time_macros.h):
// the source, the headers, and the options and name expressions, which NVRTC
// expands as well (-D X=__TIME__, a name expression k<__DATE__[5]>).
void check_time_macros(bool sloppy, const std::string& source, const IncludeGraph& includes,
                       const std::vector<std::string>& option_texts,
                       cache::CompileRequest* request, std::string* today, bool* uses_time) {
  if (sloppy) return;
  *today = date_macro_value(std::time(nullptr));
  auto any_text = [&](bool (*uses)(std::string_view)) {
    return std::any_of(option_texts.begin(), option_texts.end(),
                       [&](const std::string& t) { return uses(t); });
  };
  *uses_time = uses_time_macros(source) || any_uses_time_macros(includes.headers) ||
               any_text(uses_time_macros);
  if (uses_date_macro(source) || any_uses_date_macro(includes.headers) ||
      any_text(uses_date_macro)) {
    request->date = *today;
  }
}

// Whether a compile must not be stored for its time macros: it uses __TIME__
// (the source, a scanned or an asked header), or __DATE__ where the date
// changed since it was keyed (at midnight).
bool time_macros_forbid_storing(const std::string& today, bool uses_time,
                                const std::string& keyed_date,
                                const std::vector<ResolvedHeader>& asked) {
  if (today.empty()) return false;  // sloppy
  if (uses_time || any_uses_time_macros(asked)) return true;
  bool date = !keyed_date.empty() || any_uses_date_macro(asked);
  return date && date_macro_value(std::time(nullptr)) != today;
}

// KCACHE_DEBUG_NAME_CHECK: what differed between a program's answer and its
// answer in another folder, for looking into one kept under its name.
void print_name_check(const std::string& name, const cache::ProgramRecord& a,
                      const cache::ProgramRecord& b) {
  std::fprintf(stderr, "name check %s: result %u/%u\n", name.c_str(), a.compile_result,
               b.compile_result);
  for (size_t i = 0; i < cache::kProgramOutputs; ++i) {
    const std::string& x = a.outputs[i].bytes;
    const std::string& y = b.outputs[i].bytes;
    if (x == y) continue;
    size_t at = 0;
    while (at < x.size() && at < y.size() && x[at] == y[at]) ++at;
    size_t from = at > 80 ? at - 80 : 0;
    std::fprintf(stderr, "  output %zu differs at %zu: [%s] vs [%s]\n", i, at,
                 x.substr(from, 200).c_str(), y.substr(from, 200).c_str());
  }
  std::fprintf(stderr, "  log A:\n%s\n  log B:\n%s\n", a.log.substr(0, 3000).c_str(),
               b.log.substr(0, 3000).c_str());
}

// `request` for every program name in any folder (CompileOptions::
// name_free): the name as `shared_name` says (its file name only), and a
// pass name no named request carries, so the two never share a key.
cache::CompileRequest any_name_request(cache::CompileRequest request,
                                       const std::string& shared_name) {
  request.source_name = shared_name;
  request.image_pass += "; any program folder";
  return request;
}

}  // namespace

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

IncludeGraph Compiler::scan(const CompileOptions& options, const std::string& source) const {
  std::set<std::string> in_memory;
  for (const cache::Header& h : options.memory_headers) in_memory.insert(h.include_name);
  // Served, NVRTC looks for the source's quoted includes next to its name.
  const std::string& root =
      options.serve && !options.program ? options.logical_name() : options.source_path;
  IncludeGraph g = resolve_includes(root, source,
                                    {options.include_dirs, toolkit_.include_dirs, options.may_read,
                                     -1, scan_options(options), in_memory, options.logical_name()});
  if (options.served()) {
    // NVRTC's own "cannot open source file" must reach the program's log.
    for (MissingInclude& m : g.missing) m.stub.clear();
  }
  return g;
}

std::vector<MissingInclude> Compiler::missing_includes(const CompileOptions& options,
                                                       const Prepared& p) const {
  if (!options.serve || options.program) return p.includes.missing;
  try {
    return scan(options, p.source).missing;
  } catch (const Error&) {
    return {};  // the hints are a courtesy: NVRTC's answer stands
  }
}

void Compiler::resolve(const CompileOptions& options, Prepared* prepared) const {
  Prepared& p = *prepared;
  // A served compile's key needs no scan: every file NVRTC reads is keyed by
  // its bytes through the manifest (docs/KEYS.md), so a lookup reads the
  // source and stats what the manifest names. The scanner runs only for a
  // failed compile's hints (missing_includes).
  if (!options.serve || options.program) p.includes = scan(options, p.source);
  // Handed as they are, and found as includers by their names (a quoted
  // include in one is searched for next to that name, as NVRTC does).
  for (const cache::Header& h : options.memory_headers) {
    p.includes.headers.push_back({h.include_name, h.include_name, h.content, {}});
  }
  std::stable_sort(
      p.includes.headers.begin(), p.includes.headers.end(),
      [](const ResolvedHeader& a, const ResolvedHeader& b) { return a.name < b.name; });

  p.request.compiler_identity = keyed_identity_;
  p.request.options = p.key_options;
  p.request.source_name = options.logical_name();
  // A rewritten directive of the source itself (a spelling two files share,
  // found by a review: `"b.h"` and `<b.h>` got one file) is what NVRTC
  // compiles; a served NVRTC reads its own source as given.
  p.handed_source = !options.served() && p.includes.root_content ? *p.includes.root_content : p.source;
  p.request.source = p.handed_source;
  // Keyed as handed: a header's text and the name NVRTC gives it (handed_text).
  for (const ResolvedHeader& h : p.includes.headers) {
    p.request.headers.push_back({h.name, options.served() ? h.content : handed_text(h)});
  }
  p.request.name_expressions = options.name_expressions;
  std::vector<std::string> option_texts = p.key_options;
  option_texts.insert(option_texts.end(), options.name_expressions.begin(),
                      options.name_expressions.end());
  check_time_macros(storage_ && storage_->sloppy_time_macros(), p.source, p.includes,
                    option_texts, &p.request, &p.today, &p.uses_time);
  if (options.program) {
    // Its entries hold a program record, not an image: never the same key.
    // NVRTC reads the real file system for it (served, seal.h): its -I as
    // written reach its output (__FILE__ of a header there is "<-I>/name"),
    // and where a name is relative, the folder it is taken from decides
    // which files a computed include reaches; both are keyed.
    p.request.image_pass = "nvrtc-program; record v" +
                           std::to_string(cache::kProgramRecordVersion) + "; disk served v1";
    bool relative = options.logical_name().empty() || options.logical_name().front() != '/';
    for (const std::string& d : options.include_dirs) {
      p.request.options.push_back("-I" + d);
      relative = relative || d.empty() || d.front() != '/';
    }
    // -G and -lineinfo write the working folder (as $PWD spells it) and the
    // toolkit's folders into the output: keyed then, as for kcache compile.
    const bool names_files = writes_working_folder(p.key_options);
    if (relative || names_files) {
      p.request.options.push_back(kWorkingFolderOption + working_folder());
    }
    if (names_files) key_folders_named_in_outputs(&p.request);
  } else if (options.serve) {
    // NVRTC searches the disk itself (seal.h, serving): its -I as written
    // reach its output, the working folder only through the options that
    // write it there (or an output that names it: not stored).
    p.request.image_pass = "disk served v1";
    for (const std::string& d : options.include_dirs) p.request.options.push_back("-I" + d);
    const std::string cwd = working_folder();
    const bool names_files = writes_working_folder(p.key_options);
    if (names_files || cwd.size() <= 1) p.request.options.push_back(kWorkingFolderOption + cwd);
    if (names_files) key_folders_named_in_outputs(&p.request);
  }
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
void Compiler::key_folders_named_in_outputs(cache::CompileRequest* request) const {
  const std::string spelling = working_folder_spelling();
  if (spelling != working_folder()) {
    request->options.push_back(kWorkingFolderSpellingOption + spelling);
  }
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
  if (!pch_dir_.empty()) probe_context_.own_dirs.push_back(absolute_path(pch_dir_));
  const char* tmp = ::getenv("TMPDIR");
  if (!pch_dir_.empty() && (!tmp || pch_dir_ != tmp)) ::setenv("TMPDIR", pch_dir_.c_str(), 1);
}

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

// The names handed to NVRTC before it asks for any: the scanner's headers and
// the stubs of the includes it could not find.
std::set<std::string> handed_names(const IncludeGraph& includes) {
  std::set<std::string> names;
  for (const ResolvedHeader& h : includes.headers) names.insert(h.name);
  for (const MissingInclude& m : includes.missing) {
    if (!m.stub.empty()) names.insert(m.name);
  }
  return names;
}

// Whether `e`, found under `key`, answers target `t`: a key collision or a
// foreign writer must never hand out a wrong image.
bool entry_answers(const CompileOptions& options, const Target& t, const Hash128& key,
                   const cache::Entry& e) {
  bool names_ok = e.lowered_names().size() == options.name_expressions.size();
  if (options.program) {
    try {  // a compile NVRTC rejected has no lowered names
      names_ok = names_ok || cache::ProgramRecord::decode(e.payload()).compile_result !=
                                 cache::kNvrtcSuccess;
    } catch (const Error&) {
      names_ok = false;  // a record this kcache cannot read: compile again
    }
  }
  return e.key() == key && e.kind() == t.kind && e.arch() == t.arch && names_ok;
}

void take_entry(const Hash128& key, cache::Entry e, TargetResult* r) {
  r->hit = true;
  r->key = key;
  r->compile_ms = e.compile_ms();
  r->lean = e.lean().lean();
  r->lean_bytes_removed = e.lean().bytes_removed;
  r->lean_variables_removed = e.lean().variables_removed;
  r->entry = std::move(e);
}

// The absolute folder a program's quoted includes are searched in.
std::string program_folder(const CompileOptions& options) {
  std::string folder = folder_of(options.source_path);
  if (!folder.empty() && folder.front() == '/') return folder;
  std::string cwd = working_folder();
  if (cwd.empty()) return "";
  return folder.empty() ? cwd : cwd + "/" + folder;
}

// The absolute folder a program named `name` is searched in.
std::string program_folder_of(const std::string& name) {
  CompileOptions o;
  o.source_path = name;
  return program_folder(o);
}

}  // namespace

namespace {

// Served (NVRTC read the disk): whether two compiles of one program under two
// names, in folders `a_folder` and `b_folder` (the second a folder that
// exists nowhere: other_program_name; the working folder the same), named the
// same paths once the second's folder is written as the first's, and found
// nothing in their folders. Only then does the answer depend on the
// program's folder by names taken from it alone, each absent, so the entry
// is every folder's with those names keyed relative to it
// (relative_to_program_folder). A name beneath the first's folder that the
// second compile made by the same absolute name is not (only) the folder's:
// it stays absolute in the key (`out`), and where the first compile found a
// file by the folder (a quoted include) the second compile's absent name in
// its own folder makes the two differ; a name reached by climbing out of the
// folder (`..`) is another path from the other folder. NVRTC's own paths
// (`c`) are left out: they differ between two compile processes.
bool same_paths_in_both_folders(const NvrtcOutput& a, const std::string& a_folder,
                                const NvrtcOutput& b, const std::string& b_folder,
                                const ProbeContext& c, NotTheFolders* out) {
  if (a_folder.empty() || b_folder.empty()) return false;
  auto names = [&c](const NvrtcOutput& o, std::set<std::string>* served) {
    std::set<std::string> all;
    for (const std::string& p : without_nvrtc_own(o.probes, c)) all.insert(p);
    for (const ServedFile& f : o.served) {
      all.insert(f.path);
      served->insert(f.path);
    }
    return all;
  };
  std::set<std::string> served_a, served_b;
  const std::set<std::string> all_a = names(a, &served_a), raw_b = names(b, &served_b);
  std::set<std::string> in_b;  // the second's names, its folder written as the first's
  for (const std::string& p : raw_b) {
    in_b.insert(beneath(p, b_folder) ? a_folder + p.substr(b_folder.size()) : p);
  }
  // The folder itself: NVRTC looks at the one that exists nowhere (the
  // second's) but not at the working folder (the first's, where the program
  // is in it); whether it exists changed nothing where the answers are one.
  in_b.erase(a_folder);
  std::set<std::string> in_a = all_a;
  in_a.erase(a_folder);
  for (const std::string& p : in_a) {
    if (!beneath(p, a_folder) || !raw_b.count(p)) continue;
    const bool also_by_folder = raw_b.count(b_folder + p.substr(a_folder.size())) > 0;
    (also_by_folder ? out->both : out->absolute).insert(p);
  }
  // A file found in the folder by the folder's name is the folder's.
  bool found_there = false;
  for (const std::string& f : served_a) {
    if (beneath(f, a_folder) && !out->absolute.count(f)) found_there = true;
  }
  for (const std::string& f : served_b) found_there = found_there || beneath(f, b_folder);
  if (in_a != in_b && ::getenv("KCACHE_DEBUG_NAME_CHECK")) {
    for (const std::string& p : in_a) {
      if (!in_b.count(p)) std::fprintf(stderr, "name check: only %s named %s\n", a_folder.c_str(), p.c_str());
    }
    for (const std::string& p : in_b) {
      if (!in_a.count(p)) std::fprintf(stderr, "name check: only %s named %s\n", b_folder.c_str(), p.c_str());
    }
  }
  return in_a == in_b && !found_there;
}

}  // namespace

bool Compiler::records_apply(const CompileOptions& o) const {
  static const bool off = [] {
    const char* v = ::getenv("KCACHE_LOOKUP_RECORDS");
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
  for (const std::vector<std::string>* list : std::initializer_list<const std::vector<std::string>*>{
           &toolkit_.include_dirs, &probe_context_.toolkit_dirs}) {
    w.u32(static_cast<uint32_t>(list->size()));
    for (const std::string& d : *list) w.str(d);
  }
  for (const char* name : {"CUDA_CACHE_PATH", "HOME"}) {  // probes.cc's driver cache
    const char* v = ::getenv(name);
    w.u8(v ? 1 : 0);
    w.str(v ? v : "");
  }
  w.u8(storage_->sloppy_time_macros() ? 1 : 0);
  // Today as __DATE__ gives it (time_macros.h): a header a manifest's ask
  // brings may use it, and the key the lookup computes then holds the day
  // (the second review's wrong hit). A record lasts a day at most.
  w.str(storage_->sloppy_time_macros() ? "" : date_macro_value(std::time(nullptr)));
  w.str(working_folder());
  // resolve keys $PWD's spelling for these (whether it does follows from
  // p.key_options, hashed below).
  if (writes_working_folder(p.key_options)) w.str(working_folder_spelling());
  w.u32(static_cast<uint32_t>(p.targets.size()));
  for (const Target& t : p.targets) {
    w.u8(t.kind == cache::TargetKind::cubin ? 1 : 0);
    w.str(t.arch);
  }
  for (const std::vector<std::string>* list :
       std::initializer_list<const std::vector<std::string>*>{&p.key_options, &o.name_expressions}) {
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
  w.u8(o.serve ? 1 : 0);
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
    std::optional<cache::Manifest> record =
        storage_->get_lookup_record(record_key(inputs, options, any_name));
    if (!record || record->sets().size() != 1) continue;
    const cache::ManifestSet& set = record->sets().front();
    if (set.results.size() != p.targets.size() ||
        !disk_unchanged(set.probes, any_name ? program_folder(options) : "")) {
      continue;
    }
    std::vector<TargetResult> found;
    for (size_t i = 0; i < p.targets.size(); ++i) {
      const Target& t = p.targets[i];
      const cache::ManifestResult& recorded = set.results[i];
      if (recorded.cubin != (t.kind == cache::TargetKind::cubin) || recorded.arch != t.arch) break;
      std::optional<cache::Entry> e = storage_->get(recorded.key, cache::Store::Access::uncounted);
      if (!e) break;  // evicted: the long way decides
      if (!entry_answers(options, t, recorded.key, *e)) break;
      TargetResult r;
      r.target = t;
      r.any_name = recorded.any_name;
      take_entry(recorded.key, std::move(*e), &r);
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
  bool any_name = options.name_free &&
                  std::all_of(found.begin(), found.end(),
                              [](const TargetResult& r) { return r.any_name; });
  std::string folder = any_name ? program_folder(options) : "";
  if (any_name) {
    // Paths beneath the folder are recorded relative to it: only where
    // nothing the lookup read names the folder itself, so that in another
    // folder the lookup would look at the same places beneath that one.
    const std::string cwd = working_folder();
    bool named = folder.empty() || folder == "/" || cwd == folder ||
                 cwd.compare(0, folder.size() + 1, folder + "/") == 0 ||
                 names_folder(p.source, folder);
    for (const std::vector<std::string>* list : std::initializer_list<const std::vector<std::string>*>{
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
  std::optional<std::vector<cache::ManifestProbe>> probes = seen.probes(folder, p.keyed_absolutely);
  if (!probes && any_name) {
    any_name = false;  // it holds for this folder only (lookup_record.h)
    probes = seen.probes("");
  }
  if (!probes) return;
  cache::ManifestSet set;
  set.probes = std::move(*probes);
  for (const TargetResult& r : found) {
    set.results.push_back({r.target.kind == cache::TargetKind::cubin, r.target.arch,
                           r.any_name, r.key});
  }
  cache::Manifest record(record_key(record_inputs(options, p), options, any_name));
  try {
    record.add(std::move(set));
  } catch (const InvalidArgument&) {
    return;  // a path a manifest cannot hold: no record for this one
  }
  storage_->put_lookup_record(record);
}

void Compiler::look_up(const CompileOptions& options, Prepared& prepared,
                       std::vector<TargetResult>* out, bool* through_asks) {
  const IncludeGraph& includes = prepared.includes;
  cache::CompileRequest& request = prepared.request;
  const std::set<std::string> base_names = handed_names(includes);
  // A program's probes in its own folder are recorded relative to it for
  // the entry of every name (settle_entry): checked in this one's.
  ProbeContext probes = probe_context_;
  if (options.program) probes.program_folder = program_folder(options);
  if (options.serve && !options.program) probes.program_folder = working_folder();
  const AskContext ask_context{options, includes, base_names, probes, toolkit_.include_dirs,
                               !prepared.today.empty()};
  // Per target: the scanner key; on a miss, its manifest's sets, newest
  // first, each replayed against the disk (cache/manifest.h).
  for (const Target& t : prepared.targets) {
    TargetResult r;
    r.target = t;
    request.target = t.kind;
    request.arch = t.arch;
    r.key = cache::compute_key(request);
    // Why it is no hit: the first thing found that no longer held (the
    // newest manifest set's changed path, an entry no longer stored).
    std::string why;
    auto lookup = [&](const Hash128& key) {
      // Counted by the caller, once the lookup is decided (count_lookups).
      if (std::optional<cache::Entry> e = storage_->get(key, cache::Store::Access::uncounted)) {
        if (entry_answers(options, t, key, *e)) take_entry(key, std::move(*e), &r);
      }
      if (!r.hit && why.empty()) why = kNotInStore;
    };
    // The scanner key, then its manifest's sets; for a program that may
    // share its entry with every name, first all that for no name.
    auto look_up_request = [&](const cache::CompileRequest& req) {
      Hash128 scanner_key = cache::compute_key(req);
      // A served compile's entry is always under the key of what NVRTC read
      // (settle_entry): its manifest first, never a get of a key nothing is
      // stored under (with a remote, a round trip and its library loaded).
      // An unserved one stored directly under it: not found is no reason
      // yet, its manifest may say more.
      if (!options.served()) {
        lookup(scanner_key);
        if (why == kNotInStore) why.clear();
      }
      if (r.hit) return;
      if (std::optional<cache::Manifest> m = storage_->get_manifest(cache::manifest_key(scanner_key))) {
        for (const cache::ManifestSet& set : m->sets()) {
          std::string set_why;
          std::optional<std::vector<ResolvedHeader>> have = replay(ask_context, set, &set_why);
          if (!have) {
            if (why.empty()) why = set_why;
            continue;
          }
          // Under the worker, a set that read an undeclared file is no hit:
          // a sandboxed build would not find it (the compile says so).
          if (options.serve && options.may_read &&
              !undeclared_files(options.may_read, present_files(set.probes)).empty()) {
            if (why.empty()) why = "a file it read is not among the action's inputs";
            continue;
          }
          lookup(full_key(req, *have, set, prepared.today));
          if (r.hit) {
            for (const cache::ManifestProbe& probe : set.probes) {
              if (!probe.path.empty() && probe.path.front() == '/') {
                prepared.keyed_absolutely.insert(probe.path);
              }
            }
            r.found_by = FoundBy::manifest;
            if (through_asks && !have->empty()) *through_asks = true;
            return;
          }
        }
      }
    };
    if (!storage_) {
      why = "no store";
    } else if (prepared.uses_time) {  // a hit would be another second's __TIME__
      why = "it uses __TIME__ or __TIMESTAMP__ (never cached)";
    } else {
      if (options.name_free) {
        // The request made nameless in place and back: a copy would copy
        // every header's bytes.
        std::string name = std::move(request.source_name);
        const std::string pass = request.image_pass;
        request = any_name_request(std::move(request), options.shared_name);
        look_up_request(request);
        request.source_name = std::move(name);
        request.image_pass = pass;
        r.any_name = r.hit;
      }
      if (!r.hit) look_up_request(request);
    }
    if (!r.hit) r.miss_reason = why;
    out->push_back(std::move(r));
  }
  // Nothing found that no longer held: the last stored compile of this
  // source says what changed since (cache/lookup_note.h).
  if (!storage_ || !storage_->local()) return;
  std::optional<cache::LookupNote> last;
  bool read = false;
  for (TargetResult& r : *out) {
    if (r.hit || !r.miss_reason.empty()) continue;
    if (!read) last = cache::read_lookup_note(storage_->local()->dir(), note_key(options));
    read = true;
    r.miss_reason = since_note(last, lookup_note(options, prepared), options, r.target);
  }
}

Hash128 Compiler::note_key(const CompileOptions& options) const {
  ByteWriter w;
  w.str("kcache lookup note v1");
  w.str(options.source_path);
  w.str(options.logical_name());
  w.str(working_folder());
  w.u8(options.program ? 1 : 0);
  return xxh3_128(w.data());
}

cache::LookupNote Compiler::lookup_note(const CompileOptions& options, const Prepared& p) const {
  cache::LookupNote note;
  note.key = note_key(options);
  note.source_hash = xxh3_128(p.source);
  note.toolkit = keyed_identity_ + "; " + p.request.image_pass;
  note.options = p.request.options;
  for (const std::string& e : options.name_expressions) {
    note.options.push_back("--name-expression=" + e);
  }
  for (const Target& t : p.targets) note.targets.push_back(t.arch);
  for (const ResolvedHeader& h : p.includes.headers) {
    note.headers.emplace_back(h.path.empty() ? h.name : absolute_path(h.path), xxh3_64(h.content));
  }
  return note;
}

// After a stored miss: the note a later miss of this source compares with.
void Compiler::write_note(const CompileOptions& options, const Prepared& p) {
  cache::Store* local = storage_ ? storage_->local() : nullptr;
  if (!local || local->read_only()) return;
  try {
    cache::write_lookup_note(local->dir(), lookup_note(options, p));
  } catch (const Error&) {
    // A reason less precise later, nothing worse: no warning for it.
  }
}

// Once per target, where its lookup was decided (ccache's statistics): a hit
// and the NVRTC time it saves, or a miss.
void Compiler::count_lookups(const std::vector<TargetResult>& targets) {
  if (!storage_) return;
  for (const TargetResult& r : targets) {
    storage_->count(r.hit ? "hits" : "misses", 1);
    if (!r.hit) continue;
    storage_->count("compile_ms_saved", r.compile_ms);
    if (r.found_by == FoundBy::lookup_record) storage_->count("lookup_record_hits", 1);
    if (r.found_by == FoundBy::manifest) storage_->count("manifest_hits", 1);
  }
}

void Compiler::record_after_store(const CompileOptions& options, const Prepared& made) {
  Prepared p;
  p.targets = made.targets;
  p.key_options = made.key_options;
  p.source = made.source;
  std::vector<TargetResult> found;
  bool through_asks = false;
  DiskObservations seen;
  resolve(options, &p);
  look_up(options, p, &found, &through_asks);
  if (!std::all_of(found.begin(), found.end(), [](const TargetResult& r) { return r.hit; })) {
    return;
  }
  if (through_asks) {
    for (TargetResult& r : found) r.any_name = false;  // asked headers may name the folder
  }
  write_lookup_record(options, p, seen, found);
}

std::vector<TargetResult> Compiler::explain(const CompileOptions& options) {
  std::vector<TargetResult> found;
  Prepared prepared = prepare_head(options);
  if (records_apply(options) && record_hit(options, prepared, &found)) return found;
  resolve(options, &prepared);
  bool through_asks = false;
  look_up(options, prepared, &found, &through_asks);
  return found;
}

CompileResult Compiler::compile(const CompileOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  auto lookup_done = [&started](CompileResult* r) {
    r->lookup_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                            started).count();
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
    bool through_asks = false;
    look_up(options, prepared, &result.targets, &through_asks);
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
        light.any_name = r.any_name && !through_asks;
        found.push_back(std::move(light));
      }
      write_lookup_record(options, prepared, *seen, found);
    }
  }
  compile_misses(options, prepared, recorded, &result);
  return finish(options, std::move(result));
}

// One target compiled now: what NVRTC answered and what keys it.
struct Compiler::Miss {
  size_t index = 0;  // into CompileResult::targets
  Target target;
  NvrtcInput input;  // as the last round handed it
  std::optional<NvrtcOutput> output;
  std::vector<ResolvedHeader> asked;  // headers NVRTC asked for
  cache::ManifestSet asks;            // the same, ask by ask (then the probes)
  ClassifiedProbes classified;        // the final round's probes
  bool date_keyed = false;            // the key holds today's __DATE__
  std::string unresolved;             // an include found nowhere (a program's)
  bool name_checked = false;          // one answer for every name (name_check)
  NotTheFolders not_the_folders;  // names beneath the program's folder not (only) its
  LeanImage lean;
  std::exception_ptr error;
  // Storing it (store_misses).
  bool storable = true;
  bool time_macros = false;  // not stored for them
  std::optional<Hash128> manifest_key;
  std::optional<cache::Entry> shared;  // the entry for every name, if not r.entry
};

namespace {

// An include NVRTC asked for, found where NVRTC would have looked, or a
// CompileError that says where kcache looked (and the hdrs/deps hint for an
// undeclared one, undeclared.h).
std::vector<ResolvedHeader> resolve_asked(const AskContext& c, const AskedInclude& a,
                                          const std::vector<ResolvedHeader>& have,
                                          const CompileError& e) {
  const CompileOptions& options = c.options;
  std::string searched;
  std::string refused;  // the first existing file may_read refused
  std::optional<std::string> includer_path;
  if (std::optional<std::vector<ResolvedHeader>> out =
          resolve_ask(c, a, have, &searched, &includer_path, &refused)) {
    return std::move(*out);
  }
  for (const std::string& d : c.toolkit_dirs) searched += (searched.empty() ? "" : ", ") + d;
  std::string message = "\"" + a.name + "\" (included from " +
                        (includer_path ? *includer_path : a.includer) + ":" +
                        std::to_string(a.line) + ") was not found in: " + searched;
  // may_read is Bazel's worker honouring the action's declared inputs
  // (cli/declared_inputs.h): say which declaration is missing.
  if (refused.empty()) {  // sandboxed: the file is not there at all (undeclared.h)
    std::vector<std::string> dirs = options.include_dirs;
    if (!a.angled && includer_path) dirs.insert(dirs.begin(), folder_of(*includer_path));
    refused = find_undeclared(a.name, dirs, options.source_path).value_or("");
  }
  if (!refused.empty()) {
    // The hint first and alone; NVRTC's log adds nothing to it.
    throw CompileError(undeclared_hint(refused, options.target_label) + "\n  " + message, "",
                       e.options());
  }
  throw CompileError("kcache: " + message, "kcache: " + message + "\n" + e.log(), e.options());
}

int64_t realtime_ns() {
  struct timespec t;
  ::clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

}  // namespace

void Compiler::compile_misses(const CompileOptions& options, Prepared& prepared, bool recorded,
                              CompileResult* result) {
  std::vector<Miss> misses;
  for (size_t i = 0; i < result->targets.size(); ++i) {
    if (result->targets[i].hit) continue;
    misses.emplace_back();
    misses.back().index = i;
    misses.back().target = result->targets[i].target;
  }
  if (misses.empty()) return;
  if (!options.program) check_archs(misses);
  const std::set<std::string> base_names = handed_names(prepared.includes);
  const AskContext ask_context{options, prepared.includes, base_names, probe_context_,
                               toolkit_.include_dirs, !prepared.today.empty()};
  const AskResolver resolve = [&ask_context](const AskedInclude& a,
                                             const std::vector<ResolvedHeader>& have,
                                             const CompileError& e) {
    return resolve_asked(ask_context, a, have, e);
  };
  std::vector<std::thread> threads;
  for (size_t s = 1; s < misses.size(); ++s) {
    threads.emplace_back([&, s] { compile_miss(options, prepared, resolve, &misses[s]); });
  }
  compile_miss(options, prepared, resolve, &misses[0]);  // a single target starts no thread
  for (std::thread& th : threads) th.join();

  double nvrtc_ms = 0;
  int failures = 0;
  for (const Miss& m : misses) {
    if (m.output) nvrtc_ms += m.output->ms;
    // A program's rejected source is an answer, not a throw: it counts too.
    failures += m.error != nullptr || (m.output && m.output->program &&
                                       m.output->program->compile_result != cache::kNvrtcSuccess);
  }
  if (storage_) {
    storage_->count("nvrtc_invocations", static_cast<int64_t>(misses.size()));
    storage_->count("nvrtc_ms", static_cast<int64_t>(nvrtc_ms + 0.5));
    if (failures) storage_->count("nvrtc_failures", failures);
  }
  for (const Miss& m : misses) {
    if (!m.error) continue;
    try {
      std::rethrow_exception(m.error);  // the first in target order
    } catch (const CompileError& e) {
      // A file NVRTC read that the action did not declare (served), or an
      // include it could not find that exists undeclared: say so
      // (undeclared.h).
      if (options.serve && options.may_read) {
        std::vector<std::string> files = undeclared_files(options.may_read, e.probes());
        if (!files.empty()) {
          throw undeclared_error(files, missing_includes(options, prepared), options.source_path,
                                 options.target_label);
        }
      }
      std::vector<MissingInclude> missing = missing_includes(options, prepared);
      if (options.serve) add_unopened_include(e.log(), options.include_dirs, &missing);
      throw with_undeclared_hints(e, missing, options.served(),
                                  options.source_path,
                                  options.target_label);
    }
  }
  store_misses(options, prepared, misses, result);
  if (std::any_of(misses.begin(), misses.end(), [](const Miss& m) { return m.storable; })) {
    write_note(options, prepared);
  }
  // The next process finds it through a lookup record (lookup_record.h):
  // looked up once now as it would, recording what that looks at.
  if (storage_ && recorded &&
      std::any_of(misses.begin(), misses.end(), [](const Miss& m) { return m.storable; })) {
    record_after_store(options, prepared);
  }
}

// A target NVRTC does not support is an InvalidArgument naming what it does.
// (A program's is NVRTC's to answer, in its record.)
void Compiler::check_archs(const std::vector<Miss>& misses) const {
  for (const Miss& m : misses) {
    const Nvrtc& nvrtc = Nvrtc::open(toolkit_.nvrtc.path);
    std::vector<int> supported = nvrtc.supported_archs();
    const Target& t = m.target;
    if (!supported.empty() &&
        std::find(supported.begin(), supported.end(), t.number) == supported.end()) {
      auto [major, minor] = nvrtc.version();
      throw InvalidArgument(t.arch + " is not supported by NVRTC " + std::to_string(major) + "." +
                            std::to_string(minor) + " (" + nvrtc.path() + "); it supports " +
                            describe_supported(supported) + " (and compute_ of each)");
    }
  }
}

NvrtcInput Compiler::miss_input(const CompileOptions& options, const Prepared& p,
                                const Target& t) const {
  NvrtcInput input;
  input.source_name = options.logical_name();
  input.source = p.handed_source;
  for (const ResolvedHeader& h : p.includes.headers) {
    input.headers.push_back({h.name, handed_text(h)});
  }
  for (const MissingInclude& m : p.includes.missing) {
    if (!m.stub.empty()) input.headers.push_back({m.name, m.stub});
  }
  input.name_expressions = options.name_expressions;
  input.program = options.program;
  input.want_cubin = t.kind == cache::TargetKind::cubin;
  input.want_ptx = options.lean;
  input.options.push_back("-arch=" + t.arch);
  input.options.insert(input.options.end(), p.key_options.begin(), p.key_options.end());
  if (options.served()) {
    // NVRTC's own search on the real file system (seal.h, serving): the
    // in-memory headers only, the -I as written, the working folder. A
    // program gets no toolkit folder it was not given; `kcache compile` the
    // toolkit's after the user's (as nvcc searches them).
    input.headers.clear();
    for (const cache::Header& h : options.memory_headers) {
      input.headers.push_back({h.include_name, h.content});
    }
    for (const std::string& d : options.include_dirs) input.options.push_back("-I" + d);
    input.serve_disk = true;
    input.working_dir = working_folder();
    if (options.program) return input;
  }
  for (const std::string& d : probe_context_.toolkit_dirs) {
    input.options.push_back("-I" + d);  // absolute: NVRTC's cwd is sealed
  }
  return input;
}

void Compiler::compile_miss(const CompileOptions& options, const Prepared& p,
                            const AskResolver& resolve, Miss* m) {
  try {
    m->input = miss_input(options, p, m->target);
    m->date_keyed = !p.request.date.empty();
    SlotGuard guard(slots_);
    std::unique_lock<std::mutex> here(in_process_, std::defer_lock);
    // With a pool every compile runs there, so each child keeps seeing
    // the same options (the same arch), which a handed compile's PCH needs.
    if (!pool_) here.try_lock();
    // A program's name check (check_name) compiles the same input under
    // another name. Served, its input is known now: it runs in a second
    // child of the pool at the same time, so a miss waits for one compile.
    std::future<NvrtcOutput> early_check;
    if (pool_ && options.name_free && m->input.serve_disk) {
      NvrtcInput other = m->input;
      other.source_name = options.name_check;
      early_check = std::async(std::launch::async, [this, other = std::move(other)] {
        return pool_->compile(toolkit_.nvrtc.path, other);
      });
    }
    run_rounds(options, resolve, m, &here);
    if (options.serve && options.may_read) {
      std::vector<std::string> files =
          undeclared_files(options.may_read, named_paths(*m->output));
      if (!files.empty()) {
        throw undeclared_error(files, missing_includes(options, p), options.source_path,
                               options.target_label);
      }
    }
    check_name(options, m, &here, early_check.valid() ? &early_check : nullptr);
    if (here.owns_lock()) here.unlock();  // the lean step needs no NVRTC
    if (options.lean) make_lean(p, m);
  } catch (const CompileError& e) {
    CompileError named(std::string(e.what()) + " for " + m->target.arch, e.log(), e.options());
    named.set_probes(e.probes(), e.started_ns());  // what NVRTC named (undeclared_files)
    m->error = std::make_exception_ptr(std::move(named));
  } catch (...) {
    m->error = std::current_exception();
  }
}

NvrtcOutput Compiler::nvrtc_round(const NvrtcInput& input, std::unique_lock<std::mutex>* here) {
  if (pool_) return pool_->compile(toolkit_.nvrtc.path, input);
  if (here->owns_lock() || worker_command_.empty()) {
    if (!here->owns_lock()) here->lock();
    const Nvrtc& nvrtc = Nvrtc::open(toolkit_.nvrtc.path);
    // Served, every file is read through the seal: a PCH holds headers
    // NVRTC would not open again (pch.h).
    return pch_dir_.empty() || input.serve_disk ? nvrtc.compile(input)
                                                : compile_with_pch(nvrtc, input, pch_dir_);
  }
  return compile_in_worker(worker_command_, toolkit_.nvrtc.path, input);
}

// NVRTC is sealed (nvrtc.h): an include the scanner could not see (a
// computed one, say) fails the compile, naming it; kcache finds it the way
// NVRTC would, hands it over and compiles again, at most kMaxIncludeRounds
// times.
void Compiler::run_rounds(const CompileOptions& options, const AskResolver& resolve, Miss* m,
                          std::unique_lock<std::mutex>* here) {
  Rounds rounds;
  rounds.started_ns = realtime_ns();
  auto take_ask = [&](const AskedInclude& a, const CompileError& e) {
    rounds.asked_names.push_back(a.name);
    cache::ManifestAsk recorded{a.name, a.includer, a.angled, {}};
    for (ResolvedHeader& h : resolve(a, m->asked, e)) {
      m->input.headers.push_back({h.name, handed_text(h)});
      recorded.headers.push_back({h.name, xxh3_64(h.content)});
      m->asked.push_back(std::move(h));
    }
    m->asks.push_back(std::move(recorded));
  };
  for (int round = 0;; ++round) {
    try {
      m->output = nvrtc_round(m->input, here);
    } catch (const CompileError& e) {
      // Served: NVRTC searched the disk itself; its "cannot open" stands.
      std::optional<AskedInclude> a = parse_cannot_open(e.log());
      if (!a || round == kMaxIncludeRounds || m->input.serve_disk) throw;
      // Where this round searched before it asked is keyed too.
      rounds.earlier.emplace_back(e.probes(), e.started_ns());
      take_ask(*a, e);
      continue;
    }
    // A program's compile NVRTC rejected is a result; one it rejected for
    // an include it could not open goes round like the throw above.
    const std::optional<cache::ProgramRecord>& answered = m->output->program;
    // Served (a program's): NVRTC searched the disk itself, so "cannot open"
    // is the file system's answer, not a header to hand over.
    if (answered && !m->input.serve_disk &&
        answered->compile_result == cache::kNvrtcErrorCompilation) {
      std::optional<AskedInclude> a = parse_cannot_open(answered->log);
      if (a && round < kMaxIncludeRounds) {
        try {
          take_ask(*a, CompileError("NVRTC could not compile " + options.logical_name(),
                                    answered->log, m->input.options));
          rounds.earlier.emplace_back(m->output->probes, m->output->started_ns);
          continue;
        } catch (const CompileError& e) {
          // Found nowhere: NVRTC's own answer stands, but it is the sealed
          // NVRTC's (its -I are the toolkit's), so it is not stored.
          m->unresolved = e.what();
        }
      }
    }
    std::vector<std::string> refused = settle_probes(rounds, round == kMaxIncludeRounds, m);
    if (refused.empty()) return;
    rounds.earlier.emplace_back(m->output->probes, m->output->started_ns);
    for (const std::string& f : refused) {
      AskedInclude a;
      a.name = f;
      a.includer = options.logical_name();
      take_ask(a, CompileError("NVRTC was refused " + f, "", m->input.options));
    }
  }
}

// NVRTC compiled. What it named (seal.h) is keyed; an existing user file it
// was refused without failing (a computed __has_include, say) got an answer
// that is not the file system's: those are returned, to be handed over by
// their absolute names for another round. Empty: the probes are settled.
std::vector<std::string> Compiler::settle_probes(const Rounds& rounds, bool last_round, Miss* m) {
  ProbeContext probe_context = probe_context_;
  probe_context.check_time_macros = !(storage_ && storage_->sloppy_time_macros());
  const NvrtcOutput& out = *m->output;
  if (m->input.serve_disk) {
    probe_context.served = true;
    probe_context.date_keyed = m->date_keyed;
    for (const std::string& o : m->input.options) {
      if (o.compare(0, 2, "-I") == 0 && o.size() > 2) {
        probe_context.user_dirs.push_back(
            without_dot_parts(o[2] == '/' ? o.substr(2) : m->input.working_dir + "/" + o.substr(2)));
      }
    }
  }
  ClassifiedProbes c = classify_probes(out.probes, probe_context, out.started_ns);
  add_served(out.served, probe_context, out.started_ns, &c);
  if (::getenv("KCACHE_DEBUG_PROBES")) {
    for (const std::string& p : out.probes) std::fprintf(stderr, "probe %s\n", p.c_str());
    for (const std::string& l : probe_key_lines(c.keyed)) std::fprintf(stderr, "keyed %s\n", l.c_str());
  }
  std::vector<std::string> fresh;
  for (const std::string& f : c.user_files) {
    bool handed = std::any_of(m->input.headers.begin(), m->input.headers.end(),
                              [&](const NvrtcHeader& h) { return h.name == f; });
    if (!handed) fresh.push_back(f);
  }
  if (out.sealed && !fresh.empty() && !last_round) return fresh;
  if (!c.user_files.empty() && c.unkeyable.empty()) {
    c.unkeyable = "NVRTC reached " + c.user_files.front() +
                  " by a name kcache cannot hand it under (more `..` than the seal is deep?)";
  }
  for (const std::string& name : rounds.asked_names) {
    add_asked_absences(name, probe_context, rounds.started_ns, &c);
  }
  for (const auto& [probes, round_started] : rounds.earlier) {
    merge_earlier_round(classify_probes(probes, probe_context, round_started), &c);
  }
  m->classified = std::move(c);
  return {};
}

// One answer for every folder? Compiled again in another folder from the
// same final input: only answers that agree (program.h) are.
void Compiler::check_name(const CompileOptions& options, Miss* m,
                          std::unique_lock<std::mutex>* here, std::future<NvrtcOutput>* early) {
  if (!options.name_free || !m->output->program || !m->output->sealed ||
      !m->classified.unkeyable.empty() || !m->unresolved.empty()) {
    return;
  }
  // Served: a file NVRTC found in the program's folder (read, or only
  // looked at) ties the answer to that folder.
  const std::string folder = program_folder(options);
  for (const cache::ManifestProbe& p : m->classified.keyed) {
    if (p.present && (p.path == folder || p.path.rfind(folder + "/", 0) == 0)) return;
  }
  NvrtcInput other = m->input;
  other.source_name = options.name_check;
  try {
    std::optional<NvrtcOutput> checked;
    if (early) {
      checked = early->get();  // compiled alongside the miss
    } else if (pool_) {
      checked = pool_->compile(toolkit_.nvrtc.path, other);
    } else {
      if (!here->owns_lock()) here->lock();
      checked = Nvrtc::open(toolkit_.nvrtc.path).compile(other);
    }
    m->name_checked = checked->program && checked->sealed &&
                      checked->lowered_names == m->output->lowered_names &&
                      options.name_check_same(*m->output->program, *checked->program) &&
                      (!m->input.serve_disk ||
                       same_paths_in_both_folders(*m->output, folder, *checked,
                                                  program_folder_of(options.name_check),
                                                  probe_context_, &m->not_the_folders));
    if (!m->name_checked && checked->program && ::getenv("KCACHE_DEBUG_NAME_CHECK")) {
      print_name_check(options.logical_name(), *m->output->program, *checked->program);
    }
  } catch (const std::exception&) {
    m->name_checked = false;  // kept under its own name
  }
}

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
  LeanInput in{t.kind, t.arch, std::move(*image), std::move(ptx), p.key_options, {},
               toolkit_.nvjitlink.path};
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
      if (m.manifest_key) add_to_manifest(*m.manifest_key, std::move(m.asks));
    } else {
      storage_->count(m.time_macros ? "uncached_time_macros" : "uncached_compiles", 1);
    }
  }
}

// A miss's key and entry, and whether it may be stored (and why not).
void Compiler::settle_entry(const CompileOptions& options, const Prepared& p, int64_t now,
                            Miss* m, TargetResult* r) {
  NvrtcOutput& out = *m->output;
  m->asks.probes = std::move(m->classified.keyed);
  if (options.served()) {
    std::string why = options.program
                          ? ""
                          : key_beneath_working_folder(p.request, out, &m->asks.probes);
    if (why.empty()) why = toolkit_named_unkeyed(p.request, out, probe_context_.toolkit_dirs);
    if (!why.empty() && m->classified.unkeyable.empty()) m->classified.unkeyable = std::move(why);
  }
  if (options.served() || !m->asked.empty() || !m->asks.probes.empty()) {
    // Keyed by everything handed over and everything NVRTC named; a lookup
    // finds it through the manifest of its scanner key (r->key until here).
    cache::CompileRequest full = p.request;
    full.target = r->target.kind;
    full.arch = r->target.arch;
    m->manifest_key = cache::manifest_key(cache::compute_key(full));
    r->key = full_key(full, m->asked, m->asks, p.today);
  }
  // A compile NVRTC could not be sealed for may have read an unkeyed file;
  // one whose probes cannot be keyed may have answered from one.
  if (!out.sealed) warn_unsealed(out.unsealed_why);
  if (!m->classified.unkeyable.empty() && ::getenv("KCACHE_DEBUG_PROBES")) {
    std::fprintf(stderr, "unkeyable: %s\n", m->classified.unkeyable.c_str());
  }
  if (!m->unresolved.empty()) r->not_stored = m->unresolved;
  if (!m->classified.unkeyable.empty()) r->not_stored = m->classified.unkeyable;
  if (!out.sealed) r->not_stored = "NVRTC could not be sealed: " + out.unsealed_why;
  m->storable = out.sealed && m->classified.unkeyable.empty() && m->unresolved.empty();
  if (time_macros_forbid_storing(p.today, p.uses_time, p.request.date, m->asked)) {
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
  if (options.name_free && m->storable && m->name_checked) {
    if (std::optional<std::string> shared = options.name_free(payload)) {
      cache::CompileRequest any = any_name_request(p.request, options.shared_name);
      any.target = r->target.kind;
      any.arch = r->target.arch;
      Hash128 any_key = cache::compute_key(any);
      if (m->manifest_key) {
        // What NVRTC found in the program's folder (its builtin names next
        // to the program, a quoted include) is keyed relative to that folder:
        // a lookup checks the same names in its own (probes_hold).
        relative_to_program_folder(program_folder(options), m->not_the_folders, &m->asks.probes);
        m->manifest_key = cache::manifest_key(any_key);
        any_key = full_key(any, m->asked, m->asks, p.today);
      }
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

CompileResult Compiler::finish(const CompileOptions& options, CompileResult result) const {
  result.lowered_names = result.targets.front().entry->lowered_names();
  if (options.program) return result;  // its answers are in the entry's record
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
