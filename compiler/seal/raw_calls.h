// The calls code under the supervisor's rule (supervisor.h) may make: the
// kernel directly, and path handling that allocates nothing. Private to
// compiler/seal.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kcache::compiler::seal {

// A system call without libc: no wrapper, no errno (a failure is -errno), no
// lazy binding.
inline long raw_syscall(long nr, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0,
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

constexpr size_t kMaxPath = PATH_MAX;

// `path` (absolute, or relative to the absolute `base`) with "." parts and
// repeated slashes dropped and ".." folded lexically (kept, `keep_parents`),
// into `out` (at most `cap` bytes); its length, 0 if it does not fit.
size_t join_lexically(const char* base, size_t base_len, const char* path, size_t path_len,
                      char* out, size_t cap, bool keep_parents = false);

// Whether `path` is `folder` or lies beneath it (a trailing slash of
// `folder` aside). Allocates nothing.
bool lies_in(std::string_view path, std::string_view folder);

// Reads a NUL-terminated path from this process's memory (`pid`) into `out` (at
// most kMaxPath bytes) without trusting the pointer (a bad one is EFAULT
// here, as it is for the system call). Returns its length.
size_t read_path(long pid, uint64_t address, char* out);

// The folder descriptor `fd` names, by /proc/self/fd/N, into `out` (at least
// kMaxPath bytes); its length, 0 if unknown.
size_t folder_of_fd(int fd, char* out);

}  // namespace kcache::compiler::seal
