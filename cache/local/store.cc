#include "cache/local/store.h"

#include <linux/magic.h>
#include <pwd.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "cache/format/manifest.h"
#include "cache/local/sqlite.h"
#include "cache/local/store_blobs.h"
#include "cache/local/store_deferred.h"
#include "cache/local/store_folder.h"
#include "cache/local/store_index.h"
#include "cache/local/store_recovery.h"
#include "common/environment.h"
#include "common/error.h"
#include "common/safe_path.h"

namespace kcache::cache {
namespace {

// Store layout (one folder, shared by every process):
//   index.sqlite        the index: one row per entry, counters, meta (store_index.h)
//   index.lock          held while the index is made or rebuilt (store_recovery.h)
//   blobs/ab/<key>.<id> one file per entry (the encoded Entry; store_blobs.h)
//   deferred/<id>       counters and LRU times of processes that wrote
//                       nothing else, until a writer merges them (store_deferred.h)
//   manifests/          direct-mode manifests (cache/format/manifest.h): files of
//                       their own, so nothing of theirs is lost with the index
//
// This file is the Store itself: what each operation does, in terms of those
// parts. The blob files are the truth, the index is derived from them; a
// put writes its blob before the row that names it, so a process killed at
// any point leaves at worst a stray file, which cleanup() adopts (or
// removes) once it is older than kStrayGraceSeconds.

// A file with no row younger than this may be a put still in progress.
constexpr int64_t kStrayGraceSeconds = 15 * 60;
// Evict down to this fraction of the cap so that not every put evicts.
constexpr double kEvictTargetFraction = 0.9;
// Buffered hits are written at the latest after this many.
constexpr size_t kMaxPendingTouches = 512;
// A blob no row names written this recently is a put whose row is not in
// yet: taking it back is no news.
constexpr int64_t kPutInFlightSeconds = 10;

int64_t system_clock_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void warn_to_stderr(const std::string& message) {
  if (store_quiet()) return;
  std::fprintf(stderr, "kcache: %s\n", message.c_str());
}

// Network file systems where the index must sync every commit and file
// locks are the file system's, by statfs magic; "" for anything else.
std::string network_file_system_of(const std::string& dir) {
  struct statfs fs;
  if (::statfs(dir.c_str(), &fs) != 0) return "";
  // clang-format off
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
  // clang-format on
}

int64_t seconds_to_ns(int64_t seconds) { return seconds * 1000000000; }

class SqliteStore : public Store {
 public:
  SqliteStore(std::string dir, StoreOptions options)
      : clock_(options.clock ? options.clock : system_clock_now),
        folder_(std::move(dir), options.fs ? *options.fs : FileSystem::real(),
                options.warn ? options.warn : warn_to_stderr, options.umask),
        fs_(folder_.fs()),
        blobs_(folder_),
        index_(folder_, (options.network_file_system ? options.network_file_system
                                                     : network_file_system_of)(folder_.dir())),
        keeper_(folder_, index_, blobs_, clock_, [this] { forget_pending(); }),
        deferred_(folder_),
        merge_one_in_(options.merge_deferred_one_in) {
    keeper_.reopen();
  }

  ~SqliteStore() override {
    try {
      flush();
    } catch (const std::exception& e) {
      folder_.notice("flush", std::string("could not record cache statistics: ") + e.what());
    }
    keeper_.let_go_if_forked();  // the parent's connection
  }

  // -- entries --------------------------------------------------------------

  std::optional<Entry> get(const Hash128& key, Access access) override {
    return keeper_.with_index([&] { return get_from_index(key, access); }, /*writing=*/false);
  }

  void put(const Entry& entry) override {
    require_writable("store a new entry");
    const std::string hex = entry.key().hex();
    const std::string file = blobs_.write(entry);
    std::optional<IndexRow> old;
    try {
      keeper_.with_index([&] { old = insert_row(entry, file); });
    } catch (...) {
      blobs_.remove(hex, file);  // the row was not written: nothing names this file
      throw;
    }
    // The index deleted or replaced while we wrote it: the row goes into the
    // one that is there now too (or its rebuild adopts the blob, which is on
    // disk before any row names it).
    if (!keeper_.unchanged()) {
      std::optional<IndexRow> again;
      keeper_.with_index([&] { again = insert_row(entry, file); });
      if (!old) old = again;
    }
    // Not when a rebuild adopted this very file meanwhile.
    if (old && old->file != file) blobs_.remove(hex, old->file);
    keeper_.with_index([&] { evict_to(index_.max_size(), kEvictTargetFraction); });
  }

  bool remove(const Hash128& key) override {
    require_writable("remove an entry");
    const std::string hex = key.hex();
    IndexRow row;
    bool found = keeper_.with_index([&] {
      sqlite::Transaction txn(index_.db());
      if (!index_.find(hex, &row)) return false;
      index_.erase(hex, row.size);
      txn.commit();
      return true;
    });
    if (found) blobs_.remove(hex, row.file);
    return found;
  }

  std::optional<EntryInfo> info(const Hash128& key) override {
    return keeper_.with_index([&] { return index_.info(key.hex()); });
  }

  std::vector<EntryInfo> list() override {
    merge_deferred();  // the LRU times it shows
    return keeper_.with_index([&] { return index_.list(); });
  }

  // -- statistics -----------------------------------------------------------

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
    forget_pending();
    // Nothing can be recorded in a read-only store; hits still worked.
    if (index_.read_only() || record.empty()) return;
    const uint64_t id = deferred_.write(record);
    if (merge_one_in_ != 0 && id % merge_one_in_ == 0) merge_deferred();
  }

  StoreStats stats() override {
    if (index_.read_only()) {
      StoreStats out = keeper_.with_index([&] { return stats_with_pending(); });
      for (const auto& [name, delta] : deferred_.peek().counters) out.counters[name] += delta;
      return out;
    }
    keeper_.with_index([&] { write_merging([&] { write_pending(); }); });
    forget_pending();
    return keeper_.with_index([&] { return stats_with_pending(); });
  }

  void zero_stats() override {
    require_writable("zero the statistics");
    pending_counters_.clear();
    keeper_.with_index([&] {
      write_merging([&] {
        index_.zero_counters();
        index_.set_meta("stats_zeroed_at", std::to_string(clock_()));
      });
    });
  }

  // -- housekeeping ---------------------------------------------------------

  void set_max_size(uint64_t bytes) override {
    require_writable("change the size limit");
    keeper_.with_index([&] {
      write_merging([&] { index_.set_meta("max_size", std::to_string(bytes)); });
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
      keeper_.with_index([&] {
        sqlite::Transaction txn(index_.db());
        named = index_.erase_all();
        // A blob this clear leaves (one it cannot remove, or a clear cut
        // short) is never taken back into the index (take_back_blob,
        // adopt_strays): `kcache -C` is the way out of a bad entry.
        index_.set_meta(kClearedAtMeta, std::to_string(clock_()));
        txn.commit();
      });
    } catch (const Error& e) {
      index_usable = false;
      folder_.notice("clear", std::string("the store index could not be read (") + e.what() +
                                  "); removing every blob file and starting a new index");
    }
    CleanupResult result = remove_every_blob(named);
    if (!index_usable) keeper_.start_over();
    // Manifests only point at entries: without them they are useless.
    result.manifests_removed = remove_manifest_files(folder_.dir(), fs_);
    return result;
  }

  CleanupResult cleanup() override {
    require_writable("clean it up");
    CleanupResult result;
    merge_deferred();
    result.stray_files_removed += deferred_.remove_stale(grace_cutoff_ns());
    keeper_.with_index([&] {
      IndexKeeper::StrayFiles strays = keeper_.adopt_strays(kStrayGraceSeconds, true);
      result = evict_to(index_.max_size(), 1.0);
      result.stray_files_removed += strays.removed;
      result.stray_files_adopted = strays.adopted;
    });
    // Manifest leftovers: temp files of killed writers (a rename is atomic, so
    // a file under a key's name is whole: one that does not parse is damaged).
    const int64_t cutoff_ns = grace_cutoff_ns();
    for (const ManifestFile& file : list_manifest_files(folder_.dir(), fs_)) {
      bool stray = file.key ? !manifest_problem(file).empty() : file.info.mtime_ns <= cutoff_ns;
      if (stray && remove_manifest_quietly(file)) result.stray_files_removed += 1;
    }
    return result;
  }

  CleanupResult evict_older_than(std::chrono::seconds age) override {
    require_writable("evict entries");
    const int64_t cutoff = clock_() - age.count();
    merge_deferred();
    CleanupResult result = keeper_.with_index([&] {
      return evict_where([cutoff](const IndexRow& row, int64_t) { return row.last_used < cutoff; });
    });
    // Temp files are left to cleanup(), which knows when one is abandoned.
    result.manifests_removed = remove_manifests_used_before(cutoff, /*everything=*/false);
    return result;
  }

  VerifyResult verify() override {
    require_writable("verify it (corrupt entries are removed)");
    VerifyResult result;
    keeper_.check();
    // The index itself first: a damaged one is rebuilt before its rows are
    // trusted (the rebuild checks every blob it adopts).
    if (std::string damage = index_.quick_check(); !damage.empty()) {
      uint64_t adopted =
          keeper_.rebuild("PRAGMA quick_check: " + damage, keeper_.opened(), /*say=*/false);
      result.problems.push_back("index: " + damage + " (moved aside and rebuilt from " +
                                std::to_string(adopted) + " blob files)");
    }
    flush();
    verify_entries(&result);
    // The running totals must equal what the rows say.
    keeper_.with_index([&] {
      sqlite::Transaction txn(index_.db());
      index_.recount_totals();
      txn.commit();
    });
    verify_manifests(&result);
    return result;
  }

  const std::string& dir() const override { return folder_.dir(); }
  uint64_t files_let_go() const override { return index_.files_let_go(); }
  bool read_only() const override { return index_.read_only(); }
  void make_folder(const std::string& folder) override { folder_.make_folder(folder); }

 private:
  // -- lookups --------------------------------------------------------------

  std::optional<Entry> get_from_index(const Hash128& key, Access access) {
    // Twice: a concurrent put may replace the file between our lookup and read.
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::optional<std::optional<Entry>> found = read_indexed(key, access, attempt == 0);
      if (!found) continue;
      if (*found) return *found;
      break;
    }
    if (std::optional<Entry> entry = take_back_blob(key)) {
      if (access == Access::lookup) count_hit(*entry);
      return entry;
    }
    if (access == Access::lookup) pending_counters_["misses"] += 1;
    return std::nullopt;
  }

  // The entry the row of `key` names: the entry, or nullopt inside when there
  // is none to be had (no row, a bad blob: removed), or nullopt when the blob
  // is missing and `may_retry`.
  std::optional<std::optional<Entry>> read_indexed(const Hash128& key, Access access,
                                                   bool may_retry) {
    const std::string hex = key.hex();
    IndexRow row;
    if (!index_.find(hex, &row)) return std::optional<Entry>();
    if (!blob_of_key(row.file, hex)) {
      drop_bad_entry(hex, row.file,
                     "the index names \"" + escape_for_message(row.file) +
                         "\" as its blob file, which is not a blob name of this key");
      return std::optional<Entry>();
    }
    std::optional<std::string> bytes = blobs_.read(row.file);
    if (!bytes) {
      if (may_retry) return std::nullopt;
      drop_bad_entry(hex, row.file, "its blob file " + blobs_.path(row.file) + " is missing");
      return std::optional<Entry>();
    }
    try {
      Entry entry = Entry::decode(std::move(*bytes), "cache entry " + hex);
      if (entry.key() != key) {
        throw CorruptError("cache entry " + hex + " holds the entry for " + entry.key().hex());
      }
      if (access == Access::maintenance) return entry;
      if (access == Access::lookup) count_hit(entry);
      pending_touches_.push_back(hex);
      if (pending_touches_.size() >= kMaxPendingTouches) flush_or_drop();
      return entry;
    } catch (const IncompatibleVersionError&) {
      return std::optional<Entry>();  // a newer kcache's sharing this store: not ours to delete
    } catch (const CorruptError& e) {
      drop_bad_entry(hex, row.file, e.what());
      return std::optional<Entry>();
    }
  }

  void count_hit(const Entry& entry) {
    pending_counters_["hits"] += 1;
    pending_counters_["compile_ms_saved"] += entry.compile_ms();
  }

  // Before a miss: a blob file of `key` that no row names (an index replaced
  // by an older copy of itself, or cut short; a put whose row is not in yet)
  // is the entry, taken back into the index. The blob files are the truth; a
  // miss costs a compile, and this one listing of the key's shard folder.
  // Nothing is removed here.
  std::optional<Entry> take_back_blob(const Hash128& key) {
    const std::string shard_dir = blobs_.shard_dir(key.hex().substr(0, 2));
    for (const BlobFiles::Found& found : blobs_.files_of(key, index_.cleared_at_ns())) {
      try {
        std::optional<Entry> entry = blobs_.read_entry(shard_dir + "/" + found.name, key);
        if (!entry) continue;
        if (!index_.read_only()) index_taken_back(*entry, found);
        return entry;
      } catch (const sqlite::IndexCorruptError&) {
        throw;
      } catch (const Error&) {
        continue;  // damaged, a newer kcache's, unreadable: cleanup's to judge
      }
    }
    return std::nullopt;
  }

  void index_taken_back(const Entry& entry, const BlobFiles::Found& found) {
    sqlite::Transaction txn(index_.db());
    index_.insert_if_absent(entry, found.name, clock_());
    if (index_.db().changes() > 0) {
      index_.add_totals(static_cast<int64_t>(entry.encoded().size()), 1);
    }
    txn.commit();
    if (found.mtime_ns > seconds_to_ns(clock_() - kPutInFlightSeconds)) return;
    folder_.notice("blob-taken-back",
                   "the store index " + index_.path() +
                       " had no row for blob files it holds (an older copy of the index, or one "
                       "cut short); took them back as they were looked up (`kcache -c` takes "
                       "back the rest)");
  }

  // Removes an entry whose blob is missing or corrupt, if the row still names
  // that blob (another process may have replaced it meanwhile).
  void drop_bad_entry(const std::string& hex, const std::string& file, const std::string& why,
                      bool warn = true) {
    if (warn) {
      folder_.notice("corrupt-entry",
                     "removed a corrupt cache entry: " + why + "; it will be recompiled");
    }
    pending_counters_["corrupt_removed"] += 1;
    if (index_.read_only()) return;
    try {
      sqlite::Transaction txn(index_.db());
      IndexRow row;
      if (index_.find(hex, &row) && row.file == file) index_.erase(hex, row.size);
      txn.commit();
      blobs_.remove(hex, file);
    } catch (const sqlite::IndexCorruptError&) {
      throw;  // the index itself is damaged: with_index rebuilds it
    } catch (const Error& e) {
      folder_.notice("corrupt-entry-remove",
                     std::string("could not remove the corrupt entry: ") + e.what());
    }
  }

  // -- writes and what this process counted ---------------------------------

  std::optional<IndexRow> insert_row(const Entry& entry, const std::string& file) {
    const std::string hex = entry.key().hex();
    std::optional<IndexRow> old;
    const int64_t now = clock_();
    write_merging([&] {
      // In the transaction: a put retried after a failed commit counts once.
      index_.add_counter("stored", 1);
      old.reset();
      IndexRow previous;
      if (index_.find(hex, &previous)) old = previous;
      index_.insert(entry, file, now);
      index_.add_totals(static_cast<int64_t>(entry.encoded().size()) - (old ? old->size : 0),
                        old ? 0 : 1);
      write_pending();
    });
    forget_pending();
    return old;
  }

  // Runs `write` in one write transaction with the merge of every deferred
  // file, applied first. A claimed file is removed once the transaction
  // commits and given back when it does not; a writer killed in between
  // loses those counts (cleanup() removes what it left).
  template <typename F>
  void write_merging(F&& write) {
    std::vector<DeferredFiles::Claimed> claimed;
    DeferredRecord deferred = deferred_.claim(&claimed);
    try {
      sqlite::Transaction txn(index_.db());
      for (const auto& [hex, when] : deferred.used) index_.touch(hex, when);
      for (const auto& [name, delta] : deferred.counters) {
        if (delta != 0) index_.add_counter(name, delta);
      }
      write();
      txn.commit();
    } catch (...) {
      DeferredFiles::give_back(claimed);
      throw;
    }
    DeferredFiles::remove(claimed);
  }

  // Best effort: statistics never fail an operation.
  void merge_deferred() {
    if (index_.read_only()) return;
    try {
      keeper_.with_index([&] { write_merging([] {}); });
    } catch (const Error& e) {
      folder_.notice("flush", std::string("could not record cache statistics: ") + e.what());
    }
  }

  // A hit stays a hit when its statistics cannot be written (a full disk).
  void flush_or_drop() {
    try {
      flush();
    } catch (const Error& e) {
      folder_.notice("flush", std::string("could not record cache statistics: ") + e.what());
      forget_pending();
    }
  }

  void write_pending() {
    const int64_t now = clock_();
    for (const std::string& hex : pending_touches_) index_.touch(hex, now);
    for (const auto& [name, delta] : pending_counters_) {
      if (delta != 0) index_.add_counter(name, delta);
    }
  }

  void forget_pending() {
    pending_counters_.clear();
    pending_touches_.clear();
  }

  StoreStats stats_with_pending() {
    StoreStats out = index_.stats();
    for (const auto& [name, delta] : pending_counters_) out.counters[name] += delta;
    return out;
  }

  // -- eviction -------------------------------------------------------------

  // If the store holds more than `cap` bytes, evicts least recently used
  // entries until it holds at most cap * fraction. A cap of 0 means no limit.
  CleanupResult evict_to(uint64_t cap, double fraction) {
    if (cap == 0 || static_cast<uint64_t>(index_.total_size()) <= cap) return {};
    const auto target = static_cast<int64_t>(static_cast<double>(cap) * fraction);
    CleanupResult result =
        evict_where([target](const IndexRow&, int64_t total) { return total > target; });
    if (result.entries_removed > 0) {
      // Manifests go with the entries: those last used before every entry
      // kept are older than anything the cap kept (store.h says why).
      std::optional<int64_t> oldest_kept = index_.oldest_last_used();
      result.manifests_removed =
          remove_manifests_used_before(oldest_kept.value_or(0), /*everything=*/!oldest_kept);
    }
    return result;
  }

  // Deletes, in one transaction, the rows `victim` picks, then their files.
  // Rows are offered least recently used first, with the store's total size
  // as it would be after the victims picked so far are gone.
  CleanupResult evict_where(const std::function<bool(const IndexRow& row, int64_t total)>& victim) {
    std::vector<IndexRow> victims;
    {
      sqlite::Transaction txn(index_.db());
      int64_t total = index_.total_size();
      index_.each_row_least_recently_used_first([&](const IndexRow& row) {
        if (!victim(row, total)) return;
        total -= row.size;
        victims.push_back(row);
      });
      for (const IndexRow& row : victims) index_.erase(row.key, row.size);
      if (!victims.empty()) index_.add_counter("evicted", static_cast<int64_t>(victims.size()));
      txn.commit();
    }
    CleanupResult result;
    for (const IndexRow& row : victims) {
      blobs_.remove(row.key, row.file);
      result.entries_removed += 1;
      result.bytes_removed += static_cast<uint64_t>(row.size);
    }
    return result;
  }

  // clear()'s: every blob file, named by a row (`named`: file -> size) or not,
  // but temp files younger than the grace period (a put in progress).
  CleanupResult remove_every_blob(const std::map<std::string, int64_t>& named) {
    CleanupResult result;
    const int64_t cutoff_ns = grace_cutoff_ns();
    for (const std::string& shard : blobs_.shard_names()) {
      const std::string shard_dir = blobs_.shard_dir(shard);
      for (const std::string& name : fs_.list_directory(shard_dir)) {
        auto row = named.find(name);
        if (row != named.end()) {
          folder_.remove_quietly(shard_dir + "/" + name);
          result.entries_removed += 1;
          result.bytes_removed += static_cast<uint64_t>(row->second);
          continue;
        }
        std::optional<FileInfo> stat = fs_.stat(shard_dir + "/" + name);
        if (!stat || stat->is_directory) continue;
        if (!key_of_blob_name(name) && stat->mtime_ns > cutoff_ns) continue;
        if (fs_.remove_file(shard_dir + "/" + name)) result.stray_files_removed += 1;
      }
    }
    return result;
  }

  int64_t grace_cutoff_ns() { return seconds_to_ns(clock_() - kStrayGraceSeconds); }

  // -- verify ---------------------------------------------------------------

  // Every row's blob read and checked; a bad one's entry removed.
  void verify_entries(VerifyResult* result) {
    std::vector<IndexRow> rows = keeper_.with_index([&] { return index_.rows_by_key(); });
    for (const IndexRow& row : rows) {
      result->entries_checked += 1;
      std::string problem = blobs_.problem(row.key, row.file, row.size);
      if (problem.empty()) continue;
      result->problems.push_back(row.key + ": " + problem + " (removed)");
      keeper_.with_index([&] { drop_bad_entry(row.key, row.file, problem, /*warn=*/false); });
    }
  }

  void verify_manifests(VerifyResult* result) {
    for (const ManifestFile& file : list_manifest_files(folder_.dir(), fs_)) {
      if (!file.key) continue;  // temp files and strays: cleanup()'s
      result->manifests_checked += 1;
      std::string problem = manifest_problem(file);
      if (problem.empty()) continue;
      result->problems.push_back("manifest " + file.key->hex() + ": " + problem + " (removed)");
      remove_manifest_quietly(file);
    }
  }

  // -- manifests (files beside the index: cache/format/manifest.h) ------------------

  // Removes the manifests (not temp files) whose mtime is before `cutoff_s`,
  // or all of them; returns how many.
  uint64_t remove_manifests_used_before(int64_t cutoff_s, bool everything) {
    const int64_t cutoff_ns = seconds_to_ns(cutoff_s);
    uint64_t removed = 0;
    for (const ManifestFile& file : list_manifest_files(folder_.dir(), fs_)) {
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
      folder_.notice("remove-manifest", e.what());
      return false;
    }
  }

  void require_writable(const std::string& what) const {
    if (index_.read_only()) {
      throw IoError("cannot " + what + ": the store in " + folder_.dir() + " is read-only " +
                    (::access(folder_.dir().c_str(), W_OK) == 0
                         ? "in this process (its index could not be opened for writing: a full "
                           "disk?)"
                         : "for this user (check its permissions, or use --dir)"));
    }
  }

  std::function<int64_t()> clock_;
  StoreFolder folder_;
  FileSystem& fs_;
  BlobFiles blobs_;
  StoreIndex index_;
  IndexKeeper keeper_;
  DeferredFiles deferred_;
  const uint64_t merge_one_in_;  // StoreOptions::merge_deferred_one_in
  std::map<std::string, int64_t> pending_counters_;
  std::vector<std::string> pending_touches_;
};

}  // namespace

bool store_quiet() {
  const char* quiet = env::read(env::Var::kcache_quiet);
  return quiet && *quiet && std::strcmp(quiet, "0") != 0;
}

std::string default_store_dir() {
  if (const char* dir = env::read(env::Var::kcache_dir); dir && *dir) return dir;
  if (const char* xdg = env::read(env::Var::xdg_cache_home); xdg && *xdg) {
    return std::string(xdg) + "/kcache";
  }
  const char* home = env::read(env::Var::home);
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
