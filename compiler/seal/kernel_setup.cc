#include "common/environment.h"
#include "compiler/seal/kernel_setup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace kcache::compiler::seal {
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

// A system call of the seal's refused with `err`, in words: a kernel without
// it answers ENOSYS (or EOPNOTSUPP: Landlock built but off), while EPERM or
// EACCES come from a seccomp filter this process inherited from the program
// that started it (its own sandbox), which no kcache setting can lift.
std::string refused_by(const char* call, int err, const std::string& otherwise) {
  if (err != EPERM && err != EACCES) return otherwise;
  return std::string(
             "a seccomp filter of the program that started kcache (inherited by its "
             "compile process) refused ") +
         call + " (" + (err == EPERM ? "EPERM" : "EACCES") + ")";
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

}  // namespace

int landlock_abi() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kLandlockCreateRulesetVersion);
  return abi < 0 ? 0 : static_cast<int>(abi);
}

std::string no_landlock_reason() {
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kLandlockCreateRulesetVersion);
  return refused_by("landlock_create_ruleset", abi < 0 ? errno : 0,
                    "the kernel has no Landlock (needs Linux 5.13+ with landlock in lsm=)");
}

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

void mark_refused(const std::string& why) {
  Availability& a = availability();
  std::lock_guard<std::mutex> lock(a.m);
  a.probed = true;
  a.available = false;
  a.reason = why;
}

}  // namespace kcache::compiler::seal

namespace kcache::compiler {

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

bool seal_available(std::string* why) {
  seal::Availability& a = seal::availability();
  std::lock_guard<std::mutex> lock(a.m);
  if (!a.probed) {
    a.probed = true;
    const char* off = env::read(env::Var::kcache_seal);
    if (off && std::string(off) == "off") {
      a.reason = "turned off with KCACHE_SEAL=off";
    } else {
      std::thread probe([&a] {
        if (seal::landlock_abi() < 1) {
          a.reason = seal::no_landlock_reason();
          return;
        }
        int fd = seal::install_supervision(&a.reason);
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

}  // namespace kcache::compiler
