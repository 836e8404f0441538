// The seal's record: what the supervisor (supervisor.h) writes while the
// sealed thread runs, and what it means once that thread has been joined
// (SealResult's probes, names and served files). Private to compiler/seal.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/hash.h"
#include "compiler/seal/seal.h"

namespace kcache::compiler::seal {

// Records that are not path calls (nr is never negative for those).
constexpr int32_t kServedRecord = -1;   // base: a Snapshot; path: the absolute name
constexpr int32_t kRefusedRecord = -2;  // base: why (static text); path: the absolute name

// Records of files served from the file itself (SnapshotCache): the same
// layout as kServedRecord, checked again after the sealed thread ended.
constexpr int32_t kServedKnownRecord = -3;
// A name answered "no such file" by SealPolicy::hidden_folders: base empty,
// path the absolute name.
constexpr int32_t kHiddenRecord = -4;

// A served file's record (its `base` bytes): the hash of the bytes served and
// the file's stat when it was opened.
struct Snapshot {
  Hash128 content;
  uint64_t dev, ino, size, mtime_ns, ctime_ns;
};

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

  // An open refused (a kRefusedRecord): `why`, static text, of the absolute
  // name `path`. Supervisor side: no allocation.
  void append_refused(const char* why, const char* path, size_t path_len) {
    append(kRefusedRecord, why, static_cast<uint32_t>(std::strlen(why)), path,
           static_cast<uint32_t>(path_len));
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

// The arena's records as SealResult::probes: relative names resolved against
// the working directory `cwd` (which chdir moves), those inside the deleted
// chain `chain_root` left out, each path once, in first-use order. Serving
// (`chain_root` empty), fills `names`' relative_names and absolute_names.
std::vector<std::string> probes_of(const RecordArena& arena, std::string cwd,
                                   const std::string& chain_root, SealResult* names);

// The files the supervisor served and the first it refused (serving only).
void served_of(const RecordArena& arena, SealResult* out);

}  // namespace kcache::compiler::seal
