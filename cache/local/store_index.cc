#include "cache/local/store_index.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "cache/local/store_blobs.h"
#include "common/arch.h"
#include "common/error.h"
#include "common/safe_path.h"

namespace kcache::cache {
namespace {

// Bump kSchemaVersion when the tables change (and migrate in
// create_or_check_schema). Set kCompatibleVersion to the oldest schema version
// whose code can still read and write a store of this version: an older kcache
// refuses a store whose compatible_version is above the version it knows.
constexpr int kSchemaVersion = 1;
constexpr int kCompatibleVersion = 1;
// Bazel runs many actions at once against one store; writes are short.
constexpr int kBusyTimeoutMs = 30000;
// How the index journals a write (use_local_journal says why).
constexpr const char* kLocalJournalPragma = "PRAGMA journal_mode = TRUNCATE";
// Leaving an older kcache's WAL mode while another process has the index
// open fails at once; it would otherwise wait out the whole busy timeout on
// every open.
constexpr int kLeaveWalTimeoutMs = 100;

int kind_code(TargetKind kind) { return kind == TargetKind::ptx ? 1 : 2; }
TargetKind kind_from_code(int64_t code) { return code == 1 ? TargetKind::ptx : TargetKind::cubin; }

// Binds an `entries` row, in the table's column order, to an INSERT of it.
sqlite::Statement& bind_row(sqlite::Statement& s, const Entry& entry, const std::string& file,
                            int64_t last_used) {
  return s.bind(1, entry.key().hex())
      .bind(2, file)
      .bind(3, kind_code(entry.kind()))
      .bind(4, entry.arch())
      .bind(5, static_cast<int64_t>(entry.encoded().size()))
      .bind(6, static_cast<int64_t>(entry.compile_ms()))
      .bind(7, entry.created_unix_s())
      .bind(8, last_used);
}

// Of a statement selecting key, file, size, last_used.
IndexRow row_from(sqlite::Statement& s) {
  IndexRow row;
  row.key = s.column_text(0);
  row.file = s.column_text(1);
  row.size = s.column_int(2);
  row.last_used = s.column_int(3);
  return row;
}

// Of a statement selecting key, kind, arch, size, compile_ms, created, last_used.
EntryInfo info_from(sqlite::Statement& s) {
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

bool all_digits(const std::string& text) {
  return std::all_of(text.begin(), text.end(), ::isdigit);
}

}  // namespace

StoreIndex::StoreIndex(StoreFolder& folder, std::string network_fs)
    : folder_(folder), path_(folder.dir() + "/" + kIndexName), network_fs_(std::move(network_fs)) {}

// -- the connection -----------------------------------------------------------

void StoreIndex::connect() {
  // A connection that failed half-way (a snapshot opened, no statements
  // prepared) is no connection: connected() says so, and the next use
  // opens again.
  try {
    connect_or_throw();
  } catch (...) {
    drop();
    throw;
  }
}

void StoreIndex::connect_or_throw() {
  const std::string& dir = folder_.dir();
  FileSystem& fs = folder_.fs();
  read_only_ =
      ::access(dir.c_str(), W_OK) != 0 || (fs.stat(path_) && ::access(path_.c_str(), W_OK) != 0);
  if (!read_only_) {
    open_read_write();
  } else if (fs.stat(path_)) {
    open_read_only();
  } else if (std::optional<FileInfo> blobs = fs.stat(dir + "/" + kBlobDirName);
             blobs && blobs->is_directory) {
    throw IoError("cannot use the store in " + dir +
                  ": its index is missing and the folder is not writable, so the index "
                  "cannot be rebuilt from its blob files; make the folder writable (the "
                  "next use rebuilds it) or choose another with --dir or $KCACHE_DIR");
  } else {
    throw IoError("cannot create a store in " + dir +
                  ": the folder is not writable; choose another with --dir or $KCACHE_DIR");
  }
  prepare_statements();
}

void StoreIndex::open_read_write() {
  try {
    db_ = std::make_unique<sqlite::Database>(path_, sqlite::OpenMode::read_write_create,
                                             kBusyTimeoutMs);
    db_->set_warn([this](const std::string& m) { folder_.notice("rollback", m); });
    folder_.give_made_file(path_);
    if (network_fs_.empty()) {
      use_local_journal();
    } else {
      use_network_journal();
    }
    create_or_check_schema();
  } catch (const sqlite::IndexCorruptError&) {
    throw;
  } catch (const IoError& e) {
    // A full disk (no room for the journal): the index is still there to
    // read, so hits stay hits; nothing is stored by this process.
    if (!folder_.fs().stat(path_)) throw;
    db_.reset();
    read_only_ = true;
    open_snapshot();
    folder_.notice("read-only", "the store index " + path_ + " cannot be opened for writing (" +
                                    e.what() + "; a full disk?): looking entries up only");
  }
}

// A store this user may read but not write: SQLite's shared locks work on a
// file opened read-only, and a rollback journal needs nothing else, so the
// index is read as any reader reads it. An index SQLite cannot read that
// way (still in WAL mode from an older kcache with no -shm this user may
// open, or a journal left by a killed writer that only a writer can roll
// back) is read as a snapshot instead.
void StoreIndex::open_read_only() {
  try {
    db_ = std::make_unique<sqlite::Database>(path_, sqlite::OpenMode::read_only, kBusyTimeoutMs);
    db_->set_warn([this](const std::string& m) { folder_.notice("rollback", m); });
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
void StoreIndex::open_snapshot() {
  db_ = std::make_unique<sqlite::Database>(path_, sqlite::OpenMode::immutable, kBusyTimeoutMs);
  db_->set_warn([this](const std::string& m) { folder_.notice("rollback", m); });
  check_schema_version();
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
// build VM (docs/PERFORMANCE.md).
void StoreIndex::use_local_journal() {
  // An older kcache's index is in WAL mode (the mode is kept in the file):
  // leaving it takes an exclusive lock, so while such a process has it open
  // the index stays in WAL for now and the next open tries again.
  db_->exec("SELECT count(*) FROM sqlite_master");
  if (journal_mode() == "wal") {
    db_->set_busy_timeout(kLeaveWalTimeoutMs);
    try {
      db_->exec(kLocalJournalPragma);
    } catch (const IoError& e) {
      folder_.notice("wal-kept", "the store index " + path_ +
                                     " is in WAL mode and another process has it open (an older "
                                     "kcache?); it stays in WAL until that process ends: " +
                                     e.what());
    }
    db_->set_busy_timeout(kBusyTimeoutMs);
  } else {
    db_->exec(kLocalJournalPragma);
  }
  db_->exec("PRAGMA synchronous = OFF");
}

std::string StoreIndex::journal_mode() {
  sqlite::Statement s(*db_, "PRAGMA journal_mode");
  return s.step() ? s.column_text(0) : std::string();
}

// On a network file system the index syncs every commit (synchronous =
// FULL), so what one machine committed is on the server before its lock
// goes; the rollback journal's locks are the file system's (WAL's shared
// memory is not shared between machines at all: sqlite.org/wal.html).
void StoreIndex::use_network_journal() {
  folder_.notice("network-fs",
                 "the store in " + folder_.dir() + " is on " + network_fs_ +
                     ", a network file system, where SQLite's index must sync every commit "
                     "(slower writes, needs working file locks). To share results between "
                     "machines, give each machine a local store and use the remote tier "
                     "(remote_url, docs/REMOTE.md)");
  try {
    db_->exec(kLocalJournalPragma);
  } catch (const IoError& e) {
    // Another process on this machine (an older kcache) holds it in WAL mode.
    folder_.notice("network-fs-journal", std::string("could not leave WAL mode: ") + e.what());
  }
  db_->exec("PRAGMA synchronous = FULL");
}

void StoreIndex::drop() {
  files_let_go_.fetch_add(1);
  find_.reset();
  insert_.reset();
  delete_.reset();
  touch_.reset();
  add_counter_.reset();
  add_totals_.reset();
  db_.reset();
}

void StoreIndex::abandon() {
  files_let_go_.fetch_add(1);
  (void)find_.release();
  (void)insert_.release();
  (void)delete_.release();
  (void)touch_.release();
  (void)add_counter_.release();
  (void)add_totals_.release();
  (void)db_.release();
}

void StoreIndex::create_or_check_schema() {
  // The common case, a store made before: read, without the write lock
  // BEGIN IMMEDIATE would wait for behind every writer.
  try {
    if (get_meta("version")) {
      check_schema_version();
      return;
    }
  } catch (const sqlite::IndexTableMissingError&) {
    // No tables yet: made below.
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
    set_meta("version", std::to_string(kSchemaVersion));
    set_meta("compatible_version", std::to_string(kCompatibleVersion));
    set_meta("max_size", std::to_string(kDefaultMaxSize));
    // A new index is filled from the blobs next (store_recovery.h), which
    // clears this: one found set was made by a process killed while filling
    // it, and is finished before it is trusted.
    set_meta(kFillingMeta, "1");
  }
  check_schema_version();
  txn.commit();
}

void StoreIndex::check_schema_version() {
  std::optional<std::string> compatible = get_meta("compatible_version");
  std::optional<std::string> version = get_meta("version");
  if (!compatible || !version) {
    throw sqlite::IndexCorruptError("store index " + path_ + " has no version information");
  }
  if (std::atoi(compatible->c_str()) > kSchemaVersion) {
    throw IncompatibleVersionError(
        "the store in " + folder_.dir() + " was written by a newer kcache (store version " +
        *version + ", readable by kcache store version " + *compatible +
        " and later; this kcache knows " + std::to_string(kSchemaVersion) +
        "). Use the newer kcache, or another folder (--dir)");
  }
}

void StoreIndex::prepare_statements() {
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

// -- meta ---------------------------------------------------------------------

std::optional<std::string> StoreIndex::get_meta(const std::string& name) {
  sqlite::Statement s(*db_, "SELECT value FROM meta WHERE name = ?");
  s.bind(1, name);
  if (!s.step()) return std::nullopt;
  return s.column_text(0);
}

void StoreIndex::set_meta(const std::string& name, const std::string& value) {
  sqlite::Statement s(*db_, "INSERT OR REPLACE INTO meta VALUES (?, ?)");
  s.bind(1, name).bind(2, value).run();
}

void StoreIndex::delete_meta(const std::string& name) {
  sqlite::Statement(*db_, "DELETE FROM meta WHERE name = ?").bind(1, name).run();
}

uint64_t StoreIndex::max_size() {
  std::optional<std::string> v = get_meta("max_size");
  return v ? std::strtoull(v->c_str(), nullptr, 10) : kDefaultMaxSize;
}

int64_t StoreIndex::cleared_at_ns() {
  std::optional<std::string> v = get_meta(kClearedAtMeta);
  if (!v || v->empty() || !all_digits(*v) || v->size() > 12) return 0;
  return std::stoll(*v) * 1000000000;
}

// -- rows, counters, totals ---------------------------------------------------

bool StoreIndex::find(const std::string& hex, IndexRow* row) {
  find_->bind(1, hex);
  if (!find_->step()) return false;
  *row = row_from(*find_);
  find_->reset();
  return true;
}

void StoreIndex::insert(const Entry& entry, const std::string& file, int64_t last_used) {
  bind_row(*insert_, entry, file, last_used).run();
}

void StoreIndex::insert_if_absent(const Entry& entry, const std::string& file, int64_t last_used) {
  sqlite::Statement s(*db_, "INSERT OR IGNORE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  bind_row(s, entry, file, last_used).run();
}

void StoreIndex::erase(const std::string& hex, int64_t size) {
  delete_->bind(1, hex).run();
  if (db_->changes() > 0) add_totals(-size, -1);
}

void StoreIndex::add_totals(int64_t bytes, int64_t entries) {
  add_totals_->bind(1, bytes).bind(2, entries).run();
}

void StoreIndex::recount_totals() {
  db_->exec(
      "UPDATE totals SET total_size = (SELECT COALESCE(SUM(size), 0) FROM entries), "
      "entries = (SELECT COUNT(*) FROM entries)");
}

void StoreIndex::touch(const std::string& hex, int64_t when) {
  touch_->bind(1, when).bind(2, hex).run();
}

void StoreIndex::add_counter(const std::string& name, int64_t delta) {
  add_counter_->bind(1, name).bind(2, delta).run();
}

std::map<std::string, int64_t> StoreIndex::erase_all() {
  std::map<std::string, int64_t> named;
  sqlite::Statement all(*db_, "SELECT key, file, size FROM entries");
  while (all.step()) named[all.column_text(1)] = all.column_int(2);
  db_->exec("DELETE FROM entries");
  db_->exec("UPDATE totals SET total_size = 0, entries = 0");
  return named;
}

void StoreIndex::zero_counters() { db_->exec("UPDATE counters SET value = 0"); }

// -- queries ------------------------------------------------------------------

std::optional<EntryInfo> StoreIndex::info(const std::string& hex) {
  sqlite::Statement s(*db_,
                      "SELECT key, kind, arch, size, compile_ms, created, last_used "
                      "FROM entries WHERE key = ?");
  s.bind(1, hex);
  if (!s.step()) return std::nullopt;
  return info_from(s);
}

std::vector<EntryInfo> StoreIndex::list() {
  sqlite::Statement s(*db_,
                      "SELECT key, kind, arch, size, compile_ms, created, last_used "
                      "FROM entries ORDER BY last_used DESC, key");
  std::vector<EntryInfo> out;
  while (s.step()) out.push_back(info_from(s));
  return out;
}

std::vector<IndexRow> StoreIndex::rows_by_key() {
  std::vector<IndexRow> rows;
  sqlite::Statement all(*db_, "SELECT key, file, size, last_used FROM entries ORDER BY key");
  while (all.step()) rows.push_back(row_from(all));
  return rows;
}

void StoreIndex::each_row_least_recently_used_first(
    const std::function<void(const IndexRow&)>& each) {
  sqlite::Statement all(
      *db_, "SELECT key, file, size, last_used FROM entries ORDER BY last_used, created, key");
  while (all.step()) each(row_from(all));
}

void StoreIndex::names(std::set<std::string>* keys, std::set<std::string>* files) {
  sqlite::Statement all(*db_, "SELECT key, file FROM entries");
  while (all.step()) {
    keys->insert(all.column_text(0));
    files->insert(all.column_text(1));
  }
}

StoreStats StoreIndex::stats() {
  StoreStats out;
  sqlite::Statement counters(*db_, "SELECT name, value FROM counters");
  while (counters.step()) out.counters[counters.column_text(0)] = counters.column_int(1);
  sqlite::Statement totals(*db_, "SELECT total_size, entries FROM totals");
  if (totals.step()) {
    out.bytes = static_cast<uint64_t>(totals.column_int(0));
    out.entries = static_cast<uint64_t>(totals.column_int(1));
  }
  out.max_size = max_size();
  return out;
}

int64_t StoreIndex::total_size() {
  sqlite::Statement total(*db_, "SELECT total_size FROM totals");
  return total.step() ? total.column_int(0) : 0;
}

std::optional<int64_t> StoreIndex::oldest_last_used() {
  sqlite::Statement s(*db_, "SELECT MIN(last_used) FROM entries");
  if (s.step() && !s.column_is_null(0)) return s.column_int(0);
  return std::nullopt;
}

std::string StoreIndex::quick_check() {
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
  return damage;
}

}  // namespace kcache::cache
