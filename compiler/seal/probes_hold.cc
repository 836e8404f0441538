// Whether a compile's keyed probes still hold on a lookup (probes.h,
// probes_hold), and the lines the key hashes for them (probe_key_lines).
// A lookup runs for every hit, so it trusts a stat where the classification
// kept one (probes_disk.cc, keep_stamp_if_it_stands) and an absent name's
// folder stamp, and reads and hashes a file only where neither holds.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/environment.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/hash.h"
#include "compiler/lookup_record.h"
#include "compiler/seal/probes.h"
#include "compiler/seal/probes_parts.h"

namespace kcache::compiler::probe_parts {
namespace {

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

// What a lookup's check of one set of probes shares between them.
struct HoldCheck {
  std::map<std::string, std::optional<FolderState>> folders;  // one stat per folder
  FolderHandles handles;
  // Each present file's content and identity, as recorded and now
  // (same_files_as_recorded).
  std::vector<std::tuple<Hash128, FileIdentity, FileIdentity>> present;
  // The driver's JIT cache folders in the lookup's environment, looked up
  // once (driver_cache_folders).
  std::optional<std::vector<std::string>> driver_cache;
};

// A present probe's file, found at `disk` with `st`: why its bytes are not
// the recorded ones, or nullopt where they are.
std::optional<std::string> why_bytes_differ(const cache::ManifestProbe& p, const DiskPath& disk,
                                            const Stat& st) {
  if (p.ctime_ns != 0 && st.dev == p.dev && st.ino == p.ino && st.size == p.size &&
      st.mtime_ns == p.mtime_ns && st.ctime_ns == p.ctime_ns) {
    // A stamp kept only where it stands for the bytes (keep_stamp_if_it_stands).
    return std::nullopt;
  }
  std::optional<std::string> content;
  try {
    content = read_input_file(disk.full());
  } catch (const Error&) {
    return shown_path(disk) + " cannot be read";
  }
  if (!content || xxh3_128(*content) != p.content) return shown_path(disk) + " changed";
  return std::nullopt;
}

// Why `p` does not hold on the disk now, as a user reads it (probes_hold's
// `why`), or nullopt where it does.
std::optional<std::string> why_not_held(const cache::ManifestProbe& p, const ProbeContext& c,
                                        HoldCheck* check) {
  if (p.path.compare(0, std::char_traits<char>::length(kDriverCacheLabel), kDriverCacheLabel) ==
      0) {
    // Left unkeyed as the driver's JIT cache: only while it still is, in
    // this process's environment.
    if (p.present || !driver_cache_path(p.path.substr(
                         std::char_traits<char>::length(kDriverCacheLabel)))) {
      return std::string("the driver's JIT cache folder changed");
    }
    return std::nullopt;
  }
  std::optional<DiskPath> disk = disk_path(p.path, c);
  if (!disk) return p.path + " is not found where it was";
  if (p.has_folder && !recording_lookup()) {
    if (p.present || p.folder_depth >= disk->components.size()) {
      return p.path + " is not found where it was";
    }
    std::string folder = disk->folder(p.folder_depth);
    auto it = check->folders.find(folder);
    if (it == check->folders.end()) it = check->folders.emplace(folder, folder_state(folder)).first;
    if (it->second == FolderState{p.dev, p.ino, p.mtime_ns, p.ctime_ns}) return std::nullopt;
  }
  if (p.present) {
    // Where the lookup's environment puts the name in the driver's JIT cache,
    // a compile now is answered "no such file" there (seal.h): what it read
    // there before says nothing.
    if (!check->driver_cache) check->driver_cache = driver_cache_folders();
    const std::string full = disk->full();
    if (!has_parent_part(full) && hidden_name(full, *check->driver_cache)) {
      return shown_path(*disk) + " is in the driver's JIT cache folder now";
    }
  }
  observe_path(disk->full());  // a lookup record (lookup_record.h) holds it
  Stat st = check->handles.stat(*disk);
  if (st.file != p.present || st.other) {
    if (env::read(env::Var::kcache_debug_probes)) {
      std::fprintf(stderr, "probe fails: %s\n", p.path.c_str());
    }
    return shown_path(*disk) + (p.present ? " was removed" : " appeared");
  }
  if (!p.present) return std::nullopt;
  check->present.emplace_back(p.content, FileIdentity{p.dev, p.ino}, FileIdentity{st.dev, st.ino});
  return why_bytes_differ(p, *disk, st);
}

}  // namespace
}  // namespace kcache::compiler::probe_parts

namespace kcache::compiler {

bool probes_hold(const std::vector<cache::ManifestProbe>& probes, const ProbeContext& c,
                 std::string* why) {
  using namespace probe_parts;
  auto fails = [why](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  HoldCheck check;
  for (const cache::ManifestProbe& p : probes) {
    if (std::optional<std::string> reason = why_not_held(p, c, &check)) return fails(*reason);
  }
  if (!same_files_as_recorded(std::move(check.present))) {
    if (env::read(env::Var::kcache_debug_probes)) {
      std::fprintf(stderr, "probe fails: one file or two\n");
    }
    return fails("files read under two names are linked differently (one file or two copies)");
  }
  return true;
}

std::vector<std::string> probe_key_lines(const std::vector<cache::ManifestProbe>& probes) {
  using namespace probe_parts;
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
