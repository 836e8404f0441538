// Serving (SealPolicy::serve): every file NVRTC opens to read outside its own
// folders is opened by the supervisor and installed as the call's result, as
// a sealed, hashed memfd copy (a snapshot no one can change), or as the file
// itself where this process copied it before and its stat still stands for
// those bytes (SnapshotCache), checked again after the compile
// (check_known_files). Private to compiler/seal; the code here that runs on
// the supervisor's thread follows its rule (supervisor.h).
#pragma once

#include <fcntl.h>
#include <linux/seccomp.h>
#include <sys/stat.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "common/hash.h"
#include "compiler/seal/record.h"
#include "compiler/seal/seal.h"

namespace kcache::compiler::seal {

inline uint64_t ns_of(const struct timespec& t) {
  return static_cast<uint64_t>(t.tv_sec) * 1000000000 + static_cast<uint64_t>(t.tv_nsec);
}

// Whether `st` is the stat `s` (a Snapshot, a ServedFile) was taken with:
// device, inode, size, mtime and ctime.
template <typename Stamped>
bool has_stat(const Stamped& s, const struct stat& st) {
  return s.dev == static_cast<uint64_t>(st.st_dev) && s.ino == static_cast<uint64_t>(st.st_ino) &&
         s.size == static_cast<uint64_t>(st.st_size) && s.mtime_ns == ns_of(st.st_mtim) &&
         s.ctime_ns == ns_of(st.st_ctim);
}

// Snapshots this process has taken before (serving). A file whose stat
// (device, inode, size, mtime, ctime) is as it was when its snapshot was
// hashed, and whose stamp stood for its bytes then (common/stamp_trust.h:
// older than the writeback window), still has those bytes. So the supervisor
// installs such a file itself, not a copy: the ~500 toolkit headers a CUB
// compile reads again at every compile cost no memfd, copy or hash. A write
// while NVRTC reads it is found after the compile (check_known_files: its
// stat or its bytes changed), and the file is given as changed, which is
// never keyed. Only files on a local file system are kept: a network or FUSE
// file system may answer stat from a cache of its own, or take ctime from
// another machine's clock. Filled and read by one supervisor at a time
// (acquire); another goes without. Follows the supervisor's invariant:
// reserved before use, no allocation inside.
class SnapshotCache {
 public:
  // The process's cache, if no other supervisor holds it and
  // KCACHE_SNAPSHOT_REUSE is not "off"; null otherwise. Give it back with
  // release().
  static SnapshotCache* acquire();
  void release() { busy_.store(false, std::memory_order_release); }

  // The snapshot of `path` taken when the file had the stat `st`, if any.
  const Snapshot* find(const char* path, size_t len, const struct stat& st) const;

  // Keeps `snap`, taken of `path` at `now_ns`, if the file had settled.
  void remember(const char* path, size_t len, const Snapshot& snap, int64_t now_ns);

 private:
  static constexpr size_t kSlots = 16384;  // a power of two; CuTe reads ~700 files
  static constexpr size_t kPathBytes = size_t{4} << 20;
  struct Entry {
    uint64_t hash;
    uint32_t offset, length;
    bool used;
    Snapshot snap;
  };

  SnapshotCache();
  bool ok() const { return entries_ != nullptr; }
  static uint64_t hash_of(const char* path, size_t len);
  Entry* slot(const char* path, size_t len) const;

  Entry* entries_ = nullptr;
  char* paths_ = nullptr;
  size_t used_slots_ = 0, path_used_ = 0;
  std::atomic<bool> busy_{false};
};

// Files served from the file itself (ServedFile::known) must still have the
// stat and the bytes they were known by, or what NVRTC read may not be those
// bytes: a write through a shared mapping changes no stamp. (Only a change
// made and undone while NVRTC read, both through a mapping, goes unseen.) A
// changed one's ctime is given as UINT64_MAX (changed while read, as a copy
// that grew). Reading them again costs a CUB compile ~1 ms; copying them
// cost ~30. After the sealed thread was joined.
void check_known_files(SealResult* out);

// Answers the sealed thread's opens for reading of paths outside the
// policy's folders with a snapshot (serving), on the supervisor's thread.
// Follows the supervisor's rule: everything it uses is made by its
// constructor.
class SnapshotServer {
 public:
  static constexpr long kContinue = 1;  // let the call run (Landlock judges it)
  static constexpr long kAnswered = 2;  // the call has its result (ADDFD_FLAG_SEND)

  // `cwd_fd`: the sealed thread's working directory, open, named `cwd`;
  // `known`: the files whose bytes are known (null: none).
  SnapshotServer(int listener, RecordArena* arena, const SealPolicy& policy, int cwd_fd,
                 const std::string& cwd, SnapshotCache* known);

  // The answer to `req`: -errno, kContinue or kAnswered. `path` has room for
  // kMaxPath + 1 bytes; `read_len`: the path's length if the caller already
  // read it into `path`.
  long serve(const seccomp_notif& req, char* path, size_t read_len);

  // Whether the path call `d` (its path in `path`, `len` bytes; `at`: its
  // first argument is a folder descriptor) names something beneath
  // SealPolicy::hidden_folders: recorded (kHiddenRecord), to be answered
  // ENOENT.
  bool hides(const seccomp_data& d, bool at, const char* path, size_t len);

 private:
  // An open call's folder descriptor, path address and flags.
  struct OpenCall {
    int dir = AT_FDCWD;
    uint64_t path_at = 0, flags = 0;
  };
  bool open_call(const seccomp_data& d, OpenCall* call) const;
  bool base_of(int dir, const char* path, size_t* base_len);
  long open_as_named(int at, const char* path, size_t abs_len);
  long snapshot(const seccomp_notif& req, int src, uint64_t flags, size_t abs_len);
  long fill_and_send(const seccomp_notif& req, int src, int mem, const struct stat& st,
                     uint64_t flags, size_t abs_len, int64_t stat_ns /* -1: not kept */);
  long send(const seccomp_notif& req, int fd_to_send, uint64_t flags, size_t abs_len,
            const Snapshot& snap, int32_t record);
  long install(const seccomp_notif& req, int fd_to_send, uint64_t flags, size_t abs_len);
  bool own(const char* path, size_t len) const;
  bool leads_to_own(const char* absolute);
  static bool pseudo(const char* path, size_t len);

  int listener_;
  RecordArena* arena_;
  const SealPolicy& policy_;
  int cwd_fd_;
  const std::string& cwd_;
  SnapshotCache* known_;  // files whose bytes are known (null: none)
  long pid_ = 0;
  std::vector<char> base_, absolute_, resolved_, copy_;  // sized by the constructor
  Hasher128 hasher_;                                     // its state allocated by the constructor
};

}  // namespace kcache::compiler::seal
