// Setting up the seal on the calling thread: the Landlock domain that bounds
// what it may open, and the seccomp filter that reports its path calls to a
// supervisor (supervisor.h); and whether this kernel lets a process do
// either, and if not, why. Private to compiler/seal.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "compiler/seal/seal.h"

namespace kcache::compiler::seal {

// An open descriptor, closed with this object.
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

// The system calls that name a path, and which argument holds it. The
// supervisor sees each before it runs.
struct PathCall {
  int nr;
  int path_arg;
  bool at;  // args[0] is a folder descriptor the path is relative to
};
inline constexpr PathCall kPathCalls[] = {
    {SYS_open, 0, false},
    {SYS_creat, 0, false},
    {SYS_stat, 0, false},
    {SYS_lstat, 0, false},
    {SYS_access, 0, false},
    {SYS_readlink, 0, false},
    {SYS_chdir, 0, false},
    {SYS_mkdir, 0, false},
    {SYS_truncate, 0, false},
    {SYS_execve, 0, false},
    {SYS_openat, 1, true},
    {SYS_newfstatat, 1, true},
    {SYS_faccessat, 1, true},
    {SYS_readlinkat, 1, true},
    {SYS_mkdirat, 1, true},
    {SYS_statx, 1, true},
    {SYS_execveat, 1, true},
    {437 /* openat2 */, 1, true},
    {439 /* faccessat2 */, 1, true},
};

// This kernel's Landlock ABI version, 0 where it has none.
int landlock_abi();

// Why Landlock cannot be used here: after landlock_abi() gave 0.
std::string no_landlock_reason();

// Restricts the calling thread to `policy`. Returns an empty string, or why not.
std::string restrict_with_landlock(const SealPolicy& policy);

// Installs the filter on the calling thread; returns the listener, or -1
// with `why` set.
int install_supervision(std::string* why);

// A boundary the kernel refused in run_sealed(): seal_available() says so
// from now on, and it is not tried again in this process.
void mark_refused(const std::string& why);

}  // namespace kcache::compiler::seal
