#include "cache/local/store_recovery.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <map>
#include <optional>

#include "common/error.h"

namespace kcache::cache {
namespace {

std::atomic<uint64_t> forks_seen{0};

}  // namespace

FileIdentity identity_of(const std::string& path) {
  FileIdentity id;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return id;
  id.exists = true;
  id.is_directory = S_ISDIR(st.st_mode);
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  id.size = st.st_size;
  return id;
}

uint64_t fork_generation() {
  static const bool registered = [] {
    return pthread_atfork(nullptr, nullptr, [] { forks_seen.fetch_add(1); }) == 0;
  }();
  (void)registered;
  return forks_seen.load(std::memory_order_relaxed);
}

IndexLock::IndexLock(const std::string& path) {
  // Read-only: flock() needs no write access, so users sharing a store
  // through a group-writable folder lock the same file.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return;  // a read-only folder: nothing will be written anyway
  while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
  }
}

IndexLock::~IndexLock() {
  if (fd_ >= 0) ::close(fd_);
}

// -- opening ------------------------------------------------------------------

IndexKeeper::IndexKeeper(StoreFolder& folder, StoreIndex& index, BlobFiles& blobs,
                         std::function<int64_t()> clock, std::function<void()> forked)
    : folder_(folder),
      index_(index),
      blobs_(blobs),
      clock_(std::move(clock)),
      forked_(std::move(forked)) {}

std::string IndexKeeper::lock_path() const { return folder_.dir() + "/" + kIndexLockName; }

// open(), again when the index files change under it meanwhile: a process
// deleting them while another re-creates them makes SQLite fail with an I/O
// error (a journal gone before SQLite deletes it, ...) or find the new file
// malformed (a journal of the deleted file rolled back into it).
void IndexKeeper::reopen() {
  for (int attempt = 0;; ++attempt) {
    index_.drop();
    try {
      open();
      return;
    } catch (const IoError&) {
      if (attempt >= kReopenAttempts) throw;
    } catch (const sqlite::IndexCorruptError&) {
      // The rebuild met a file damaged by the same race (another process's
      // journal rolled back into the new index): rebuilt again by open().
      if (attempt >= kReopenAttempts) throw;
    }
  }
}

void IndexKeeper::open() {
  try {
    folder_.make_folder(folder_.dir());
    folder_.make_folder(blobs_.dir());
  } catch (const IoError&) {
    // A read-only folder that already holds a store is still readable.
    if (!folder_.fs().stat(index_.path())) throw;
  }
  fork_generation_ = fork_generation();
  FileIdentity id = identity_of(index_.path());
  if (id.is_directory) {
    rebuild("it is a folder, not a file", id);
    return;
  }
  if ((!id.exists || id.size == 0) && ::access(folder_.dir().c_str(), W_OK) == 0) {
    create();
    return;
  }
  try {
    connect();
    finish_filling();
  } catch (const sqlite::IndexCorruptError& e) {
    rebuild(e.what(), id);
  }
}

// A missing or empty index: made under the lock (another process may be
// making it; then it is there once we hold the lock), and filled with the
// blobs an earlier index named, if any.
void IndexKeeper::create() {
  IndexLock lock(lock_path());
  FileIdentity id = identity_of(index_.path());
  if (id.exists && id.size > 0) {
    try {
      connect();
      if (index_.get_meta(kFillingMeta)) adopt_blobs();  // we hold the lock
    } catch (const sqlite::IndexCorruptError& e) {
      rebuild(e.what(), id, /*say=*/true, /*locked=*/true);
    }
    return;
  }
  // A journal (or an older kcache's -wal) left without its database would be
  // played into the new one. An empty file goes too: a new inode shares no
  // SQLite state with a connection of this process to the emptied one.
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    folder_.remove_quietly(index_.path() + suffix);
  }
  connect();
  uint64_t adopted = adopt_blobs();
  if (adopted > 0) {
    folder_.notice("index-rebuilt", "the store index " + index_.path() + " was " +
                                        (id.exists ? "empty" : "missing") + "; rebuilt it from " +
                                        std::to_string(adopted) + " blob files");
  }
}

void IndexKeeper::connect() {
  try {
    index_.connect();
  } catch (const sqlite::IndexCorruptError&) {
    // The file found damaged, for the rebuild that follows (not the one
    // connected before, which a rebuild would take for another's new index).
    index_id_ = identity_of(index_.path());
    throw;
  }
  index_id_ = identity_of(index_.path());
  next_lookup_check_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
}

// An index whose filling from the blobs was cut short (kFillingMeta): filled
// now, under the lock, before any lookup trusts it (a partial index would
// lose every entry it lacks). Another process may be filling it: then it is
// done once we hold the lock.
void IndexKeeper::finish_filling() {
  if (index_.read_only() || !index_.get_meta(kFillingMeta)) return;
  IndexLock lock(lock_path());
  if (!index_.get_meta(kFillingMeta)) return;
  uint64_t adopted = adopt_blobs();
  folder_.notice("index-rebuilt", "the store index " + index_.path() +
                                      " was left half made by a process that was stopped; "
                                      "rebuilt it from the blob files (" +
                                      std::to_string(adopted) + " adopted)");
}

// -- noticing a changed index or a fork ---------------------------------------

void IndexKeeper::check(bool writing) {
  if (!index_.connected()) {  // an earlier reopen failed half-way
    reopen();
    return;
  }
  if (fork_generation() != fork_generation_) {
    index_.abandon();
    forked_();
    reopen();
    return;
  }
  if (index_.read_only()) return;  // a snapshot; nothing is written through it
  if (!writing) {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_lookup_check_) return;
    next_lookup_check_ = now + std::chrono::seconds(1);
  }
  if (unchanged()) return;
  reopen();
}

bool IndexKeeper::unchanged() const {
  FileIdentity now = identity_of(index_.path());
  return now.same_file(index_id_) && !now.is_directory && now.size > 0;
}

void IndexKeeper::let_go_if_forked() {
  if (fork_generation() != fork_generation_) index_.abandon();
}

// -- rebuilding ---------------------------------------------------------------

// "<path>.corrupt.<time>", made unique by the process and a count: two
// rebuilds within a second must not replace the first damaged file, the
// only copy of the counters and the size limit.
std::string IndexKeeper::aside_name(const std::string& path) const {
  static std::atomic<uint64_t> moved{0};
  std::string name = path + ".corrupt." + std::to_string(clock_());
  const std::string unique =
      name + "." + std::to_string(::getpid()) + "." + std::to_string(moved.fetch_add(1));
  return ::access(name.c_str(), F_OK) != 0 && errno == ENOENT ? name : unique;
}

uint64_t IndexKeeper::rebuild(const std::string& why, const FileIdentity& damaged, bool say,
                              bool locked) {
  index_.drop();
  if (::access(folder_.dir().c_str(), W_OK) != 0) {
    throw CorruptError(why + "; the store folder is read-only, so the index cannot be rebuilt");
  }
  std::optional<IndexLock> lock;
  if (!locked) lock.emplace(lock_path());
  const std::string& path = index_.path();
  FileIdentity now = identity_of(path);
  if (now.exists && !now.is_directory && now.size > 0 && !now.same_file(damaged)) {
    connect();  // rebuilt by another process while we waited
    return 0;
  }
  const std::string aside = aside_name(path);
  if (now.exists && std::rename(path.c_str(), aside.c_str()) != 0) {
    throw IoError(errno_message("cannot move the damaged store index aside to", aside, errno));
  }
  for (const char* suffix : {"-wal", "-shm", "-journal"}) folder_.remove_quietly(path + suffix);
  connect();
  if (now.exists && !now.is_directory) salvage_settings(aside);
  uint64_t adopted = adopt_blobs();
  if (say) {
    folder_.notice("index-rebuilt", "the store index " + path + " was unreadable (" + why +
                                        "); moved it to " + aside + " and rebuilt the index from " +
                                        std::to_string(adopted) + " blob files");
  }
  return adopted;
}

void IndexKeeper::start_over() {
  index_.drop();
  IndexLock lock(lock_path());
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    std::string path = index_.path() + suffix;
    if (identity_of(path).is_directory) {
      std::rename(path.c_str(), aside_name(path).c_str());
    } else {
      folder_.remove_quietly(path);
    }
  }
  connect();
}

// The size limit and counters live only in the index: copied from the
// damaged file where they still read, else the defaults stand.
void IndexKeeper::salvage_settings(const std::string& damaged_path) {
  std::optional<std::string> max;
  std::map<std::string, int64_t> counters;
  try {
    sqlite::Database old(damaged_path, sqlite::OpenMode::immutable, 0);
    try {
      sqlite::Statement s(old, "SELECT value FROM meta WHERE name = 'max_size'");
      if (s.step()) max = s.column_text(0);
    } catch (const Error&) {
    }
    try {
      sqlite::Statement s(old, "SELECT name, value FROM counters");
      while (s.step()) counters[s.column_text(0)] = s.column_int(1);
    } catch (const Error&) {
      counters.clear();  // a part of them would mislead
    }
  } catch (const Error&) {
    return;
  }
  sqlite::Transaction txn(index_.db());
  if (max && !max->empty() && std::all_of(max->begin(), max->end(), ::isdigit)) {
    index_.set_meta("max_size", *max);
  }
  for (const auto& [name, value] : counters) index_.add_counter(name, value);
  txn.commit();
}

// A new or rebuilt index: every blob that checks out. Corrupt ones are
// removed; duplicates and temp files are left to cleanup's grace period.
uint64_t IndexKeeper::adopt_blobs() {
  uint64_t adopted = adopt_strays(/*min_age_s=*/0, /*remove_rest=*/false).adopted;
  sqlite::Transaction txn(index_.db());
  index_.delete_meta(kFillingMeta);
  txn.commit();
  return adopted;
}

// -- blob files no row names --------------------------------------------------

struct IndexKeeper::StrayScan {
  std::set<std::string> named_files, named_keys;
  int64_t min_age_s = 0;
  int64_t cutoff_ns = 0;   // files written after this are too young
  int64_t cleared_ns = 0;  // files written before this were left by a clear
};

IndexKeeper::StrayFiles IndexKeeper::adopt_strays(int64_t min_age_s, bool remove_rest) {
  StrayScan scan;
  index_.names(&scan.named_keys, &scan.named_files);
  scan.min_age_s = min_age_s;
  scan.cutoff_ns = (clock_() - min_age_s) * 1000000000;
  scan.cleared_ns = index_.cleared_at_ns();
  StrayFiles result;
  FileSystem& fs = folder_.fs();
  for (const std::string& shard : blobs_.shard_names()) {
    const std::string shard_dir = blobs_.shard_dir(shard);
    for (const std::string& name : fs.list_directory(shard_dir)) {
      if (scan.named_files.count(name)) continue;
      switch (judge_stray(shard_dir, name, scan)) {
        case Stray::leave:
          break;
        case Stray::adopted:
          result.adopted += 1;
          break;
        case Stray::remove:
          if (remove_rest && fs.remove_file(shard_dir + "/" + name)) result.removed += 1;
          break;
      }
    }
  }
  sqlite::Transaction txn(index_.db());
  index_.recount_totals();
  txn.commit();
  return result;
}

// What becomes of `name` in `shard_dir`, a file no row names: adopted into
// the index when it is a whole entry of its name's key that no row has.
IndexKeeper::Stray IndexKeeper::judge_stray(const std::string& shard_dir, const std::string& name,
                                            StrayScan& scan) {
  const std::string path = shard_dir + "/" + name;
  std::optional<FileInfo> stat = folder_.fs().stat(path);
  if (!stat || stat->is_directory) return Stray::leave;
  if (stat->mtime_ns <= scan.cleared_ns) return Stray::remove;  // never an entry again
  if (scan.min_age_s > 0 && stat->mtime_ns > scan.cutoff_ns) return Stray::leave;
  std::optional<Hash128> key = key_of_blob_name(name);
  if (!key) return Stray::remove;                               // a temp file
  if (scan.named_keys.count(key->hex())) return Stray::remove;  // a duplicate
  try {
    std::optional<Entry> entry = blobs_.read_entry(path, *key);
    if (!entry) return Stray::leave;  // gone meanwhile
    sqlite::Transaction txn(index_.db());
    index_.insert_if_absent(*entry, name, stat->mtime_ns / 1000000000);
    txn.commit();
    scan.named_keys.insert(key->hex());
    return Stray::adopted;
  } catch (const IncompatibleVersionError&) {
    return Stray::leave;  // a newer kcache's entry sharing this store: not ours
  } catch (const sqlite::IndexCorruptError&) {
    throw;
  } catch (const CorruptError&) {
    return Stray::remove;
  }
}

}  // namespace kcache::cache
