#include "cache/local/sqlite.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>

#include "common/error.h"

namespace kcache::cache::sqlite {

LowDescriptorHold::LowDescriptorHold() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    int got = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (got < 0) return;
    if (got > 2) {  // taken meanwhile by another thread of the program
      ::close(got);
      return;
    }
    held_[got] = got;
  }
}

LowDescriptorHold::~LowDescriptorHold() {
  for (int fd : held_) {
    if (fd >= 0) ::close(fd);
  }
}

Database::Database(const std::string& path, OpenMode mode, int busy_timeout_ms) : path_(path) {
  LowDescriptorHold hold;  // the index is opened here
  int flags = SQLITE_OPEN_NOMUTEX;  // one thread per connection (see store.h)
  std::string uri = path;
  switch (mode) {
    case OpenMode::read_write_create:
      flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
      break;
    case OpenMode::read_only:
      flags |= SQLITE_OPEN_READONLY;
      break;
    case OpenMode::immutable:
      // For an index we cannot read with locks (an older kcache's WAL index
      // whose -shm we may not open, a hot journal only a writer can roll
      // back, a full disk): read it as a snapshot. Payloads are checksummed, so a concurrent writer can at
      // worst cause a miss.
      flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
      uri = "file:" + path + "?immutable=1";
      break;
  }
  int rc = sqlite3_open_v2(uri.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw IoError("cannot open the store index " + path + ": " + msg);
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, busy_timeout_ms);
  // Never memory-map the database, from the first read on: a file truncated
  // under a mapping is a SIGBUS in the host program (the drop-in libnvrtc
  // lives in anyone's process). Reads cost a pread each (docs/PERFORMANCE.md).
  try {
    exec("PRAGMA mmap_size = 0");
  } catch (...) {
    sqlite3_close(db_);  // no destructor runs for a constructor that throws
    db_ = nullptr;
    throw;
  }
}

Database::~Database() { sqlite3_close_v2(db_); }

void Database::set_busy_timeout(int ms) { sqlite3_busy_timeout(db_, ms); }

void Database::exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    fail(rc, std::string("running \"") + sql + "\": " + msg);
  }
}

int64_t Database::changes() const { return sqlite3_changes(db_); }

void Database::fail(int rc, const std::string& doing) const {
  int primary = rc & 0xff;
  std::string msg = "store index " + path_ + ": " + doing;
  if (doing.find(sqlite3_errstr(rc)) == std::string::npos)
    msg += " (" + std::string(sqlite3_errstr(rc)) + ")";
  // An I/O error's extended code says which call failed (SQLite's
  // SQLITE_IOERR_* list): the one thing a bug report about it needs.
  const int extended = db_ ? sqlite3_extended_errcode(db_) : rc;
  if (primary == SQLITE_IOERR && (extended & 0xff) == SQLITE_IOERR && extended != SQLITE_IOERR) {
    msg += " [SQLite code " + std::to_string(extended) + "]";
  }
  if (primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT) throw IndexCorruptError(msg);
  if (primary == SQLITE_ERROR && msg.find("no such table") != std::string::npos) {
    throw IndexTableMissingError(msg);
  }
  if (rc == SQLITE_READONLY_DBMOVED) throw IndexMovedError(msg);
  throw IoError(msg);
}

Statement::Statement(Database& db, const char* sql) : db_(db) {
  int rc = sqlite3_prepare_v3(db.handle(), sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  if (rc != SQLITE_OK)
    db.fail(rc, std::string("preparing \"") + sql + "\": " + sqlite3_errmsg(db.handle()));
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int index, int64_t value) {
  if (needs_reset_) reset();
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) db_.fail(rc, "binding a value");
  return *this;
}

Statement& Statement::bind(int index, std::string_view text) {
  if (needs_reset_) reset();
  int rc =
      sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) db_.fail(rc, "binding a value");
  return *this;
}

bool Statement::step() {
  needs_reset_ = true;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) {
    reset();
    return false;
  }
  std::string msg = sqlite3_errmsg(db_.handle());
  reset();
  db_.fail(rc, std::string("running \"") + sqlite3_sql(stmt_) + "\": " + msg);
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  needs_reset_ = false;
}

int64_t Statement::column_int(int index) const { return sqlite3_column_int64(stmt_, index); }

std::string Statement::column_text(int index) const {
  const unsigned char* text = sqlite3_column_text(stmt_, index);
  int n = sqlite3_column_bytes(stmt_, index);
  return text ? std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(n))
              : std::string();
}

bool Statement::column_is_null(int index) const {
  return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

Transaction::Transaction(Database& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  // Autocommit again means no transaction is open: SQLite rolled it back on
  // SQLITE_FULL or SQLITE_IOERR, and the error that said so was thrown.
  if (done_ || sqlite3_get_autocommit(db_.handle())) return;
  if (sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr) != SQLITE_OK) {
    db_.warn("rolling back a transaction on " + db_.path() +
             " failed: " + sqlite3_errmsg(db_.handle()));
  }
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace kcache::cache::sqlite
