#include "compiler/seal.h"

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

// Reads a NUL-terminated path from this process's memory without trusting
// the pointer (a bad one is EFAULT here, as it is for the system call).
std::string read_path(uint64_t address) {
  std::string out;
  char buf[256];
  while (address && out.size() < PATH_MAX) {
    iovec local{buf, sizeof buf};
    iovec remote{reinterpret_cast<void*>(address), sizeof buf};
    ssize_t got = ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0);
    if (got <= 0) {
      // Maybe the string ends just before an unmapped page: go byte by byte.
      remote.iov_len = local.iov_len = 1;
      if (::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) != 1) break;
      got = 1;
    }
    const void* nul = std::memchr(buf, '\0', static_cast<size_t>(got));
    if (nul) {
      out.append(buf, static_cast<const char*>(nul) - buf);
      return out;
    }
    out.append(buf, static_cast<size_t>(got));
    address += static_cast<uint64_t>(got);
  }
  return out;
}

std::string folder_of_fd(int fd) {
  char link[PATH_MAX];
  std::string proc = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(proc.c_str(), link, sizeof link - 1);
  return n > 0 ? std::string(link, static_cast<size_t>(n)) : std::string();
}

// Answers the sealed thread's path calls (each runs as asked: the Landlock
// domain is the boundary, this only records) until the filter is gone or
// `stop` is signalled.
class Supervisor {
 public:
  Supervisor(int listener, int stop, std::string cwd, std::string chain_root)
      : listener_(listener), stop_(stop), cwd_(std::move(cwd)), chain_root_(std::move(chain_root)) {}

  void run() {
    seccomp_notif_sizes sizes{};
    if (::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) return;
    std::vector<char> req_buf(std::max<size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)));
    std::vector<char> resp_buf(
        std::max<size_t>(sizes.seccomp_notif_resp, sizeof(seccomp_notif_resp)));
    for (;;) {
      pollfd fds[2] = {{listener_, POLLIN, 0}, {stop_, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents & POLLIN) {
        auto* req = reinterpret_cast<seccomp_notif*>(req_buf.data());
        std::memset(req_buf.data(), 0, req_buf.size());
        if (::ioctl(listener_, SECCOMP_IOCTL_NOTIF_RECV, req) == 0) {
          record(req->data);
          auto* resp = reinterpret_cast<seccomp_notif_resp*>(resp_buf.data());
          std::memset(resp_buf.data(), 0, resp_buf.size());
          resp->id = req->id;
          resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
          ::ioctl(listener_, SECCOMP_IOCTL_NOTIF_SEND, resp);
        }
        continue;
      }
      if (fds[0].revents & (POLLHUP | POLLERR | POLLNVAL)) return;
      if (fds[1].revents) return;
    }
  }

  std::vector<std::string> take() { return std::move(probes_); }

 private:
  void record(const seccomp_data& d) {
    for (const PathCall& c : kPathCalls) {
      if (c.nr != d.nr) continue;
      std::string path = read_path(d.args[c.path_arg]);
      if (path.empty()) return;  // fstat(fd) and friends name no path
      std::string base = cwd_;
      if (c.at && path.front() != '/' && static_cast<int>(d.args[0]) != AT_FDCWD) {
        base = folder_of_fd(static_cast<int>(d.args[0]));
      }
      std::string resolved = path.front() == '/' ? path : resolve_lexically(base, path);
      if (d.nr == SYS_chdir) cwd_ = resolved;
      bool in_chain = resolved == chain_root_ ||
                      resolved.compare(0, chain_root_.size() + 1, chain_root_ + "/") == 0;
      if (!in_chain && seen_.insert(resolved).second) probes_.push_back(resolved);
      return;
    }
  }

  int listener_;
  int stop_;
  std::string cwd_;
  std::string chain_root_;
  std::unordered_set<std::string> seen_;
  std::vector<std::string> probes_;
};

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
  if (!seal_available(&why)) {
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
  std::condition_variable ready;
  int listener = -2;  // -2: not yet; -1: failed
  std::string cwd, root;
  std::thread sealed([&] {
    std::string failed;
    cwd = seal_working_directory(&root);
    if (cwd.empty()) failed = "unshare(CLONE_FS) refused: the compile could read the working folder";
    if (failed.empty()) failed = restrict_with_landlock(policy);
    int fd = -1;
    if (failed.empty()) fd = install_supervision(&failed);
    {
      std::lock_guard<std::mutex> lock(m);
      listener = fd;
      result.why = failed;
    }
    ready.notify_all();
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  });
  int fd;
  {
    std::unique_lock<std::mutex> lock(m);
    ready.wait(lock, [&] { return listener != -2; });
    fd = listener;
  }
  SealResult out;
  if (fd >= 0) {
    Supervisor supervisor(fd, stop.get(), cwd, root);
    std::thread watch([&] { supervisor.run(); });
    sealed.join();
    uint64_t one = 1;
    if (::write(stop.get(), &one, sizeof one) < 0) {
      // The supervisor also ends when the filter goes away with the thread.
    }
    watch.join();
    ::close(fd);
    out.probes = supervisor.take();
    out.sealed = true;
  } else {
    sealed.join();
    out.why = result.why;
    mark_refused(result.why);
  }
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace kcache::compiler
