// A small RAII layer over SQLite for the store's index (Chromium sql/,
// SQLiteCpp): prepared statements that reset themselves, transactions that
// roll back unless committed. sqlite3.h stays inside sqlite.cc.
//
// Errors throw IoError naming the database path and SQLite's message, except
// IndexCorruptError when SQLite says the file is not a database or is malformed
// (the store then rebuilds its index from the blob files).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kcache::cache::sqlite {

enum class OpenMode { read_write_create, read_only, immutable };

// The database file itself is damaged (SQLITE_CORRUPT, SQLITE_NOTADB), as
// opposed to an entry a row names: the index, not the entry, must be rebuilt.
class IndexCorruptError : public CorruptError {
 public:
  using CorruptError::CorruptError;
};

// A table the store made is not in the file: the file changed under the
// connection (another process's journal of a deleted index rolled back into
// it), damage as SQLITE_CORRUPT is. Where no table was made yet (a new file)
// the caller catches it first.
class IndexTableMissingError : public IndexCorruptError {
 public:
  using IndexCorruptError::IndexCorruptError;
};

// The database file was unlinked (or renamed) under the connection, which
// SQLite notices at the next write (SQLITE_READONLY_DBMOVED): reopen it.
class IndexMovedError : public IoError {
 public:
  using IoError::IoError;
};

// Never memory-maps the file (PRAGMA mmap_size = 0). The store keeps its index
// in a rollback journal mode, so SQLite maps no -shm file either.
class Database {
 public:
  Database(const std::string& path, OpenMode mode, int busy_timeout_ms);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  void exec(const char* sql);
  int64_t changes() const;
  const std::string& path() const { return path_; }
  sqlite3* handle() { return db_; }
  void set_busy_timeout(int ms);
  // Throws the right error for a failed call whose result code is `rc`.
  [[noreturn]] void fail(int rc, const std::string& doing) const;
  // Where the few problems that cannot be thrown go (a failed rollback in a
  // destructor); default: dropped. The store routes them to its notices.
  void set_warn(std::function<void(const std::string&)> warn) { warn_ = std::move(warn); }
  void warn(const std::string& message) const {
    if (warn_) warn_(message);
  }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
  std::function<void(const std::string&)> warn_;
};

class Statement {
 public:
  Statement(Database& db, const char* sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds are 1-based, as in SQLite. Text and blobs are copied.
  Statement& bind(int index, int64_t value);
  Statement& bind(int index, std::string_view text);
  // True while there is a row; false when done. The statement resets itself
  // when done and when the next bind after a step happens.
  bool step();
  // Runs to completion (for INSERT/UPDATE/DELETE).
  void run();
  void reset();

  int64_t column_int(int index) const;
  std::string column_text(int index) const;
  bool column_is_null(int index) const;

 private:
  Database& db_;
  sqlite3_stmt* stmt_ = nullptr;
  bool needs_reset_ = false;
};

// SQLite never uses descriptors 0-2 for its files: it fills a free one with
// /dev/null for good and opens again (robust_open). A program that closed
// its standard descriptors (a daemon) would find them open after a compile
// wrote the index (the rollback journal is opened for each write). So while
// SQLite may open a file, the free ones among 0-2 are held by descriptors of
// our own, closed again when this ends.
class LowDescriptorHold {
 public:
  LowDescriptorHold();
  ~LowDescriptorHold();
  LowDescriptorHold(const LowDescriptorHold&) = delete;
  LowDescriptorHold& operator=(const LowDescriptorHold&) = delete;

 private:
  int held_[3] = {-1, -1, -1};
};

// BEGIN IMMEDIATE: takes the write lock up front, so two writers never
// deadlock upgrading read locks (which a busy timeout cannot resolve).
class Transaction {
 public:
  explicit Transaction(Database& db);
  // Rolls back unless commit() ran; never throws. Says nothing when SQLite
  // already rolled back itself (a full disk, an I/O error: it does so).
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  LowDescriptorHold hold_;  // first: held before BEGIN, released after the end
  Database& db_;
  bool done_ = false;
};

}  // namespace kcache::cache::sqlite
