// The store's index: index.sqlite, one row per entry (its blob file, size,
// kind, arch, times), the counters, the running totals and `meta` (schema
// version, size limit). The schema, its statements and queries, and how the
// index journals a write live here; keeping the index usable (locks,
// rebuilds, reopening) is store_recovery.h's.
//
// Payloads live in blob files rather than inline in SQLite: on this class of
// machine reading a 200 KB payload through the index and a file costs about
// what a plain read() does, inline blobs cost 2.5x (docs/PERFORMANCE.md,
// bench/blob_placement_bench.cc), and evicting a file gives the space back at
// once instead of leaving free pages in the database.
//
// Private to cache/local/store.cc and its parts.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cache/format/entry.h"
#include "cache/local/sqlite.h"
#include "cache/local/store.h"
#include "cache/local/store_folder.h"

namespace kcache::cache {

constexpr const char* kIndexName = "index.sqlite";
// Set in a new index until it has been filled from the blob files.
constexpr const char* kFillingMeta = "filling";
// When the store was last cleared (unix seconds): older blobs are not taken back.
constexpr const char* kClearedAtMeta = "cleared_at";

struct IndexRow {
  std::string key;  // hex
  std::string file;
  int64_t size = 0;
  int64_t last_used = 0;
};

class StoreIndex {
 public:
  // `network_fs`: the network file system the store is on, "" for a local one.
  StoreIndex(StoreFolder& folder, std::string network_fs);

  const std::string& path() const { return path_; }

  // -- the connection ---------------------------------------------------------

  // Opens index.sqlite (read-only when this user may not write the folder or
  // the index, or when the disk is full), sets its journal and makes or
  // checks its schema. Throws sqlite::IndexCorruptError for a damaged index,
  // IncompatibleVersionError for a newer kcache's, IoError otherwise.
  void connect();
  // Closes the connection (to reopen it, or for good).
  void drop();
  // Forgets the connection without closing it: SQLite forbids using a
  // connection across fork(), and even closing one could release the
  // parent's locks, so a forked child leaves it open.
  void abandon();
  bool connected() const { return db_ != nullptr; }
  bool read_only() const { return read_only_; }
  // How many times drop() or abandon() let go of the index's open files.
  uint64_t files_let_go() const { return files_let_go_.load(); }
  sqlite::Database& db() { return *db_; }

  // -- meta -------------------------------------------------------------------

  std::optional<std::string> get_meta(const std::string& name);
  void set_meta(const std::string& name, const std::string& value);
  void delete_meta(const std::string& name);
  uint64_t max_size();
  // When the store was last cleared, in ns (0: never, or not known).
  int64_t cleared_at_ns();

  // -- rows, counters, totals (inside the caller's transaction) --------------

  bool find(const std::string& hex, IndexRow* row);
  // Inserts or replaces the row of entry.key(), naming blob `file`.
  void insert(const Entry& entry, const std::string& file, int64_t last_used);
  void insert_if_absent(const Entry& entry, const std::string& file, int64_t last_used);
  // Deletes the row of `hex` (of `size` bytes), keeping the totals right.
  void erase(const std::string& hex, int64_t size);
  void add_totals(int64_t bytes, int64_t entries);
  // The running totals set again from the rows.
  void recount_totals();
  void touch(const std::string& hex, int64_t when);
  void add_counter(const std::string& name, int64_t delta);
  // Deletes every row; returns blob file -> size of what they named.
  std::map<std::string, int64_t> erase_all();

  // -- queries ----------------------------------------------------------------

  std::optional<EntryInfo> info(const std::string& hex);
  std::vector<EntryInfo> list();  // most recently used first
  std::vector<IndexRow> rows_by_key();
  // Calls `each` with every row, least recently used first.
  void each_row_least_recently_used_first(const std::function<void(const IndexRow&)>& each);
  // Every row's key and blob file.
  void names(std::set<std::string>* keys, std::set<std::string>* files);
  StoreStats stats();  // counters, totals and the size limit
  int64_t total_size();
  // The oldest last-use time of any row; nullopt when there are none.
  std::optional<int64_t> oldest_last_used();
  // "" when SQLite's quick_check finds the index sound, else its first line.
  std::string quick_check();
  void zero_counters();

 private:
  void connect_or_throw();
  void open_read_only();
  void open_snapshot();
  void open_read_write();
  void use_local_journal();
  void use_network_journal();
  std::string journal_mode();
  void create_or_check_schema();
  void check_schema_version();
  void prepare_statements();

  StoreFolder& folder_;
  const std::string path_;
  const std::string network_fs_;
  std::atomic<uint64_t> files_let_go_{0};
  bool read_only_ = false;
  std::unique_ptr<sqlite::Database> db_;
  std::unique_ptr<sqlite::Statement> find_, insert_, delete_, touch_, add_counter_, add_totals_;
};

}  // namespace kcache::cache
