// A probe's name and stat on the disk, for both halves of probes.h: the
// name a toolkit path is recorded by, the real name of a path (memoized for
// one classification), where a recorded name lies on this machine now, an
// absent name's folder stamp and the stamp a lookup may take for a file's
// bytes (the rule of common/stamp_trust.h).
#include <stdlib.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <optional>
#include <string>
#include <string_view>

#include "common/stamp_trust.h"
#include "compiler/lookup_record.h"
#include "compiler/seal/probes.h"
#include "compiler/seal/probes_parts.h"

namespace kcache::compiler::probe_parts {
namespace {

thread_local ClassifyMemo* classify_memo = nullptr;

}  // namespace

bool under(const std::string& path, const std::string& dir) {
  return !dir.empty() && path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         (path[dir.size()] == '/' || dir.back() == '/');
}

ClassifyScope::ClassifyScope() : outer_(classify_memo) {
  if (!outer_) classify_memo = &memo_;
}

ClassifyScope::~ClassifyScope() {
  if (!outer_) classify_memo = nullptr;
}

namespace {
std::string canonical_uncached(const std::string& path);
}  // namespace

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

namespace {

std::string canonical_uncached(const std::string& path) {
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real)) return real;
  size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return path;
  return canonical(path.substr(0, slash)) + path.substr(slash);
}

}  // namespace

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

namespace {

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

}  // namespace

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

Stat stat_of(const std::string& path, int dir) {
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

}  // namespace kcache::compiler::probe_parts

namespace kcache::compiler {

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

}  // namespace kcache::compiler
