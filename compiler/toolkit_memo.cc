#include "compiler/toolkit_memo.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <string_view>

#include "common/bytes.h"
#include "common/error.h"
#include "common/hash.h"

namespace kcache::compiler {
namespace {

constexpr std::string_view kMagic{"KCTKMEMO", 8};
constexpr uint16_t kVersion = 1;
// A toolkit needs five items; a few toolkits share a store. Past these, the
// oldest go (a value is computed again, never wrong).
constexpr size_t kMaxItems = 32;
constexpr size_t kMaxFileBytes = 64 * 1024;
constexpr size_t kChecksumBytes = 8;

// The whole file, where it is a plain file of at most kMaxFileBytes: one
// open, its size from fstat (no buffer larger than the file is touched).
std::optional<std::string> read_small_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::optional<std::string> out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
      static_cast<uint64_t>(st.st_size) <= kMaxFileBytes) {
    std::string bytes(static_cast<size_t>(st.st_size), '\0');
    ssize_t n;
    do {
      n = ::pread(fd, &bytes[0], bytes.size(), 0);
    } while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(bytes.size())) out = std::move(bytes);
  }
  ::close(fd);
  return out;
}

void write_stamp(ByteWriter& w, const FileStamp& s) {
  for (uint64_t v : {s.dev, s.ino, s.size, s.mtime_ns, s.ctime_ns}) w.u64(v);
}

FileStamp read_stamp(ByteReader& r) {
  FileStamp s;
  for (uint64_t* v : {&s.dev, &s.ino, &s.size, &s.mtime_ns, &s.ctime_ns}) *v = r.u64("stamp");
  return s;
}

bool write_whole(int fd, const std::string& bytes) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string toolkit_memo_path(const std::string& store_dir) {
  return store_dir.empty() ? "" : store_dir + "/toolkit-stamps";
}

ToolkitMemo::ToolkitMemo(std::string file) : file_(std::move(file)) {
  if (!file_.empty()) load();
}

void ToolkitMemo::load() {
  std::optional<std::string> bytes = read_small_file(file_);
  if (!bytes || bytes->size() < kMagic.size() + 2 + 4 + kChecksumBytes) return;
  const std::string_view all(*bytes);
  const std::string_view covered = all.substr(0, all.size() - kChecksumBytes);
  try {
    ByteReader tail(all.substr(covered.size()), file_);
    if (tail.u64("checksum") != xxh3_64(covered)) return;
    ByteReader r(covered, file_);
    if (r.bytes(kMagic.size(), "magic") != kMagic || r.u16("version") != kVersion) return;
    const uint32_t count = r.u32("count");
    if (count > kMaxItems) return;
    std::vector<Item> items;
    for (uint32_t i = 0; i < count; ++i) {
      Item item;
      item.what = std::string(r.str("what"));
      item.path = std::string(r.str("path"));
      item.stamp = read_stamp(r);
      item.value = std::string(r.str("value"));
      items.push_back(std::move(item));
    }
    r.expect_end();
    items_ = std::move(items);
  } catch (const CorruptError&) {
    // Ignored: every value is computed again, and the file replaced.
  }
}

std::optional<std::string> ToolkitMemo::value(const std::string& what, const std::string& path,
                                              const std::function<std::string(int fd)>& compute) {
  auto same = [&](const Item& i) { return i.what == what && i.path == path; };
  auto it = std::find_if(items_.begin(), items_.end(), same);
  struct stat st;
  if (it != items_.end() && ::stat(path.c_str(), &st) == 0 && FileStamp::of(st) == it->stamp) {
    return it->value;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  // The time before the stamp is taken, and the stamp before the bytes are
  // read, from the descriptor they are read from: the rule's order.
  const int64_t read_ns = realtime_now_ns();
  const bool stamped = ::fstat(fd, &st) == 0;
  std::string computed;
  try {
    computed = compute(fd);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  if (it != items_.end()) {
    items_.erase(it);
    changed_ = true;
  }
  const FileStamp stamp = FileStamp::of(st);
  if (!file_.empty() && stamped && stamp_stands_for_bytes(stamp, path, read_ns)) {
    items_.insert(items_.begin(), Item{what, path, stamp, computed});
    if (items_.size() > kMaxItems) items_.resize(kMaxItems);
    changed_ = true;
  }
  return computed;
}

std::string ToolkitMemo::encode() const {
  ByteWriter w;
  w.bytes(kMagic);
  w.u16(kVersion);
  w.u32(static_cast<uint32_t>(items_.size()));
  for (const Item& i : items_) {
    w.str(i.what);
    w.str(i.path);
    write_stamp(w, i.stamp);
    w.str(i.value);
  }
  const uint64_t checksum = xxh3_64(w.data());
  w.u64(checksum);
  return w.take();
}

namespace {

// Temporary files of writers killed between open and rename, an hour old
// (a live writer's is seconds old). Saving is rare (a changed toolkit), so
// the store's folder is listed only then.
void remove_abandoned_temps(const std::string& file) {
  const size_t slash = file.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : file.substr(0, slash);
  const std::string prefix = file.substr(slash + 1) + ".tmp.";
  DIR* dir = ::opendir(folder.c_str());
  if (!dir) return;
  const time_t cutoff = ::time(nullptr) - 3600;
  while (const dirent* e = ::readdir(dir)) {
    struct stat st;
    if (std::string_view(e->d_name).rfind(prefix, 0) != 0) continue;
    if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
        st.st_mtime < cutoff) {
      ::unlinkat(::dirfd(dir), e->d_name, 0);
    }
  }
  ::closedir(dir);
}

}  // namespace

void ToolkitMemo::save() const {
  if (file_.empty() || !changed_) return;
  remove_abandoned_temps(file_);
  const std::string bytes = encode();
  if (bytes.size() > kMaxFileBytes) return;
  const std::string temp = file_ + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return;
  const bool ok = write_whole(fd, bytes);
  // No fsync: after a crash a torn file fails its checksum and is rebuilt.
  if (::close(fd) != 0 || !ok || ::rename(temp.c_str(), file_.c_str()) != 0) {
    ::unlink(temp.c_str());
  }
}

}  // namespace kcache::compiler
