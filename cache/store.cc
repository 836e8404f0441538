#include "cache/store.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <unordered_map>

#include "cache/manifest.h"
#include "cache/sqlite.h"
#include "cache/store_deferred.h"
#include "common/arch.h"
#include "common/error.h"
#include "common/safe_path.h"

namespace kcache::cache {
namespace {

// Store layout (one folder, shared by every process):
//   index.sqlite        the index: one row per entry, counters, meta
//   blobs/ab/<key>.<id> one file per entry (the encoded Entry); `ab` is the
//                       key's first two hex digits, so no folder grows huge
//
// Payloads live in files rather than inline in SQLite: on this class of
// machine reading a 200 KB payload through the index and a file costs about
// what a plain read() does, inline blobs cost 2.5x (docs/PERFORMANCE.md,
// bench/blob_placement_bench.cc), and evicting a file gives the space back at
// once instead of leaving free pages in the database.
//
// Each write goes to a file name no one else uses (<key>.<random id>), and the
// row naming it is inserted only once the file is complete. So a reader never
// sees a partial file, an eviction can never delete a file a newer row names,
// and a process killed at any point leaves at worst a stray file, which
// cleanup() adopts (or removes) once it is older than kStrayGraceSeconds.
//
// The blob files are the truth and the index is derived from them: each blob
// carries its key and checksum (cache/entry.h), so an index that is missing,
// empty, a folder, or that SQLite reports as damaged (at open or in any query)
// is moved aside and rebuilt from the blobs, under index.lock so that two
// processes never rebuild at once. A process notices an index deleted,
// emptied or replaced under it (inode, size) and a fork (pid) before each
// operation, and reopens. Manifests are files of their own (manifests/), not
// rows: nothing of theirs is lost with the index. Counters and the size
// limit live only in the index: a rebuild copies them from the damaged file
// when it still reads, else they start over.

// Bump kSchemaVersion when the tables change (and migrate in
// create_or_check_schema). Set kCompatibleVersion to the oldest schema version
// whose code can still read and write a store of this version: an older kcache
// refuses a store whose compatible_version is above the version it knows.
constexpr int kSchemaVersion = 1;
constexpr int kCompatibleVersion = 1;
constexpr const char* kIndexName = "index.sqlite";
constexpr const char* kBlobDirName = "blobs";
constexpr const char* kIndexLockName = "index.lock";
// Counters and LRU times of processes that wrote nothing else
// (cache/store_deferred.h), until a writer merges them into the index.
constexpr const char* kDeferredDirName = "deferred";
// About one flush in this many also merges the deferred files, so they do
// not pile up in a store that only serves hits.
constexpr uint64_t kMergeOneIn = 64;
// Set in a new index until it has been filled from the blob files (adopt_blobs).
constexpr const char* kFillingMeta = "filling";
// When the store was last cleared (unix seconds): older blobs are not taken back.
constexpr const char* kClearedAtMeta = "cleared_at";
// Retries of an operation whose index was deleted or replaced under it. A
// rollback journal notices the deletion at the next write (SQLite's
// "attempt to write a readonly database", the file moved), so an index
// deleted again and again by someone meets every writer more than once.
constexpr int kReopenAttempts = 6;
// A store folder made by kcache: private to its user (StoreOptions::umask
// and a group-shared folder say otherwise).
constexpr mode_t kPrivateFolderMode = 0700;
// Bazel runs many actions at once against one store; writes are short.
constexpr int kBusyTimeoutMs = 30000;
// A file with no row younger than this may be a put still in progress.
constexpr int64_t kStrayGraceSeconds = 15 * 60;
// Evict down to this fraction of the cap so that not every put evicts.
constexpr double kEvictTargetFraction = 0.9;
// How the index journals a write (use_local_journal says why).
constexpr const char* kLocalJournalPragma = "PRAGMA journal_mode = TRUNCATE";
// Leaving WAL while another process has the index open fails at once; it
// would otherwise wait out the whole busy timeout on every open.
constexpr int kLeaveWalTimeoutMs = 100;
// Buffered hits are written at the latest after this many.
constexpr size_t kMaxPendingTouches = 512;

int64_t system_clock_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void warn_to_stderr(const std::string& message) {
  if (store_quiet()) return;
  std::fprintf(stderr, "kcache: %s\n", message.c_str());
}

// From the kernel each time: a generator's state would be copied by fork(),
// and a parent and child storing the same key would then pick the same name.
uint64_t random_u64() {
  uint64_t value = 0;
  if (getrandom(&value, sizeof value, 0) != static_cast<ssize_t>(sizeof value)) {
    static std::atomic<uint64_t> counter{0};
    value = std::random_device{}() ^ (static_cast<uint64_t>(getpid()) << 32) ^
            static_cast<uint64_t>(system_clock_now()) ^ (++counter * 0x9E3779B97F4A7C15ull);
  }
  return value;
}

std::string random_id() { return hex64(random_u64()); }

// Network file systems where WAL's shared memory is not shared between
// machines (sqlite.org/wal.html), by statfs magic; "" for anything else.
std::string network_file_system_of(const std::string& dir) {
  struct statfs fs;
  if (::statfs(dir.c_str(), &fs) != 0) return "";
  switch (static_cast<uint64_t>(fs.f_type)) {
    case NFS_SUPER_MAGIC: return "NFS";
    case 0x0BD00BD0: return "Lustre";
    case V9FS_MAGIC: return "9p";
    case SMB_SUPER_MAGIC: case 0xFF534D42: case 0xFE534D42: return "SMB/CIFS";
    case 0x00C36400: return "CephFS";
    case 0x01161970: return "GFS2";
    case AFS_SUPER_MAGIC: case 0x6B414653: return "AFS";
    case 0x47504653: return "GPFS";
    case 0x7461636f: return "OCFS2";
    default: return "";
  }
}

// Bumped in every child fork() makes. Cheaper than getpid() on each lookup
// (a system call: several microseconds in some VMs, against a 4 KiB hit's few).
std::atomic<uint64_t> forks_seen{0};

uint64_t fork_generation() {
  static const bool registered = [] {
    return pthread_atfork(nullptr, nullptr, [] { forks_seen.fetch_add(1); }) == 0;
  }();
  (void)registered;
  return forks_seen.load(std::memory_order_relaxed);
}

// Whether `what` is said for the first time in this process. The lock is
// taken around fork() too: a child never inherits it held.
bool first_in_process(const std::string& what) {
  static std::mutex* mutex = new std::mutex;  // never destroyed: used at exit
  static std::set<std::string>* said = new std::set<std::string>;
  static const bool registered = [] {
    return pthread_atfork([] { mutex->lock(); }, [] { mutex->unlock(); },
                          [] { mutex->unlock(); }) == 0;
  }();
  (void)registered;
  std::lock_guard<std::mutex> lock(*mutex);
  return said->insert(what).second;
}

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

// flock() on a file beside the index for as long as it lives: rebuilding and
// creating the index happen one process at a time.
class IndexLock {
 public:
  explicit IndexLock(const std::string& path) {
    // Read-only: flock() needs no write access, so users sharing a store
    // through a group-writable folder lock the same file.
    fd_ = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return;  // a read-only folder: nothing will be written anyway
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~IndexLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  IndexLock(const IndexLock&) = delete;
  IndexLock& operator=(const IndexLock&) = delete;

 private:
  int fd_ = -1;
};

int kind_code(TargetKind kind) { return kind == TargetKind::ptx ? 1 : 2; }

// Binds an `entries` row, in the table's column order, to an INSERT of it.
sqlite::Statement& bind_row(sqlite::Statement& s, const std::string& hex, const Entry& entry,
                            const std::string& file, int64_t last_used) {
  return s.bind(1, hex)
      .bind(2, file)
      .bind(3, kind_code(entry.kind()))
      .bind(4, entry.arch())
      .bind(5, static_cast<int64_t>(entry.encoded().size()))
      .bind(6, static_cast<int64_t>(entry.compile_ms()))
      .bind(7, entry.created_unix_s())
      .bind(8, last_used);
}
TargetKind kind_from_code(int64_t code) { return code == 1 ? TargetKind::ptx : TargetKind::cubin; }

// "<32 hex>.<16 hex>" -> the key, or nullopt for anything else (temp files).
std::optional<Hash128> key_of_blob_name(const std::string& name) {
  if (name.size() != 32 + 1 + 16 || name[32] != '.') return std::nullopt;
  for (size_t i = 33; i < name.size(); ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
  }
  return Hash128::from_hex(std::string_view(name).substr(0, 32));
}

// Whether `file` is a blob name of key `hex`: a row naming another key's
// blob (a damaged or crafted index) must never make us read it as ours or
// delete it (that entry is intact).
bool blob_of_key(const std::string& file, const std::string& hex) {
  std::optional<Hash128> key = key_of_blob_name(file);
  return key && key->hex() == hex;
}

class SqliteStore : public Store {
  struct Row {
    std::string key;
    std::string file;
    int64_t size = 0;
    int64_t last_used = 0;
  };

 public:
  SqliteStore(std::string dir, StoreOptions options)
      : dir_(std::move(dir)),
        blob_dir_(dir_ + "/" + kBlobDirName),
        index_path_(dir_ + "/" + kIndexName),
        deferred_dir_(dir_ + "/" + kDeferredDirName),
        fs_(options.fs ? *options.fs : FileSystem::real()),
        warn_(options.warn ? options.warn : warn_to_stderr),
        clock_(options.clock ? options.clock : system_clock_now),
        network_fs_((options.network_file_system ? options.network_file_system
                                                 : network_file_system_of)(dir_)),
        umask_(options.umask) {
    reopen_index();
  }

  ~SqliteStore() override {
    try {
      flush();
    } catch (const std::exception& e) {
      notice("flush", std::string("could not record cache statistics: ") + e.what());
    }
    // A forked child's copy that never reopened: the parent's connection.
    if (fork_generation() != fork_generation_) abandon_connection();
    // A process that only looked entries up (a hit) changed nothing a reader
    // needs: it leaves its LRU times in the WAL for the next writer to
    // checkpoint instead of paying SQLite's checkpoint on close (two
    // fdatasyncs, and two more to make the WAL again next time). Writers still
    // checkpoint, so a read-only (immutable) opener sees their entries.
    if (!changed_index_ && !read_only_ && db_) db_->keep_wal_on_close();
  }

  std::optional<Entry> get(const Hash128& key, Access access) override {
    return with_index([&] { return get_from_index(key, access); }, /*writing=*/false);
  }

  std::optional<Entry> get_from_index(const Hash128& key, Access access) {
    const std::string hex = key.hex();
    // Twice: a concurrent put may replace the file between our lookup and read.
    for (int attempt = 0; attempt < 2; ++attempt) {
      Row row;
      if (!find_row(hex, &row)) break;
      if (!blob_of_key(row.file, hex)) {
        drop_bad_entry(hex, row.file,
                       "the index names \"" + escape_for_message(row.file) +
                           "\" as its blob file, which is not a blob name of this key");
        break;
      }
      std::optional<std::string> bytes = fs_.read_file(blob_path(row.file));
      if (!bytes) {
        if (attempt == 0) continue;
        drop_bad_entry(hex, row.file, "its blob file " + blob_path(row.file) + " is missing");
        break;
      }
      try {
        Entry entry = Entry::decode(std::move(*bytes), "cache entry " + hex);
        if (entry.key() != key) {
          throw CorruptError("cache entry " + hex + " holds the entry for " + entry.key().hex());
        }
        if (access == Access::maintenance) return entry;
        if (access == Access::lookup) {
          pending_counters_["hits"] += 1;
          pending_counters_["compile_ms_saved"] += entry.compile_ms();
        }
        pending_touches_.push_back(hex);
        if (pending_touches_.size() >= kMaxPendingTouches) flush_or_drop();
        return entry;
      } catch (const IncompatibleVersionError&) {
        break;  // written by a newer kcache sharing this store: not ours to delete
      } catch (const CorruptError& e) {
        drop_bad_entry(hex, row.file, e.what());
        break;
      }
    }
    if (std::optional<Entry> entry = take_back_blob(key)) {
      if (access == Access::lookup) {
        pending_counters_["hits"] += 1;
        pending_counters_["compile_ms_saved"] += entry->compile_ms();
      }
      return entry;
    }
    if (access == Access::lookup) pending_counters_["misses"] += 1;
    return std::nullopt;
  }

  // Before a miss: a blob file of `key` that no row names (an index replaced
  // by an older copy of itself, or cut short, found by a review; a put
  // whose row is not in yet) is the entry, taken back into the index. The
  // blob files are the truth; a miss costs a compile, and this one listing
  // of the key's shard folder. Nothing is removed here.
  std::optional<Entry> take_back_blob(const Hash128& key) {
    const std::string hex = key.hex();
    const std::string shard_dir = blob_dir_ + "/" + hex.substr(0, 2);
    std::vector<std::string> names;
    try {
      names = fs_.list_directory(shard_dir);
    } catch (const Error&) {
      return std::nullopt;  // no such shard (yet)
    }
    const int64_t cleared_ns = cleared_at_ns();
    for (const std::string& name : names) {
      if (!blob_of_key(name, hex)) continue;
      std::optional<FileInfo> written = fs_.stat(shard_dir + "/" + name);
      if (!written || written->mtime_ns <= cleared_ns) continue;  // left by a clear
      try {
        std::optional<std::string> bytes = fs_.read_file(shard_dir + "/" + name);
        if (!bytes) continue;
        Entry entry = Entry::decode(std::move(*bytes), shard_dir + "/" + name);
        if (entry.key() != key) continue;
        if (!read_only_) {
          sqlite::Transaction txn(*db_);
          changed_index_ = true;
          insert_if_absent(entry, name, clock_());
          if (db_->changes() > 0) add_totals(static_cast<int64_t>(entry.encoded().size()), 1);
          txn.commit();
          // A put in flight (its row not in yet) is no news.
          bool in_flight = written->mtime_ns > (clock_() - 10) * 1000000000;
          if (!in_flight) notice("blob-taken-back", "the store index " + index_path_ +
                                        " had no row for blob files it holds (an older copy of "
                                        "the index, or one cut short); took them back as they "
                                        "were looked up (`kcache -c` takes back the rest)");
        }
        return entry;
      } catch (const sqlite::IndexCorruptError&) {
        throw;
      } catch (const Error&) {
        continue;  // damaged, a newer kcache's, unreadable: cleanup's to judge
      }
    }
    return std::nullopt;
  }

  void put(const Entry& entry) override {
    require_writable("store a new entry");
    const std::string hex = entry.key().hex();
    const std::string file = hex + "." + random_id();
    const std::string path = blob_path(file);
    make_folder(path.substr(0, path.rfind('/')));
    write_file(path, entry.encoded());

    std::optional<Row> old;
    try {
      with_index([&] { old = insert_row(entry, hex, file); });
    } catch (...) {
      remove_quietly(path);  // the row was not written: nothing names this file
      throw;
    }
    // The index deleted or replaced while we wrote it: the row goes into the
    // one that is there now too (or its rebuild adopts the blob, which is on
    // disk before any row names it).
    if (!index_file_unchanged()) {
      std::optional<Row> again;
      with_index([&] { again = insert_row(entry, hex, file); });
      if (!old) old = again;
    }
    // Not when a rebuild adopted this very file meanwhile.
    if (old && old->file != file) remove_blob_quietly(hex, old->file);
    with_index([&] { evict_to(max_size(), kEvictTargetFraction); });
  }

  std::optional<Row> insert_row(const Entry& entry, const std::string& hex,
                                const std::string& file) {
    std::optional<Row> old;
    const int64_t now = clock_();
    pending_counters_["stored"] += 1;
    write_merging([&] {
      old.reset();
      Row previous;
      if (find_row(hex, &previous)) old = previous;
      bind_row(*insert_, hex, entry, file, now).run();
      add_totals(static_cast<int64_t>(entry.encoded().size()) - (old ? old->size : 0), old ? 0 : 1);
      write_pending();
    });
    pending_counters_.clear();
    pending_touches_.clear();
    return old;
  }

  bool remove(const Hash128& key) override {
    require_writable("remove an entry");
    const std::string hex = key.hex();
    Row row;
    bool found = with_index([&] {
      sqlite::Transaction txn(*db_);
      changed_index_ = true;
      if (!find_row(hex, &row)) return false;
      delete_row(hex, row.size);
      txn.commit();
      return true;
    });
    if (found) remove_blob_quietly(hex, row.file);
    return found;
  }

  std::optional<EntryInfo> info(const Hash128& key) override {
    return with_index([&]() -> std::optional<EntryInfo> {
      sqlite::Statement s(*db_,
                          "SELECT key, kind, arch, size, compile_ms, created, last_used "
                          "FROM entries WHERE key = ?");
      s.bind(1, key.hex());
      if (!s.step()) return std::nullopt;
      return info_from(s);
    });
  }

  std::vector<EntryInfo> list() override {
    merge_deferred();  // the LRU times it shows
    return with_index([&] {
      sqlite::Statement s(*db_,
                          "SELECT key, kind, arch, size, compile_ms, created, last_used "
                          "FROM entries ORDER BY last_used DESC, key");
      std::vector<EntryInfo> out;
      while (s.step()) out.push_back(info_from(s));
      return out;
    });
  }

  void count(const std::string& counter, int64_t delta) override {
    pending_counters_[counter] += delta;
  }

  // What this process counted goes to a deferred file, not the index: a
  // process that only had hits writes nothing to the index (no lock, no
  // journal, no sync); the next writer merges it.
  void flush() override {
    if (pending_counters_.empty() && pending_touches_.empty()) return;
    DeferredRecord record;
    for (const auto& [name, delta] : pending_counters_) {
      if (delta != 0) record.counters[name] = delta;
    }
    const int64_t now = clock_();
    for (const std::string& hex : pending_touches_) record.used[hex] = now;
    pending_counters_.clear();
    pending_touches_.clear();
    // Nothing can be recorded in a read-only store; hits still worked.
    if (read_only_ || record.empty()) return;
    const uint64_t id = random_u64();
    make_folder(deferred_dir_);
    write_file(deferred_dir_ + "/" + hex64(id), encode_deferred(record));
    if (id % kMergeOneIn == 0) merge_deferred();
  }

  // -- deferred counters and LRU times (cache/store_deferred.h) -------------

  struct Claimed {
    std::string path;
    std::string claimed;
  };

  // Takes every deferred file (renamed, so that two writers never add one
  // twice) and returns what they hold together.
  DeferredRecord claim_deferred(std::vector<Claimed>* claimed) {
    DeferredRecord all;
    std::vector<std::string> names;
    try {
      names = fs_.list_directory(deferred_dir_);
    } catch (const Error&) {
      return all;
    }
    for (const std::string& name : names) {
      if (!is_deferred_name(name)) continue;
      Claimed file{deferred_dir_ + "/" + name,
                   deferred_dir_ + "/" + name + ".merging." + random_id()};
      if (::rename(file.path.c_str(), file.claimed.c_str()) != 0) continue;  // another's now
      claimed->push_back(file);
      all.add(read_deferred(file.claimed));
    }
    return all;
  }

  DeferredRecord read_deferred(const std::string& path) {
    try {
      std::optional<FileInfo> info = fs_.stat(path);
      if (!info || info->is_directory || info->size > kMaxDeferredBytes) return {};
      std::optional<std::string> bytes = fs_.read_file(path);
      return bytes ? decode_deferred(*bytes) : DeferredRecord{};
    } catch (const Error&) {
      return {};  // unreadable: those counts are lost, nothing else
    }
  }

  // What the deferred files hold now, without taking them (a read-only user's
  // statistics).
  DeferredRecord peek_deferred() {
    DeferredRecord all;
    try {
      for (const std::string& name : fs_.list_directory(deferred_dir_)) {
        if (is_deferred_name(name)) all.add(read_deferred(deferred_dir_ + "/" + name));
      }
    } catch (const Error&) {
    }
    return all;
  }

  // Runs `write` in one write transaction with the merge of every deferred
  // file, applied first. A claimed file is removed once the transaction
  // commits and renamed back when it does not; a writer killed in between
  // loses those counts (cleanup() removes what it left).
  template <typename F>
  void write_merging(F&& write) {
    std::vector<Claimed> claimed;
    DeferredRecord deferred = claim_deferred(&claimed);
    try {
      sqlite::Transaction txn(*db_);
      changed_index_ = true;
      for (const auto& [hex, when] : deferred.used) touch_->bind(1, when).bind(2, hex).run();
      for (const auto& [name, delta] : deferred.counters) {
        if (delta != 0) add_counter_->bind(1, name).bind(2, delta).run();
      }
      write();
      txn.commit();
    } catch (...) {
      for (const Claimed& file : claimed) ::rename(file.claimed.c_str(), file.path.c_str());
      throw;
    }
    for (const Claimed& file : claimed) ::unlink(file.claimed.c_str());
  }

  // Best effort: statistics never fail an operation.
  void merge_deferred() {
    if (read_only_) return;
    try {
      with_index([&] { write_merging([] {}); });
    } catch (const Error& e) {
      notice("flush", std::string("could not record cache statistics: ") + e.what());
    }
  }

  // A hit stays a hit when its statistics cannot be written (a full disk).
  void flush_or_drop() {
    try {
      flush();
    } catch (const Error& e) {
      notice("flush", std::string("could not record cache statistics: ") + e.what());
      pending_counters_.clear();
      pending_touches_.clear();
    }
  }

  StoreStats stats() override {
    if (read_only_) {
      StoreStats out = with_index([&] { return stats_from_index(); });
      for (const auto& [name, delta] : peek_deferred().counters) out.counters[name] += delta;
      return out;
    }
    with_index([&] { write_merging([&] { write_pending(); }); });
    pending_counters_.clear();
    pending_touches_.clear();
    return with_index([&] { return stats_from_index(); });
  }

  StoreStats stats_from_index() {
    StoreStats out;
    sqlite::Statement counters(*db_, "SELECT name, value FROM counters");
    while (counters.step()) out.counters[counters.column_text(0)] = counters.column_int(1);
    for (const auto& [name, delta] : pending_counters_) out.counters[name] += delta;
    sqlite::Statement totals(*db_, "SELECT total_size, entries FROM totals");
    if (totals.step()) {
      out.bytes = static_cast<uint64_t>(totals.column_int(0));
      out.entries = static_cast<uint64_t>(totals.column_int(1));
    }
    out.max_size = max_size();
    return out;
  }

  void zero_stats() override {
    require_writable("zero the statistics");
    pending_counters_.clear();
    with_index([&] {
      write_merging([&] {
        db_->exec("UPDATE counters SET value = 0");
        set_meta("stats_zeroed_at", std::to_string(clock_()));
      });
    });
  }

  void set_max_size(uint64_t bytes) override {
    require_writable("change the size limit");
    with_index([&] {
      write_merging([&] { set_meta("max_size", std::to_string(bytes)); });
      evict_to(bytes, 1.0);
    });
  }

  // Empties the store whatever state the index is in: every blob file goes,
  // named by a row or not, and an index that cannot even be rebuilt is
  // replaced by a new one.
  CleanupResult clear() override {
    require_writable("clear it");
    std::map<std::string, int64_t> named;  // blob file -> size, from the rows
    bool index_usable = true;
    try {
      with_index([&] {
        named.clear();
        sqlite::Transaction txn(*db_);
        changed_index_ = true;
        sqlite::Statement all(*db_, "SELECT key, file, size FROM entries");
        while (all.step()) named[all.column_text(1)] = all.column_int(2);
        db_->exec("DELETE FROM entries");
        db_->exec("UPDATE totals SET total_size = 0, entries = 0");
        // A blob this clear leaves (one it cannot remove, or a clear cut
        // short) is never taken back into the index (take_back_blob,
        // adopt_strays): `kcache -C` is the way out of a bad entry.
        set_meta(kClearedAtMeta, std::to_string(clock_()));
        txn.commit();
      });
    } catch (const Error& e) {
      index_usable = false;
      notice("clear", std::string("the store index could not be read (") + e.what() +
                          "); removing every blob file and starting a new index");
    }
    CleanupResult result;
    const int64_t cutoff_ns = (clock_() - kStrayGraceSeconds) * 1000000000;
    for (const std::string& shard : shard_names()) {
      const std::string shard_dir = blob_dir_ + "/" + shard;
      for (const std::string& name : fs_.list_directory(shard_dir)) {
        auto row = named.find(name);
        if (row != named.end()) {
          remove_quietly(shard_dir + "/" + name);
          result.entries_removed += 1;
          result.bytes_removed += static_cast<uint64_t>(row->second);
          continue;
        }
        // A temp file may be a put in progress; a finished blob is not.
        std::optional<FileInfo> stat = fs_.stat(shard_dir + "/" + name);
        if (!stat || stat->is_directory) continue;
        if (!key_of_blob_name(name) && stat->mtime_ns > cutoff_ns) continue;
        if (fs_.remove_file(shard_dir + "/" + name)) result.stray_files_removed += 1;
      }
    }
    if (!index_usable) {
      drop_connection();
      IndexLock lock(dir_ + "/" + kIndexLockName);
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        std::string path = index_path_ + suffix;
        if (identity_of(path).is_directory) {
          std::rename(path.c_str(), (path + ".corrupt." + std::to_string(clock_())).c_str());
        } else {
          remove_quietly(path);
        }
      }
      connect();
    }
    // Manifests only point at entries: without them they are useless.
    result.manifests_removed = remove_manifest_files(dir_, fs_);
    return result;
  }

  CleanupResult cleanup() override {
    require_writable("clean it up");
    CleanupResult result;
    merge_deferred();
    result.stray_files_removed += remove_stale_deferred();
    with_index([&] {
      StrayFiles strays = adopt_or_remove_strays(kStrayGraceSeconds);
      result = evict_to(max_size(), 1.0);
      result.stray_files_removed += strays.removed;
      result.stray_files_adopted = strays.adopted;
    });
    // Manifest leftovers: temp files of killed writers (a rename is atomic, so
    // a file under a key's name is whole: one that does not parse is damaged).
    const int64_t cutoff_ns = (clock_() - kStrayGraceSeconds) * 1000000000;
    for (const ManifestFile& file : list_manifest_files(dir_, fs_)) {
      bool stray = file.key ? !manifest_problem(file).empty() : file.info.mtime_ns <= cutoff_ns;
      if (stray && remove_manifest_quietly(file)) result.stray_files_removed += 1;
    }
    return result;
  }

  CleanupResult evict_older_than(std::chrono::seconds age) override {
    require_writable("evict entries");
    const int64_t cutoff = clock_() - age.count();
    merge_deferred();
    CleanupResult result = with_index([&] {
      return evict_where([cutoff](const Row& row, int64_t) { return row.last_used < cutoff; });
    });
    // Temp files are left to cleanup(), which knows when one is abandoned.
    result.manifests_removed = remove_manifests_used_before(cutoff, /*everything=*/false);
    return result;
  }

  VerifyResult verify() override {
    require_writable("verify it (corrupt entries are removed)");
    VerifyResult result;
    check_index_file();
    // The index itself first: a damaged one is rebuilt before its rows are
    // trusted (the rebuild checks every blob it adopts).
    std::string damage;
    try {
      sqlite::Statement check(*db_, "PRAGMA quick_check");
      while (check.step()) {
        std::string line = check.column_text(0);
        if (line != "ok" && damage.empty()) damage = line;
      }
    } catch (const sqlite::IndexCorruptError& e) {
      damage = e.what();
    }
    if (!damage.empty()) {
      uint64_t adopted = rebuild_index("PRAGMA quick_check: " + damage, index_id_, /*say=*/false);
      result.problems.push_back("index: " + damage + " (moved aside and rebuilt from " +
                                std::to_string(adopted) + " blob files)");
    }
    flush();
    std::vector<Row> rows;
    with_index([&] {
      rows.clear();
      sqlite::Statement all(*db_, "SELECT key, file, size, last_used FROM entries ORDER BY key");
      while (all.step()) rows.push_back(row_from(all));
    });
    for (const Row& row : rows) {
      result.entries_checked += 1;
      std::string problem;
      try {
        std::optional<std::string> bytes;
        if (!blob_of_key(row.file, row.key)) {
          problem = "the index names \"" + escape_for_message(row.file) +
                    "\" as its blob file, which is not a blob name of this key";
        } else if (!(bytes = fs_.read_file(blob_path(row.file)))) {
          problem = "blob file " + blob_path(row.file) + " is missing";
        } else if (static_cast<int64_t>(bytes->size()) != row.size) {
          problem = "blob file has " + std::to_string(bytes->size()) + " bytes, the index says " +
                    std::to_string(row.size);
        } else if (Entry::decode(std::move(*bytes), "cache entry " + row.key).key().hex() !=
                   row.key) {
          problem = "the blob file holds the entry of another key";
        }
      } catch (const IncompatibleVersionError&) {
        continue;  // a newer kcache's entry: not corrupt
      } catch (const Error& e) {
        problem = e.what();
      }
      if (problem.empty()) continue;
      result.problems.push_back(row.key + ": " + problem + " (removed)");
      with_index([&] { drop_bad_entry(row.key, row.file, problem, /*warn=*/false); });
    }
    // The running totals must equal what the rows say.
    with_index([&] {
      sqlite::Transaction txn(*db_);
      changed_index_ = true;
      recount_totals();
      txn.commit();
    });
    for (const ManifestFile& file : list_manifest_files(dir_, fs_)) {
      if (!file.key) continue;  // temp files and strays: cleanup()'s
      result.manifests_checked += 1;
      std::string problem = manifest_problem(file);
      if (problem.empty()) continue;
      result.problems.push_back("manifest " + file.key->hex() + ": " + problem + " (removed)");
      remove_manifest_quietly(file);
    }
    return result;
  }

  const std::string& dir() const override { return dir_; }
  uint64_t files_let_go() const override { return files_let_go_.load(); }
  bool read_only() const override { return read_only_; }

  // -- owners and modes (StoreOptions::umask) -------------------------------

  void make_folder(const std::string& folder) override {
    if (folder == dir_) {
      const bool made = !fs_.stat(dir_);
      const mode_t mode = umask_ ? 0777 & ~*umask_ : kPrivateFolderMode;
      fs_.create_directories(dir_, mode);
      if (made && umask_) (void)::chmod(dir_.c_str(), mode);
      learn_sharing();
      return;
    }
    if (!shared_) {
      fs_.create_directories(folder, kPrivateFolderMode);
      return;
    }
    // The folders missing now are the ones this call makes (or a concurrent
    // one: then fixing them fails with EPERM, harmlessly, or does the same).
    std::vector<std::string> missing;
    for (std::string f = folder; f.size() > dir_.size() && !fs_.stat(f);
         f = f.substr(0, f.rfind('/'))) {
      missing.push_back(f);
    }
    fs_.create_directories(folder, folder_mode_);
    for (const std::string& f : missing) give_to_store(f, folder_mode_);
  }

  // The store folder's mode, group and owner decide those of what is made in
  // it; a private store (0700, owned by this user, no umask setting) pays
  // this stat at open and nothing per file.
  void learn_sharing() {
    struct stat st;
    if (::stat(dir_.c_str(), &st) != 0) return;
    owner_ = st.st_uid;
    group_ = st.st_gid;
    const bool root_in_others = ::geteuid() == 0 && st.st_uid != 0;
    if (umask_) {
      folder_mode_ = 0777 & ~*umask_;
      file_mode_ = 0666 & ~*umask_;
    } else {
      folder_mode_ = st.st_mode & 07777;
      // Blobs are never rewritten, only read, renamed and removed; the index
      // is written by every user who shares the store.
      file_mode_ = (st.st_mode & 0666) | 0644;
    }
    shared_ = umask_ || root_in_others || (st.st_mode & 0077) != 0;
  }

  void write_file(const std::string& path, std::string_view bytes) {
    fs_.write_file_atomically(path, bytes, shared_ ? file_mode_ : 0644);
    if (shared_) give_to_store(path, file_mode_);
  }

  // The process's umask cut the mode mkdir and open were given; root's files
  // in another user's store go to that user (SQLite does the same for the
  // journals of an index root opens).
  void give_to_store(const std::string& path, mode_t mode) {
    if (::geteuid() == 0 && owner_ != 0 && ::chown(path.c_str(), owner_, group_) != 0) {
      notice("chown", errno_message("cannot give to the store folder's owner", path, errno));
    }
    (void)::chmod(path.c_str(), mode);
  }

 private:

  // -- opening, and keeping the index usable --------------------------------

  // Every store message a program can see: once per reason and store folder
  // per process, whichever of its threads' Stores meets it first.
  void notice(const std::string& reason, const std::string& message) {
    if (!noticed_.insert(reason).second) return;
    if (!first_in_process(dir_ + '\n' + reason)) return;
    warn_(message);
  }

  void open_index() {
    try {
      make_folder(dir_);
      make_folder(blob_dir_);
    } catch (const IoError&) {
      // A read-only folder that already holds a store is still readable.
      if (!fs_.stat(index_path_)) throw;
    }
    fork_generation_ = fork_generation();
    FileIdentity id = identity_of(index_path_);
    if (id.is_directory) {
      rebuild_index("it is a folder, not a file", id);
      return;
    }
    if ((!id.exists || id.size == 0) && ::access(dir_.c_str(), W_OK) == 0) {
      create_index();
      return;
    }
    try {
      connect();
      finish_filling();
    } catch (const sqlite::IndexCorruptError& e) {
      rebuild_index(e.what(), id);
    }
  }

  // A missing or empty index: made under the lock (another process may be
  // making it; then it is there once we hold the lock), and filled with the
  // blobs an earlier index named, if any.
  void create_index() {
    IndexLock lock(dir_ + "/" + kIndexLockName);
    FileIdentity id = identity_of(index_path_);
    if (id.exists && id.size > 0) {
      try {
        connect();
        if (get_meta(kFillingMeta)) adopt_blobs();  // we hold the lock
      } catch (const sqlite::IndexCorruptError& e) {
        rebuild_index(e.what(), id, /*say=*/true, /*locked=*/true);
      }
      return;
    }
    // A WAL left without its database would be replayed into the new one.
    // An empty file goes too: a new inode shares no SQLite state (its -shm
    // mapping) with a connection of this process to the emptied one.
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) remove_quietly(index_path_ + suffix);
    connect();
    uint64_t adopted = adopt_blobs();
    if (adopted > 0) {
      notice("index-rebuilt", "the store index " + index_path_ + " was " +
                                  (id.exists ? "empty" : "missing") + "; rebuilt it from " +
                                  std::to_string(adopted) + " blob files");
    }
  }

  // A store this user may read but not write: SQLite's shared locks work on a
  // file opened read-only, and a rollback journal needs nothing else, so the
  // index is read as any reader reads it. An index SQLite cannot read that
  // way (still in WAL mode from an older kcache with no -shm this user may
  // open, or a journal left by a killed writer that only a writer can roll
  // back) is read as a snapshot instead.
  void open_read_only() {
    try {
      db_ = std::make_unique<sqlite::Database>(index_path_, sqlite::OpenMode::read_only,
                                               kBusyTimeoutMs);
      db_->set_warn([this](const std::string& m) { notice("rollback", m); });
      check_schema_version();
      return;
    } catch (const IncompatibleVersionError&) {
      throw;
    } catch (const Error&) {
      db_.reset();
    }
    open_snapshot();
  }

  // The index read as it is, never written (an immutable SQLite snapshot).
  void open_snapshot() {
    db_ = std::make_unique<sqlite::Database>(index_path_, sqlite::OpenMode::immutable,
                                             kBusyTimeoutMs);
    db_->set_warn([this](const std::string& m) { notice("rollback", m); });
    check_schema_version();
  }

  void connect() {
    read_only_ = ::access(dir_.c_str(), W_OK) != 0 ||
                 (fs_.stat(index_path_) && ::access(index_path_.c_str(), W_OK) != 0);
    if (read_only_) {
      if (!fs_.stat(index_path_)) {
        std::optional<FileInfo> blobs = fs_.stat(blob_dir_);
        if (blobs && blobs->is_directory) {  // a store whose index was lost (a review's F7)
          throw IoError("cannot use the store in " + dir_ +
                        ": its index is missing and the folder is not writable, so the index "
                        "cannot be rebuilt from its blob files; make the folder writable (the "
                        "next use rebuilds it) or choose another with --dir or $KCACHE_DIR");
        }
        throw IoError("cannot create a store in " + dir_ +
                      ": the folder is not writable; choose another with --dir or $KCACHE_DIR");
      }
      open_read_only();
    } else {
      try {
        db_ = std::make_unique<sqlite::Database>(index_path_, sqlite::OpenMode::read_write_create,
                                                 kBusyTimeoutMs);
        db_->set_warn([this](const std::string& m) { notice("rollback", m); });
        if (shared_) give_to_store(index_path_, file_mode_);
        if (network_fs_.empty()) {
          use_local_journal();
        } else {
          use_rollback_journal();
        }
        create_or_check_schema();
      } catch (const sqlite::IndexCorruptError&) {
        throw;
      } catch (const IoError& e) {
        // A full disk (no room for WAL's files once the last writer removed
        // them, a review's F6): the index is still there to read, so hits
        // stay hits; nothing is stored by this process.
        if (!fs_.stat(index_path_)) throw;
        db_.reset();
        read_only_ = true;
        open_snapshot();
        notice("read-only", "the store index " + index_path_ + " cannot be opened for writing (" +
                                e.what() + "; a full disk?): looking entries up only");
      }
    }
    prepare_statements();
    index_id_ = identity_of(index_path_);
    next_lookup_check_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  }

  // The index is kept in a rollback journal, never in WAL: WAL maps
  // index.sqlite-shm into every process that uses the store, so a -shm
  // truncated by anyone kills them all with SIGBUS (the drop-in libnvrtc
  // lives in anyone's program), and a reader that may not write -shm sees
  // nothing of what is still in the -wal (a store filled by one user, read by
  // another). Hits read and never write (counters and LRU times go through
  // deferred files), so readers wait on no writer but during a commit; what
  // the journal costs a miss's write and a hit is in docs/PERFORMANCE.md
  // ("Journal mode"). TRUNCATE keeps the journal file between writes (an
  // empty one is no hot journal), saving a create and an unlink per commit.
  // synchronous = OFF: a commit survives a killed process (the journal and
  // the pages are in the page cache before the lock goes), and only a power
  // loss can damage the index, which is then rebuilt from the blob files
  // (themselves written without a sync). NORMAL would sync the journal and
  // the index at every commit: a put took 30 ms instead of 6-8 ms on the
  // build VM, where WAL took 3-16 ms (docs/PERFORMANCE.md).
  void use_local_journal() {
    // An older kcache's index is in WAL mode (the mode is kept in the file):
    // leaving it takes an exclusive lock, so while such a process has it open
    // the index stays in WAL for now and the next open tries again.
    db_->exec("SELECT count(*) FROM sqlite_master");
    if (journal_mode() == "wal") {
      db_->set_busy_timeout(kLeaveWalTimeoutMs);
      try {
        db_->exec(kLocalJournalPragma);
      } catch (const IoError& e) {
        notice("wal-kept", "the store index " + index_path_ +
                               " is in WAL mode and another process has it open (an older "
                               "kcache?); it stays in WAL until that process ends: " + e.what());
      }
      db_->set_busy_timeout(kBusyTimeoutMs);
    } else {
      db_->exec(kLocalJournalPragma);
    }
    db_->exec("PRAGMA synchronous = OFF");
  }

  std::string journal_mode() {
    sqlite::Statement s(*db_, "PRAGMA journal_mode");
    return s.step() ? s.column_text(0) : std::string();
  }

  // WAL's shared memory (-shm) is not shared between machines on a network
  // file system, so two machines would corrupt the index; a rollback journal
  // takes locks through the file system instead (sqlite.org/wal.html).
  void use_rollback_journal() {
    notice("network-fs",
           "the store in " + dir_ + " is on " + network_fs_ +
               ", a network file system where SQLite's WAL does not work across machines; the "
               "index uses a rollback journal (slower writes, needs working file locks). To "
               "share results between machines, give each machine a local store and use the "
               "remote tier (remote_url, docs/REMOTE.md)");
    try {
      db_->exec("PRAGMA journal_mode = TRUNCATE");
    } catch (const IoError& e) {
      // Another process on this machine holds it in WAL mode: it stays so.
      notice("network-fs-journal", std::string("could not leave WAL mode: ") + e.what());
    }
    db_->exec("PRAGMA synchronous = FULL");
  }

  // Before each operation: the index deleted, emptied or replaced under us,
  // or this process a fork of the one that opened it. Then reopen (which
  // creates or rebuilds as needed). A write stats the index each time; a
  // lookup at most once a second (a stat costs as much as a small hit, and
  // a lookup in a replaced index reads a stale copy: at worst a miss; damage
  // it meets is reported by SQLite and rebuilt all the same).
  void check_index_file(bool writing = true) {
    if (!db_) {  // an earlier reopen failed half-way
      reopen_index();
      return;
    }
    if (fork_generation() != fork_generation_) {
      // SQLite forbids using a connection across fork(), and even closing
      // one could release the parent's locks: the child leaves it open.
      abandon_connection();
      pending_counters_.clear();  // the parent counts these
      pending_touches_.clear();
      reopen_index();
      return;
    }
    if (read_only_) return;  // a snapshot; nothing is written through it
    if (!writing) {
      const auto now = std::chrono::steady_clock::now();
      if (now < next_lookup_check_) return;
      next_lookup_check_ = now + std::chrono::seconds(1);
    }
    if (index_file_unchanged()) return;
    reopen_index();
  }

  // open_index(), again when the index files change under it meanwhile: a
  // process deleting them while another re-creates them makes SQLite fail
  // with an I/O error (a journal gone before SQLite deletes it, ...).
  void reopen_index() {
    for (int attempt = 0;; ++attempt) {
      drop_connection();
      try {
        open_index();
        return;
      } catch (const IoError&) {
        if (attempt >= kReopenAttempts) throw;
      }
    }
  }

  bool index_file_unchanged() const {
    FileIdentity now = identity_of(index_path_);
    return now.same_file(index_id_) && !now.is_directory && now.size > 0;
  }

  // Runs `body` against the index; when SQLite reports the index damaged,
  // rebuilds it from the blobs once and runs `body` again (likewise when it
  // fails because the index was deleted or replaced meanwhile).
  template <typename F>
  auto with_index(F&& body, bool writing = true) -> decltype(body()) {
    for (int attempt = 0;; ++attempt) {
      FileIdentity damaged;
      try {
        check_index_file(writing);
        damaged = index_id_;
        return body();
      } catch (const sqlite::IndexCorruptError& e) {
        if (read_only_ || attempt > 0) throw;
        rebuild_index(e.what(), damaged);
        writing = true;  // the rebuilt index is checked as is
      } catch (const sqlite::IndexMovedError&) {
        // Its file unlinked under our connection; a new file at the same
        // path may have the same inode number, so this is the only sign.
        if (read_only_ || attempt >= kReopenAttempts) throw;
        reopen_index();
      } catch (const IoError&) {
        // The index deleted or replaced in the middle of this operation
        // (SQLite says "disk I/O error"): again, on the index there now.
        if (read_only_ || attempt >= kReopenAttempts || (db_ && index_file_unchanged())) throw;
        writing = true;
      }
    }
  }

  void drop_connection() {
    files_let_go_.fetch_add(1);
    if (db_) db_->keep_wal_on_close();
    find_.reset();
    insert_.reset();
    delete_.reset();
    touch_.reset();
    add_counter_.reset();
    add_totals_.reset();
    db_.reset();
  }

  void abandon_connection() {
    files_let_go_.fetch_add(1);
    (void)find_.release();
    (void)insert_.release();
    (void)delete_.release();
    (void)touch_.release();
    (void)add_counter_.release();
    (void)add_totals_.release();
    (void)db_.release();
  }

  void create_or_check_schema() {
    // The common case, a store made before: read, without the write lock
    // BEGIN IMMEDIATE would wait for behind every writer.
    try {
      if (get_meta("version")) {
        check_schema_version();
        return;
      }
    } catch (const sqlite::IndexCorruptError&) {
      throw;
    } catch (const IncompatibleVersionError&) {
      throw;
    } catch (const IoError&) {
      // No tables yet: made below.
    }
    sqlite::Transaction txn(*db_);
    db_->exec(
        "CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;"
        "CREATE TABLE IF NOT EXISTS entries("
        "  key TEXT PRIMARY KEY, file TEXT NOT NULL, kind INTEGER NOT NULL, arch TEXT NOT NULL,"
        "  size INTEGER NOT NULL, compile_ms INTEGER NOT NULL, created INTEGER NOT NULL,"
        "  last_used INTEGER NOT NULL) WITHOUT ROWID;"
        "CREATE INDEX IF NOT EXISTS entries_by_last_used ON entries(last_used);"
        "CREATE TABLE IF NOT EXISTS counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL) "
        "  WITHOUT ROWID;"
        "CREATE TABLE IF NOT EXISTS totals(id INTEGER PRIMARY KEY CHECK (id = 0),"
        "  total_size INTEGER NOT NULL, entries INTEGER NOT NULL);"
        "INSERT OR IGNORE INTO totals VALUES (0, 0, 0);");
    if (!get_meta("version")) {
      changed_index_ = true;
      set_meta("version", std::to_string(kSchemaVersion));
      set_meta("compatible_version", std::to_string(kCompatibleVersion));
      set_meta("max_size", std::to_string(kDefaultMaxSize));
      // A new index is filled from the blobs next (adopt_blobs), which clears
      // this: one found set was made by a process killed while filling it,
      // and is finished before it is trusted (open_index).
      set_meta(kFillingMeta, "1");
    }
    check_schema_version();
    txn.commit();
  }

  void check_schema_version() {
    std::optional<std::string> compatible = get_meta("compatible_version");
    std::optional<std::string> version = get_meta("version");
    if (!compatible || !version) {
      throw sqlite::IndexCorruptError("store index " + index_path_ + " has no version information");
    }
    if (std::atoi(compatible->c_str()) > kSchemaVersion) {
      throw IncompatibleVersionError(
          "the store in " + dir_ + " was written by a newer kcache (store version " + *version +
          ", readable by kcache store version " + *compatible + " and later; this kcache knows " +
          std::to_string(kSchemaVersion) + "). Use the newer kcache, or another folder (--dir)");
    }
  }

  // The index is damaged (or a folder): move it aside and re-index the
  // blobs, which carry everything but their last-use time. `damaged` is the
  // file found damaged: if another process replaced it meanwhile, that one is
  // used instead. Returns how many blobs were adopted.
  uint64_t rebuild_index(const std::string& why, const FileIdentity& damaged, bool say = true,
                         bool locked = false) {
    drop_connection();
    if (::access(dir_.c_str(), W_OK) != 0) {
      throw CorruptError(why + "; the store folder is read-only, so the index cannot be rebuilt");
    }
    std::optional<IndexLock> lock;
    if (!locked) lock.emplace(dir_ + "/" + kIndexLockName);
    FileIdentity now = identity_of(index_path_);
    if (now.exists && !now.is_directory && now.size > 0 && !now.same_file(damaged)) {
      connect();  // rebuilt by another process while we waited
      return 0;
    }
    const std::string aside = index_path_ + ".corrupt." + std::to_string(clock_());
    if (now.exists && std::rename(index_path_.c_str(), aside.c_str()) != 0) {
      throw IoError(errno_message("cannot move the damaged store index aside to", aside, errno));
    }
    for (const char* suffix : {"-wal", "-shm", "-journal"}) remove_quietly(index_path_ + suffix);
    connect();
    if (now.exists && !now.is_directory) salvage_settings(aside);
    uint64_t adopted = adopt_blobs();
    if (say) {
      notice("index-rebuilt", "the store index " + index_path_ + " was unreadable (" + why +
                                  "); moved it to " + aside + " and rebuilt the index from " +
                                  std::to_string(adopted) + " blob files");
    }
    return adopted;
  }

  // The size limit and counters live only in the index: copied from the
  // damaged file where they still read, else the defaults stand.
  void salvage_settings(const std::string& damaged_path) {
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
    sqlite::Transaction txn(*db_);
    changed_index_ = true;
    if (max && !max->empty() && std::all_of(max->begin(), max->end(), ::isdigit)) {
      set_meta("max_size", *max);
    }
    for (const auto& [name, value] : counters) add_counter_->bind(1, name).bind(2, value).run();
    txn.commit();
  }

  struct StrayFiles {
    uint64_t adopted = 0;
    uint64_t removed = 0;
  };

  // Every blob file no row names and no younger than `min_age_s`: adopted
  // (a row inserted) when it decodes, holds its name's key and no row has
  // that key; otherwise removed if `remove_rest` (corrupt, misnamed, or a
  // duplicate of a key a row names). A newer kcache's entry is left alone.
  StrayFiles adopt_strays(int64_t min_age_s, bool remove_rest) {
    std::set<std::string> named_files, named_keys;
    {
      sqlite::Statement all(*db_, "SELECT key, file FROM entries");
      while (all.step()) {
        named_keys.insert(all.column_text(0));
        named_files.insert(all.column_text(1));
      }
    }
    const int64_t cutoff_ns = (clock_() - min_age_s) * 1000000000;
    const int64_t cleared_ns = cleared_at_ns();
    StrayFiles result;
    std::vector<std::pair<std::string, std::string>> batch;  // shard/name
    for (const std::string& shard : shard_names()) {
      const std::string shard_dir = blob_dir_ + "/" + shard;
      for (const std::string& name : fs_.list_directory(shard_dir)) {
        if (named_files.count(name)) continue;
        std::optional<FileInfo> stat = fs_.stat(shard_dir + "/" + name);
        if (!stat || stat->is_directory) continue;
        if (stat->mtime_ns <= cleared_ns) {  // left by a clear: never an entry again
          if (remove_rest && fs_.remove_file(shard_dir + "/" + name)) result.removed += 1;
          continue;
        }
        if (min_age_s > 0 && stat->mtime_ns > cutoff_ns) continue;
        std::optional<Hash128> key = key_of_blob_name(name);
        std::string why;
        if (!key) {
          why = "temp";
        } else if (named_keys.count(key->hex())) {
          why = "duplicate";
        } else {
          try {
            std::optional<std::string> bytes = fs_.read_file(shard_dir + "/" + name);
            if (!bytes) continue;  // gone meanwhile
            Entry entry = Entry::decode(std::move(*bytes), shard_dir + "/" + name);
            if (entry.key() != *key) throw CorruptError("misnamed");
            sqlite::Transaction txn(*db_);
            changed_index_ = true;
            insert_if_absent(entry, name, stat->mtime_ns / 1000000000);
            txn.commit();
            named_keys.insert(key->hex());
            result.adopted += 1;
            continue;
          } catch (const IncompatibleVersionError&) {
            continue;  // a newer kcache's entry sharing this store: not ours
          } catch (const sqlite::IndexCorruptError&) {
            throw;
          } catch (const CorruptError&) {
            why = "corrupt";
          }
        }
        if (remove_rest && fs_.remove_file(shard_dir + "/" + name)) result.removed += 1;
      }
    }
    sqlite::Transaction txn(*db_);
    changed_index_ = true;
    recount_totals();
    txn.commit();
    return result;
  }

  // The shard folders of blobs/: a file or anything else there (a stray
  // README) is no shard, and must not stop a rebuild or a cleanup.
  std::vector<std::string> shard_names() {
    std::vector<std::string> out;
    for (const std::string& name : fs_.list_directory(blob_dir_)) {
      std::optional<FileInfo> info = fs_.stat(blob_dir_ + "/" + name);
      if (info && info->is_directory) out.push_back(name);
    }
    return out;
  }

  // When the store was last cleared, in ns (0: never, or not known).
  int64_t cleared_at_ns() {
    std::optional<std::string> v = get_meta(kClearedAtMeta);
    if (!v || v->empty() || !std::all_of(v->begin(), v->end(), ::isdigit) || v->size() > 12) return 0;
    return std::stoll(*v) * 1000000000;
  }

  // A new or rebuilt index: every blob that checks out. Corrupt ones are
  // removed; duplicates and temp files are left to cleanup's grace period.
  uint64_t adopt_blobs() {
    uint64_t adopted = adopt_strays(/*min_age_s=*/0, /*remove_rest=*/false).adopted;
    sqlite::Transaction txn(*db_);
    sqlite::Statement(*db_, "DELETE FROM meta WHERE name = ?").bind(1, kFillingMeta).run();
    txn.commit();
    return adopted;
  }

  // An index whose filling from the blobs was cut short (kFillingMeta): filled
  // now, under the lock, before any lookup trusts it (a partial index would
  // lose every entry it lacks). Another process may be filling it: then it is
  // done once we hold the lock.
  void finish_filling() {
    if (read_only_ || !get_meta(kFillingMeta)) return;
    IndexLock lock(dir_ + "/" + kIndexLockName);
    if (!get_meta(kFillingMeta)) return;
    uint64_t adopted = adopt_blobs();
    notice("index-rebuilt", "the store index " + index_path_ +
                                " was left half made by a process that was stopped; rebuilt it "
                                "from the blob files (" + std::to_string(adopted) + " adopted)");
  }

  StrayFiles adopt_or_remove_strays(int64_t grace_seconds) {
    return adopt_strays(grace_seconds, /*remove_rest=*/true);
  }

  void insert_if_absent(const Entry& entry, const std::string& file, int64_t last_used) {
    sqlite::Statement s(*db_, "INSERT OR IGNORE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    bind_row(s, entry.key().hex(), entry, file, last_used).run();
  }

  void recount_totals() {
    db_->exec(
        "UPDATE totals SET total_size = (SELECT COALESCE(SUM(size), 0) FROM entries), "
        "entries = (SELECT COUNT(*) FROM entries)");
  }

  void prepare_statements() {
    find_ = std::make_unique<sqlite::Statement>(
        *db_, "SELECT key, file, size, last_used FROM entries WHERE key = ?");
    if (read_only_) return;
    insert_ = std::make_unique<sqlite::Statement>(
        *db_, "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    delete_ = std::make_unique<sqlite::Statement>(*db_, "DELETE FROM entries WHERE key = ?");
    touch_ = std::make_unique<sqlite::Statement>(
        *db_, "UPDATE entries SET last_used = max(last_used, ?) WHERE key = ?");
    add_counter_ = std::make_unique<sqlite::Statement>(
        *db_,
        "INSERT INTO counters VALUES (?, ?) "
        "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value");
    add_totals_ = std::make_unique<sqlite::Statement>(
        *db_, "UPDATE totals SET total_size = total_size + ?, entries = entries + ?");
  }

  // -- rows ----------------------------------------------------------------

  // File names are stored without their shard folder; it follows from the key.
  // The index is data too (a store folder restored by CI, shared, or damaged):
  // a name that is not "<32 hex>.<16 hex>" must not make us read or delete a
  // file outside blobs/, so it is a CorruptError.
  std::string blob_path(const std::string& file) const {
    if (!key_of_blob_name(file)) {
      throw CorruptError("the index in " + dir_ + " names \"" + escape_for_message(file) +
                         "\" as a blob file, which is not a blob name (<32 hex>.<16 hex>)");
    }
    return join_plain_name(join_plain_name(blob_dir_, file.substr(0, 2), "blob shard"), file,
                           "blob file name");
  }

  // Deletes the blob the row of `hex` named, unless the name is no blob name
  // of that key (then only the row goes, and the name is reported): a row
  // naming another key's blob must not delete that intact entry.
  void remove_blob_quietly(const std::string& hex, const std::string& file) {
    if (!blob_of_key(file, hex)) {
      notice("not-a-blob-name", "not removing \"" + escape_for_message(file) +
                                    "\", named as a blob file by the index, which is not a blob "
                                    "name of its key");
      return;
    }
    remove_quietly(blob_path(file));
  }

  static Row row_from(sqlite::Statement& s) {
    Row row;
    row.key = s.column_text(0);
    row.file = s.column_text(1);
    row.size = s.column_int(2);
    return row;
  }

  static EntryInfo info_from(sqlite::Statement& s) {
    EntryInfo info;
    info.key = Hash128::from_hex(s.column_text(0)).value_or(Hash128{});
    info.kind = kind_from_code(s.column_int(1));
    info.arch = s.column_text(2);
    // The index is data too: what `kcache ls` prints must not rewrite a terminal.
    if (!parse_arch(info.arch)) info.arch = escape_for_message(info.arch);
    info.size = static_cast<uint64_t>(s.column_int(3));
    info.compile_ms = static_cast<uint32_t>(s.column_int(4));
    info.created_unix_s = s.column_int(5);
    info.last_used_unix_s = s.column_int(6);
    return info;
  }

  bool find_row(const std::string& hex, Row* row) {
    find_->bind(1, hex);
    if (!find_->step()) return false;
    *row = row_from(*find_);
    row->last_used = find_->column_int(3);
    find_->reset();
    return true;
  }

  void delete_row(const std::string& hex, int64_t size) {
    delete_->bind(1, hex).run();
    if (db_->changes() > 0) add_totals(-size, -1);
  }

  void add_totals(int64_t bytes, int64_t entries) {
    add_totals_->bind(1, bytes).bind(2, entries).run();
  }

  // Removes an entry whose blob is missing or corrupt, if the row still names
  // that blob (another process may have replaced it meanwhile).
  void drop_bad_entry(const std::string& hex, const std::string& file, const std::string& why,
                      bool warn = true) {
    if (warn) notice("corrupt-entry", "removed a corrupt cache entry: " + why + "; it will be recompiled");
    pending_counters_["corrupt_removed"] += 1;
    if (read_only_) return;
    try {
      sqlite::Transaction txn(*db_);
      changed_index_ = true;
      Row row;
      if (find_row(hex, &row) && row.file == file) delete_row(hex, row.size);
      txn.commit();
      remove_blob_quietly(hex, file);
    } catch (const sqlite::IndexCorruptError&) {
      throw;  // the index itself is damaged: with_index rebuilds it
    } catch (const Error& e) {
      notice("corrupt-entry-remove", std::string("could not remove the corrupt entry: ") + e.what());
    }
  }

  // -- counters, eviction --------------------------------------------------

  void write_pending() {
    const int64_t now = clock_();
    for (const std::string& hex : pending_touches_) touch_->bind(1, now).bind(2, hex).run();
    for (const auto& [name, delta] : pending_counters_) {
      if (delta != 0) add_counter_->bind(1, name).bind(2, delta).run();
    }
  }

  std::optional<std::string> get_meta(const std::string& name) {
    sqlite::Statement s(*db_, "SELECT value FROM meta WHERE name = ?");
    s.bind(1, name);
    if (!s.step()) return std::nullopt;
    return s.column_text(0);
  }

  void set_meta(const std::string& name, const std::string& value) {
    sqlite::Statement s(*db_, "INSERT OR REPLACE INTO meta VALUES (?, ?)");
    s.bind(1, name).bind(2, value).run();
  }

  uint64_t max_size() {
    std::optional<std::string> v = get_meta("max_size");
    return v ? std::strtoull(v->c_str(), nullptr, 10) : kDefaultMaxSize;
  }

  // If the store holds more than `cap` bytes, evicts least recently used
  // entries until it holds at most cap * fraction. A cap of 0 means no limit.
  CleanupResult evict_to(uint64_t cap, double fraction) {
    if (cap == 0) return {};
    {
      sqlite::Statement total(*db_, "SELECT total_size FROM totals");
      if (!total.step() || static_cast<uint64_t>(total.column_int(0)) <= cap) return {};
    }
    const auto target = static_cast<int64_t>(static_cast<double>(cap) * fraction);
    CleanupResult result =
        evict_where([target](const Row&, int64_t total) { return total > target; });
    if (result.entries_removed > 0) {
      // Manifests go with the entries: those last used before every entry
      // kept are older than anything the cap kept (store.h says why).
      std::optional<int64_t> oldest_kept;
      sqlite::Statement s(*db_, "SELECT MIN(last_used) FROM entries");
      if (s.step() && !s.column_is_null(0)) oldest_kept = s.column_int(0);
      result.manifests_removed =
          remove_manifests_used_before(oldest_kept.value_or(0), /*everything=*/!oldest_kept);
    }
    return result;
  }

  // -- manifests (files beside the index: cache/manifest.h) ------------------

  // Removes the manifests (not temp files) whose mtime is before `cutoff_s`,
  // or all of them; returns how many.
  uint64_t remove_manifests_used_before(int64_t cutoff_s, bool everything) {
    const int64_t cutoff_ns = cutoff_s * 1000000000;
    uint64_t removed = 0;
    for (const ManifestFile& file : list_manifest_files(dir_, fs_)) {
      if (!file.key || (!everything && file.info.mtime_ns >= cutoff_ns)) continue;
      if (remove_manifest_quietly(file)) removed += 1;
    }
    return removed;
  }

  // Why the manifest cannot be used, or "" when it parses (a newer kcache's
  // manifest too: not ours to judge). Errors other than a damaged file (an
  // unreadable folder) are thrown: housekeeping should not hide them.
  std::string manifest_problem(const ManifestFile& file) {
    try {
      std::optional<std::string> bytes = fs_.read_file(file.path);
      if (bytes) Manifest::decode(*bytes, *file.key, "manifest " + file.path);
      return "";  // or gone meanwhile
    } catch (const IncompatibleVersionError&) {
      return "";
    } catch (const CorruptError& e) {
      return e.what();
    }
  }

  bool remove_manifest_quietly(const ManifestFile& file) {
    try {
      return fs_.remove_file(file.path);
    } catch (const Error& e) {
      notice("remove-manifest", e.what());
      return false;
    }
  }

  // Deletes, in one transaction, the rows `victim` picks, then their files.
  // Rows are offered least recently used first, with the store's total size
  // as it would be after the victims picked so far are gone.
  CleanupResult evict_where(const std::function<bool(const Row& row, int64_t total)>& victim) {
    std::vector<Row> victims;
    {
      sqlite::Transaction txn(*db_);
      changed_index_ = true;
      int64_t total = 0;
      {
        sqlite::Statement s(*db_, "SELECT total_size FROM totals");
        if (s.step()) total = s.column_int(0);
      }
      sqlite::Statement rows(
          *db_, "SELECT key, file, size, last_used FROM entries ORDER BY last_used, created, key");
      while (rows.step()) {
        Row row = row_from(rows);
        row.last_used = rows.column_int(3);
        if (!victim(row, total)) continue;
        total -= row.size;
        victims.push_back(std::move(row));
      }
      for (const Row& row : victims) delete_row(row.key, row.size);
      if (!victims.empty()) {
        add_counter_->bind(1, std::string("evicted"))
            .bind(2, static_cast<int64_t>(victims.size()))
            .run();
      }
      txn.commit();
    }
    CleanupResult result;
    for (const Row& row : victims) {
      remove_blob_quietly(row.key, row.file);
      result.entries_removed += 1;
      result.bytes_removed += static_cast<uint64_t>(row.size);
    }
    return result;
  }

  // Deferred files' temp files and claimed files older than the grace period:
  // left by a killed process.
  uint64_t remove_stale_deferred() {
    const int64_t cutoff_ns = (clock_() - kStrayGraceSeconds) * 1000000000;
    uint64_t removed = 0;
    for (const std::string& name : fs_.list_directory(deferred_dir_)) {
      if (is_deferred_name(name)) continue;
      std::optional<FileInfo> info = fs_.stat(deferred_dir_ + "/" + name);
      if (!info || info->is_directory || info->mtime_ns > cutoff_ns) continue;
      if (fs_.remove_file(deferred_dir_ + "/" + name)) removed += 1;
    }
    return removed;
  }

  void remove_quietly(const std::string& path) {
    try {
      fs_.remove_file(path);
    } catch (const Error& e) {
      notice("remove", e.what());
    }
  }

  void require_writable(const std::string& what) const {
    if (read_only_) {
      throw IoError("cannot " + what + ": the store in " + dir_ + " is read-only " +
                    (::access(dir_.c_str(), W_OK) == 0
                         ? "in this process (its index could not be opened for writing: a full "
                           "disk?)"
                         : "for this user (check its permissions, or use --dir)"));
    }
  }

  const std::string dir_;
  const std::string blob_dir_;
  const std::string index_path_;
  const std::string deferred_dir_;
  FileSystem& fs_;
  std::function<void(const std::string&)> warn_;
  std::function<int64_t()> clock_;
  const std::string network_fs_;  // "" on a local file system
  uint64_t fork_generation_ = 0;  // fork_generation() when db_ was opened
  std::atomic<uint64_t> files_let_go_{0};  // drop_connection, abandon_connection
  std::chrono::steady_clock::time_point next_lookup_check_;
  FileIdentity index_id_;         // the index file db_ has open
  std::set<std::string> noticed_;
  const std::optional<mode_t> umask_;
  bool shared_ = false;  // learn_sharing()
  mode_t folder_mode_ = kPrivateFolderMode;
  mode_t file_mode_ = 0644;
  uid_t owner_ = 0;
  gid_t group_ = 0;
  bool changed_index_ = false;  // entries, settings or schema written by this process
  bool read_only_ = false;
  std::unique_ptr<sqlite::Database> db_;
  std::unique_ptr<sqlite::Statement> find_, insert_, delete_, touch_, add_counter_, add_totals_;
  std::map<std::string, int64_t> pending_counters_;
  std::vector<std::string> pending_touches_;
};

}  // namespace

bool store_quiet() {
  const char* quiet = std::getenv("KCACHE_QUIET");
  return quiet && *quiet && std::strcmp(quiet, "0") != 0;
}

std::string default_store_dir() {
  if (const char* dir = std::getenv("KCACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/kcache";
  }
  const char* home = std::getenv("HOME");
  if (!home || !*home) {
    const struct passwd* pw = getpwuid(getuid());
    home = pw ? pw->pw_dir : nullptr;
  }
  if (!home) {
    throw InvalidArgument("cannot find a folder for the store: set KCACHE_DIR or pass --dir");
  }
  return std::string(home) + "/.cache/kcache";
}

std::unique_ptr<Store> Store::open(const std::string& dir, StoreOptions options) {
  if (dir.empty()) throw InvalidArgument("the store folder is empty; pass --dir or set KCACHE_DIR");
  // Absolute from here on: a relative folder names the one it names now,
  // not whatever the process's working folder is later (a program under the
  // drop-in that changes its folder would otherwise grow a store in each).
  std::error_code error;
  std::string absolute = std::filesystem::absolute(dir, error).lexically_normal().string();
  while (absolute.size() > 1 && absolute.back() == '/') absolute.pop_back();
  return std::make_unique<SqliteStore>(error ? dir : absolute, std::move(options));
}

}  // namespace kcache::cache
