// Decides where the store keeps payloads: inline in SQLite or as files beside
// the index (DESIGN.md: "choose by measurement"). Each case reads the same
// bytes; the plain read() of a file is the floor. Results: docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>

#include "bench/bench_util.h"

namespace {

constexpr int kEntries = 64;  // several keys, so lookups are not all one row

using kcache::bench::make_temp_dir;
using kcache::bench::plain_read;

void exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "?";
    sqlite3_free(err);
    throw std::runtime_error(msg);
  }
}

std::string payload(size_t size) {
  std::string p(size, '\0');
  std::mt19937_64 rng(size);
  for (char& c : p) c = static_cast<char>(rng());
  return p;
}

struct Fixture {
  std::string dir;
  sqlite3* db = nullptr;
  sqlite3_stmt* select = nullptr;

  Fixture(size_t size, bool inline_blobs, int64_t mmap_bytes) {
    dir = make_temp_dir();
    sqlite3_open((dir + "/index.sqlite").c_str(), &db);
    exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
    exec(db, ("PRAGMA mmap_size=" + std::to_string(mmap_bytes)).c_str());
    exec(db, "CREATE TABLE e(key INTEGER PRIMARY KEY, size INTEGER, data BLOB)");
    std::string p = payload(size);
    sqlite3_stmt* ins;
    sqlite3_prepare_v2(db, "INSERT INTO e VALUES(?,?,?)", -1, &ins, nullptr);
    exec(db, "BEGIN");
    for (int k = 0; k < kEntries; ++k) {
      sqlite3_bind_int(ins, 1, k);
      sqlite3_bind_int64(ins, 2, static_cast<int64_t>(size));
      if (inline_blobs) {
        sqlite3_bind_blob(ins, 3, p.data(), static_cast<int>(p.size()), SQLITE_STATIC);
      } else {
        sqlite3_bind_null(ins, 3);
        std::string path = dir + "/" + std::to_string(k);
        int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (::write(fd, p.data(), p.size()) != static_cast<ssize_t>(p.size())) std::abort();
        ::close(fd);
      }
      sqlite3_step(ins);
      sqlite3_reset(ins);
    }
    exec(db, "COMMIT");
    sqlite3_finalize(ins);
    sqlite3_prepare_v2(db, "SELECT size, data FROM e WHERE key=?", -1, &select, nullptr);
  }
  ~Fixture() {
    sqlite3_finalize(select);
    sqlite3_close(db);
    kcache::bench::remove_tree(dir);
  }
};

void BM_PlainRead(benchmark::State& state) {
  Fixture f(static_cast<size_t>(state.range(0)), false, 0);
  int k = 0;
  for (auto _ : state) {
    std::string data = plain_read(f.dir + "/" + std::to_string(k++ % kEntries));
    benchmark::DoNotOptimize(data.data());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_IndexThenFile(benchmark::State& state) {
  Fixture f(static_cast<size_t>(state.range(0)), false, 0);
  int k = 0;
  for (auto _ : state) {
    int key = k++ % kEntries;
    sqlite3_bind_int(f.select, 1, key);
    if (sqlite3_step(f.select) != SQLITE_ROW) state.SkipWithError("no row");
    sqlite3_reset(f.select);
    std::string data = plain_read(f.dir + "/" + std::to_string(key));
    benchmark::DoNotOptimize(data.data());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void inline_read(benchmark::State& state, int64_t mmap_bytes) {
  Fixture f(static_cast<size_t>(state.range(0)), true, mmap_bytes);
  int k = 0;
  for (auto _ : state) {
    sqlite3_bind_int(f.select, 1, k++ % kEntries);
    if (sqlite3_step(f.select) != SQLITE_ROW) state.SkipWithError("no row");
    const void* blob = sqlite3_column_blob(f.select, 1);
    std::string data(static_cast<const char*>(blob),
                     static_cast<size_t>(sqlite3_column_bytes(f.select, 1)));
    sqlite3_reset(f.select);
    benchmark::DoNotOptimize(data.data());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void BM_InlineBlob(benchmark::State& state) { inline_read(state, 0); }
void BM_InlineBlobMmap(benchmark::State& state) { inline_read(state, 1ll << 30); }

#define SIZES Arg(4 << 10)->Arg(200 << 10)->Arg(1 << 20)
BENCHMARK(BM_PlainRead)->SIZES;
BENCHMARK(BM_IndexThenFile)->SIZES;
BENCHMARK(BM_InlineBlob)->SIZES;
BENCHMARK(BM_InlineBlobMmap)->SIZES;

}  // namespace

BENCHMARK_MAIN();
