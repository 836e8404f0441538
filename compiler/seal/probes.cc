#include "compiler/seal/probes.h"

#include <stdlib.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <climits>
#include <map>
#include <tuple>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/environment.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/hash.h"
#include "common/stamp_trust.h"
#include "compiler/lookup_record.h"
#include "compiler/seal/seal.h"
#include "compiler/time_macros.h"

namespace kcache::compiler {
namespace {

constexpr const char* kToolkitLabel = "toolkit";

bool under(const std::string& path, const std::string& dir) {
  return !dir.empty() && path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         (path[dir.size()] == '/' || dir.back() == '/');
}

// A folder's identity and last change: a name added to, removed from or
// renamed in it changes its mtime and ctime.
struct FolderState {
  uint64_t dev = 0, ino = 0, mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FolderState& o) const {
    return dev == o.dev && ino == o.ino && mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns;
  }
};

// What one classification (ClassifyScope) already asked the disk: its probes
// share their folders. realpath() reads every component's link again for
// each (~10 system calls a name), and an absent name's folder walk
// (record_folder) stats every folder above it: a CUB compile's ~1,000 absent
// names made ~13,000 stats of /usr, /usr/local, ... before.
struct ClassifyMemo {
  std::unordered_map<std::string, std::string> canonical;
  // record_folder's walk: a name with no entry (true), or its stat as a
  // folder (false, with `folder` empty when it is no folder).
  struct Walked {
    bool absent = false;
    std::optional<FolderState> folder;
  };
  std::unordered_map<std::string, Walked> walked;
};
thread_local ClassifyMemo* classify_memo = nullptr;

class ClassifyScope {
 public:
  ClassifyScope() : outer_(classify_memo) {
    if (!outer_) classify_memo = &memo_;
  }
  ~ClassifyScope() {
    if (!outer_) classify_memo = nullptr;
  }

 private:
  ClassifyMemo* outer_;
  ClassifyMemo memo_;
};

std::string canonical_uncached(const std::string& path);

std::string canonical(const std::string& path) {
  if (!classify_memo) return canonical_uncached(path);
  auto it = classify_memo->canonical.find(path);
  if (it != classify_memo->canonical.end()) return it->second;
  std::string real;
  size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  struct stat st;
  if (slash == std::string::npos || slash == 0 || base.empty() || base == "." || base == ".." ||
      path.find("/../") != std::string::npos ||
      (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))) {
    real = canonical_uncached(path);
  } else {
    // Not a link (or absent): its folder's real name and its own.
    real = canonical(path.substr(0, slash)) + "/" + base;
  }
  classify_memo->canonical.emplace(path, real);
  return real;
}

std::string canonical_uncached(const std::string& path) {
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real)) return real;
  size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return path;
  return canonical(path.substr(0, slash)) + path.substr(slash);
}

// Paths NVRTC names for itself: the dynamic loader looking for libcuda in
// the system's library folders (NVRTC tries to load it on every compile;
// where there is no driver the search differs with the process's history),
// the time zone, character-set modules, process files. A computed
// `__has_include` of a name in a system library folder is therefore not
// keyed (docs/KEYS.md); an #include of one still fails and is handed over.
bool ends_with(const std::string& s, const char* suffix) {
  size_t n = std::char_traits<char>::length(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool header_suffix(const std::string& base) {
  for (const char* header : {".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl", ".inc", ".ipp"}) {
    if (ends_with(base, header)) return true;
  }
  return false;
}

// A name the dynamic loader may try for a library: lib*.so*, never a header.
bool library_name(const std::string& path) {
  std::string base = path.substr(path.rfind('/') + 1);
  if (base.compare(0, 3, "lib") != 0 || base.find(".so") == std::string::npos) return false;
  return !header_suffix(base);
}

// A name the dynamic loader tried for NVRTC: libcuda in NVRTC's library
// folder (its RUNPATH, hwcaps subfolders), absent where the driver is
// elsewhere or missing, and looked for or not with the process's history.
// Serving, the loader's calls are never recorded (seal.h): no name is.
bool loader_name(const std::string& path, const ProbeContext& c) {
  return !c.served && library_name(path) &&
         path.compare(path.rfind('/') + 1, 7, "libcuda") == 0;
}

// The driver's JIT cache ($CUDA_CACHE_PATH, else $HOME/.nv): a live driver in
// the process (CuPy, kcache_jit) has the sealed NVRTC name its files. Where
// that is depends on the environment of the process that classifies, so a
// probe left unkeyed for this reason is recorded as `own:<path>` (a lookup
// in another environment, where the path is no longer the driver's, misses),
// and a header-named file there is never the driver's: it is keyed like any
// user path.
bool driver_cache_path(const std::string& path) {
  if (header_suffix(path.substr(path.rfind('/') + 1))) return false;
  if (const char* cache = env::read(env::Var::cuda_cache_path)) {
    if (*cache == '/' && (path == cache || under(path, cache))) return true;
  }
  if (const char* home = env::read(env::Var::home)) {
    const std::string nv = std::string(home) + "/.nv";
    if (*home == '/' && (path == nv || under(path, nv))) return true;
  }
  return false;
}

constexpr const char* kDriverCacheLabel = "own:";

enum class Own { no, yes, driver_cache };

// `toolkit_reals`: the toolkit folders' real names. Nothing here reads the
// environment except driver_cache_path, whose answer is recorded.
Own is_nvrtc_own(const std::string& path, const std::string& real, const ProbeContext& c,
                 const std::vector<std::string>& toolkit_reals) {
  // A toolkit path reached by another spelling (a link to the toolkit's
  // folder, /usr/local/cuda for /usr/local/cuda-13.0) is no library of
  // NVRTC's, whatever its name or folder: NVRTC can read it.
  for (const std::string& d : toolkit_reals) {
    if (real == d || under(real, d)) return Own::no;
  }
  if (c.served) {
    // Serving (seal.h): NVRTC read every other file through the supervisor,
    // and the loader's calls are not recorded; what is left as its own is
    // what Landlock lets it read itself and what the process reads by
    // itself. Any other name it looked at is keyed, whatever its folder.
    for (const char* file : kProcessFiles) {
      if (path == file || under(path, file)) return Own::yes;
    }
    if (path == "/etc/localtime" || under(path, "/usr/share/zoneinfo") ||
        path.find("/gconv/") != std::string::npos) {
      return Own::yes;
    }
    if (!c.nvrtc_library_dir.empty() &&
        (under(path, c.nvrtc_library_dir) || under(real, canonical(c.nvrtc_library_dir)))) {
      return Own::yes;
    }
    for (const std::string& d : c.own_dirs) {
      if (under(path, d) || under(real, canonical(d))) return Own::yes;
    }
    return Own::no;
  }
  if (under(path, "/dev/shm")) return Own::no;  // files anyone can put there
  for (const std::string& d : c.user_dirs) {
    if (path == d || under(path, d) || under(real, canonical(d))) return Own::no;
  }
  for (const char* folder : {"/proc", "/sys", "/dev", "/usr/share/zoneinfo", "/lib", "/lib32",
                             "/lib64", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/local/lib",
                             "/usr/local/lib64"}) {
    if (path == folder || under(path, folder)) return Own::yes;
  }
  for (const char* file : {"/etc/localtime", "/etc/ld.so.cache", "/etc/ld.so.preload"}) {
    if (path == file) return Own::yes;
  }
  // (NVRTC's look at its working folder, $PWD, is left out by the process
  // it ran in: nvrtc.cc.) $LD_LIBRARY_PATH's folders are no longer NVRTC's
  // own by the variable: the loader's names there are library names (below),
  // and anything else there is keyed like any user path.
  // The loader's search for libcuda in folders of its own (RUNPATHs, hwcaps
  // subfolders, $LD_LIBRARY_PATH): library names only, so a header there is
  // still keyed.
  if (library_name(path)) return Own::yes;
  for (const std::string& d : c.own_dirs) {
    if (under(path, d) || under(real, canonical(d))) return Own::yes;
  }
  if (driver_cache_path(path)) return Own::driver_cache;
  return Own::no;
}

// The first four bytes of a file (fewer if it is shorter); nothing if it
// cannot be opened.
std::optional<std::string> magic_of(const std::string& path) {
  char magic[4] = {};
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::nullopt;
  size_t n = std::fread(magic, 1, sizeof magic, f);
  std::fclose(f);
  return std::string(magic, n);
}

// NVRTC's own libraries by name (libnvrtc.so.13, libnvrtc-builtins.so.13.0,
// libnvrtc.alt.so.13 and their links), in whatever folder: the compiler's
// identity fingerprints the ones it loads (toolkit.h).
bool nvrtc_library(const std::string& path) {
  return path.compare(path.rfind('/') + 1, 8, "libnvrtc") == 0 && library_name(path);
}

// What glibc reads for NVRTC by itself: the time zone's data (TZif, beneath
// the zone folder) and iconv's configuration in a gconv folder.
bool glibc_reads(const std::string& path, const std::string& real) {
  const size_t slash = path.rfind('/');
  const std::string base = path.substr(slash + 1);
  const std::string folder = path.substr(0, slash);
  if (under(path, "/usr/share/zoneinfo") || under(real, "/usr/share/zoneinfo")) {
    return magic_of(path) == std::optional<std::string>("TZif");
  }
  if (base == "gconv-modules" || base == "gconv-modules.cache") return ends_with(folder, "/gconv");
  return ends_with(folder, "/gconv/gconv-modules.d") && ends_with(base, ".conf");
}

// Files in NVRTC's own readable folders (its library folder, the time zones,
// character sets) are not keyed, which is exact only while they are what
// NVRTC itself reads there: libraries, zone data, gconv module lists. Any
// other file there (a header a computed include named by its absolute path)
// was read unkeyed. (Handed only: served, such files are keyed.)
bool nvrtc_own_kind(const std::string& path) {
  std::string base = path.substr(path.rfind('/') + 1);
  if (base.compare(0, 12, "gconv-module") == 0) return true;
  const std::optional<std::string> magic = magic_of(path);
  if (!magic) return true;  // not readable: NVRTC did not read it either
  return *magic == "\x7f" "ELF" || *magic == "TZif";
}

// "toolkit<i>:<rel>" for a path beneath toolkit folder i, else nullopt. By
// the name NVRTC used only: a user's link into the toolkit is the user's file
// (handed and keyed by its bytes), since the link can change while the
// toolkit does not.
// A name with `..` (a toolkit header's `#include "../x.h"`) keeps it, as
// NVRTC spelt it ("toolkit0:cooperative_groups/../cooperative_groups.h"):
// the kernel resolves it (through a link, not lexically), and so does a
// lookup. Folded, a name through a user's link that only climbed into the
// toolkit was checked at the toolkit's file, and a moved link went unseen.
std::optional<std::string> toolkit_name(const std::string& named, const ProbeContext& c) {
  for (size_t i = 0; i < c.toolkit_dirs.size(); ++i) {
    const std::string& d = c.toolkit_dirs[i];
    if (under(named, d)) {
      return kToolkitLabel + std::to_string(i) + ":" +
             named.substr(d.size() + (d.back() == '/' ? 0 : 1));
    }
  }
  return std::nullopt;
}

// A recorded probe path on this machine now: the folder it is below (a
// toolkit folder, or "/" for an absolute path) and the components under it.
struct DiskPath {
  std::string base;
  std::vector<std::string> components;
  std::string relative() const {
    std::string out;
    for (const std::string& part : components) out += (out.empty() ? "" : "/") + part;
    return out;
  }
  std::string full() const {
    std::string out = base == "/" ? "" : base;
    for (const std::string& part : components) out += "/" + part;
    return out;
  }
  // The folder `depth` components below base.
  std::string folder(size_t depth) const {
    std::string out = base;
    for (size_t i = 0; i < depth; ++i) out += (out.back() == '/' ? "" : "/") + components[i];
    return out;
  }
};

std::optional<DiskPath> disk_path(const std::string& recorded, const ProbeContext& c) {
  DiskPath out;
  std::string rel;
  const size_t folder_label = std::char_traits<char>::length(kSourceFolderPrefix);
  if (recorded.compare(0, folder_label, kSourceFolderPrefix) == 0) {
    // Beneath the program's folder: "program-folder:" is the folder itself.
    if (c.program_folder.empty() || c.program_folder.front() != '/') return std::nullopt;
    out.base = c.program_folder;
    rel = recorded.substr(folder_label);
    if (rel.empty()) return out;
    if (rel.front() != '/') return std::nullopt;
    rel = rel.substr(1);
  } else if (recorded.compare(0, std::char_traits<char>::length(kToolkitLabel), kToolkitLabel) !=
             0) {
    if (recorded.empty() || recorded.front() != '/') return std::nullopt;
    out.base = "/";
    rel = recorded.substr(1);
  } else {
    size_t colon = recorded.find(':');
    if (colon == std::string::npos) return std::nullopt;
    std::string index = recorded.substr(std::char_traits<char>::length(kToolkitLabel),
                                        colon - std::char_traits<char>::length(kToolkitLabel));
    if (index.empty() || index.size() > 3 ||
        index.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    size_t i = static_cast<size_t>(std::stoul(index));
    rel = recorded.substr(colon + 1);
    if (i >= c.toolkit_dirs.size() || rel.empty() || rel.front() == '/') return std::nullopt;
    out.base = c.toolkit_dirs[i];
  }
  size_t start = 0;
  while (start <= rel.size()) {
    size_t end = rel.find('/', start);
    if (end == std::string::npos) end = rel.size();
    std::string part = rel.substr(start, end - start);
    // Relative names the seal records resolved, without empty or "." parts.
    // An absolute name keeps its ".." parts as NVRTC opened it
    // ("/inc/sub/../y.h" for `#include "../y.h"` in /inc/sub/x.h): the kernel
    // resolves them on disk (through a linked folder, not lexically), and a
    // lookup checks the same spelling, so it sees what NVRTC would open.
    if (part.empty() || part == ".") return std::nullopt;
    out.components.push_back(std::move(part));
    start = end + 1;
  }
  return out;
}

uint64_t ns_of(const struct timespec& t) {
  return static_cast<uint64_t>(t.tv_sec) * 1000000000 + static_cast<uint64_t>(t.tv_nsec);
}

std::optional<FolderState> folder_state(const std::string& path) {
  struct stat st;
  if (observed_stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  return FolderState{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                     ns_of(st.st_mtim), ns_of(st.st_ctim)};
}

bool no_entry(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) != 0 && errno == ENOENT;
}

// For an absent path: the deepest folder on it that exists, if the next name
// has no entry in it at all (not even a dangling link) and the folder has not
// changed since the compile started. While that folder keeps its state, the
// path stays absent, so a lookup checks it with one stat shared by every
// absent name below that folder.
ClassifyMemo::Walked walk_step(const std::string& path) {
  auto look = [&] {
    ClassifyMemo::Walked w;
    w.absent = no_entry(path);
    if (!w.absent) w.folder = folder_state(path);
    return w;
  };
  if (!classify_memo) return look();
  auto it = classify_memo->walked.find(path);
  if (it == classify_memo->walked.end()) it = classify_memo->walked.emplace(path, look()).first;
  return it->second;
}

void record_folder(const DiskPath& path, int64_t started_ns, cache::ManifestProbe* p) {
  // The walk down to the first name with no entry may use what this
  // classification saw before (ClassifyScope): it only finds the depth.
  size_t depth = 0;
  std::optional<FolderState> state = walk_step(path.folder(0)).folder;
  for (; depth < path.components.size(); ++depth) {
    ClassifyMemo::Walked next = walk_step(path.folder(depth + 1));
    if (next.absent) break;
    if (depth + 1 == path.components.size() || !next.folder) return;
    state = next.folder;
  }
  if (depth == path.components.size()) return;
  if (!state || static_cast<int64_t>(state->ctime_ns) >= started_ns) return;
  // The one rule for trusting a stamp (common/stamp_trust.h): on a file
  // system with whole-second stamps (ext3, FAT) or a stat cache (NFS), a
  // name added in the second of the compile leaves the folder's stamp as it
  // was. A folder changed within the window is not used (one stat per name).
  const FileStamp stamp{state->dev, state->ino, 0, state->mtime_ns, state->ctime_ns};
  if (!stamp_stands_for_bytes(stamp, path.folder(depth), started_ns)) return;
  // Looked at now, after the folder's stat: the name was absent in that
  // state (a name added since changed the folder's stamp, which the lookup
  // then finds changed).
  if (!no_entry(path.folder(depth + 1))) return;
  p->has_folder = true;
  p->folder_depth = static_cast<uint32_t>(depth);
  p->dev = state->dev;
  p->ino = state->ino;
  p->mtime_ns = state->mtime_ns;
  p->ctime_ns = state->ctime_ns;
}

struct Stat {
  bool file = false;  // a regular file (what an include can read)
  // Something neither a file nor a folder (a FIFO, a device, a socket): the
  // seal refuses it, so it is not the absence a probe recorded.
  bool other = false;
  uint64_t dev = 0, ino = 0, size = 0, mtime_ns = 0, ctime_ns = 0;
};

// `path` relative to the open folder `dir` (AT_FDCWD: as it is).
Stat stat_of(const std::string& path, int dir = AT_FDCWD) {
  Stat s;
  struct stat st;
  if (::fstatat(dir, path.c_str(), &st, 0) != 0) return s;
  if (!S_ISREG(st.st_mode)) {
    s.other = !S_ISDIR(st.st_mode);
    return s;
  }
  s.file = true;
  s.dev = static_cast<uint64_t>(st.st_dev);
  s.ino = static_cast<uint64_t>(st.st_ino);
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000 +
               static_cast<uint64_t>(st.st_mtim.tv_nsec);
  s.ctime_ns = static_cast<uint64_t>(st.st_ctim.tv_sec) * 1000000000 +
               static_cast<uint64_t>(st.st_ctim.tv_nsec);
  return s;
}


}  // namespace

// `path` without "." components and repeated slashes.
std::string without_dot_parts(const std::string& path) {
  std::string out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string_view part(path.data() + start, end - start);
    if (!part.empty() && part != ".") {
      out += '/';
      out += part;
    }
    start = end + 1;
  }
  return out.empty() ? "/" : out;
}

std::vector<std::string> without_nvrtc_own(std::vector<std::string> paths, const ProbeContext& c) {
  ClassifyScope memo;
  std::vector<std::string> toolkit_reals;
  for (const std::string& d : c.toolkit_dirs) toolkit_reals.push_back(canonical(d));
  paths.erase(std::remove_if(paths.begin(), paths.end(),
                             [&](const std::string& path) {
                               return !toolkit_name(path, c) &&
                                      is_nvrtc_own(path, canonical(path), c, toolkit_reals) !=
                                          Own::no;
                             }),
              paths.end());
  return paths;
}

namespace {

// A name whose file depends on the process that looks at it: beneath
// /proc/self, /proc/thread-self or /proc/<pid>, /dev/fd, /dev/std*.
bool of_a_process(const std::string& path) {
  for (const char* folder : {"/proc/self", "/proc/thread-self", "/dev/fd", "/dev/stdin",
                             "/dev/stdout", "/dev/stderr"}) {
    if (path == folder || under(path, folder)) return true;
  }
  if (path.rfind("/proc/", 0) != 0) return false;
  size_t end = path.find('/', 6);
  std::string pid = path.substr(6, end == std::string::npos ? std::string::npos : end - 6);
  return !pid.empty() && pid.find_first_not_of("0123456789") == std::string::npos;
}

std::string served_working_folder(const ProbeContext& c) {
  if (!c.working_folder.empty()) return c.working_folder;
  char cwd[PATH_MAX];
  return ::getcwd(cwd, sizeof cwd) ? std::string(cwd) : std::string("/");
}

// The stamp a lookup may take for the bytes (probes_hold), where the rule
// says it stands for them (common/stamp_trust.h): else none (mtime and ctime
// 0, which no file has), and every lookup reads and hashes the file again.
void keep_stamp_if_it_stands(const std::string& path, uint64_t mtime_ns, uint64_t ctime_ns,
                             int64_t started_ns, cache::ManifestProbe* p) {
  const FileStamp stamp{p->dev, p->ino, p->size, mtime_ns, ctime_ns};
  const bool stands = stamp_stands_for_bytes(stamp, path, started_ns);
  p->mtime_ns = stands ? mtime_ns : 0;
  p->ctime_ns = stands ? ctime_ns : 0;
}

// A folder on `path`'s way below the working folder `cwd` (each lexical
// folder above it: the link and what it leads to) whose ctime is not older
// than `started_ns`, or nullopt. A file NVRTC only looked at is classified
// after the compile by what is there now: a folder renamed into place
// meanwhile (`mv staged inc`) keeps its files' ctime but changes its own.
// The working folder and those above it are not looked at: a program's log
// written there changes them, and none of them moves while the process works
// in it.
std::optional<std::string> folder_changed_since(const std::string& path, const std::string& cwd,
                                                int64_t started_ns) {
  for (size_t slash = path.rfind('/'); slash != std::string::npos && slash > 0;
       slash = path.rfind('/', slash - 1)) {
    const std::string folder = path.substr(0, slash);
    if (cwd == folder || (cwd.size() > folder.size() && cwd.compare(0, folder.size(), folder) == 0 &&
                          cwd[folder.size()] == '/')) {
      break;
    }
    for (bool follow : {false, true}) {
      struct stat st;
      int r = follow ? ::stat(folder.c_str(), &st) : ::lstat(folder.c_str(), &st);
      if (r != 0 || static_cast<int64_t>(ns_of(st.st_ctim)) >= started_ns) return folder;
    }
  }
  return std::nullopt;
}

// A file NVRTC looked at, keyed by its bytes and stamps into `p`. Nothing
// (nullopt) when keyed; else why not: empty where the file went meanwhile
// (the lookup's stat cannot match), else why the result is not storable.
std::optional<std::string> key_present_file(const std::string& path, const Stat& st,
                                            const ProbeContext& c, int64_t started_ns,
                                            cache::ManifestProbe* p) {
  if (static_cast<int64_t>(st.ctime_ns) >= started_ns)
    return path + " changed while NVRTC compiled";
  std::optional<std::string> content;
  try {
    content = read_input_file(path);
  } catch (const Error& e) {
    return std::string(e.what());
  }
  if (!content) return std::string();
  if (c.check_time_macros &&
      (uses_time_macros(*content) || (!c.date_keyed && uses_date_macro(*content)))) {
    return path + " uses a time macro";
  }
  if (stat_of(path).ctime_ns != st.ctime_ns) return path + " changed while kcache read it";
  if (c.mounts_changed) {
    return path +
           " is there now, but the mount table changed while NVRTC compiled (a folder "
           "mounted onto its way?): NVRTC may have found it absent";
  }
  std::optional<std::string> folder;
  if (c.served) folder = folder_changed_since(path, served_working_folder(c), started_ns);
  if (folder) {
    return path + " is there now, but " + *folder +
           " changed while NVRTC compiled (renamed into place?): NVRTC may have found it absent";
  }
  p->present = true;
  p->content = xxh3_128(*content);
  p->dev = st.dev;
  p->ino = st.ino;
  p->size = st.size;
  keep_stamp_if_it_stands(path, st.mtime_ns, st.ctime_ns, started_ns, p);
  return std::nullopt;
}

}  // namespace

MountTableWatch::MountTableWatch()
    : fd_(::open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC)) {}

MountTableWatch::~MountTableWatch() {
  if (fd_ >= 0) ::close(fd_);
}

// The kernel reports a change once (poll then takes the new table as seen):
// the answer is kept.
bool MountTableWatch::changed() const {
  if (fd_ < 0 || changed_) return true;
  pollfd p{fd_, POLLPRI, 0};
  int n;
  while ((n = ::poll(&p, 1, 0)) < 0 && errno == EINTR) {
  }
  changed_ = n < 0 || (p.revents & (POLLPRI | POLLERR)) != 0;
  return changed_;
}

ClassifiedProbes classify_probes(const std::vector<std::string>& probes, const ProbeContext& c,
                                 int64_t started_ns) {
  ClassifyScope memo;
  ClassifiedProbes out;
  std::map<std::string, cache::ManifestProbe> keyed;
  std::vector<std::string> toolkit_reals;
  for (const std::string& d : c.toolkit_dirs) toolkit_reals.push_back(canonical(d));
  const std::string library_real =
      c.nvrtc_library_dir.empty() ? "" : canonical(c.nvrtc_library_dir);
  for (const std::string& named : probes) {
    if (named.empty() || named.front() != '/') continue;  // the seal gives absolute paths only
    // "x/./y" and "x//y" name x/y (a toolkit header included as <./mma.h>:
    // includes.h, kAliasPrefix); ".." is left as named.
    const std::string path = without_dot_parts(named);
    // Beneath the sealed source's folder, which exists nowhere (seal.h):
    // nothing to key, and a program's key stays free of its folder's name.
    if (under(path, kSealedSourceRoot)) {
      struct stat root;
      if (::lstat(kSealedSourceRoot, &root) == 0) {
        out.unkeyable = std::string(kSealedSourceRoot) +
                        " exists on this machine: kcache hands absolute source names beneath it "
                        "as a folder that must not exist; remove it";
      }
      continue;
    }
    std::string real = canonical(path);
    if (c.served && (of_a_process(path) || of_a_process(real))) {
      // What it names depends on the process that looks: a lookup would stat
      // its own open files (a review's /dev/fd/4 under __has_include).
      out.unkeyable = path + " names a process's own files (/proc, /dev/fd): not keyable";
      continue;
    }
    Stat st = stat_of(path);
    std::optional<std::string> toolkit = toolkit_name(path, c);
    // The toolkit's folders first: a header there is keyed whatever its name
    // or wherever the toolkit lies (under /usr/lib, on $LD_LIBRARY_PATH).
    const Own own = toolkit ? Own::no : is_nvrtc_own(path, real, c, toolkit_reals);
    if (own == Own::driver_cache) {
      cache::ManifestProbe p;
      p.path = kDriverCacheLabel + path;
      keyed.emplace(p.path, std::move(p));
      continue;
    }
    // By either spelling: /usr/local/lib64 may be a link to the toolkit's.
    const bool readable_to_nvrtc =
        own == Own::yes &&
        ((!c.nvrtc_library_dir.empty() &&
          (under(path, c.nvrtc_library_dir) || under(real, library_real))) ||
         under(path, "/usr/share/zoneinfo") || path.find("/gconv/") != std::string::npos);
    // Serving, the loader's calls are not recorded (seal.h): a file NVRTC's
    // own code looked at in the folders it may read itself is keyed by its
    // bytes like any other, whatever its name or first bytes (reviews' stale
    // hits: a library a computed __has_include found, then removed; an edited
    // gconv-modules-x.h or gconv-modules; a header that starts with TZif).
    // But NVRTC's own libraries (the compiler's identity fingerprints them)
    // and what glibc reads for NVRTC by itself: those are in a record or not
    // with the process's history (TZ=UTC: the zone file at a pool child's
    // first compile, never at the CLI's, which read it before), so keyed
    // they would split entries.
    if (readable_to_nvrtc && c.served && st.file && !nvrtc_library(path) &&
        !glibc_reads(path, real)) {
      // keyed below
    } else if (own == Own::yes) {
      if (readable_to_nvrtc && st.file && !nvrtc_own_kind(path)) {
        out.unkeyable = "NVRTC read " + path +
                        " from a folder of its own that kcache does not key (name it by a "
                        "path outside NVRTC's library, time-zone and gconv folders)";
      }
      // NVRTC could read a file appearing there (an include search, a
      // computed __has_include of "<lib>/libkc.so"): an absent name is keyed
      // as absent, unless the loader tried it looking for the driver.
      if (!readable_to_nvrtc || st.file || loader_name(path, c)) continue;
    }
    // A folder is no file to include: keyed as absent like a missing name,
    // so a file replacing it later is noticed.
    if (!toolkit && st.file && !c.served) {
      out.user_files.push_back(path);
      continue;
    }
    cache::ManifestProbe p;
    p.path = toolkit ? *toolkit : path;
    if (st.file) {
      std::optional<std::string> why = key_present_file(path, st, c, started_ns, &p);
      if (why) {
        if (!why->empty()) out.unkeyable = *why;
        continue;
      }
    } else if (std::optional<DiskPath> disk = disk_path(p.path, c)) {
      record_folder(*disk, started_ns, &p);
    }
    keyed.emplace(p.path, std::move(p));
  }
  for (auto& [name, p] : keyed) out.keyed.push_back(std::move(p));
  return out;
}

// The toolkit folders a lookup stats beneath, opened once (O_PATH): a name
// relative to one costs the kernel a walk of its own components only.
class FolderHandles {
 public:
  ~FolderHandles() {
    for (const auto& [path, fd] : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  Stat stat(const DiskPath& path) {
    if (path.base == "/") return stat_of(path.full());
    auto it = fds_.find(path.base);
    if (it == fds_.end()) {
      int fd = ::open(path.base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
      it = fds_.emplace(path.base, fd).first;
    }
    return it->second < 0 ? stat_of(path.full()) : stat_of(path.relative(), it->second);
  }

 private:
  std::map<std::string, int> fds_;
};

void add_asked_absences(const std::string& spelling, const ProbeContext& c, int64_t started_ns,
                        ClassifiedProbes* into) {
  if (spelling.empty() || spelling.front() == '/' || has_parent_part(spelling)) return;
  for (size_t i = 0; i < c.toolkit_dirs.size(); ++i) {
    cache::ManifestProbe p;
    p.path = kToolkitLabel + std::to_string(i) + ":" + spelling;
    std::optional<DiskPath> disk = disk_path(p.path, c);
    if (!disk) continue;
    if (stat_of(disk->full()).file) {
      into->unkeyable = disk->full() + " appeared while NVRTC compiled";
      continue;
    }
    record_folder(*disk, started_ns, &p);
    auto same = [&](const cache::ManifestProbe& q) { return q.path == p.path; };
    auto it = std::find_if(into->keyed.begin(), into->keyed.end(), same);
    if (it == into->keyed.end()) {
      into->keyed.insert(std::upper_bound(into->keyed.begin(), into->keyed.end(), p,
                                          [](const cache::ManifestProbe& a,
                                             const cache::ManifestProbe& b) {
                                            return a.path < b.path;
                                          }),
                         std::move(p));
    } else if (it->present) {
      into->unkeyable = disk->full() + " appeared while NVRTC compiled";
    }
  }
}

namespace {

struct TimeMacros {
  bool time = false, date = false;
};

// Which time macros the bytes NVRTC was served use: read again (the
// snapshot's bytes, or it changed: nullopt), once per content and thread
// (no lock: the drop-in's forks take every lock it has). A CUB miss is
// served ~500 headers, the same ones every time.
std::optional<TimeMacros> time_macros_of(const ServedFile& f) {
  thread_local std::map<Hash128, TimeMacros> by_content;
  auto it = by_content.find(f.content);
  if (it != by_content.end()) return it->second;
  std::optional<std::string> content;
  try {
    content = read_input_file(f.path);
  } catch (const Error&) {
    return std::nullopt;
  }
  if (!content || xxh3_128(*content) != f.content) return std::nullopt;
  TimeMacros m{uses_time_macros(*content), uses_date_macro(*content)};
  if (by_content.size() < 100000) by_content.emplace(f.content, m);
  return m;
}

}  // namespace

void add_served(const std::vector<ServedFile>& served, const ProbeContext& c, int64_t started_ns,
                ClassifiedProbes* into) {
  auto by_path = [](const cache::ManifestProbe& a, const cache::ManifestProbe& b) {
    return a.path < b.path;
  };
  // Merged into `into->keyed` (sorted by path) at the end: inserted one by
  // one, ~500 served files moved ~1,000 probes each.
  std::map<std::string, cache::ManifestProbe> added;
  for (const ServedFile& f : served) {
    cache::ManifestProbe p;
    p.path = toolkit_name(f.path, c).value_or(f.path);
    p.present = true;
    p.content = f.content;
    p.dev = f.dev;
    p.ino = f.ino;
    p.size = f.size;
    keep_stamp_if_it_stands(f.path, f.mtime_ns, f.ctime_ns, started_ns, &p);
    if (static_cast<int64_t>(std::min<uint64_t>(f.ctime_ns, INT64_MAX)) >= started_ns) {
      into->unkeyable = f.path + " changed while NVRTC compiled";
      continue;
    }
    auto it = std::lower_bound(into->keyed.begin(), into->keyed.end(), p, by_path);
    const cache::ManifestProbe* before =
        it != into->keyed.end() && it->path == p.path ? &*it : nullptr;
    auto again = added.find(p.path);
    if (again != added.end()) before = &again->second;
    if (before) {
      if (!before->present || before->content != p.content) {
        into->unkeyable = f.path + " changed while NVRTC compiled (read twice, or absent first)";
      }
      continue;
    }
    if (c.check_time_macros) {
      std::optional<TimeMacros> macros = time_macros_of(f);
      if (!macros) {
        into->unkeyable = f.path + " changed while NVRTC compiled";
        continue;
      }
      if (macros->time || (!c.date_keyed && macros->date)) {
        into->unkeyable = f.path + " uses a time macro";
        continue;
      }
    }
    std::string path = p.path;
    added.emplace(std::move(path), std::move(p));
  }
  std::vector<cache::ManifestProbe> merged;
  merged.reserve(into->keyed.size() + added.size());
  auto next = added.begin();
  for (cache::ManifestProbe& p : into->keyed) {
    for (; next != added.end() && next->first < p.path; ++next) merged.push_back(std::move(next->second));
    merged.push_back(std::move(p));
  }
  for (; next != added.end(); ++next) merged.push_back(std::move(next->second));
  into->keyed = std::move(merged);
}

void merge_earlier_round(const ClassifiedProbes& earlier, ClassifiedProbes* into) {
  if (!earlier.unkeyable.empty() && into->unkeyable.empty()) into->unkeyable = earlier.unkeyable;
  auto by_path = [](const cache::ManifestProbe& a, const cache::ManifestProbe& b) {
    return a.path < b.path;
  };
  for (const cache::ManifestProbe& p : earlier.keyed) {
    auto it = std::lower_bound(into->keyed.begin(), into->keyed.end(), p, by_path);
    if (it == into->keyed.end() || it->path != p.path) {
      into->keyed.insert(it, p);
    } else if (it->present != p.present || (p.present && it->content != p.content)) {
      into->unkeyable = p.path + " changed between two rounds of NVRTC";
    }
  }
}

// Files of equal bytes read under two names: whether they are one file
// decides NVRTC's answer (#pragma once includes one file once, two copies
// twice), so that relation is keyed (probe_key_lines) and checked
// (probes_hold) as the compile saw it: the identity of each present probe, a
// (device, inode) pair, the compile's or the lookup's.
using FileIdentity = std::pair<uint64_t, uint64_t>;

// Whether `seen` (content, recorded identity, identity now) relates every two
// files of equal content as the compile did.
bool same_files_as_recorded(
    std::vector<std::tuple<Hash128, FileIdentity, FileIdentity>> seen) {
  std::sort(seen.begin(), seen.end(), [](const auto& a, const auto& b) {
    return std::get<0>(a).high != std::get<0>(b).high ? std::get<0>(a).high < std::get<0>(b).high
                                                      : std::get<0>(a).low < std::get<0>(b).low;
  });
  const FileIdentity unrecorded{0, 0};  // a name NVRTC never used (compiler.cc: a copy)
  for (size_t i = 0; i < seen.size(); ++i) {
    if (std::get<1>(seen[i]) == unrecorded) continue;
    for (size_t j = i + 1; j < seen.size() && std::get<0>(seen[j]) == std::get<0>(seen[i]); ++j) {
      if (std::get<1>(seen[j]) == unrecorded) continue;
      const bool were_one = std::get<1>(seen[i]) == std::get<1>(seen[j]);
      const bool are_one = std::get<2>(seen[i]) == std::get<2>(seen[j]);
      if (were_one != are_one) return false;
    }
  }
  return true;
}

namespace {

// A probe's path as a user reads it: beneath the working folder relative to
// it, else absolute.
std::string shown_path(const DiskPath& disk) {
  const std::string path = disk.full();
  char here[PATH_MAX];
  const std::string cwd = ::getcwd(here, sizeof here) ? here : "";
  if (cwd.size() > 1 && path.compare(0, cwd.size() + 1, cwd + "/") == 0) {
    return path.substr(cwd.size() + 1);
  }
  return path;
}

}  // namespace

bool probes_hold(const std::vector<cache::ManifestProbe>& probes, const ProbeContext& c,
                 std::string* why) {
  auto fails = [why](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  std::map<std::string, std::optional<FolderState>> folders;  // one stat per folder
  FolderHandles handles;
  std::vector<std::tuple<Hash128, FileIdentity, FileIdentity>> present;
  for (const cache::ManifestProbe& p : probes) {
    if (p.path.compare(0, std::char_traits<char>::length(kDriverCacheLabel), kDriverCacheLabel) ==
        0) {
      // Left unkeyed as the driver's JIT cache: only while it still is, in
      // this process's environment.
      if (p.present || !driver_cache_path(p.path.substr(
                           std::char_traits<char>::length(kDriverCacheLabel)))) {
        return fails("the driver's JIT cache folder changed");
      }
      continue;
    }
    std::optional<DiskPath> disk = disk_path(p.path, c);
    if (!disk) return fails(p.path + " is not found where it was");
    if (p.has_folder && !recording_lookup()) {
      if (p.present || p.folder_depth >= disk->components.size()) {
        return fails(p.path + " is not found where it was");
      }
      std::string folder = disk->folder(p.folder_depth);
      auto it = folders.find(folder);
      if (it == folders.end()) it = folders.emplace(folder, folder_state(folder)).first;
      if (it->second == FolderState{p.dev, p.ino, p.mtime_ns, p.ctime_ns}) continue;
    }
    observe_path(disk->full());  // a lookup record (lookup_record.h) holds it
    Stat st = handles.stat(*disk);
    if (st.file != p.present || st.other) {
      if (env::read(env::Var::kcache_debug_probes)) {
        std::fprintf(stderr, "probe fails: %s\n", p.path.c_str());
      }
      return fails(shown_path(*disk) + (p.present ? " was removed" : " appeared"));
    }
    const std::string path = disk->full();
    if (!p.present) continue;
    present.emplace_back(p.content, FileIdentity{p.dev, p.ino}, FileIdentity{st.dev, st.ino});
    if (p.ctime_ns != 0 && st.dev == p.dev && st.ino == p.ino && st.size == p.size &&
        st.mtime_ns == p.mtime_ns && st.ctime_ns == p.ctime_ns) {
      continue;  // a stamp kept only where it stands for the bytes (keep_stamp_if_it_stands)
    }
    std::optional<std::string> content;
    try {
      content = read_input_file(path);
    } catch (const Error&) {
      return fails(shown_path(*disk) + " cannot be read");
    }
    if (!content || xxh3_128(*content) != p.content) return fails(shown_path(*disk) + " changed");
  }
  if (!same_files_as_recorded(std::move(present))) {
    if (env::read(env::Var::kcache_debug_probes)) {
      std::fprintf(stderr, "probe fails: one file or two\n");
    }
    return fails("files read under two names are linked differently (one file or two copies)");
  }
  return true;
}

std::vector<std::string> probe_key_lines(const std::vector<cache::ManifestProbe>& probes) {
  // Present files of equal bytes: which of them are one file, numbered in
  // the order of their paths (the numbers, not the inodes, are keyed).
  std::map<std::string, std::vector<FileIdentity>> files_of;  // by content
  for (const cache::ManifestProbe& p : probes) {
    if (p.present && (p.dev || p.ino)) files_of[p.content.hex()].push_back({p.dev, p.ino});
  }
  std::vector<std::string> lines;
  lines.reserve(probes.size());
  std::vector<const cache::ManifestProbe*> by_path;
  for (const cache::ManifestProbe& p : probes) by_path.push_back(&p);
  std::sort(by_path.begin(), by_path.end(),
            [](const cache::ManifestProbe* a, const cache::ManifestProbe* b) {
              return a->path < b->path;
            });
  std::map<std::string, std::vector<FileIdentity>> numbered;  // by content, first seen first
  for (const cache::ManifestProbe* p : by_path) {
    if (!p->present) {
      lines.push_back("absent " + p->path);
      continue;
    }
    std::string line = "present " + p->path + " " + p->content.hex();
    const std::string hex = p->content.hex();
    if (files_of[hex].size() > 1 && (p->dev || p->ino)) {
      std::vector<FileIdentity>& seen = numbered[hex];
      const FileIdentity id{p->dev, p->ino};
      size_t n = std::find(seen.begin(), seen.end(), id) - seen.begin();
      if (n == seen.size()) seen.push_back(id);
      line += " file " + std::to_string(n);
    }
    lines.push_back(std::move(line));
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

}  // namespace kcache::compiler
