// Keeping the store's index usable. The blob files are the truth and the
// index is derived from them (each blob carries its key and checksum,
// cache/format/entry.h), so an index that is missing, empty, a folder, or that
// SQLite reports as damaged (at open or in any query) is moved aside and
// rebuilt from the blobs, under index.lock so that two processes never
// rebuild at once. A new index carries the "filling" mark until every blob
// is in it, so one left half made by a killed process is finished before it
// is trusted. A process notices an index deleted, emptied or replaced under
// it (inode, size) and a fork (pid) before each operation, and reopens.
// Counters and the size limit live only in the index: a rebuild copies them
// from the damaged file when it still reads, else they start over.
//
// Private to cache/local/store.cc and its parts.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>

#include "cache/local/sqlite.h"
#include "cache/local/store_blobs.h"
#include "cache/local/store_folder.h"
#include "cache/local/store_index.h"

namespace kcache::cache {

constexpr const char* kIndexLockName = "index.lock";
// Retries of an operation whose index was deleted or replaced under it. A
// rollback journal notices the deletion at the next write (SQLite's
// "attempt to write a readonly database", the file moved), so an index
// deleted again and again by someone meets every writer more than once.
constexpr int kReopenAttempts = 6;

// The identity of the index file, to notice it deleted, emptied or replaced.
struct FileIdentity {
  bool exists = false;
  bool is_directory = false;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  bool same_file(const FileIdentity& o) const {
    return exists == o.exists && dev == o.dev && ino == o.ino;
  }
};

FileIdentity identity_of(const std::string& path);

// Bumped in every child fork() makes. Cheaper than getpid() on each lookup
// (a system call: several microseconds in some VMs, against a 4 KiB hit's few).
uint64_t fork_generation();

// flock() on a file beside the index for as long as it lives: rebuilding and
// creating the index happen one process at a time.
class IndexLock {
 public:
  explicit IndexLock(const std::string& path);
  ~IndexLock();  // releases the lock
  IndexLock(const IndexLock&) = delete;
  IndexLock& operator=(const IndexLock&) = delete;

 private:
  int fd_ = -1;
};

class IndexKeeper {
 public:
  // `forked` is called when this process turns out to be a fork of the one
  // that opened the index, before it is reopened (what the parent counted is
  // the parent's).
  IndexKeeper(StoreFolder& folder, StoreIndex& index, BlobFiles& blobs,
              std::function<int64_t()> clock, std::function<void()> forked);

  // Opens the index, creating or rebuilding it as needed; again when its
  // files change under it meanwhile. Throws IoError after kReopenAttempts.
  void reopen();
  // Before each operation: the index deleted, emptied or replaced under us,
  // or this process a fork of the one that opened it. Then reopen (which
  // creates or rebuilds as needed). A write stats the index each time; a
  // lookup at most once a second (a stat costs as much as a small hit, and
  // a lookup in a replaced index reads a stale copy: at worst a miss; damage
  // it meets is reported by SQLite and rebuilt all the same).
  void check(bool writing = true);
  // Whether the index file is still the one the connection has open.
  bool unchanged() const;
  // The index file the connection has open.
  const FileIdentity& opened() const { return index_id_; }
  // A fork's copy that never reopened: forgets the parent's connection.
  void let_go_if_forked();

  // Runs `body` against the index; when SQLite reports the index damaged,
  // rebuilds it from the blobs once and runs `body` again (likewise when it
  // fails because the index was deleted or replaced meanwhile).
  template <typename F>
  auto with_index(F&& body, bool writing = true) -> decltype(body());

  // The index is damaged (or a folder): move it aside and re-index the
  // blobs, which carry everything but their last-use time. `damaged` is the
  // file found damaged: if another process replaced it meanwhile, that one is
  // used instead. Returns how many blobs were adopted.
  uint64_t rebuild(const std::string& why, const FileIdentity& damaged, bool say = true,
                   bool locked = false);
  // An index that cannot even be read is replaced by a new, empty one.
  void start_over();

  struct StrayFiles {
    uint64_t adopted = 0;
    uint64_t removed = 0;
  };
  // Every blob file no row names and no younger than `min_age_s`: adopted
  // (a row inserted) when it decodes, holds its name's key and no row has
  // that key; otherwise removed if `remove_rest` (corrupt, misnamed, or a
  // duplicate of a key a row names). A newer kcache's entry is left alone.
  StrayFiles adopt_strays(int64_t min_age_s, bool remove_rest);

 private:
  enum class Stray { leave, adopted, remove };
  struct StrayScan;

  void open();
  void create();
  void connect();
  void finish_filling();
  uint64_t adopt_blobs();
  void salvage_settings(const std::string& damaged_path);
  Stray judge_stray(const std::string& shard_dir, const std::string& name, StrayScan& scan);
  std::string lock_path() const;
  std::string aside_name(const std::string& path) const;

  StoreFolder& folder_;
  StoreIndex& index_;
  BlobFiles& blobs_;
  std::function<int64_t()> clock_;
  std::function<void()> forked_;
  uint64_t fork_generation_ = 0;  // fork_generation() when the index was opened
  FileIdentity index_id_;         // the index file the connection has open
  std::chrono::steady_clock::time_point next_lookup_check_;
};

template <typename F>
auto IndexKeeper::with_index(F&& body, bool writing) -> decltype(body()) {
  // A damaged index is rebuilt at the top of the next attempt, inside the
  // try: the rebuild itself can meet a file damaged by a race (a process
  // deleting the index files while another rolls its journal back into the
  // new one), which is then rebuilt again, a bounded number of times.
  std::optional<std::string> damage;
  FileIdentity damaged;
  for (int attempt = 0;; ++attempt) {
    try {
      if (damage) {
        rebuild(*damage, damaged);
        damage.reset();
        writing = true;  // the rebuilt index is checked as is
      }
      check(writing);
      return body();
    } catch (const sqlite::IndexCorruptError& e) {
      if (index_.read_only() || attempt >= kReopenAttempts) throw;
      damage = e.what();
      damaged = index_id_;  // the file the failing connection had open
    } catch (const sqlite::IndexMovedError&) {
      // Its file unlinked under our connection; a new file at the same
      // path may have the same inode number, so this is the only sign.
      if (index_.read_only() || attempt >= kReopenAttempts) throw;
      damage.reset();
      reopen();
    } catch (const IoError&) {
      // The index deleted or replaced in the middle of this operation
      // (SQLite says "disk I/O error"): again, on the index there now. With
      // the index file unchanged its journal may have been swapped under
      // SQLite (a deleting process, another's journal): once more as it is;
      // a second failure is a real one (a full disk, EIO) and is reported.
      const bool same_file = index_.connected() && unchanged();
      if (index_.read_only() || attempt >= kReopenAttempts || (same_file && attempt > 0)) throw;
      damage.reset();
      writing = true;
    }
  }
}

}  // namespace kcache::cache
