#include "compiler/lookup_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>
#include <unordered_map>

#include "common/stamp_trust.h"
#include "compiler/seal/seal.h"

namespace kcache::compiler {
namespace {

thread_local DiskObservations* t_lookup_recording = nullptr;

int64_t record_ns(const struct timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

bool record_starts_with(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

DiskObservations::DiskObservations() : started_ns_(realtime_now_ns()), outer_(t_lookup_recording) {
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd)) {
    cwd_ = cwd;
  } else {
    spoiled_ = true;  // relative names would mean nothing
  }
  if (!outer_) t_lookup_recording = this;
}

DiskObservations::~DiskObservations() {
  if (t_lookup_recording == this) t_lookup_recording = outer_;
}

void DiskObservations::record(const std::string& path, int stat_result, int stat_errno,
                              const struct stat& st) {
  if (path.empty()) return;
  std::string absolute = path.front() == '/' ? path : cwd_ + "/" + path;
  Seen s;
  if (stat_result == 0) {
    s.there = true;
    s.folder = S_ISDIR(st.st_mode);
    s.dev = static_cast<uint64_t>(st.st_dev);
    s.ino = static_cast<uint64_t>(st.st_ino);
    s.size = static_cast<uint64_t>(st.st_size);
    s.mtime_ns = static_cast<uint64_t>(record_ns(st.st_mtim));
    s.ctime_ns = static_cast<uint64_t>(record_ns(st.st_ctim));
  } else if (stat_errno != ENOENT && stat_errno != ENOTDIR) {
    spoiled_ = true;  // EACCES, ELOOP, ...: not a state a stat stamp can vouch for
    return;
  }
  auto [it, fresh] = seen_.emplace(absolute, s);
  if (!fresh && (it->second.there != s.there || it->second.dev != s.dev ||
                 it->second.ino != s.ino || it->second.size != s.size ||
                 it->second.mtime_ns != s.mtime_ns || it->second.ctime_ns != s.ctime_ns)) {
    spoiled_ = true;  // changed while the lookup ran
  }
}

namespace {

// An absent `path` beneath a quiet folder, checked by the stamp of the
// deepest folder on its path that exists: false where there is none whose
// stamp has settled, or where `path` is there now. The folder is stat-ed
// before the name is found absent again, so an entry made after the
// folder's stat moves the stamp a later lookup compares. An entry that is
// there but does not resolve (a dangling link, on the walk or at the name)
// is answered by no folder: its target may appear elsewhere, where this
// folder's stamp does not move.
bool absent_by_folder(const std::string& path, int64_t started_ns, cache::ManifestProbe* p) {
  uint32_t depth = 0;
  std::string folder = path;
  struct stat st;
  for (;;) {
    const size_t slash = folder.rfind('/');
    if (slash == std::string::npos || folder.size() <= 1) return false;
    folder.resize(slash == 0 ? 1 : slash);
    ++depth;
    if (::stat(folder.c_str(), &st) == 0) break;
    if (errno != ENOENT && errno != ENOTDIR) return false;
    if (::lstat(folder.c_str(), &st) == 0) return false;
  }
  if (!S_ISDIR(st.st_mode)) return false;
  const FileStamp stamp{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                        static_cast<uint64_t>(st.st_size),
                        static_cast<uint64_t>(record_ns(st.st_mtim)),
                        static_cast<uint64_t>(record_ns(st.st_ctim))};
  if (!stamp_stands_for_bytes(stamp, folder, started_ns)) return false;
  struct stat again;
  if (::stat(path.c_str(), &again) == 0 || (errno != ENOENT && errno != ENOTDIR)) return false;
  if (::lstat(path.c_str(), &again) == 0) return false;
  p->has_folder = true;
  p->folder_depth = depth;
  p->dev = stamp.dev;
  p->ino = stamp.ino;
  p->mtime_ns = stamp.mtime_ns;
  p->ctime_ns = stamp.ctime_ns;
  return true;
}

// Stats of many names in few folders (a CUB record: ~800 names in ~70
// folders, ten components deep through two links): each folder is opened
// once (O_PATH) and each name stat-ed relative to it, so the kernel walks
// the folder's path once, not once per name. The outcome is ::stat(path)'s:
// the open resolves the folder's components as stat would (links followed;
// ENOENT, ENOTDIR, EACCES alike), fstatat the last one, following a link
// as stat does. Each folder is resolved once per check, which a check of
// many stats one after another never was atomic against anyway.
class FolderStats {
 public:
  FolderStats() = default;
  FolderStats(const FolderStats&) = delete;
  FolderStats& operator=(const FolderStats&) = delete;
  ~FolderStats() {
    for (const auto& [folder, fd] : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }

  int stat(const std::string& path, struct stat* st) {
    const size_t slash = path.rfind('/');
    // "/x", "a/" and names with no folder: as they are (nothing to share).
    if (slash == std::string::npos || slash == 0 || slash + 1 == path.size() ||
        fds_.size() >= kMaxFolders) {
      return ::stat(path.c_str(), st);
    }
    const int fd = folder_fd(path, slash);
    return fd < 0 ? -1 : ::fstatat(fd, path.c_str() + slash + 1, st, 0);
  }

 private:
  // Descriptors held at once: far below any RLIMIT_NOFILE; past it, plain stats.
  static constexpr size_t kMaxFolders = 256;

  // The folder of `path` (its first `slash` bytes) opened, or -1 with errno
  // set as stat(path) would meet it on the folder's path. A record's names
  // come sorted, so most share the folder of the one before.
  int folder_fd(const std::string& path, size_t slash) {
    if (last_ == fds_.end() || last_->first.size() != slash ||
        path.compare(0, slash, last_->first) != 0) {
      std::string folder = path.substr(0, slash);
      last_ = fds_.find(folder);
      if (last_ == fds_.end()) {
        const int fd = open_folder(folder);
        last_ = fds_.emplace(std::move(folder), fd >= 0 ? fd : -errno).first;
      }
    }
    if (last_->second >= 0) return last_->second;
    errno = -last_->second;
    return -1;
  }

  // `folder` opened relative to the deepest folder on its path already open
  // (most share all but their last component), as the kernel would reach it
  // from the root: the walk from there, ".." included, is the same walk.
  int open_folder(const std::string& folder) const {
    for (size_t cut = folder.rfind('/'); cut != std::string::npos && cut > 0;
         cut = folder.rfind('/', cut - 1)) {
      auto above = fds_.find(folder.substr(0, cut));
      if (above != fds_.end() && above->second >= 0) {
        return ::openat(above->second, folder.c_str() + cut + 1, O_PATH | O_DIRECTORY | O_CLOEXEC);
      }
    }
    return ::open(folder.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  }

  std::unordered_map<std::string, int> fds_;  // -errno: the open failed
  std::unordered_map<std::string, int>::iterator last_ = fds_.end();
};

}  // namespace

std::optional<std::vector<cache::ManifestProbe>> DiskObservations::probes(
    const std::string& relative_to, const std::set<std::string>& keyed_absolutely,
    const std::vector<std::string>& quiet_folders) const {
  auto in_quiet_folder = [&](const std::string& path) {
    for (const std::string& f : quiet_folders) {
      if (!f.empty() && record_starts_with(path, f + "/")) return true;
    }
    return false;
  };
  if (spoiled_ || seen_.empty()) return std::nullopt;
  auto beneath_program_folder = [&](const std::string& path) {
    return !relative_to.empty() &&
           (path == relative_to || record_starts_with(path, relative_to + "/"));
  };
  std::vector<cache::ManifestProbe> out;
  for (const auto& [path, s] : seen_) {
    cache::ManifestProbe p;
    // A name its manifest keyed absolutely is checked by that name, and
    // beneath the folder as well (where the manifest also keyed it so).
    const bool rebased = beneath_program_folder(path);
    const bool absolute_too = rebased && keyed_absolutely.count(path) > 0;
    p.path = rebased ? kSourceFolderPrefix + path.substr(relative_to.size()) : path;
    p.present = s.there;
    if (s.there && !s.folder) {
      // Its stamp stands for what the lookup read of it only where the rule
      // says so (common/stamp_trust.h); else no record until it has settled.
      const FileStamp stamp{s.dev, s.ino, s.size, s.mtime_ns, s.ctime_ns};
      if (!stamp_stands_for_bytes(stamp, path, started_ns_)) return std::nullopt;
      p.dev = s.dev;
      p.ino = s.ino;
      p.size = s.size;
      p.mtime_ns = s.mtime_ns;
      p.ctime_ns = s.ctime_ns;
    }
    // A folder: present with no stamp, checked as a folder. An absent name:
    // checked by its own stat, "not there" again, or beneath a quiet folder
    // by its deepest existing folder's stamp.
    if (!s.there && !rebased && in_quiet_folder(path)) absent_by_folder(path, started_ns_, &p);
    if (absolute_too) {
      cache::ManifestProbe as_keyed = p;
      as_keyed.path = path;
      out.push_back(std::move(as_keyed));
    }
    out.push_back(std::move(p));
  }
  return out;
}

bool recording_lookup() { return t_lookup_recording != nullptr; }

void set_too_new_margin_for_testing(int64_t ns) { set_writeback_window_for_testing(ns); }

int observed_stat(const std::string& path, struct stat* st) {
  int r = ::stat(path.c_str(), st);
  if (t_lookup_recording) t_lookup_recording->record(path, r, r == 0 ? 0 : errno, *st);
  return r;
}

void observe_path(const std::string& path) {
  if (!t_lookup_recording) return;
  struct stat st;
  observed_stat(path, &st);
}

namespace {

// Whether each name a record checks is as recorded, one probe at a time.
class ProbeCheck {
 public:
  explicit ProbeCheck(const std::string& source_folder)
      : source_folder_(source_folder), driver_cache_(driver_cache_folders()) {}

  bool holds(const cache::ProbeView& p) {
    // The path copied into one buffer (a syscall needs its NUL), not one
    // string per probe.
    static const std::string_view prefix = kSourceFolderPrefix;
    if (p.path.substr(0, prefix.size()) == prefix) {
      if (source_folder_.empty()) return false;
      path_.assign(source_folder_);
      path_.append(p.path.substr(prefix.size()));
    } else if (p.path.empty() || p.path.front() != '/') {
      return false;
    } else {
      path_.assign(p.path);
    }
    return probe_holds(p);
  }

 private:
  bool probe_holds(const cache::ProbeView& p) {
    struct stat st;
    if (p.present && p.size == 0 && p.mtime_ns == 0 && p.ctime_ns == 0) {
      // A folder (probes): what a lookup took from its stat is that it is one.
      return names_.stat(path_, &st) == 0 && S_ISDIR(st.st_mode);
    }
    if (p.present) {
      // A file the lookup's environment puts in the driver's JIT cache: a
      // compile now is answered "no such file" there (seal.h), whatever it
      // read of the file elsewhere (the same file through a link).
      if (hidden_name(path_, driver_cache_) && !has_parent_part(path_)) return false;
      return names_.stat(path_, &st) == 0 && static_cast<uint64_t>(st.st_dev) == p.dev &&
             static_cast<uint64_t>(st.st_ino) == p.ino &&
             static_cast<uint64_t>(st.st_size) == p.size &&
             static_cast<uint64_t>(record_ns(st.st_mtim)) == p.mtime_ns &&
             static_cast<uint64_t>(record_ns(st.st_ctim)) == p.ctime_ns;
    }
    if (p.has_folder) return folder_holds(p);
    return names_.stat(path_, &st) != 0 && (errno == ENOENT || errno == ENOTDIR);
  }

  // An absent name checked by its deepest existing folder's stamp, the
  // folder stat-ed once per check. Sorted names share their folder with the
  // one before: that folder is kept at hand.
  bool folder_holds(const cache::ProbeView& p) {
    if (!strip_components(p.folder_depth)) return false;
    if (!last_ || path_ != last_->first) {
      auto it = folders_.find(path_);
      if (it == folders_.end()) it = folders_.emplace(path_, folder_now(path_)).first;
      last_ = &*it;
    }
    const std::optional<FileStamp>& now = last_->second;
    return now && now->dev == p.dev && now->ino == p.ino && now->mtime_ns == p.mtime_ns &&
           now->ctime_ns == p.ctime_ns;
  }

  // The folder's stamp now, or nullopt where it is not a folder.
  static std::optional<FileStamp> folder_now(const std::string& folder) {
    struct stat st;
    if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
    return FileStamp::of(st);
  }

  // path_ without its last `strip` components ("/a/b/c", 1 -> "/a/b"; to "/").
  bool strip_components(uint32_t strip) {
    for (uint32_t i = 0; i < strip; ++i) {
      size_t slash = path_.rfind('/');
      if (slash == std::string::npos || path_.size() <= 1) return false;
      path_.resize(slash == 0 ? 1 : slash);
    }
    return true;
  }

  const std::string& source_folder_;
  const std::vector<std::string> driver_cache_;  // driver_cache_folders()
  std::string path_;
  FolderStats names_;
  std::unordered_map<std::string, std::optional<FileStamp>> folders_;
  const std::pair<const std::string, std::optional<FileStamp>>* last_ = nullptr;
};

}  // namespace

bool disk_unchanged(const std::vector<cache::ManifestProbe>& probes,
                    const std::string& source_folder) {
  ProbeCheck check(source_folder);
  for (const cache::ManifestProbe& p : probes) {
    cache::ProbeView v;
    v.path = p.path;
    v.present = p.present;
    v.has_folder = p.has_folder;
    v.folder_depth = p.folder_depth;
    v.dev = p.dev;
    v.ino = p.ino;
    v.size = p.size;
    v.mtime_ns = p.mtime_ns;
    v.ctime_ns = p.ctime_ns;
    if (!check.holds(v)) return false;
  }
  return true;
}

std::optional<std::vector<cache::ManifestResult>> record_holds(std::string_view encoded,
                                                               const Hash128& key,
                                                               const std::string& what,
                                                               const std::string& source_folder) {
  ProbeCheck check(source_folder);
  return cache::read_lookup_record(encoded, key, what,
                                   [&](const cache::ProbeView& p) { return check.holds(p); });
}

}  // namespace kcache::compiler
