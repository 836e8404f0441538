#include "compiler/toolkit.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "common/environment.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/hash.h"
#include "common/paths.h"
#include "compiler/toolkit_memo.h"

namespace kcache::compiler {
namespace {

// Enough to cover an ELF's headers, notes, dynamic symbols and version
// sections at the front, and the section header table at the back.
constexpr size_t kChunk = 64 * 1024;

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

uint64_t le(const std::string& b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

// The GNU build-id of a little-endian ELF64 file, from its program headers'
// PT_NOTE segments, if they lie within `head`.
std::string build_id(const std::string& head) {
  if (head.size() < 64 ||
      head.compare(0, 4,
                   "\x7f"
                   "ELF") != 0 ||
      head[4] != 2 || head[5] != 1) {
    return "";
  }
  uint64_t phoff = le(head, 0x20, 8);
  uint64_t phentsize = le(head, 0x36, 2);
  uint64_t phnum = le(head, 0x38, 2);
  if (phentsize < 56) return "";
  for (uint64_t i = 0; i < phnum; ++i) {
    uint64_t ph = phoff + i * phentsize;
    if (ph + 56 > head.size()) return "";
    if (le(head, ph, 4) != 4) continue;  // PT_NOTE
    uint64_t off = le(head, ph + 8, 8);
    uint64_t end = off + le(head, ph + 32, 8);
    if (end > head.size() || end < off) continue;
    while (off + 12 <= end) {
      uint64_t namesz = le(head, off, 4), descsz = le(head, off + 4, 4),
               type = le(head, off + 8, 4);
      uint64_t name = off + 12;
      uint64_t desc = name + ((namesz + 3) & ~uint64_t{3});
      uint64_t next = desc + ((descsz + 3) & ~uint64_t{3});
      if (next > end) break;
      if (type == 3 && namesz == 4 && head.compare(name, 4, std::string("GNU\0", 4)) == 0) {
        static const char* kHex = "0123456789abcdef";
        std::string hex;
        for (uint64_t j = 0; j < descsz; ++j) {
          unsigned char c = static_cast<unsigned char>(head[desc + j]);
          hex += kHex[c >> 4];
          hex += kHex[c & 15];
        }
        return hex;
      }
      off = next;
    }
  }
  return "";
}

// The value of `#define NAME <integer>` in the header open as `fd`, reading
// as little of it as it can (CUDA_VERSION sits in cuda.h's first 16 KiB;
// cuda.h is 1.1 MB).
std::optional<int> read_define_fd(int fd, const std::string& name) {
  std::string text;
  std::string needle = "#define " + name;
  std::optional<int> value;
  char buf[kChunk];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
      size_t p = at + needle.size();
      if (p >= text.size() || (text[p] != ' ' && text[p] != '\t')) continue;
      while (p < text.size() && (text[p] == ' ' || text[p] == '\t')) ++p;
      size_t digits = p;
      while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
      if (digits == p || digits == text.size()) break;  // need more text, or not a number
      value = std::atoi(text.substr(p, digits - p).c_str());
      break;
    }
    if (value) break;
  }
  return value;
}

// The same for the header at `path` (nullopt where it cannot be opened),
// through `memo`: "" stands for no such define.
std::optional<int> read_define(const std::string& path, const std::string& name,
                               ToolkitMemo& memo) {
  std::optional<std::string> v = memo.value("define " + name, path, [&](int fd) {
    std::optional<int> found = read_define_fd(fd, name);
    return found ? std::to_string(*found) : std::string();
  });
  if (!v || v->empty()) return std::nullopt;
  return std::atoi(v->c_str());
}

std::optional<std::string> first_existing(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) {
    if (exists(p)) return p;
  }
  return std::nullopt;
}

// The fingerprint of the library at `path`, open as `fd`. Throws IoError.
LibraryFingerprint fingerprint_fd(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) throw IoError(errno_message("cannot stat", path, errno));
  LibraryFingerprint f;
  f.path = path;
  f.name = path.substr(path.rfind('/') + 1);
  f.size = static_cast<uint64_t>(st.st_size);
  size_t head_size = static_cast<size_t>(std::min<uint64_t>(f.size, kChunk));
  size_t tail_size = static_cast<size_t>(std::min<uint64_t>(f.size - head_size, kChunk));
  std::string bytes(head_size + tail_size, '\0');
  ssize_t got = ::pread(fd, &bytes[0], head_size, 0);
  if (got == static_cast<ssize_t>(head_size) && tail_size > 0) {
    got = ::pread(fd, &bytes[head_size], tail_size, static_cast<off_t>(f.size - tail_size));
    if (got == static_cast<ssize_t>(tail_size)) got = static_cast<ssize_t>(head_size);
  }
  if (got != static_cast<ssize_t>(head_size)) {
    throw IoError(errno_message("cannot read", path, got < 0 ? errno : EIO));
  }
  f.build_id = build_id(bytes.substr(0, head_size));
  f.head_tail_xxh3 = hex64(xxh3_64(bytes));
  return f;
}

// The fingerprint through `memo`, remembered as "size build-id xxh3" lines.
LibraryFingerprint remembered_fingerprint(const std::string& path, ToolkitMemo& memo) {
  std::optional<std::string> v = memo.value("fingerprint", path, [&](int fd) {
    LibraryFingerprint f = fingerprint_fd(fd, path);
    return std::to_string(f.size) + "\n" + f.build_id + "\n" + f.head_tail_xxh3;
  });
  const size_t first = v ? v->find('\n') : std::string::npos;
  const size_t second = first == std::string::npos ? first : v->find('\n', first + 1);
  if (second == std::string::npos) return fingerprint_library(path);  // says why it cannot
  LibraryFingerprint f;
  f.path = path;
  f.name = path.substr(path.rfind('/') + 1);
  f.size = std::strtoull(v->c_str(), nullptr, 10);
  f.build_id = v->substr(first + 1, second - first - 1);
  f.head_tail_xxh3 = v->substr(second + 1);
  return f;
}

// A folder is a toolkit if it has include/cuda.h with a CUDA_VERSION and a
// libnvrtc; otherwise the reason it is not.
std::optional<Toolkit> try_toolkit(const std::string& root, std::string& why_not,
                                   ToolkitMemo& memo) {
  std::string cuda_h = root + "/include/cuda.h";
  if (!exists(root)) {
    why_not = "does not exist";
    return std::nullopt;
  }
  std::optional<int> version = read_define(cuda_h, "CUDA_VERSION", memo);
  if (!version) {
    why_not = exists(cuda_h) ? "no CUDA_VERSION in include/cuda.h" : "no include/cuda.h";
    return std::nullopt;
  }
  Toolkit t;
  t.root = root;
  t.cuda_version = *version;
  std::string major = std::to_string(t.cuda_version / 1000);
  std::string minor = std::to_string(t.cuda_version % 1000 / 10);
  std::vector<std::string> nvrtc_candidates, builtins_candidates;
  for (const char* lib : {"/lib64/", "/lib/"}) {
    nvrtc_candidates.push_back(root + lib + "libnvrtc.so." + major);
    nvrtc_candidates.push_back(root + lib + "libnvrtc.so");
  }
  std::optional<std::string> nvrtc = first_existing(nvrtc_candidates);
  if (!nvrtc) {
    why_not = "has include/cuda.h but no libnvrtc.so." + major + " in lib64/ or lib/";
    return std::nullopt;
  }
  // NVRTC loads its builtins from its own folder.
  const std::string lib_dir = parent_folder(*nvrtc) + "/";
  std::optional<std::string> builtins = first_existing(
      {lib_dir + "libnvrtc-builtins.so." + major + "." + minor, lib_dir + "libnvrtc-builtins.so"});
  if (!builtins) {
    why_not = "no libnvrtc-builtins.so." + major + "." + minor + " next to " + *nvrtc;
    return std::nullopt;
  }
  t.nvrtc = remembered_fingerprint(*nvrtc, memo);
  t.nvrtc_builtins = remembered_fingerprint(*builtins, memo);
  // nvJitLink assembles lean images (lean_image.h); a toolkit without it still
  // compiles, with NVRTC's own images.
  if (std::optional<std::string> nvjitlink =
          first_existing({lib_dir + "libnvJitLink.so." + major, lib_dir + "libnvJitLink.so"})) {
    t.nvjitlink = remembered_fingerprint(*nvjitlink, memo);
  }
  t.include_dirs.push_back(root + "/include");
  if (exists(root + "/include/cccl")) t.include_dirs.push_back(root + "/include/cccl");
  for (const std::string& dir : t.include_dirs) {
    if (std::optional<int> cccl =
            read_define(dir + "/cuda/std/__cccl/version.h", "CCCL_VERSION", memo)) {
      t.cccl_version = *cccl;
      break;
    }
  }
  return t;
}

}  // namespace

std::string LibraryFingerprint::describe() const {
  std::string s = name + " size=" + std::to_string(size);
  if (!build_id.empty()) s += " build-id=" + build_id;
  return s + " xxh3=" + head_tail_xxh3;
}

std::string Toolkit::version_string() const {
  return std::to_string(cuda_version / 1000) + "." + std::to_string(cuda_version % 1000 / 10);
}

std::string Toolkit::identity() const {
  std::string s = "cuda " + version_string();
  if (cccl_version) {
    s += " cccl " + std::to_string(cccl_version / 1000000) + "." +
         std::to_string(cccl_version / 1000 % 1000) + "." + std::to_string(cccl_version % 1000);
  }
  return s + "; " + nvrtc.describe() + "; " + nvrtc_builtins.describe();
}

LibraryFingerprint fingerprint_library(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(errno_message("cannot open", path, errno));
  try {
    LibraryFingerprint f = fingerprint_fd(fd, path);
    ::close(fd);
    return f;
  } catch (...) {
    ::close(fd);
    throw;
  }
}

Toolkit find_toolkit(const std::string& cuda_path, const std::string& store_dir) {
  ToolkitMemo memo(toolkit_memo_path(store_dir));
  std::vector<std::pair<std::string, std::string>> candidates;  // origin, folder
  std::vector<std::string> looked;
  if (!cuda_path.empty()) {
    candidates.emplace_back("--cuda-path", cuda_path);
  } else {
    const char* from_env = env::value(env::Var::cuda_path);
    if (from_env) {
      candidates.emplace_back("$CUDA_PATH", from_env);
    } else {
      looked.push_back("$CUDA_PATH (not set)");
    }
    candidates.emplace_back("default", "/usr/local/cuda");
  }
  for (const auto& [origin, root] : candidates) {
    std::string why_not;
    std::string trimmed = root;
    while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
    if (std::optional<Toolkit> t = try_toolkit(trimmed, why_not, memo)) {
      memo.save();
      return *t;
    }
    looked.push_back(origin + " = " + root + " (" + why_not + ")");
  }
  std::string message = "no CUDA toolkit found; looked at:";
  for (const std::string& l : looked) message += "\n  " + l;
  message +=
      "\nInstall the CUDA toolkit, or pass --cuda-path (or set CUDA_PATH) to the folder "
      "holding include/cuda.h and lib64/libnvrtc.so.";
  throw NotFound(message);
}

}  // namespace kcache::compiler
