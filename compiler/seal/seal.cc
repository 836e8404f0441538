#include "compiler/seal/seal.h"

#include "common/stamp_trust.h"

#include <dirent.h>
#include <elf.h>
#include <link.h>
#include <sys/auxv.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <exception>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>

#include "common/error.h"
#include "common/hash.h"

namespace kcache::compiler {
namespace {

// Landlock's ABI, declared here: Debian 12's kernel headers predate the
// rights of ABI 3 and later. Values from include/uapi/linux/landlock.h.
struct LandlockRulesetAttr {
  uint64_t handled_access_fs;
};
struct __attribute__((packed)) LandlockPathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
};
constexpr uint32_t kLandlockCreateRulesetVersion = 1U << 0;
constexpr int kLandlockRulePathBeneath = 1;
constexpr uint64_t kExecute = 1ULL << 0;
constexpr uint64_t kWriteFile = 1ULL << 1;
constexpr uint64_t kReadFile = 1ULL << 2;
constexpr uint64_t kReadDir = 1ULL << 3;
constexpr uint64_t kRemoveDir = 1ULL << 4;
constexpr uint64_t kRemoveFile = 1ULL << 5;
constexpr uint64_t kMakeDir = 1ULL << 7;
constexpr uint64_t kMakeReg = 1ULL << 8;
constexpr uint64_t kTruncate = 1ULL << 14;  // ABI 3
constexpr uint64_t kIoctlDev = 1ULL << 15;  // ABI 5
// Rights a rule on a file (not a folder) may carry.
constexpr uint64_t kFileRights = kExecute | kWriteFile | kReadFile | kTruncate | kIoctlDev;

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

int landlock_abi() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kLandlockCreateRulesetVersion);
  return abi < 0 ? 0 : static_cast<int>(abi);
}

// A system call of the seal's refused with `err`, in words: a kernel without
// it answers ENOSYS (or EOPNOTSUPP: Landlock built but off), while EPERM or
// EACCES come from a seccomp filter this process inherited from the program
// that started it (its own sandbox), which no kcache setting can lift.
std::string refused_by(const char* call, int err, const std::string& otherwise) {
  if (err != EPERM && err != EACCES) return otherwise;
  return std::string("a seccomp filter of the program that started kcache (inherited by its "
                     "compile process) refused ") +
         call + " (" + (err == EPERM ? "EPERM" : "EACCES") + ")";
}

// Why Landlock cannot be used here: after landlock_abi() gave 0.
std::string no_landlock_reason() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kLandlockCreateRulesetVersion);
  return refused_by("landlock_create_ruleset", abi < 0 ? errno : 0,
                    "the kernel has no Landlock (needs Linux 5.13+ with landlock in lsm=)");
}

// Every file-system right this kernel's Landlock knows: all of them are
// handled (denied unless a rule allows them).
uint64_t handled_rights(int abi) {
  uint64_t rights = (1ULL << 13) - 1;  // ABI 1: execute .. make_sym
  if (abi >= 2) rights |= 1ULL << 13;  // refer
  if (abi >= 3) rights |= kTruncate;
  if (abi >= 5) rights |= kIoctlDev;
  return rights;
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Restricts the calling thread to `policy`. Returns an empty string, or why not.
std::string restrict_with_landlock(const SealPolicy& policy) {
  int abi = landlock_abi();
  if (abi < 1) return no_landlock_reason();
  LandlockRulesetAttr attr{handled_rights(abi)};
  Fd ruleset(static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0)));
  if (ruleset.get() < 0) return std::string("landlock_create_ruleset: ") + std::strerror(errno);
  auto add = [&](const std::string& path, uint64_t rights) -> std::string {
    Fd fd(::open(path.c_str(), O_PATH | O_CLOEXEC));
    if (fd.get() < 0) return "";  // nothing there: nothing to allow
    struct stat st;
    if (::fstat(fd.get(), &st) == 0 && !S_ISDIR(st.st_mode)) rights &= kFileRights;
    LandlockPathBeneathAttr rule{rights & attr.handled_access_fs, fd.get()};
    if (::syscall(SYS_landlock_add_rule, ruleset.get(), kLandlockRulePathBeneath, &rule, 0) != 0) {
      return "landlock_add_rule " + path + ": " + std::strerror(errno);
    }
    return "";
  };
  for (const std::string& p : policy.readable) {
    if (std::string why = add(p, kReadFile | kReadDir | kExecute); !why.empty()) return why;
  }
  for (const std::string& p : policy.writable) {
    uint64_t rw = kReadFile | kReadDir | kWriteFile | kMakeReg | kRemoveFile | kTruncate |
                  kMakeDir | kRemoveDir;
    if (std::string why = add(p, rw); !why.empty()) return why;
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return std::string("prctl(PR_SET_NO_NEW_PRIVS): ") + std::strerror(errno);
  }
  if (::syscall(SYS_landlock_restrict_self, ruleset.get(), 0) != 0) {
    return std::string("landlock_restrict_self: ") + std::strerror(errno);
  }
  return "";
}

// The system calls that name a path, and which argument holds it. The
// supervisor sees each before it runs.
struct PathCall {
  int nr;
  int path_arg;
  bool at;  // args[0] is a folder descriptor the path is relative to
};
constexpr PathCall kPathCalls[] = {
    {SYS_open, 0, false},        {SYS_creat, 0, false},        {SYS_stat, 0, false},
    {SYS_lstat, 0, false},       {SYS_access, 0, false},       {SYS_readlink, 0, false},
    {SYS_chdir, 0, false},       {SYS_mkdir, 0, false},        {SYS_truncate, 0, false},
    {SYS_execve, 0, false},      {SYS_openat, 1, true},        {SYS_newfstatat, 1, true},
    {SYS_faccessat, 1, true},    {SYS_readlinkat, 1, true},    {SYS_mkdirat, 1, true},
    {SYS_statx, 1, true},        {SYS_execveat, 1, true},      {437 /* openat2 */, 1, true},
    {439 /* faccessat2 */, 1, true},
};

// Installs the filter on the calling thread; returns the listener, or -1
// with `why` set.
int install_supervision(std::string* why) {
  std::vector<sock_filter> f;
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));  // not x86-64: not ours to judge
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  // fstat: glibc makes it a newfstatat (or statx) of the empty name with
  // AT_EMPTY_PATH, on a descriptor the compile already has; it names no
  // path, and it is a sixth of NVRTC's path calls (1,028 of 6,426 for CUB),
  // so it runs without a round trip to the supervisor. (Only a stat, never a
  // read: every open is still seen.)
  for (auto [nr, flags_arg] : {std::pair<int, int>{SYS_newfstatat, 3}, {SYS_statx, 2}}) {
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 4));
    f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                         static_cast<uint32_t>(offsetof(seccomp_data, args) + 8 * flags_arg)));
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, AT_EMPTY_PATH, 0, 1));
    f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF));
  }
  const size_t n = sizeof kPathCalls / sizeof *kPathCalls;
  for (size_t i = 0; i < n; ++i) {
    // Equal: jump over the remaining tests and the ALLOW to the NOTIFY.
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(kPathCalls[i].nr),
                         static_cast<uint8_t>(n - i), 0));
  }
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF));
  sock_fprog prog{static_cast<unsigned short>(f.size()), f.data()};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    *why = std::string("prctl(PR_SET_NO_NEW_PRIVS): ") + std::strerror(errno);
    return -1;
  }
  // SPEC_ALLOW: without it the kernel turns on its Spectre mitigations for
  // a filtered task (speculative store bypass off, an indirect-branch barrier
  // at every context switch), which guard a sandbox against hostile code and
  // cost NVRTC, switching to the supervisor at every path call, up to a third
  // of a CuTe compile. The seal keys what NVRTC reads; NVRTC is no attacker.
  constexpr unsigned long kSpecAllow = 1UL << 2;  // SECCOMP_FILTER_FLAG_SPEC_ALLOW, Linux 4.17
  long fd = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                      SECCOMP_FILTER_FLAG_NEW_LISTENER | kSpecAllow, &prog);
  if (fd < 0 && errno == EINVAL) {
    fd = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  }
  if (fd < 0) {
    const int err = errno;
    *why = refused_by("seccomp", err,
                      std::string("seccomp user notification refused: ") + std::strerror(err));
    return -1;
  }
  // Linux 6.6+: the kernel switches straight between the compiling thread
  // and the supervisor instead of waking each through the scheduler, which
  // on a busy machine is the whole cost of a probe. Older kernels: EINVAL,
  // and the probes are only slower.
  constexpr unsigned long kSetFlags = _IOW('!', 4, uint64_t);  // SECCOMP_IOCTL_NOTIF_SET_FLAGS
  ::ioctl(static_cast<int>(fd), kSetFlags, 1UL /* SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP */);
  return static_cast<int>(fd);
}

// ---- The supervisor ---------------------------------------------------------
//
// THE SEAL'S INVARIANT. While a sealed thread is stopped inside a system call,
// the supervisor that must answer it waits for nothing that thread may hold.
// glibc opens files while holding its own locks (a malloc arena's, in
// heap_trim -> check_may_shrink_heap; the loader's, in dlopen; locale's), and
// the sealed thread is stopped until the answer comes: a supervisor that then
// allocated, used stdio, threw, or entered the loader could wait on the very
// lock the stopped thread holds, for good (found in a prewarm: both threads
// on the arena's futex). So the code below, from the moment the sealed thread
// may run until it has been joined:
//  - touches only memory allocated before (RecordArena, mapped with mmap; the
//    Supervisor object) and its own stack;
//  - calls the kernel directly (raw_syscall: no libc wrapper, no errno, no
//    lazy binding) and otherwise only memcpy/memset/memchr and the vDSO's
//    clock_gettime (bound before), which lock nothing;
//  - never allocates, throws, logs or formats with libc.
// Everything that allocates (resolving names, removing repeats) runs after
// the sealed thread has been joined, on the arena's bytes.
// tests/compiler/seal_stress_test holds it to that under glibc tunables that
// make every free() trim a heap.

long raw_syscall(long nr, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0,
                 long f = 0) {
#if defined(__x86_64__)
  long ret;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
#else
  long ret = ::syscall(nr, a, b, c, d, e, f);
  return ret < 0 ? -errno : ret;
#endif
}

// What the supervisor writes, in order, one record per path call:
//   record ::= nr:i32 base_len:u32 path_len:u32 base:bytes path:bytes
// `base` is the folder an *at call's descriptor names (empty for AT_FDCWD or
// an absolute path). A mapping reserved before the seal and filled only by
// the supervisor; a compile that names more than it holds is not sealed.
class RecordArena {
 public:
  static constexpr size_t kBytes = size_t{256} << 20;  // CUB names ~1 MiB; reserved, not used
  RecordArena() {
    void* p = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }
  ~RecordArena() {
    if (base_) ::munmap(base_, kBytes);
  }
  RecordArena(const RecordArena&) = delete;
  RecordArena& operator=(const RecordArena&) = delete;
  bool ok() const { return base_ != nullptr; }
  bool overflowed() const { return overflowed_; }

  // Supervisor side: no allocation.
  void append(int32_t nr, const char* base, uint32_t base_len, const char* path,
              uint32_t path_len) {
    size_t need = 12 + size_t{base_len} + path_len;
    if (overflowed_ || kBytes - used_ < need) {
      overflowed_ = true;
      return;
    }
    char* at = base_ + used_;
    std::memcpy(at, &nr, 4);
    std::memcpy(at + 4, &base_len, 4);
    std::memcpy(at + 8, &path_len, 4);
    std::memcpy(at + 12, base, base_len);
    std::memcpy(at + 12 + base_len, path, path_len);
    used_ += need;
  }

  // After the sealed thread was joined.
  template <typename F>
  void for_each(F&& f) const {
    for (size_t at = 0; at + 12 <= used_;) {
      int32_t nr;
      uint32_t base_len, path_len;
      std::memcpy(&nr, base_ + at, 4);
      std::memcpy(&base_len, base_ + at + 4, 4);
      std::memcpy(&path_len, base_ + at + 8, 4);
      const char* base = base_ + at + 12;
      f(nr, std::string_view(base, base_len), std::string_view(base + base_len, path_len));
      at += 12 + size_t{base_len} + path_len;
    }
  }

 private:
  char* base_ = nullptr;
  size_t used_ = 0;
  bool overflowed_ = false;
};

// Records that are not path calls (nr is never negative for those).
constexpr int32_t kServedRecord = -1;   // base: a Snapshot; path: the absolute name
constexpr int32_t kRefusedRecord = -2;  // base: why (static text); path: the absolute name
struct Snapshot {
  Hash128 content;
  uint64_t dev, ino, size, mtime_ns, ctime_ns;
};

// Records of files served from the file itself (SnapshotCache): the same
// layout as kServedRecord, checked again after the sealed thread ended.
constexpr int32_t kServedKnownRecord = -3;


// Snapshots this process has taken before (serving). A file whose stat
// (device, inode, size, mtime, ctime) is as it was when its snapshot was
// hashed, and whose stamp stood for its bytes then (common/stamp_trust.h:
// older than the writeback window), still has those bytes. So the supervisor installs such a file itself, not a copy:
// the ~500 toolkit headers a CUB compile reads again at every compile cost
// no memfd, copy or hash. A write while NVRTC reads it is found after the
// compile (check_known_files: its stat or its bytes changed), and the file
// is given as changed, which is never keyed. Only files on a local file
// system are kept: a network or FUSE file system may answer stat from a
// cache of its own, or take ctime from another machine's clock. Filled and
// read by one supervisor at a time (acquire); another goes without. Follows
// the supervisor's invariant: reserved before use, no allocation inside.
class SnapshotCache {
 public:
  static SnapshotCache* acquire() {
    static SnapshotCache* cache = [] {
      writeback_window_ns();  // read now: the supervisor reads no file of its own
      const char* off = ::getenv("KCACHE_SNAPSHOT_REUSE");
      if (off && std::strcmp(off, "off") == 0) return static_cast<SnapshotCache*>(nullptr);
      auto* made = new SnapshotCache;  // lives as long as the process
      if (!made->ok()) return static_cast<SnapshotCache*>(nullptr);
      return made;
    }();
    if (!cache || cache->busy_.exchange(true, std::memory_order_acquire)) return nullptr;
    return cache;
  }
  void release() { busy_.store(false, std::memory_order_release); }

  // The snapshot of `path` taken when the file had the stat `st`, if any.
  const Snapshot* find(const char* path, size_t len, const struct stat& st) const {
    const Entry* e = slot(path, len);
    if (!e || !e->used) return nullptr;
    const Snapshot& s = e->snap;
    return s.dev == static_cast<uint64_t>(st.st_dev) && s.ino == static_cast<uint64_t>(st.st_ino) &&
                   s.size == static_cast<uint64_t>(st.st_size) && s.mtime_ns == ns(st.st_mtim) &&
                   s.ctime_ns == ns(st.st_ctim)
               ? &s
               : nullptr;
  }

  // Keeps `snap`, taken of `path` at `now_ns`, if the file had settled.
  void remember(const char* path, size_t len, const Snapshot& snap, int64_t now_ns) {
    if (!stamp_settled(snap.mtime_ns, snap.ctime_ns, now_ns)) return;
    Entry* e = slot(path, len);
    if (!e) return;
    if (!e->used) {
      if (used_slots_ >= kSlots / 4 * 3 || kPathBytes - path_used_ < len) return;  // full
      std::memcpy(paths_ + path_used_, path, len);
      e->hash = hash_of(path, len);
      e->offset = static_cast<uint32_t>(path_used_);
      e->length = static_cast<uint32_t>(len);
      path_used_ += len;
      ++used_slots_;
      e->used = true;
    }
    e->snap = snap;
  }

 private:
  static constexpr size_t kSlots = 16384;  // a power of two; CuTe reads ~700 files
  static constexpr size_t kPathBytes = size_t{4} << 20;
  struct Entry {
    uint64_t hash;
    uint32_t offset, length;
    bool used;
    Snapshot snap;
  };

  SnapshotCache() {
    // Reserved, not used: pages appear as entries do.
    void* p = ::mmap(nullptr, kSlots * sizeof(Entry) + kPathBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return;
    entries_ = static_cast<Entry*>(p);
    paths_ = static_cast<char*>(p) + kSlots * sizeof(Entry);
  }
  bool ok() const { return entries_ != nullptr; }

  static uint64_t ns(const struct timespec& t) {
    return static_cast<uint64_t>(t.tv_sec) * 1000000000 + static_cast<uint64_t>(t.tv_nsec);
  }
  static uint64_t hash_of(const char* path, size_t len) {  // FNV-1a
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < len; ++i) h = (h ^ static_cast<unsigned char>(path[i])) * 1099511628211ull;
    return h;
  }
  // The entry for `path`, or the free one it would take; null if neither
  // (the table is never more than 3/4 full, so a probe ends).
  Entry* slot(const char* path, size_t len) const {
    const uint64_t h = hash_of(path, len);
    for (size_t i = 0, at = h & (kSlots - 1); i < kSlots; ++i, at = (at + 1) & (kSlots - 1)) {
      Entry& e = entries_[at];
      if (!e.used) return &e;
      if (e.hash == h && e.length == len && std::memcmp(paths_ + e.offset, path, len) == 0) return &e;
    }
    return nullptr;
  }

  Entry* entries_ = nullptr;
  char* paths_ = nullptr;
  size_t used_slots_ = 0, path_used_ = 0;
  std::atomic<bool> busy_{false};
};

// Files served from the file itself must still have the stat and the bytes
// they were known by, or what NVRTC read may not be those bytes: a write
// through a shared mapping changes no stamp. (Only a change made and undone
// while NVRTC read, both through a mapping, goes unseen.) A changed one's
// ctime is given as UINT64_MAX (changed while read, as a copy that grew).
// Reading them again costs a CUB compile ~1 ms; copying them cost ~30.
bool known_bytes_unchanged(const ServedFile& f) {
  auto ns = [](const struct timespec& t) {
    return static_cast<uint64_t>(t.tv_sec) * 1000000000 + static_cast<uint64_t>(t.tv_nsec);
  };
  int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  struct stat st;
  bool same = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
              f.dev == static_cast<uint64_t>(st.st_dev) &&
              f.ino == static_cast<uint64_t>(st.st_ino) &&
              f.size == static_cast<uint64_t>(st.st_size) && f.mtime_ns == ns(st.st_mtim) &&
              f.ctime_ns == ns(st.st_ctim);
  if (same) {
    Hasher128 hasher;
    std::vector<char> buf(size_t{1} << 16);  // not on the stack: the caller may be a small thread's
    uint64_t read_bytes = 0;
    for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 || (read_bytes += static_cast<uint64_t>(n)) > f.size) {
        same = false;
        break;
      }
      hasher.update(std::string_view(buf.data(), static_cast<size_t>(n)));
    }
    same = same && read_bytes == f.size && hasher.digest() == f.content;
  }
  ::close(fd);
  return same;
}

void check_known_files(SealResult* out) {
  for (ServedFile& f : out->served) {
    if (f.known && !known_bytes_unchanged(f)) f.ctime_ns = UINT64_MAX;
  }
}

// `path` (absolute, or relative to the absolute `base`) with "." parts and
// repeated slashes dropped and ".." folded lexically (kept, `keep_parents`),
// into `out` (at most `cap` bytes); its length, 0 if it does not fit.
// Allocates nothing (the supervisor's invariant).
size_t join_lexically(const char* base, size_t base_len, const char* path, size_t path_len,
                      char* out, size_t cap, bool keep_parents = false) {
  size_t len = 0;
  bool fits = true;
  auto push = [&](const char* s, size_t n) {
    for (size_t start = 0; start < n && fits;) {
      size_t end = start;
      while (end < n && s[end] != '/') ++end;
      size_t part = end - start;
      const bool parent = part == 2 && s[start] == '.' && s[start + 1] == '.';
      if (parent && !keep_parents) {
        while (len > 0 && out[len - 1] != '/') --len;
        if (len > 0) --len;
      } else if (part > 0 && !(part == 1 && s[start] == '.')) {
        if (len + 1 + part > cap) {
          fits = false;
          return;
        }
        out[len++] = '/';
        std::memcpy(out + len, s + start, part);
        len += part;
      }
      start = end + 1;
    }
  };
  if (path_len == 0 || path[0] != '/') push(base, base_len);
  push(path, path_len);
  if (!fits) return 0;
  if (len == 0) out[len++] = '/';
  return len;
}

// Reads a NUL-terminated path from this process's memory into `out` (at
// most kMaxPath bytes) without trusting the pointer (a bad one is EFAULT
// here, as it is for the system call). Returns its length.
constexpr size_t kMaxPath = PATH_MAX;
size_t read_path(long pid, uint64_t address, char* out) {
  size_t have = 0;
  while (address && have < kMaxPath) {
    size_t want = kMaxPath - have < 256 ? kMaxPath - have : 256;
    iovec local{out + have, want};
    iovec remote{reinterpret_cast<void*>(address), want};
    long got = raw_syscall(SYS_process_vm_readv, pid, reinterpret_cast<long>(&local), 1,
                           reinterpret_cast<long>(&remote), 1, 0);
    if (got <= 0) {
      // Maybe the string ends just before an unmapped page: go byte by byte.
      local.iov_len = remote.iov_len = 1;
      if (raw_syscall(SYS_process_vm_readv, pid, reinterpret_cast<long>(&local), 1,
                      reinterpret_cast<long>(&remote), 1, 0) != 1) {
        break;
      }
      got = 1;
    }
    const void* nul = std::memchr(out + have, '\0', static_cast<size_t>(got));
    if (nul) return static_cast<size_t>(static_cast<const char*>(nul) - out);
    have += static_cast<size_t>(got);
    address += static_cast<uint64_t>(got);
  }
  return 0;  // unterminated or unreadable: the call fails on it too
}

// The folder descriptor `fd` names, by /proc/self/fd/N, into `out`.
size_t folder_of_fd(int fd, char* out) {
  char proc[32] = "/proc/self/fd/";
  char digits[12];
  int n = 0;
  unsigned v = static_cast<unsigned>(fd);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v && n < 11);
  size_t at = 14;
  while (n) proc[at++] = digits[--n];
  proc[at] = '\0';
  long got = raw_syscall(SYS_readlink, reinterpret_cast<long>(proc), reinterpret_cast<long>(out),
                         static_cast<long>(kMaxPath));
  return got > 0 ? static_cast<size_t>(got) : 0;
}

// Where the dynamic loader's code lies in this process (its executable
// segments): a system call made from there is the loader's own.
struct LoaderCode {
  static constexpr size_t kMax = 4;
  uint64_t begin[kMax] = {}, end[kMax] = {};
  size_t count = 0;
};

LoaderCode find_loader_code() {
  LoaderCode code;
  const uint64_t base = ::getauxval(AT_BASE);
  if (base == 0) return code;  // linked statically: no loader
  struct Seen {
    uint64_t base;
    LoaderCode* code;
  } seen{base, &code};
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Seen*>(data);
        if (info->dlpi_addr != s->base) return 0;
        for (int i = 0; i < info->dlpi_phnum && s->code->count < LoaderCode::kMax; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
          s->code->begin[s->code->count] = info->dlpi_addr + ph.p_vaddr;
          s->code->end[s->code->count] = info->dlpi_addr + ph.p_vaddr + ph.p_memsz;
          ++s->code->count;
        }
        return 1;
      },
      &seen);
  return code;
}

// SealPolicy::one_cpu, on the supervisor's side: it and the sealed thread
// share one CPU, and where the sealed thread waits for that CPU (another
// thread pinned there too) both move to the allowed CPU idlest since the
// last look. Follows the supervisor's invariant: its buffers are made by the
// constructor, and it calls the kernel directly.
class CpuKeeper {
 public:
  // `cpu`: the one both start on (-1: none kept); `allowed`: the CPUs the
  // sealed thread (`tid`) could use before it was pinned.
  CpuKeeper(int cpu, const cpu_set_t& allowed, long tid) : cpu_(cpu), tid_(tid), allowed_(allowed) {
    if (cpu_ < 0) return;
    monotonic_ns();  // bound now: a first call through the PLT would enter the loader
    stat_.resize(size_t{1} << 18);
    idle_.assign(CPU_SETSIZE, 0);
    total_.assign(CPU_SETSIZE, 0);
  }

  // On the supervisor's thread, before its first answer.
  void enter() const {
    if (cpu_ >= 0) pin(0, cpu_);  // refused: the pair crosses CPUs, slower, still answered
  }

  // At a path call of thread `caller` (stopped until it is answered): every
  // kJudgeEveryNs of the sealed thread's calls, whether the pair ran less
  // than 3/4 of that time. (Alone on its CPU a compiling pair runs all the
  // time, one thread or the other; the sealed thread's run-queue wait alone
  // says little: the scheduler favours a thread that sleeps at every path
  // call.) Crowded twice running, both move to the CPU idlest between the
  // two looks (/proc/stat is read only then).
  void judge(long caller) {
    if (cpu_ < 0 || caller != tid_) return;
    const uint64_t now = monotonic_ns();
    if (now - judged_ns_ < kJudgeEveryNs) return;
    const uint64_t ran = run_ns(tid_) + run_ns(0);
    const bool crowded =
        judged_ns_ != 0 && ran >= ran_ns_ && 4 * (ran - ran_ns_) < 3 * (now - judged_ns_);
    judged_ns_ = now;
    ran_ns_ = ran;
    if (!crowded) {
      sampled_ = false;
      return;
    }
    const int idlest = idlest_cpu();  // since the last look: used only if that was crowded too
    if (!sampled_) {
      sampled_ = true;
      return;
    }
    if (idlest < 0 || idlest == cpu_) return;
    // This thread first: the answer wakes the sealed thread on this CPU.
    if (!pin(0, idlest)) return;
    if (!pin(tid_, idlest)) {
      pin(0, cpu_);  // the sealed thread stays: so does this one
      return;
    }
    cpu_ = idlest;
    moves_++;
  }

  int moves() const { return moves_; }

 private:
  static constexpr uint64_t kJudgeEveryNs = 50'000'000;

  static bool pin(long tid, int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return raw_syscall(SYS_sched_setaffinity, tid, sizeof set, reinterpret_cast<long>(&set)) == 0;
  }

  // The vDSO's clock (no system call: it runs at every path call), bound by
  // the constructor's first call.
  static uint64_t monotonic_ns() {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(t.tv_nsec);
  }

  // Reads `path` into buf (at most cap - 1 bytes, NUL-terminated); its length.
  static size_t read_text(const char* path, char* buf, size_t cap) {
    long fd = raw_syscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    size_t len = 0;
    for (long n; len + 1 < cap && (n = raw_syscall(SYS_read, fd, reinterpret_cast<long>(buf + len),
                                                   static_cast<long>(cap - 1 - len))) != 0;) {
      if (n == -EINTR) continue;
      if (n < 0) break;
      len += static_cast<size_t>(n);
    }
    raw_syscall(SYS_close, fd);
    buf[len] = '\0';
    return len;
  }

  // The decimal number at *at (skipping blanks), moving past it.
  static uint64_t number(const char*& at) {
    while (*at == ' ') ++at;
    uint64_t v = 0;
    for (; *at >= '0' && *at <= '9'; ++at) v = v * 10 + static_cast<uint64_t>(*at - '0');
    return v;
  }

  // Nanoseconds thread `tid` (0: the calling one) has run
  // (/proc/self/task/TID/schedstat: "run_ns wait_ns slices").
  static uint64_t run_ns(long tid) {
    char path[64] = "/proc/thread-self/schedstat";
    if (tid != 0) {
      constexpr char kTask[] = "/proc/self/task/";
      std::memcpy(path, kTask, sizeof kTask);
      char digits[24];
      int n = 0;
      for (uint64_t v = static_cast<uint64_t>(tid); n == 0 || v; v /= 10) {
        digits[n++] = static_cast<char>('0' + v % 10);
      }
      size_t at = sizeof kTask - 1;
      while (n) path[at++] = digits[--n];
      std::memcpy(path + at, "/schedstat", sizeof "/schedstat");
    }
    char text[128];
    if (read_text(path, text, sizeof text) == 0) return 0;
    const char* p = text;
    return number(p);
  }

  // The allowed CPU idlest since the last call, by /proc/stat's
  //   cpuN user nice system idle iowait irq softirq steal ...
  // lines; -1 where none was idle half that time (or at the first call).
  int idlest_cpu() {
    const size_t len = read_text("/proc/stat", stat_.data(), stat_.size());
    if (len == 0) return -1;
    int best = -1;
    uint64_t best_idle = 0, best_total = 1;
    const char* const stop = stat_.data() + len;
    for (const char* line = stat_.data(); line < stop;) {
      const char* end =
          static_cast<const char*>(std::memchr(line, '\n', static_cast<size_t>(stop - line)));
      if (stop - line > 3 && line[0] == 'c' && line[1] == 'p' && line[2] == 'u' && line[3] >= '0' &&
          line[3] <= '9') {
        const char* p = line + 3;
        const uint64_t cpu = number(p);
        uint64_t field[8] = {};
        for (uint64_t& f : field) f = number(p);
        const uint64_t idle = field[3] + field[4];
        uint64_t total = 0;
        for (uint64_t f : field) total += f;
        if (cpu < CPU_SETSIZE && CPU_ISSET(cpu, &allowed_)) {
          // (iowait may go back: such a CPU is skipped this time.)
          const bool forward = idle >= idle_[cpu] && total >= total_[cpu];
          const uint64_t d_idle = idle - idle_[cpu], d_total = total - total_[cpu];
          // idle/total above best_idle/best_total, and at least half.
          if (forward && total_[cpu] != 0 && d_total > 0 && d_idle <= d_total &&
              2 * d_idle >= d_total && d_idle * best_total > best_idle * d_total) {
            best = static_cast<int>(cpu);
            best_idle = d_idle;
            best_total = d_total;
          }
          idle_[cpu] = idle;
          total_[cpu] = total;
        }
      }
      if (!end) break;
      line = end + 1;
    }
    return best;
  }

  int cpu_;
  long tid_;
  cpu_set_t allowed_;
  uint64_t judged_ns_ = 0, ran_ns_ = 0;
  bool sampled_ = false;  // the last look was crowded too: /proc/stat read then
  int moves_ = 0;
  std::vector<char> stat_;
  std::vector<uint64_t> idle_, total_;  // per CPU, at the last look
};

// The sealed thread's call after `fn` (run_sealed): an openat of this
// descriptor, naming the run's Goodbye, which the filter sends to the
// supervisor like every path call; the supervisor answers it EBADF. Until
// then the supervisor waits in SECCOMP_IOCTL_NOTIF_RECV, where the kernel
// hands the CPU straight over (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP wakes only
// a RECV, not a poll()), but where nothing wakes it when the filter goes
// away; after it, in poll(), which sees that.
constexpr int kGoodbyeFd = -4127;
struct Goodbye {
  unsigned char token[16];  // random, per run: no other openat names it
};

// Answers the sealed thread's path calls (each runs as asked: the Landlock
// domain is the boundary, this only records) until, after its goodbye, the
// filter goes away with the thread (or the listener fails). Follows the invariant above: everything
// it uses is made by its constructor.
class Supervisor {
 public:
  // `policy` and `cwd_fd` (the sealed thread's working directory, open) only
  // matter when serving (SealPolicy::serve).
  Supervisor(int listener, const Goodbye& goodbye, RecordArena* arena, const SealPolicy& policy,
             int cwd_fd, const std::string& cwd, const LoaderCode& loader, CpuKeeper* keeper,
             const std::atomic<bool>* joined, SnapshotCache* known)
      : listener_(listener), goodbye_(goodbye), arena_(arena), policy_(policy), cwd_fd_(cwd_fd),
        cwd_(cwd), loader_(loader), keeper_(keeper), joined_(joined), known_(known) {
    // The kernel's sizes where it says them (a newer kernel's may be
    // larger), else these headers': never none, or the sealed thread's
    // first path call would wait for good.
    seccomp_notif_sizes sizes{};
    if (::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) sizes = {};
    req_.resize(std::max<size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)));
    resp_.resize(std::max<size_t>(sizes.seccomp_notif_resp, sizeof(seccomp_notif_resp)));
    path_.resize(kMaxPath + 1);
    base_.resize(kMaxPath + 1);
    absolute_.resize(2 * kMaxPath + 2);
    resolved_.resize(kMaxPath + 1);
    pid_ = ::getpid();
    copy_.resize(size_t{1} << 16);
    // Bound now: a first call through the PLT would enter the loader (the
    // invariant below).
    hasher_.update(std::string_view("", 0));
    hasher_.digest();
    hasher_.reset();
  }

  // No allocation from here on (the invariant).
  void run() {
    keeper_->enter();
    auto* req = reinterpret_cast<seccomp_notif*>(req_.data());
    auto* resp = reinterpret_cast<seccomp_notif_resp*>(resp_.data());
    bool said_goodbye = false;
    int idle_after_join = 0;  // 100 ms polls with nothing to answer, the sealed thread joined
    for (;;) {
      // After the goodbye the thread still ends (glibc's thread exit may
      // trim a heap, which opens a file): answer until the filter goes away
      // with it (POLLHUP), which only poll() sees. A thread or process `fn`
      // started that lives on keeps the filter: after kStragglerPolls with
      // nothing to answer, the seal gives up on it (SealResult: not sealed).
      if (said_goodbye) {
        pollfd p{listener_, POLLIN, 0};
        long r = raw_syscall(SYS_poll, reinterpret_cast<long>(&p), 1, 100);
        if (r == -EINTR) continue;
        if (r < 0 || (r > 0 && !(p.revents & POLLIN))) return;
        if (r == 0) {
          if (joined_->load() && ++idle_after_join >= kStragglerPolls) {
            outlived_ = true;
            return;
          }
          continue;
        }
      }
      std::memset(req_.data(), 0, req_.size());
      // Until the goodbye, blocks here: the kernel hands the CPU straight
      // over (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP).
      long r = raw_syscall(SYS_ioctl, listener_, static_cast<long>(SECCOMP_IOCTL_NOTIF_RECV),
                           reinterpret_cast<long>(req));
      if (r == -EINTR || r == -ENOENT) {
        // ENOENT: the caller was killed meanwhile, or (Linux 6.11+) no
        // thread uses the filter any more: then it has hung up.
        pollfd p{listener_, POLLIN, 0};
        if (raw_syscall(SYS_poll, reinterpret_cast<long>(&p), 1, 0) > 0 && !(p.revents & POLLIN))
          return;
        continue;
      }
      if (r != 0) return;
      // (A goodbye made again after its answer, a signal racing it, is
      // answered again and never recorded.)
      const bool goodbye = is_goodbye(req->data);
      if (!said_goodbye && !goodbye) keeper_->judge(static_cast<long>(req->pid));
      // Serving, the loader's calls are its own: neither recorded nor
      // served (Landlock judges them).
      const bool loader = !goodbye && policy_.serve && from_loader(req->data.instruction_pointer);
      // The path record() read, in path_, for serve() to use again.
      const size_t path_len = goodbye || loader ? 0 : record(req->data);
      long answer = goodbye ? -EBADF : policy_.serve && !loader ? serve(*req, path_len) : kContinue;
      if (answer == kAnswered) continue;
      std::memset(resp_.data(), 0, resp_.size());
      resp->id = req->id;
      if (answer == kContinue) {
        resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
      } else {
        resp->error = static_cast<int32_t>(answer);  // -errno
      }
      long sent = raw_syscall(SYS_ioctl, listener_, static_cast<long>(SECCOMP_IOCTL_NOTIF_SEND),
                              reinterpret_cast<long>(resp));
      // A goodbye a signal interrupted (ENOENT) is made again.
      if (goodbye && sent == 0) said_goodbye = true;
    }
  }

  // Whether it gave up on a thread or process `fn` started, still alive.
  bool outlived() const { return outlived_; }

 private:
  static constexpr int kStragglerPolls = 10;  // a second
  static constexpr long kContinue = 1;  // let the call run (Landlock judges it)
  static constexpr long kAnswered = 2;  // the call has its result (ADDFD_FLAG_SEND)

  // Serving: an open for reading of a path outside the policy's folders is
  // made here and answered with a snapshot; anything else runs as asked.
  // `read_len`: the path's length if record() already read it into path_.
  long serve(const seccomp_notif& req, size_t read_len) {
    const seccomp_data& d = req.data;
    int dir = AT_FDCWD;
    uint64_t path_at = 0, flags = 0;
    if (d.nr == SYS_open) {
      path_at = d.args[0];
      flags = d.args[1];
    } else if (d.nr == SYS_openat) {
      dir = static_cast<int>(d.args[0]);
      path_at = d.args[1];
      flags = d.args[2];
    } else if (d.nr == 437 /* openat2 */) {
      dir = static_cast<int>(d.args[0]);
      path_at = d.args[1];
      iovec local{&flags, sizeof flags};  // open_how.flags comes first
      iovec remote{reinterpret_cast<void*>(d.args[2]), sizeof flags};
      if (raw_syscall(SYS_process_vm_readv, pid_, reinterpret_cast<long>(&local), 1,
                      reinterpret_cast<long>(&remote), 1, 0) != sizeof flags) {
        return kContinue;
      }
    } else {
      return kContinue;
    }
    // Writing, creating, a folder or a bare handle: not a file read; the
    // Landlock domain judges it as it stands.
    if ((flags & O_ACCMODE) != O_RDONLY ||
        (flags & (O_CREAT | O_TRUNC | O_DIRECTORY | O_PATH | O_TMPFILE)) != 0) {
      return kContinue;
    }
    size_t path_len = read_len ? read_len : read_path(pid_, path_at, path_.data());
    if (path_len == 0) return kContinue;
    path_[path_len] = '\0';
    size_t base_len = 0;
    if (path_[0] != '/') {
      if (dir == AT_FDCWD) {
        base_len = cwd_.size();
        std::memcpy(base_.data(), cwd_.data(), base_len);
      } else {
        base_len = folder_of_fd(dir, base_.data());
        if (base_len == 0) return kContinue;
      }
    }
    size_t abs_len = join_lexically(base_.data(), base_len, path_.data(), path_len,
                                    absolute_.data(), absolute_.size());
    // NVRTC's own files are named without `..`; a name with `..` that only
    // folds into its folders may lead anywhere through a link: served.
    const bool parents = has_parent_part(std::string_view(path_.data(), path_len));
    if (abs_len == 0) return kContinue;
    if (!parents && own(absolute_.data(), abs_len) && leads_to_own(absolute_.data())) {
      return kContinue;
    }
    if (pseudo(absolute_.data(), abs_len)) {
      const char* why = "a file of the kernel's or of a process (/proc, /sys, /dev/fd), not servable";
      arena_->append(kRefusedRecord, why, static_cast<uint32_t>(std::strlen(why)),
                     absolute_.data(), static_cast<uint32_t>(abs_len));
      return -EACCES;
    }
    // Recorded as opened: "sub/../y.h" is the parent of wherever "sub" leads
    // (a linked folder's target's), which the kernel resolves on disk and a
    // lookup checks by the same spelling; folded, the key would name another
    // file. (Which folder it is beneath, above, is judged by the folded name.)
    if (parents) {
      abs_len = join_lexically(base_.data(), base_len, path_.data(), path_len, absolute_.data(),
                               absolute_.size(), /*keep_parents=*/true);
      if (abs_len == 0) return kContinue;
    }
    // The same name, opened from this thread: it shares the descriptor
    // table, so `dir` is valid here, and a relative name is taken from the
    // sealed thread's working directory.
    int at = path_[0] == '/' ? AT_FDCWD : dir == AT_FDCWD ? cwd_fd_ : dir;
    // Never through a /proc "magic link" (/dev/fd/3, a link to
    // /proc/self/fd/3): it names an open file of whichever process looks,
    // here this one's (a review found NVRTC served the store's own index).
    open_how how{};
    how.flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
    how.resolve = RESOLVE_NO_MAGICLINKS;
    long src = raw_syscall(437 /* openat2 */, at, reinterpret_cast<long>(path_.data()),
                           reinterpret_cast<long>(&how), sizeof how);
    if (src == -ENOSYS) {  // before Linux 5.6
      src = raw_syscall(SYS_openat, at, reinterpret_cast<long>(path_.data()),
                        static_cast<long>(how.flags));
    } else if (src == -ELOOP) {
      long plain = raw_syscall(SYS_openat, at, reinterpret_cast<long>(path_.data()),
                               static_cast<long>(how.flags | O_PATH));
      if (plain >= 0) {
        raw_syscall(SYS_close, plain);
        const char* why = "an open file of a process (a link into /proc), not servable";
        arena_->append(kRefusedRecord, why, static_cast<uint32_t>(std::strlen(why)),
                       absolute_.data(), static_cast<uint32_t>(abs_len));
        return -EACCES;
      }
    }
    if (src < 0) return src;  // as the kernel answers the sealed thread
    long answer = snapshot(req, static_cast<int>(src), flags, abs_len);
    raw_syscall(SYS_close, src);
    return answer;
  }

  long snapshot(const seccomp_notif& req, int src, uint64_t flags, size_t abs_len) {
    // Before the stat: a file is kept known only if it had settled by then.
    timespec now{};
    if (known_) raw_syscall(SYS_clock_gettime, CLOCK_REALTIME, reinterpret_cast<long>(&now));
    struct stat st;
    if (raw_syscall(SYS_fstat, src, reinterpret_cast<long>(&st)) != 0) return -EACCES;
    // A folder opened to read is what NVRTC opens while it searches its -I
    // folders (`<foo>` where ./foo is a folder: it opens it, stats it and
    // goes on to the next folder, measured): answered with the folder as the
    // kernel answers, no bytes to serve (its stat is in the probes).
    if (S_ISDIR(st.st_mode)) {
      raw_syscall(SYS_fcntl, src, F_SETFL, 0);
      long fd = install(req, src, flags, abs_len);
      return fd == -EACCES ? -EACCES : kAnswered;
    }
    const char* refused = nullptr;
    if (S_ISFIFO(st.st_mode)) refused = "a FIFO";
    else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) refused = "a device";
    else if (S_ISSOCK(st.st_mode)) refused = "a socket";
    else if (!S_ISREG(st.st_mode)) refused = "not a regular file";
    else if (static_cast<uint64_t>(st.st_size) > policy_.max_file_bytes) refused = "over the size limit";
    if (refused) {
      arena_->append(kRefusedRecord, refused, static_cast<uint32_t>(std::strlen(refused)),
                     absolute_.data(), static_cast<uint32_t>(abs_len));
      return -EACCES;
    }
    if (const Snapshot* known = known_ ? known_->find(absolute_.data(), abs_len, st) : nullptr) {
      // Its bytes are known (SnapshotCache): the file itself, as NVRTC
      // alone would open it (no O_NONBLOCK), checked again afterwards.
      if (raw_syscall(SYS_fcntl, src, F_SETFL, 0) == 0) {
        return send(req, src, flags, abs_len, *known, kServedKnownRecord);
      }
    }
    long mem = raw_syscall(SYS_memfd_create, reinterpret_cast<long>("kcache-snapshot"),
                           MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mem < 0) return mem;
    // Kept known only on a local file system (SnapshotCache says why).
    struct statfs fs;
    const bool keep = known_ && raw_syscall(SYS_fstatfs, src, reinterpret_cast<long>(&fs)) == 0 &&
                      stamps_trusted_on_type(static_cast<uint64_t>(fs.f_type));
    long answer = fill_and_send(req, src, static_cast<int>(mem), st, flags, abs_len,
                                keep ? static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec
                                     : -1);
    raw_syscall(SYS_close, mem);
    return answer;
  }

  long fill_and_send(const seccomp_notif& req, int src, int mem, const struct stat& st,
                     uint64_t flags, size_t abs_len, int64_t stat_ns /* -1: not kept */) {
    // Read, hashed and written through one buffer: no mapping to undo (an
    // munmap interrupts every CPU this process's threads ran on).
    uint64_t copied = 0;
    hasher_.reset();
    for (;;) {
      long n = raw_syscall(SYS_read, src, reinterpret_cast<long>(copy_.data()),
                           static_cast<long>(copy_.size()));
      if (n == -EINTR) continue;
      if (n < 0) return n;
      if (n == 0) break;
      copied += static_cast<uint64_t>(n);
      if (copied > policy_.max_file_bytes) {
        const char* why = "over the size limit";
        arena_->append(kRefusedRecord, why, static_cast<uint32_t>(std::strlen(why)),
                       absolute_.data(), static_cast<uint32_t>(abs_len));
        return -EACCES;
      }
      hasher_.update(std::string_view(copy_.data(), static_cast<size_t>(n)));
      for (long at = 0; at < n;) {
        long w = raw_syscall(SYS_write, mem, reinterpret_cast<long>(copy_.data() + at), n - at);
        if (w == -EINTR) continue;
        if (w <= 0) return w < 0 ? w : -EIO;
        at += w;
      }
    }
    constexpr long kSeals = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
    if (raw_syscall(SYS_fcntl, mem, F_ADD_SEALS, kSeals) != 0) return -EIO;
    if (raw_syscall(SYS_lseek, mem, 0, SEEK_SET) != 0) return -EIO;
    Snapshot snap{};
    snap.content = hasher_.digest();
    snap.dev = static_cast<uint64_t>(st.st_dev);
    snap.ino = static_cast<uint64_t>(st.st_ino);
    snap.size = copied;
    snap.mtime_ns = static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000 +
                    static_cast<uint64_t>(st.st_mtim.tv_nsec);
    snap.ctime_ns = static_cast<uint64_t>(st.st_ctim.tv_sec) * 1000000000 +
                    static_cast<uint64_t>(st.st_ctim.tv_nsec);
    if (copied != static_cast<uint64_t>(st.st_size)) snap.ctime_ns = UINT64_MAX;  // grew or shrank
    long answer = send(req, mem, flags, abs_len, snap, kServedRecord);
    if (answer == kAnswered && known_ && stat_ns >= 0) {
      known_->remember(absolute_.data(), abs_len, snap, stat_ns);
    }
    return answer;
  }

  // Installs `fd` as the call's result and records it as served with `snap`.
  long send(const seccomp_notif& req, int fd_to_send, uint64_t flags, size_t abs_len,
            const Snapshot& snap, int32_t record) {
    long fd = install(req, fd_to_send, flags, abs_len);
    if (fd == -EACCES) return -EACCES;
    if (fd < 0) return kAnswered;  // the call is gone (interrupted): nothing to answer
    arena_->append(record, reinterpret_cast<const char*>(&snap), sizeof snap, absolute_.data(),
                   static_cast<uint32_t>(abs_len));
    return kAnswered;
  }

  // Installs `fd` as the call's result: the new descriptor, -EACCES where
  // the kernel cannot (recorded as refused), another negative where the call
  // is gone.
  long install(const seccomp_notif& req, int fd_to_send, uint64_t flags, size_t abs_len) {
    seccomp_notif_addfd add{};
    add.id = req.id;
    add.flags = SECCOMP_ADDFD_FLAG_SEND;
    add.srcfd = static_cast<uint32_t>(fd_to_send);
    add.newfd_flags = static_cast<uint32_t>(flags & O_CLOEXEC);
    long fd = raw_syscall(SYS_ioctl, listener_, static_cast<long>(SECCOMP_IOCTL_NOTIF_ADDFD),
                          reinterpret_cast<long>(&add));
    if (fd == -EINVAL || fd == -ENOTTY) {
      const char* why = "not servable: the kernel has no SECCOMP_ADDFD_FLAG_SEND (Linux 5.14+)";
      arena_->append(kRefusedRecord, why, static_cast<uint32_t>(std::strlen(why)),
                     absolute_.data(), static_cast<uint32_t>(abs_len));
      return -EACCES;
    }
    return fd;
  }

  // Beneath one of the policy's folders (NVRTC's own: its libraries, the
  // time zone, its PCH folder): Landlock lets it read those itself.
  bool own(const char* path, size_t len) const {
    auto beneath = [&](std::string_view d) {  // allocates nothing (the invariant)
      size_t n = d.size();
      while (n > 1 && d[n - 1] == '/') --n;
      return len >= n && std::memcmp(path, d.data(), n) == 0 && (len == n || path[n] == '/');
    };
    for (const std::string& d : policy_.readable) {
      if (beneath(d)) return true;
    }
    for (const std::string& d : policy_.writable) {
      if (beneath(d)) return true;
    }
    // What the process reads by itself (kProcessFiles): Landlock refuses
    // it, as without serving.
    for (const char* file : kProcessFiles) {
      if (beneath(file)) return true;
    }
    return false;
  }

  // Whether a name beneath NVRTC's own folders leads to a file there too (or
  // to nothing): Landlock judges the file a link leads to, so a link there to
  // a user's header is served, as the kernel would not let NVRTC read it (a
  // review: `__has_include` of such a link was false, NVRTC alone says true).
  bool leads_to_own(const char* absolute) {
    long fd = raw_syscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>(absolute),
                          static_cast<long>(O_PATH | O_CLOEXEC));
    if (fd < 0) return true;  // nothing there: the kernel answers as it would
    size_t len = folder_of_fd(static_cast<int>(fd), resolved_.data());
    raw_syscall(SYS_close, fd);
    return len == 0 || own(resolved_.data(), len);
  }

  // The kernel's pseudo-files: their bytes are made as they are read, no
  // snapshot of a file.
  static bool pseudo(const char* path, size_t len) {
    for (const char* folder : {"/proc", "/sys", "/dev/fd", "/dev/stdin", "/dev/stdout",
                               "/dev/stderr"}) {
      size_t n = std::strlen(folder);
      if (len >= n && std::memcmp(path, folder, n) == 0 && (len == n || path[n] == '/')) {
        return true;
      }
    }
    return false;
  }

  // A call made by the dynamic loader (its code made it): a library search
  // (NVRTC's try for libcuda), never an include. Landlock judges it.
  bool from_loader(uint64_t ip) const {
    for (size_t i = 0; i < loader_.count; ++i) {
      if (ip >= loader_.begin[i] && ip < loader_.end[i]) return true;
    }
    return false;
  }

  // Whether `d` is the sealed thread's goodbye: kGoodbyeFd, and this run's
  // token at the path's address.
  bool is_goodbye(const seccomp_data& d) const {
    if (d.nr != SYS_openat || static_cast<int>(d.args[0]) != kGoodbyeFd) return false;
    Goodbye said{};
    iovec local{&said, sizeof said};
    iovec remote{reinterpret_cast<void*>(d.args[1]), sizeof said};
    return raw_syscall(SYS_process_vm_readv, pid_, reinterpret_cast<long>(&local), 1,
                       reinterpret_cast<long>(&remote), 1, 0) == sizeof said &&
           std::memcmp(said.token, goodbye_.token, sizeof said.token) == 0;
  }

  // Records the call's path; returns its length (it stays in path_), 0 for
  // none.
  size_t record(const seccomp_data& d) {
    for (const PathCall& c : kPathCalls) {
      if (c.nr != d.nr) continue;
      size_t path_len = read_path(pid_, d.args[c.path_arg], path_.data());
      if (path_len == 0) return 0;  // fstat(fd) and friends name no path
      size_t base_len = 0;
      if (c.at && path_[0] != '/' && static_cast<int>(d.args[0]) != AT_FDCWD) {
        base_len = folder_of_fd(static_cast<int>(d.args[0]), base_.data());
        // Unknown: never taken for the working folder's (probes_of), and
        // no path a lookup can check.
        if (base_len == 0) base_[base_len++] = '?';
      }
      arena_->append(d.nr, base_.data(), static_cast<uint32_t>(base_len), path_.data(),
                     static_cast<uint32_t>(path_len));
      return path_len;
    }
    return 0;
  }

  int listener_;
  Goodbye goodbye_;
  RecordArena* arena_;
  const SealPolicy& policy_;
  int cwd_fd_;
  const std::string& cwd_;
  LoaderCode loader_;
  CpuKeeper* keeper_;
  const std::atomic<bool>* joined_;  // run_sealed joined the sealed thread
  SnapshotCache* known_;  // files whose bytes are known (null: none)
  bool outlived_ = false;
  long pid_ = 0;
  std::vector<char> req_, resp_, path_, base_, absolute_, resolved_, copy_;  // sized before run()
  Hasher128 hasher_;  // its state allocated before run()
};

// The arena's records as SealResult::probes: relative names resolved against
// the working directory (which chdir moves), those inside the deleted chain
// left out, each path once, in first-use order.
std::vector<std::string> probes_of(const RecordArena& arena, std::string cwd,
                                   const std::string& chain_root, SealResult* names) {
  std::vector<std::string> probes;
  std::unordered_set<std::string> seen, relative, absolute;
  // A chdir (even one that failed: the record holds no result) makes later
  // relative names not the working folder's, kept absolute (the safe side).
  // fchdir is not watched: NVRTC changes no folder at all (measured), and
  // a library that did would have its relative names taken as the working
  // folder's. A name relative to a folder descriptor whose folder the
  // supervisor could not read has base "?" (record()).
  bool moved = false;
  arena.for_each([&](int32_t nr, std::string_view base, std::string_view path) {
    if (nr < 0) return;  // a served or refused file (served_of)
    std::string p(path);
    const std::string& from = base.empty() ? cwd : std::string(base);
    std::string resolved = p.front() == '/' ? p : resolve_lexically(from, p);
    if (p.front() != '/' && chain_root.empty() && has_parent_part(p)) {
      // A real working folder (serving): ".." kept as the kernel resolved it
      // (through a linked folder, not lexically), as the served files are.
      std::string joined(from.size() + p.size() + 2, '\0');
      joined.resize(join_lexically(from.data(), from.size(), p.data(), p.size(), &joined[0],
                                   joined.size(), /*keep_parents=*/true));
      if (!joined.empty()) resolved = joined;
    }
    bool in_chain = !chain_root.empty() &&
                    (resolved == chain_root ||
                     resolved.compare(0, chain_root.size() + 1, chain_root + "/") == 0);
    if (!in_chain && chain_root.empty()) {
      const bool by_working_folder = p.front() != '/' && base.empty() && !moved;
      if (by_working_folder ? relative.insert(resolved).second : absolute.insert(resolved).second) {
        (by_working_folder ? names->relative_names : names->absolute_names).push_back(resolved);
      }
    }
    if (nr == SYS_chdir) {
      cwd = resolved;
      moved = true;
    }
    if (!in_chain && seen.insert(resolved).second) probes.push_back(resolved);
  });
  return probes;
}

// The files the supervisor served and the first it refused (serving only).
void served_of(const RecordArena& arena, SealResult* out) {
  arena.for_each([&](int32_t nr, std::string_view base, std::string_view path) {
    if (nr == kRefusedRecord && out->refused.empty()) {
      out->refused = std::string(path) + " is " + std::string(base);
    } else if ((nr == kServedRecord || nr == kServedKnownRecord) &&
               base.size() == sizeof(Snapshot)) {
      Snapshot snap;
      std::memcpy(&snap, base.data(), sizeof snap);
      out->served.push_back({std::string(path), snap.content, snap.dev, snap.ino, snap.size,
                             snap.mtime_ns, snap.ctime_ns, nr == kServedKnownRecord});
    }
  });
}

// Blocks every signal the calling thread may block (glibc keeps its own).
void block_signals() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
}

// Keeps the calling thread on `cpu`.
bool run_on_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

// Gives the calling thread a working directory of its own, the innermost of
// a chain of freshly made folders, all deleted again. Returns its path (and
// the chain's root), or an empty string where that cannot be done.
std::string seal_working_directory(std::string* root_out) {
  if (::unshare(CLONE_FS) != 0) return "";
  const char* tmp = ::getenv("TMPDIR");
  char real[PATH_MAX];
  std::string parent = ::realpath(tmp && *tmp ? tmp : "/tmp", real) ? real : "/tmp";
  std::string root = parent + "/kcache-seal-XXXXXX";
  if (!::mkdtemp(&root[0])) return "";
  std::vector<std::string> made{root};
  bool ok = true;
  for (int i = 0; i < kSealDepth && ok; ++i) {
    std::string next = made.back() + "/d";
    ok = ::mkdir(next.c_str(), 0700) == 0;
    if (ok) made.push_back(next);
  }
  ok = ok && ::chdir(made.back().c_str()) == 0;
  for (auto it = made.rbegin(); it != made.rend(); ++it) ::rmdir(it->c_str());
  if (!ok) return "";
  *root_out = root;
  return made.back();
}

}  // namespace

bool has_parent_part(std::string_view path) {
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    if (path[i] == '.' && path[i + 1] == '.' && (i == 0 || path[i - 1] == '/') &&
        (i + 2 == path.size() || path[i + 2] == '/')) {
      return true;
    }
  }
  return false;
}

std::string resolve_lexically(const std::string& cwd, const std::string& path) {
  std::vector<std::string> parts;
  auto push = [&](const std::string& s) {
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find('/', start);
      if (end == std::string::npos) end = s.size();
      std::string part = s.substr(start, end - start);
      if (part == "..") {
        if (!parts.empty()) parts.pop_back();
      } else if (!part.empty() && part != ".") {
        parts.push_back(part);
      }
      start = end + 1;
    }
  };
  if (path.empty() || path.front() != '/') push(cwd);
  push(path);
  std::string out;
  for (const std::string& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

std::vector<std::string> with_link_targets(const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  for (const std::string& d : dirs) {
    out.push_back(d);
    DIR* dir = ::opendir(d.c_str());
    if (!dir) continue;
    while (dirent* e = ::readdir(dir)) {
      if (e->d_type != DT_LNK) continue;
      char real[PATH_MAX];
      std::string link = d + "/" + e->d_name;
      if (::realpath(link.c_str(), real)) out.push_back(real);
    }
    ::closedir(dir);
  }
  return out;
}

namespace {
// What seal_available() found, and any refusal run_sealed() met since: a
// boundary refused once is not tried again in this process.
struct Availability {
  std::mutex m;
  bool probed = false;
  bool available = false;
  std::string reason;
};
Availability& availability() {
  static Availability a;
  return a;
}

void mark_refused(const std::string& why) {
  Availability& a = availability();
  std::lock_guard<std::mutex> lock(a.m);
  a.probed = true;
  a.available = false;
  a.reason = why;
}
}  // namespace

bool seal_available(std::string* why) {
  Availability& a = availability();
  std::lock_guard<std::mutex> lock(a.m);
  if (!a.probed) {
    a.probed = true;
    const char* off = ::getenv("KCACHE_SEAL");
    if (off && std::string(off) == "off") {
      a.reason = "turned off with KCACHE_SEAL=off";
    } else {
      std::thread probe([&a] {
        if (landlock_abi() < 1) {
          a.reason = no_landlock_reason();
          return;
        }
        int fd = install_supervision(&a.reason);
        if (fd >= 0) {
          ::close(fd);
          a.available = true;
        }
      });
      probe.join();
    }
  }
  if (why) *why = a.reason;
  return a.available;
}

namespace {

// Where the sealed thread works: the deleted chain, or (serving) the folder
// the compile asked for, open, with its real name.
struct WorkingFolder {
  const SealPolicy& policy;
  Fd served_fd;
  std::string served_name;

  explicit WorkingFolder(const SealPolicy& p)
      : policy(p), served_fd(p.serve ? ::open(dir(), O_PATH | O_DIRECTORY | O_CLOEXEC) : -1) {
    if (!policy.serve) return;
    char real[PATH_MAX];
    if (served_fd.get() < 0 || !::realpath(dir(), real)) {
      throw IoError("cannot open the working folder " + policy.working_dir + ": " +
                    std::strerror(errno));
    }
    served_name = real;
  }

  const char* dir() const { return policy.working_dir.empty() ? "." : policy.working_dir.c_str(); }

  // Enters it on the calling thread (unshare(CLONE_FS): its own). Returns
  // its name (and the chain's root), empty where that failed.
  std::string enter(std::string* root) const {
    if (!policy.serve) return seal_working_directory(root);
    if (::unshare(CLONE_FS) != 0 || ::fchdir(served_fd.get()) != 0) return "";
    return served_name;
  }
};

// Runs `fn` on a thread of its own with no boundary (the kernel refused it).
void run_unsealed(const WorkingFolder& folder, const std::function<void()>& fn) {
  std::exception_ptr error;
  std::thread plain([&] {
    try {
      std::string root;
      folder.enter(&root);
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  });
  plain.join();
  if (error) std::rethrow_exception(error);
}

// The start of the sealed thread, and what it tells the thread that
// supervises it.
struct SealedStart {
  std::mutex m;
  std::condition_variable changed;
  int listener = -2;        // -2: not yet; -1: failed (`why`)
  bool supervised = false;  // the supervisor runs: `fn` may start
  bool abandoned = false;   // no supervisor could be started: skip `fn`
  std::string why;
  int cpu = -1;             // policy.one_cpu: the CPU the thread and its supervisor share
  cpu_set_t allowed{};      // the CPUs it could use before
  long tid = 0;             // the sealed thread's
  std::string cwd, root;    // its working folder (and the deleted chain's root)

  // On the thread to seal: its CPU, folder, Landlock domain and filter;
  // then waits until the supervisor runs (from here on every path call of
  // this thread waits for it).
  // Returns false where the seal was abandoned (`fn` must not run).
  bool seal_this_thread(const SealPolicy& policy, const WorkingFolder& folder) {
    std::string failed;
    tid = raw_syscall(SYS_gettid);
    if (policy.one_cpu && ::sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
      cpu = ::sched_getcpu();
      if (cpu >= 0 && !run_on_cpu(cpu)) cpu = -1;
    }
    cwd = folder.enter(&root);
    if (cwd.empty())
      failed = "unshare(CLONE_FS) refused: the compile could read the working folder";
    if (failed.empty()) failed = restrict_with_landlock(policy);
    int fd = -1;
    if (failed.empty()) fd = install_supervision(&failed);
    std::unique_lock<std::mutex> lock(m);
    listener = fd;
    why = failed;
    changed.notify_all();
    if (fd >= 0) changed.wait(lock, [&] { return supervised || abandoned; });
    return !abandoned;
  }

  // On the supervising thread: the listener, once the sealed thread has one.
  int wait_for_listener() {
    std::unique_lock<std::mutex> lock(m);
    changed.wait(lock, [&] { return listener != -2; });
    return listener;
  }

  void let_it_run() {
    {
      std::lock_guard<std::mutex> lock(m);
      supervised = true;
    }
    changed.notify_all();
  }

  void abandon() {
    {
      std::lock_guard<std::mutex> lock(m);
      abandoned = true;
    }
    changed.notify_all();
  }
};

}  // namespace

void set_snapshot_settle_margin_for_testing(int64_t ns) { set_writeback_window_for_testing(ns); }

SealResult run_sealed(const SealPolicy& policy, const std::function<void()>& fn) {
  // Everything the supervisor will use is made before the sealed thread can
  // run `fn` (the invariant above).
  RecordArena arena;
  WorkingFolder folder(policy);
  const LoaderCode loader = policy.serve ? find_loader_code() : LoaderCode{};
  std::string why;
  if (!arena.ok()) why = "cannot reserve memory for the seal's record (mmap failed)";
  if (!arena.ok() || !seal_available(&why)) {
    run_unsealed(folder, fn);
    SealResult result;
    result.why = why;
    return result;
  }

  Goodbye goodbye{};
  if (::getrandom(goodbye.token, sizeof goodbye.token, 0) != sizeof goodbye.token) {
    throw IoError(std::string("cannot make the seal's token (getrandom): ") + std::strerror(errno));
  }
  // Serving, the files whose bytes this process knows (SnapshotCache).
  struct Known {
    SnapshotCache* cache;
    ~Known() {
      if (cache) cache->release();
    }
    SnapshotCache* get() const { return cache; }
  } known{policy.serve ? SnapshotCache::acquire() : nullptr};
  SealedStart start;
  std::exception_ptr error;
  std::thread sealed([&] {
    // No signal of the program's on this thread: none interrupts a call of
    // `fn` (a stopped path call is interruptible, the call itself is not)
    // or its goodbye.
    block_signals();
    if (!start.seal_this_thread(policy, folder)) return;
    // Sealed, the thread's last call is its goodbye (the supervisor then
    // waits for the filter to go), whichever way it leaves `fn`.
    struct SayGoodbye {
      const Goodbye* to;
      ~SayGoodbye() {
        if (!to) return;
        while (raw_syscall(SYS_openat, kGoodbyeFd, reinterpret_cast<long>(to->token), O_RDONLY) ==
               -EINTR) {
        }
      }
    } say{start.listener >= 0 ? &goodbye : nullptr};
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  });
  const int fd = start.wait_for_listener();
  SealResult out;
  if (fd >= 0) {
    std::optional<CpuKeeper> keeper;
    std::optional<Supervisor> supervisor;
    std::atomic<bool> joined{false};
    std::thread watch;
    try {  // (the sealed thread waits, in no path call, holding nothing)
      keeper.emplace(start.cpu, start.allowed, start.tid);
      supervisor.emplace(fd, goodbye, &arena, policy, folder.served_fd.get(), folder.served_name,
                         loader, &*keeper, &joined, known.get());
      watch = std::thread([&] {
        block_signals();  // no program's handler runs here while a sealed thread is stopped
        supervisor->run();
      });
    } catch (...) {
      ::close(fd);  // its path calls now fail at once (ENOSYS): it skips `fn` and ends
      start.abandon();
      sealed.join();
      throw;
    }
    start.let_it_run();
    sealed.join();
    joined = true;
    watch.join();
    ::close(fd);
    if (supervisor->outlived()) {
      out.why = "a thread or process the sealed code started outlived it (what it names next "
                "goes unrecorded)";
    } else if (arena.overflowed()) {
      out.why = "NVRTC named more paths than the seal records (" +
                std::to_string(RecordArena::kBytes >> 20) + " MiB of names)";
    } else {
      out.probes = probes_of(arena, start.cwd, start.root, &out);
      out.cpu_moves = keeper->moves();
      served_of(arena, &out);
      check_known_files(&out);
      out.sealed = true;
    }
  } else {
    sealed.join();
    out.why = start.why;
    mark_refused(start.why);
  }
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace kcache::compiler
