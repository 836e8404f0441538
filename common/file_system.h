// Every disk touch of kcache's stores goes through FileSystem, one small seam,
// so tests can inject a failing write, a full disk or a torn file without mocks
// everywhere (leveldb's Env). Production code uses FileSystem::real().
//
// Errors: each method throws IoError whose message names the path and the OS
// error (strerror), except where a "missing" result is documented as a value.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kcache {

struct FileInfo {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool is_directory = false;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // The whole file, or nullopt if it does not exist.
  virtual std::optional<std::string> read_file(const std::string& path) = 0;

  // Writes `data` to a temporary file in the same folder, then renames it over
  // `path`: a reader sees the old file or the whole new one, never a part, even
  // if the process is killed mid-write. No fsync: kill -9 cannot lose the page
  // cache, and readers verify checksums anyway.
  virtual void write_file_atomically(const std::string& path, std::string_view data,
                                     mode_t mode = 0644) = 0;

  // True if the file existed and was removed.
  virtual bool remove_file(const std::string& path) = 0;

  // mkdir -p with `mode` for every folder it creates.
  virtual void create_directories(const std::string& path, mode_t mode) = 0;

  virtual std::optional<FileInfo> stat(const std::string& path) = 0;

  // Names (not paths) in `dir`, without "." and "..". Empty if `dir` is missing.
  virtual std::vector<std::string> list_directory(const std::string& dir) = 0;

  static FileSystem& real();
};

// Convenience for code that has no reason to be tested against faults.
inline std::optional<std::string> read_file(const std::string& path) {
  return FileSystem::real().read_file(path);
}
inline void write_file_atomically(const std::string& path, std::string_view data,
                                  mode_t mode = 0644) {
  FileSystem::real().write_file_atomically(path, data, mode);
}

// The most bytes kcache reads from one compiler input a user names (a kernel
// source, a header, found by a scan, an ask or a manifest replay): every
// header is read into memory whole, hashed and handed to NVRTC, so without a
// bound a computed include of something endless (`/dev/zero`, a growing log)
// reads until std::bad_alloc (issue 27). The largest headers real kernels
// include are a few MiB (the toolkit's largest is under 2 MiB; CUTLASS's and
// CUB's, generated tables included, are smaller); 64 MiB leaves room for
// tables of constants included as headers while failing in well under a
// second.
constexpr uint64_t kMaxInputFileBytes = uint64_t{64} << 20;

// A compiler input a user named: nullopt if nothing is at `path`; the bytes
// if it is a regular file (a symbolic link to one is fine) of at most
// kMaxInputFileBytes. Anything else is an IoError naming the path and what
// it is (a FIFO, a device, a socket, a folder), or that it is too large. It
// is never opened blocking and never read past the bound: a FIFO cannot hang
// the read, a device cannot feed it forever, and a file swapped for a FIFO
// after a check is caught by fstat on the descriptor read.
std::optional<std::string> read_input_file(const std::string& path);

// What `mode` (st_mode) is, for messages: "a FIFO (named pipe)", "a character
// device", "a folder", ... ("" for a regular file).
std::string describe_file_type(unsigned mode);

// "what failed on path: strerror(errno)" for IoError messages.
std::string errno_message(const std::string& what, const std::string& path, int err);

}  // namespace kcache
