// Follows the supervisor's rule (supervisor.h): allocates nothing, calls the
// kernel directly.
#include "compiler/seal/raw_calls.h"

#include <sys/syscall.h>
#include <sys/uio.h>

#include <cstring>
#include <string_view>

#include "compiler/seal/seal.h"

namespace kcache::compiler::seal {

bool lies_in(std::string_view path, std::string_view folder) {
  size_t n = folder.size();
  while (n > 1 && folder[n - 1] == '/') --n;
  return path.size() >= n && path.compare(0, n, folder.substr(0, n)) == 0 &&
         (path.size() == n || path[n] == '/');
}

size_t join_lexically(const char* base, size_t base_len, const char* path, size_t path_len,
                      char* out, size_t cap, bool keep_parents) {
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

}  // namespace kcache::compiler::seal

namespace kcache::compiler {

bool has_parent_part(std::string_view path) {
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    if (path[i] == '.' && path[i + 1] == '.' && (i == 0 || path[i - 1] == '/') &&
        (i + 2 == path.size() || path[i + 2] == '/')) {
      return true;
    }
  }
  return false;
}

}  // namespace kcache::compiler

namespace kcache::compiler {

bool header_named(std::string_view path) {
  const std::string_view base = path.substr(path.rfind('/') + 1);
  for (std::string_view header : {".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl", ".inc", ".ipp"}) {
    if (base.size() >= header.size() &&
        base.compare(base.size() - header.size(), header.size(), header) == 0) {
      return true;
    }
  }
  return false;
}

bool hidden_name(std::string_view path, const std::vector<std::string>& folders) {
  if (path.empty() || path.front() != '/') return false;
  for (const std::string& f : folders) {
    // Not the root (CUDA_CACHE_PATH=/): no cache folder.
    if (f.find_first_not_of('/') != std::string::npos && seal::lies_in(path, f)) {
      return !header_named(path);
    }
  }
  return false;
}

}  // namespace kcache::compiler
