// Classifying what a sealed NVRTC looked at, after its compile (probes.h,
// classify_probes): each path keyed by its content or its absence, left out
// as NVRTC's own, or handed over; or the reason the result is unkeyable.
// Here, not at a lookup, because only now is it known what NVRTC found: a
// path is judged by what is on the disk after the compile, so every way the
// disk may have changed while NVRTC ran (a file, a folder renamed into place,
// a mount) makes the result unkeyable rather than keyed wrong.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file_system.h"
#include "common/hash.h"
#include "compiler/seal/probes.h"
#include "compiler/seal/probes_parts.h"
#include "compiler/seal/seal.h"
#include "compiler/time_macros.h"

namespace kcache::compiler::probe_parts {
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

// The real names of the toolkit's folders and of NVRTC's library folder,
// found once a classification.
struct RealFolders {
  std::vector<std::string> toolkit_reals;
  std::string library_real;
};

RealFolders real_folders(const ProbeContext& c) {
  RealFolders out;
  for (const std::string& d : c.toolkit_dirs) out.toolkit_reals.push_back(canonical(d));
  out.library_real = c.nvrtc_library_dir.empty() ? "" : canonical(c.nvrtc_library_dir);
  return out;
}

// Beneath the sealed source's folder, which exists nowhere (seal.h):
// nothing to key, and a program's key stays free of its folder's name.
bool beneath_sealed_source(const std::string& path, ClassifiedProbes* out) {
  if (!under(path, kSealedSourceRoot)) return false;
  struct stat root;
  if (::lstat(kSealedSourceRoot, &root) == 0) {
    out->unkeyable = std::string(kSealedSourceRoot) +
                     " exists on this machine: kcache hands absolute source names beneath it "
                     "as a folder that must not exist; remove it";
  }
  return true;
}

// For a path is_nvrtc_own calls NVRTC's own: true where it is left unkeyed
// (or makes the result unkeyable), false where it is keyed all the same.
bool left_as_nvrtc_own(const std::string& path, const std::string& real, const Stat& st,
                       const ProbeContext& c, const std::string& library_real,
                       ClassifiedProbes* out) {
  // By either spelling: /usr/local/lib64 may be a link to the toolkit's.
  const bool readable_to_nvrtc =
      (!c.nvrtc_library_dir.empty() &&
       (under(path, c.nvrtc_library_dir) || under(real, library_real))) ||
      under(path, "/usr/share/zoneinfo") || path.find("/gconv/") != std::string::npos;
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
    return false;
  }
  if (readable_to_nvrtc && st.file && !nvrtc_own_kind(path)) {
    out->unkeyable = "NVRTC read " + path +
                     " from a folder of its own that kcache does not key (name it by a "
                     "path outside NVRTC's library, time-zone and gconv folders)";
  }
  // NVRTC could read a file appearing there (an include search, a
  // computed __has_include of "<lib>/libkc.so"): an absent name is keyed
  // as absent, unless the loader tried it looking for the driver.
  return !readable_to_nvrtc || st.file || loader_name(path, c);
}

// Keys `path` (by its toolkit name, where it has one) as present with its
// bytes, or as absent; or says why the result is unkeyable.
void key_probe(const std::string& path, const Stat& st, const std::optional<std::string>& toolkit,
               const ProbeContext& c, int64_t started_ns, ClassifiedProbes* out,
               std::map<std::string, cache::ManifestProbe>* keyed) {
  cache::ManifestProbe p;
  p.path = toolkit ? *toolkit : path;
  if (st.file) {
    std::optional<std::string> why = key_present_file(path, st, c, started_ns, &p);
    if (why) {
      if (!why->empty()) out->unkeyable = *why;
      return;
    }
  } else if (std::optional<DiskPath> disk = disk_path(p.path, c)) {
    record_folder(*disk, started_ns, &p);
  }
  keyed->emplace(p.path, std::move(p));
}

// One path NVRTC named: keyed into `keyed`, handed over (out->user_files),
// left out, or the reason the result is unkeyable.
void classify_one(const std::string& named, const ProbeContext& c, int64_t started_ns,
                  const RealFolders& folders, ClassifiedProbes* out,
                  std::map<std::string, cache::ManifestProbe>* keyed) {
  if (named.empty() || named.front() != '/') return;  // the seal gives absolute paths only
  // "x/./y" and "x//y" name x/y (a toolkit header included as <./mma.h>:
  // includes.h, kAliasPrefix); ".." is left as named.
  const std::string path = without_dot_parts(named);
  if (beneath_sealed_source(path, out)) return;
  std::string real = canonical(path);
  if (c.served && (of_a_process(path) || of_a_process(real))) {
    // What it names depends on the process that looks: a lookup would stat
    // its own open files (a review's /dev/fd/4 under __has_include).
    out->unkeyable = path + " names a process's own files (/proc, /dev/fd): not keyable";
    return;
  }
  Stat st = stat_of(path);
  std::optional<std::string> toolkit = toolkit_name(path, c);
  // The toolkit's folders first: a header there is keyed whatever its name
  // or wherever the toolkit lies (under /usr/lib, on $LD_LIBRARY_PATH).
  // What the seal answered as the driver's cache: NVRTC saw nothing there.
  const Own own = c.served && c.hidden.count(path) ? Own::driver_cache
                  : toolkit                       ? Own::no
                                                  : is_nvrtc_own(path, real, c, folders.toolkit_reals);
  if (own == Own::driver_cache) {
    cache::ManifestProbe p;
    p.path = kDriverCacheLabel + path;
    keyed->emplace(p.path, std::move(p));
    return;
  }
  if (own == Own::yes && left_as_nvrtc_own(path, real, st, c, folders.library_real, out)) return;
  // A folder is no file to include: keyed as absent like a missing name,
  // so a file replacing it later is noticed.
  if (!toolkit && st.file && !c.served) {
    out->user_files.push_back(path);
    return;
  }
  key_probe(path, st, toolkit, c, started_ns, out, keyed);
}

}  // namespace
}  // namespace kcache::compiler::probe_parts

namespace kcache::compiler {

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
  using namespace probe_parts;
  ClassifyScope memo;
  ClassifiedProbes out;
  std::map<std::string, cache::ManifestProbe> keyed;
  const RealFolders folders = real_folders(c);
  for (const std::string& named : probes) classify_one(named, c, started_ns, folders, &out, &keyed);
  for (auto& [name, p] : keyed) out.keyed.push_back(std::move(p));
  return out;
}

}  // namespace kcache::compiler
