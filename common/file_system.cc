#include "common/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/paths.h"

namespace kcache {
namespace {

// Closes a descriptor on every path out of a function.
class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// A name no other process or thread will pick: pid, a counter and the time.
std::string temp_name_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++) + "." +
         std::to_string(ts.tv_nsec);
}

class RealFileSystem : public FileSystem {
 public:
  std::optional<std::string> read_file(const std::string& path) override {
    // O_NONBLOCK: opening a FIFO (planted in a store, say) must not wait for
    // a writer that never comes; reads block again below, as for any file.
    FdGuard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (fd.get() < 0) {
      if (errno == ENOENT) return std::nullopt;
      throw IoError(errno_message("cannot open", path, errno));
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) throw IoError(errno_message("cannot stat", path, errno));
    if (S_ISDIR(st.st_mode)) throw IoError("cannot read " + path + ": it is a directory");
    if (!S_ISREG(st.st_mode)) {
      // A FIFO with no writer reads as empty; one with a writer as it writes.
      ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
    }
    // Size from fstat, then read until EOF: the file may still grow or shrink.
    // A small probe detects growth, so the common case never reallocates.
    std::string out(static_cast<size_t>(st.st_size), '\0');
    size_t filled = 0;
    for (;;) {
      char probe[512];
      char* dest = filled < out.size() ? &out[filled] : probe;
      size_t room = filled < out.size() ? out.size() - filled : sizeof probe;
      ssize_t n = ::read(fd.get(), dest, room);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw IoError(errno_message("cannot read", path, errno));
      }
      if (n == 0) break;
      if (dest == probe) {
        out.append(probe, static_cast<size_t>(n));
        filled = out.size();
      } else {
        filled += static_cast<size_t>(n);
      }
    }
    out.resize(filled);
    return out;
  }

  void write_file_atomically(const std::string& path, std::string_view data, mode_t mode) override {
    std::string temp = temp_name_for(path);
    FdGuard fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
    if (fd.get() < 0) throw IoError(errno_message("cannot create", temp, errno));
    size_t written = 0;
    while (written < data.size()) {
      ssize_t n = ::write(fd.get(), data.data() + written, data.size() - written);
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::unlink(temp.c_str());
        throw IoError(errno_message("cannot write", path, err));
      }
      written += static_cast<size_t>(n);
    }
    if (::close(fd.release()) != 0) {
      int err = errno;
      ::unlink(temp.c_str());
      throw IoError(errno_message("cannot write", path, err));
    }
    if (::rename(temp.c_str(), path.c_str()) != 0) {
      int err = errno;
      ::unlink(temp.c_str());
      throw IoError(errno_message("cannot rename into", path, err));
    }
  }

  bool remove_file(const std::string& path) override {
    if (::unlink(path.c_str()) == 0) return true;
    if (errno == ENOENT) return false;
    throw IoError(errno_message("cannot remove", path, errno));
  }

  void create_directories(const std::string& path, mode_t mode) override {
    if (path.empty()) return;
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        throw IoError("cannot create folder " + path + ": a file is in the way");
      return;
    }
    std::string parent = parent_folder(path);
    if (parent != path) create_directories(parent, mode);
    if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
      throw IoError(errno_message("cannot create folder", path, errno));
    }
  }

  std::optional<FileInfo> stat(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
      throw IoError(errno_message("cannot stat", path, errno));
    }
    FileInfo info;
    info.size = static_cast<uint64_t>(st.st_size);
    info.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    info.is_directory = S_ISDIR(st.st_mode);
    return info;
  }

  std::vector<std::string> list_directory(const std::string& dir) override {
    std::vector<std::string> names;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) return names;
      throw IoError(errno_message("cannot list", dir, errno));
    }
    while (struct dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      names.emplace_back(e->d_name);
    }
    ::closedir(d);
    return names;
  }
};

}  // namespace

std::string describe_file_type(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "";
    case S_IFIFO:
      return "a FIFO (named pipe)";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFSOCK:
      return "a socket";
    case S_IFDIR:
      return "a folder";
    default:
      return "not a regular file";
  }
}

std::optional<std::string> read_input_file(const std::string& path) {
  auto not_regular = [&](unsigned mode) {
    return IoError("cannot read " + path + ": it is " + describe_file_type(mode) +
                   ", not a regular file (kcache reads sources and headers only from regular "
                   "files)");
  };
  auto too_large = [&] {
    return IoError("cannot read " + path + ": it is larger than " +
                   std::to_string(kMaxInputFileBytes >> 20) +
                   " MiB, the most kcache reads as one source or header (kMaxInputFileBytes)");
  };
  // Judged before opening: opening a device can itself act (a tape, a
  // watchdog), and opening a FIFO for reading waits for a writer.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;
    throw IoError(errno_message("cannot stat", path, errno));
  }
  if (!S_ISREG(st.st_mode)) throw not_regular(st.st_mode);
  if (static_cast<uint64_t>(st.st_size) > kMaxInputFileBytes) throw too_large();
  // O_NONBLOCK: should the name be swapped for a FIFO since, the open does
  // not wait for a writer; fstat on the descriptor then refuses it.
  FdGuard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw IoError(errno_message("cannot open", path, errno));
  }
  if (::fstat(fd.get(), &st) != 0) throw IoError(errno_message("cannot stat", path, errno));
  if (!S_ISREG(st.st_mode)) throw not_regular(st.st_mode);
  if (static_cast<uint64_t>(st.st_size) > kMaxInputFileBytes) throw too_large();
  // Read until EOF, the file may still grow, but never past the bound.
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t filled = 0;
  for (;;) {
    if (filled == out.size()) {
      if (out.size() > kMaxInputFileBytes) throw too_large();
      out.resize(std::min<uint64_t>(kMaxInputFileBytes + 1, out.size() + 4096));
    }
    ssize_t n = ::read(fd.get(), &out[filled], out.size() - filled);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(errno_message("cannot read", path, errno));
    }
    if (n == 0) break;
    filled += static_cast<size_t>(n);
  }
  if (filled > kMaxInputFileBytes) throw too_large();
  out.resize(filled);
  return out;
}

FileSystem& FileSystem::real() {
  static RealFileSystem instance;
  return instance;
}

std::string errno_message(const std::string& what, const std::string& path, int err) {
  return what + " " + path + ": " + std::strerror(err);
}

}  // namespace kcache
