#include "compiler/lookup_record.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>
#include <unordered_map>

namespace kcache::compiler {
namespace {

thread_local DiskObservations* t_lookup_recording = nullptr;

// ccache's "too new": a stamp this close to the lookup's start may not have
// moved for a write that came after it.
int64_t g_record_too_new_ns = int64_t{2} * 1000000000;

int64_t record_ns(const struct timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

int64_t record_now_ns() {
  struct timespec t;
  ::clock_gettime(CLOCK_REALTIME, &t);
  return record_ns(t);
}

bool record_starts_with(const std::string& s, const std::string& prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// `path` without its last `strip` components ("/a/b/c", 1 -> "/a/b"; to "/").
std::optional<std::string> record_strip_components(const std::string& path, uint32_t strip) {
  std::string out = path;
  for (uint32_t i = 0; i < strip; ++i) {
    size_t slash = out.rfind('/');
    if (slash == std::string::npos || out.size() <= 1) return std::nullopt;
    out.resize(slash == 0 ? 1 : slash);
  }
  return out;
}

}  // namespace

DiskObservations::DiskObservations() : started_ns_(record_now_ns()), outer_(t_lookup_recording) {
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

std::optional<std::vector<cache::ManifestProbe>> DiskObservations::probes(
    const std::string& relative_to) const {
  if (spoiled_ || seen_.empty()) return std::nullopt;
  const int64_t limit = started_ns_ - g_record_too_new_ns;
  auto too_new = [&](uint64_t mtime_ns, uint64_t ctime_ns) {
    return static_cast<int64_t>(mtime_ns) >= limit || static_cast<int64_t>(ctime_ns) >= limit;
  };
  auto beneath_program_folder = [&](const std::string& path) {
    return !relative_to.empty() &&
           (path == relative_to || record_starts_with(path, relative_to + "/"));
  };
  auto written = [&](const std::string& path) {
    return beneath_program_folder(path) ? kSourceFolderPrefix + path.substr(relative_to.size())
                                        : path;
  };
  std::vector<cache::ManifestProbe> out;
  std::unordered_map<std::string, size_t> folder_probe;  // one probe per answering folder
  for (const auto& [path, s] : seen_) {
    cache::ManifestProbe p;
    if (s.there) {
      if (too_new(s.mtime_ns, s.ctime_ns)) return std::nullopt;
      p.path = written(path);
      p.present = true;
      p.dev = s.dev;
      p.ino = s.ino;
      p.size = s.size;
      p.mtime_ns = s.mtime_ns;
      p.ctime_ns = s.ctime_ns;
      out.push_back(std::move(p));
      continue;
    }
    // Absent: the deepest folder above it that exists, if the next name has
    // no entry there at all. folder_depth counts the components stripped
    // from the end of the path (so it holds beneath another program folder).
    uint32_t strip = 0;
    std::string child = path;
    bool answered = false;
    const bool beneath = beneath_program_folder(path);
    for (std::optional<std::string> up = record_strip_components(path, 1); up;
         up = record_strip_components(*up, 1)) {
      ++strip;
      struct stat st;
      if (::stat(up->c_str(), &st) == 0) {
        // A folder above the program folder says nothing about what another
        // program folder holds (one that did not exist here): such a record
        // holds only for this folder.
        if (beneath && !beneath_program_folder(*up)) return std::nullopt;
        struct stat entry;
        if (S_ISDIR(st.st_mode) && ::lstat(child.c_str(), &entry) != 0 && errno == ENOENT) {
          auto seen = seen_.find(*up);
          if (too_new(static_cast<uint64_t>(record_ns(st.st_mtim)),
                      static_cast<uint64_t>(record_ns(st.st_ctim))) ||
              (seen != seen_.end() &&
               (!seen->second.there || seen->second.ino != static_cast<uint64_t>(st.st_ino) ||
                seen->second.mtime_ns != static_cast<uint64_t>(record_ns(st.st_mtim)) ||
                seen->second.ctime_ns != static_cast<uint64_t>(record_ns(st.st_ctim))))) {
            return std::nullopt;  // changed since the lookup looked
          }
          if (folder_probe.count(*up)) {
            answered = true;  // that folder's probe answers for this name too
            break;
          }
          p.path = written(path);
          p.has_folder = true;
          p.folder_depth = strip;
          p.dev = static_cast<uint64_t>(st.st_dev);
          p.ino = static_cast<uint64_t>(st.st_ino);
          p.mtime_ns = static_cast<uint64_t>(record_ns(st.st_mtim));
          p.ctime_ns = static_cast<uint64_t>(record_ns(st.st_ctim));
          folder_probe.emplace(*up, out.size());
          answered = true;
        }
        break;
      }
      child = *up;
    }
    if (answered && p.path.empty()) continue;
    if (!answered) {
      // An entry that is no file (a dangling link): checked as the path.
      struct stat st;
      if (::stat(path.c_str(), &st) == 0) return std::nullopt;  // there now  // there now
      p.path = written(path);
    }
    out.push_back(std::move(p));
  }
  return out;
}

void set_too_new_margin_for_testing(int64_t ns) { g_record_too_new_ns = ns; }

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

bool disk_unchanged(const std::vector<cache::ManifestProbe>& probes,
                    const std::string& source_folder) {
  std::unordered_map<std::string, bool> folders;  // a folder answers for many names
  const std::string prefix = kSourceFolderPrefix;
  for (const cache::ManifestProbe& p : probes) {
    std::string path = p.path;
    if (record_starts_with(path, prefix)) {
      if (source_folder.empty()) return false;
      path = source_folder + path.substr(prefix.size());
    } else if (path.empty() || path.front() != '/') {
      return false;
    }
    struct stat st;
    if (p.present) {
      if (::stat(path.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_dev) != p.dev ||
          static_cast<uint64_t>(st.st_ino) != p.ino ||
          static_cast<uint64_t>(st.st_size) != p.size ||
          static_cast<uint64_t>(record_ns(st.st_mtim)) != p.mtime_ns ||
          static_cast<uint64_t>(record_ns(st.st_ctim)) != p.ctime_ns) {
        return false;
      }
    } else if (p.has_folder) {
      std::optional<std::string> folder = record_strip_components(path, p.folder_depth);
      if (!folder) return false;
      auto it = folders.find(*folder);
      if (it == folders.end()) {
        bool same = ::stat(folder->c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
                    static_cast<uint64_t>(st.st_dev) == p.dev &&
                    static_cast<uint64_t>(st.st_ino) == p.ino &&
                    static_cast<uint64_t>(record_ns(st.st_mtim)) == p.mtime_ns &&
                    static_cast<uint64_t>(record_ns(st.st_ctim)) == p.ctime_ns;
        it = folders.emplace(*folder, same).first;
      }
      if (!it->second) return false;
    } else if (::stat(path.c_str(), &st) == 0 || (errno != ENOENT && errno != ENOTDIR)) {
      return false;
    }
  }
  return true;
}

}  // namespace kcache::compiler
