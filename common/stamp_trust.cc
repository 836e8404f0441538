#include "common/stamp_trust.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>

namespace kcache {
namespace {

constexpr int64_t kNsPerCentisecond = 10000000;
// Timestamp granularity: a file system's clock tick (ext4: the kernel's
// coarse clock, a few ms; FAT: 2 s) within which a write may leave a stamp
// as it was.
constexpr int64_t kGranularityNs = int64_t{2} * 1000000000;
constexpr uint64_t kTmpfsMagic = 0x01021994;
constexpr uint64_t kOverlayMagic = 0x794C7630;
// No file system's type: what an overlay whose upper layer is not trusted
// is remembered as.
constexpr uint64_t kUntrustedType = 0;
#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif
// The least window, whatever a test sets: the coarsest kernel clock tick
// (HZ=100), within which a write may leave a stamp as it was.
constexpr int64_t kMinWindowNs = 10000000;

std::atomic<int64_t> g_window_ns{-1};  // -1: not read yet
std::atomic<bool> g_trust_tmpfs{false};

uint64_t ns_of(const struct timespec& t) {
  return static_cast<uint64_t>(t.tv_sec) * 1000000000 + static_cast<uint64_t>(t.tv_nsec);
}

// A /proc/sys/vm value in centiseconds, or `otherwise`.
int64_t centiseconds(const char* path, int64_t otherwise) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return otherwise;
  char buf[32] = {};
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return otherwise;
  char* end = nullptr;
  long long v = std::strtoll(buf, &end, 10);
  return end == buf || v < 0 ? otherwise : static_cast<int64_t>(v);
}

int64_t measured_window_ns() {
  const int64_t expire = centiseconds("/proc/sys/vm/dirty_expire_centisecs", 3000);
  const int64_t every = centiseconds("/proc/sys/vm/dirty_writeback_centisecs", 500);
  if (every == 0) return INT64_MAX;  // no periodic writeback: a dirty page may stay dirty
  if (expire > INT64_MAX / kNsPerCentisecond / 4 || every > INT64_MAX / kNsPerCentisecond / 4) {
    return INT64_MAX;
  }
  return (expire + every) * kNsPerCentisecond + kGranularityNs;
}

// A mountinfo field with its octal escapes (\040 for a blank) undone.
std::string unescaped(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool octal =
        s[i] == '\\' && i + 3 < s.size() && std::strspn(s.c_str() + i + 1, "01234567") >= 3;
    if (!octal) {
      out += s[i];
      continue;
    }
    out += static_cast<char>(((s[i + 1] - '0') << 6) | ((s[i + 2] - '0') << 3) | (s[i + 3] - '0'));
    i += 3;
  }
  return out;
}

// The upperdir option of mountinfo line `line` ("ID PARENT ... - overlay
// SOURCE ...,upperdir=U,..."; a comma in U is written "\,"), or empty.
std::string upper_dir_of(const std::string& line) {
  size_t at = line.find(" - ");
  if (at == std::string::npos || (at = line.find("upperdir=", at)) == std::string::npos) return "";
  std::string upper;
  for (at += 9; at < line.size() && line[at] != ',' && line[at] != ' ' && line[at] != '\n'; ++at) {
    if (line[at] == '\\' && at + 1 < line.size() && line[at + 1] == ',') ++at;
    upper += line[at];
  }
  return unescaped(upper);
}

// The upper layer of the overlay mount with id `mount_id`, from
// /proc/self/mountinfo, or empty where there is none to find.
std::string overlay_upper_dir(uint64_t mount_id) {
  FILE* f = std::fopen("/proc/self/mountinfo", "re");
  if (!f) return "";
  std::string upper;
  char* line = nullptr;
  size_t cap = 0;
  const std::string id = std::to_string(mount_id) + " ";
  while (::getline(&line, &cap, f) > 0) {
    if (std::strncmp(line, id.c_str(), id.size()) != 0) continue;
    upper = upper_dir_of(line);
    break;
  }
  std::free(line);
  std::fclose(f);
  return upper;
}

// Whether stamps on the overlay holding `path` may be trusted: its files'
// stats are its upper layer's inodes, whose pages that layer's file system
// writes back or not (a tmpfs upper never does). Trusted where the upper
// layer is (by its statfs type), and where it cannot be found from here (a
// container sees its overlay's upperdir in the host's folders only, almost
// always ext4 or xfs: the statfs type alone, as for any file system).
bool overlay_trusted(const std::string& path) {
  struct statx sx;
  if (::statx(AT_FDCWD, path.c_str(), 0, STATX_MNT_ID, &sx) != 0 || !(sx.stx_mask & STATX_MNT_ID)) {
    return true;
  }
  const std::string upper = overlay_upper_dir(sx.stx_mnt_id);
  struct statfs fs;
  if (upper.empty() || ::statfs(upper.c_str(), &fs) != 0) return true;
  const uint64_t type = static_cast<uint64_t>(fs.f_type);
  return type == kOverlayMagic || stamps_trusted_on_type(type);
}

}  // namespace

FileStamp FileStamp::of(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<uint64_t>(st.st_size), ns_of(st.st_mtim), ns_of(st.st_ctim)};
}

int64_t writeback_window_ns() {
  int64_t w = g_window_ns.load(std::memory_order_relaxed);
  if (w >= 0) return w;
  w = measured_window_ns();
  int64_t unset = -1;
  g_window_ns.compare_exchange_strong(unset, w, std::memory_order_relaxed);
  return g_window_ns.load(std::memory_order_relaxed);
}

bool stamp_settled(uint64_t mtime_ns, uint64_t ctime_ns, int64_t read_ns) {
  const int64_t window = std::max(writeback_window_ns(), kMinWindowNs);
  if (window == INT64_MAX || read_ns < window) return false;
  const uint64_t limit = static_cast<uint64_t>(read_ns - window);
  return mtime_ns < limit && ctime_ns < limit;
}

bool stamps_trusted_on_type(uint64_t type) {
  switch (type) {
    case 0xEF53:      // ext2, ext3, ext4
    case 0x58465342:  // xfs
    case 0x9123683E:  // btrfs
    case 0x794C7630:  // overlayfs (containers): the upper layer's inode
    case 0xF2F52010:  // f2fs
    case 0x2FC12FC1:  // zfs
    case 0x73717368:  // squashfs (read-only)
      return true;
    case kTmpfsMagic:
      return g_trust_tmpfs.load(std::memory_order_relaxed);
    default:
      return false;
  }
}

bool stamps_trusted_on(uint64_t dev, const std::string& path) {
  // Per thread, no lock: a compile process forked from a threaded host
  // (the drop-in) must not meet a lock another thread held at the fork.
  // An overlay is judged by its upper layer (overlay_trusted), once per
  // device: what is kept is the type, or the overlay's verdict.
  thread_local std::map<uint64_t, uint64_t> types;
  auto it = types.find(dev);
  if (it != types.end()) return stamps_trusted_on_type(it->second);
  struct statfs fs;
  if (::statfs(path.c_str(), &fs) != 0) return false;
  uint64_t type = static_cast<uint64_t>(fs.f_type);
  if (type == kOverlayMagic && !overlay_trusted(path)) type = kUntrustedType;
  if (types.size() < 256) types.emplace(dev, type);
  return stamps_trusted_on_type(type);
}

bool stamp_stands_for_bytes(const FileStamp& stamp, const std::string& path, int64_t read_ns) {
  return stamp_settled(stamp.mtime_ns, stamp.ctime_ns, read_ns) &&
         stamps_trusted_on(stamp.dev, path);
}

int64_t realtime_now_ns() {
  struct timespec t;
  ::clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<int64_t>(ns_of(t));
}

void set_writeback_window_for_testing(int64_t ns) {
  g_window_ns.store(ns < 0 ? measured_window_ns() : ns, std::memory_order_relaxed);
}

void set_trust_tmpfs_for_testing(bool trust) {
  g_trust_tmpfs.store(trust, std::memory_order_relaxed);
}

}  // namespace kcache
