#include "compiler/seal/seal.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_set>

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
  if (abi < 1) return "the kernel has no Landlock (needs Linux 5.13+ with landlock in lsm=)";
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
  long fd = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  if (fd < 0) {
    *why = std::string("seccomp user notification refused: ") + std::strerror(errno);
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
//    lazy binding) and otherwise only memcpy/memset/memchr, which lock nothing;
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

// Answers the sealed thread's path calls (each runs as asked: the Landlock
// domain is the boundary, this only records) until the filter is gone or
// `stop` is signalled. Follows the invariant above: everything it uses is
// made by its constructor.
class Supervisor {
 public:
  Supervisor(int listener, int stop, RecordArena* arena)
      : listener_(listener), stop_(stop), arena_(arena) {
    seccomp_notif_sizes sizes{};
    if (::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) == 0) {
      req_.resize(std::max<size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)));
      resp_.resize(std::max<size_t>(sizes.seccomp_notif_resp, sizeof(seccomp_notif_resp)));
    }
    path_.resize(kMaxPath + 1);
    base_.resize(kMaxPath + 1);
    pid_ = ::getpid();
  }

  // No allocation from here on (the invariant).
  void run() {
    if (req_.empty()) return;
    for (;;) {
      pollfd fds[2] = {{listener_, POLLIN, 0}, {stop_, POLLIN, 0}};
      long r = raw_syscall(SYS_poll, reinterpret_cast<long>(fds), 2, -1);
      if (r == -EINTR) continue;
      if (r < 0) return;
      if (fds[0].revents & POLLIN) {
        auto* req = reinterpret_cast<seccomp_notif*>(req_.data());
        std::memset(req_.data(), 0, req_.size());
        if (raw_syscall(SYS_ioctl, listener_, static_cast<long>(SECCOMP_IOCTL_NOTIF_RECV),
                        reinterpret_cast<long>(req)) == 0) {
          record(req->data);
          auto* resp = reinterpret_cast<seccomp_notif_resp*>(resp_.data());
          std::memset(resp_.data(), 0, resp_.size());
          resp->id = req->id;
          resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
          raw_syscall(SYS_ioctl, listener_, static_cast<long>(SECCOMP_IOCTL_NOTIF_SEND),
                      reinterpret_cast<long>(resp));
        }
        continue;
      }
      if (fds[0].revents & (POLLHUP | POLLERR | POLLNVAL)) return;
      if (fds[1].revents) return;
    }
  }

 private:
  void record(const seccomp_data& d) {
    for (const PathCall& c : kPathCalls) {
      if (c.nr != d.nr) continue;
      size_t path_len = read_path(pid_, d.args[c.path_arg], path_.data());
      if (path_len == 0) return;  // fstat(fd) and friends name no path
      size_t base_len = 0;
      if (c.at && path_[0] != '/' && static_cast<int>(d.args[0]) != AT_FDCWD) {
        base_len = folder_of_fd(static_cast<int>(d.args[0]), base_.data());
      }
      arena_->append(d.nr, base_.data(), static_cast<uint32_t>(base_len), path_.data(),
                     static_cast<uint32_t>(path_len));
      return;
    }
  }

  int listener_;
  int stop_;
  RecordArena* arena_;
  long pid_ = 0;
  std::vector<char> req_, resp_, path_, base_;  // sized before run()
};

// The arena's records as SealResult::probes: relative names resolved against
// the working directory (which chdir moves), those inside the deleted chain
// left out, each path once, in first-use order.
std::vector<std::string> probes_of(const RecordArena& arena, std::string cwd,
                                   const std::string& chain_root) {
  std::vector<std::string> probes;
  std::unordered_set<std::string> seen;
  arena.for_each([&](int32_t nr, std::string_view base, std::string_view path) {
    std::string p(path);
    std::string resolved =
        p.front() == '/' ? p : resolve_lexically(base.empty() ? cwd : std::string(base), p);
    if (nr == SYS_chdir) cwd = resolved;
    bool in_chain = resolved == chain_root ||
                    resolved.compare(0, chain_root.size() + 1, chain_root + "/") == 0;
    if (!in_chain && seen.insert(resolved).second) probes.push_back(resolved);
  });
  return probes;
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
          a.reason = "the kernel has no Landlock (needs Linux 5.13+ with landlock in lsm=)";
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

SealResult run_sealed(const SealPolicy& policy, const std::function<void()>& fn) {
  SealResult result;
  std::exception_ptr error;
  std::string why;
  // Everything the supervisor will use is made before the sealed thread can
  // run `fn` (the invariant above).
  RecordArena arena;
  if (!arena.ok()) why = "cannot reserve memory for the seal's record (mmap failed)";
  if (!arena.ok() || !seal_available(&why)) {
    result.why = why;
    std::thread plain([&] {
      try {
        std::string root;
        seal_working_directory(&root);
        fn();
      } catch (...) {
        error = std::current_exception();
      }
    });
    plain.join();
    if (error) std::rethrow_exception(error);
    return result;
  }

  Fd stop(::eventfd(0, EFD_CLOEXEC));
  std::mutex m;
  std::condition_variable changed;
  int listener = -2;        // -2: not yet; -1: failed
  bool supervised = false;  // the supervisor runs: `fn` may start
  std::string cwd, root;
  std::thread sealed([&] {
    std::string failed;
    cwd = seal_working_directory(&root);
    if (cwd.empty()) failed = "unshare(CLONE_FS) refused: the compile could read the working folder";
    if (failed.empty()) failed = restrict_with_landlock(policy);
    int fd = -1;
    if (failed.empty()) fd = install_supervision(&failed);
    {
      std::unique_lock<std::mutex> lock(m);
      listener = fd;
      result.why = failed;
      changed.notify_all();
      // From here on every path call of this thread waits for the
      // supervisor: wait until it runs.
      if (fd >= 0) changed.wait(lock, [&] { return supervised; });
    }
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  });
  int fd;
  {
    std::unique_lock<std::mutex> lock(m);
    changed.wait(lock, [&] { return listener != -2; });
    fd = listener;
  }
  SealResult out;
  if (fd >= 0) {
    Supervisor supervisor(fd, stop.get(), &arena);
    std::thread watch([&] { supervisor.run(); });
    {
      std::lock_guard<std::mutex> lock(m);
      supervised = true;
    }
    changed.notify_all();
    sealed.join();
    uint64_t one = 1;
    if (::write(stop.get(), &one, sizeof one) < 0) {
      // The supervisor also ends when the filter goes away with the thread.
    }
    watch.join();
    ::close(fd);
    if (arena.overflowed()) {
      out.why = "NVRTC named more paths than the seal records (" +
                std::to_string(RecordArena::kBytes >> 20) + " MiB of names)";
    } else {
      out.probes = probes_of(arena, cwd, root);
      out.sealed = true;
    }
  } else {
    sealed.join();
    out.why = result.why;
    mark_refused(result.why);
  }
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace kcache::compiler
