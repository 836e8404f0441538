// What the store committed is never lost (issue 28): the blob files are the
// truth and the index is derived from them. Every way an index can be lost or
// damaged, at rest and under a running process, ends with every committed
// entry a hit again, one line saying so, and verify/cleanup/clear working.
// Also: fork() (issue 26 item 6), a truncated index under a running process
// (item 7: no SIGBUS), a full disk's messages, a network file system.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <set>

#include <sqlite3.h>

#include "cache/storage.h"
#include "cache/local/store.h"
#include "common/error.h"
#include "tests/cache/store_samples.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cache {
namespace {

using kcache::testing::SampleEntries;
using kcache::testing::TempDir;

constexpr int kEntries = 200;  // enough rows for an index of several pages
constexpr int kPage = 4096;

const SampleEntries kSamples{"recovery", 500, 37, 3000, 25, 7};
Hash128 key_of(int k) { return kSamples.key(k); }
std::string payload_of(int k) { return kSamples.payload(k); }
Entry entry_of(int k) { return kSamples.entry(k); }

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

int count_blob_files(const std::string& dir) {
  int n = 0;
  FileSystem& fs = FileSystem::real();
  for (const std::string& shard : fs.list_directory(dir + "/blobs")) {
    n += static_cast<int>(fs.list_directory(dir + "/blobs/" + shard).size());
  }
  return n;
}

// Overwrites `length` bytes at `offset` of `path` with 0xA5.
void overwrite(const std::string& path, off_t offset, size_t length) {
  int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0) << path;
  std::string junk(length, '\xA5');
  ASSERT_EQ(::pwrite(fd, junk.data(), junk.size(), offset), static_cast<ssize_t>(junk.size()));
  ::close(fd);
}

class StoreRecoveryTest : public ::testing::Test {
 protected:
  std::string store_dir() const { return dir_ / "store"; }
  std::string index() const { return store_dir() + "/index.sqlite"; }

  std::unique_ptr<Store> open_store() {
    StoreOptions options;
    options.warn = [this](const std::string& m) { warnings_.push_back(m); };
    return Store::open(store_dir(), options);
  }

  // kEntries entries, then the store closed.
  void populate(int from = 0, int to = kEntries) {
    auto store = open_store();
    for (int k = from; k < to; ++k) store->put(entry_of(k));
  }

  // Every committed entry is a hit with its bytes; one line said so; verify,
  // cleanup and clear then work on the rebuilt index.
  void expect_everything_recovered(int entries = kEntries) {
    {
      auto store = open_store();
      for (int k = 0; k < entries; ++k) {
        std::optional<Entry> e = store->get(key_of(k));
        ASSERT_TRUE(e) << "entry " << k << " was lost";
        ASSERT_EQ(e->payload(), payload_of(k)) << "entry " << k;
      }
    }
    ASSERT_EQ(warnings_.size(), 1u) << "expected one line saying the index was rebuilt";
    EXPECT_NE(warnings_[0].find("rebuilt"), std::string::npos) << warnings_[0];
    warnings_.clear();

    auto store = open_store();
    VerifyResult verify = store->verify();
    EXPECT_EQ(verify.entries_checked, static_cast<uint64_t>(entries));
    for (const std::string& p : verify.problems) ADD_FAILURE() << "verify: " << p;
    StoreStats stats = store->stats();
    EXPECT_EQ(stats.entries, static_cast<uint64_t>(entries)) << "blobs not counted by -s";
    CleanupResult cleaned = store->cleanup();
    EXPECT_EQ(cleaned.entries_removed, 0u);
    CleanupResult cleared = store->clear();
    EXPECT_EQ(cleared.entries_removed, static_cast<uint64_t>(entries));
    EXPECT_EQ(count_blob_files(store_dir()), 0);
    EXPECT_EQ(store->stats().entries, 0u);
    EXPECT_TRUE(warnings_.empty()) << warnings_[0];
  }

  TempDir dir_;
  std::vector<std::string> warnings_;
};

// Runs `sql` on the store's index, as a damaged or crafted index would hold it.
void run_sql(const std::string& index, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(index.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

std::string blob_file_of(const std::string& store_dir, const Hash128& key) {
  std::string shard = store_dir + "/blobs/" + key.hex().substr(0, 2);
  for (const std::string& name : FileSystem::real().list_directory(shard)) {
    if (name.compare(0, 32, key.hex()) == 0) return name;
  }
  return "";
}

// A review (session 8): the row of one key naming another key's blob made a
// lookup, and verify, delete that other, intact entry.
TEST_F(StoreRecoveryTest, ARowNamingAnotherKeysBlobNeverDeletesThatEntry) {
  populate(0, 2);
  const std::string other = blob_file_of(store_dir(), key_of(1));
  ASSERT_FALSE(other.empty());
  run_sql(index(), "UPDATE entries SET file = '" + other + "' WHERE key = '" + key_of(0).hex() + "'");
  {
    auto store = open_store();
    // Its row is bad and dropped; its own blob, which no row names then, is
    // taken back.
    std::optional<Entry> own = store->get(key_of(0));
    ASSERT_TRUE(own);
    EXPECT_EQ(own->payload(), payload_of(0));
    std::optional<Entry> e = store->get(key_of(1));
    ASSERT_TRUE(e) << "the intact entry was deleted";
    EXPECT_EQ(e->payload(), payload_of(1));
  }
  populate(0, 2);
  run_sql(index(), "UPDATE entries SET file = '" + other + "' WHERE key = '" + key_of(0).hex() + "'");
  auto store = open_store();
  EXPECT_EQ(store->verify().problems.size(), 1u);
  std::optional<Entry> e = store->get(key_of(1));
  ASSERT_TRUE(e) << "verify deleted the intact entry";
  EXPECT_EQ(e->payload(), payload_of(1));
}

// A process killed while it filled a new index from the blobs left a valid
// index holding some of them, which every later process trusted.
TEST_F(StoreRecoveryTest, AnIndexLeftHalfFilledIsFinishedBeforeItIsTrusted) {
  populate();
  run_sql(index(), "DELETE FROM entries WHERE key > '8'; "
                   "UPDATE totals SET total_size = 0, entries = 0; "
                   "INSERT OR REPLACE INTO meta VALUES ('filling', '1');");
  expect_everything_recovered();
}

// A stray file in blobs/ stopped a rebuild half-way and failed every cleanup
// and clear; a FIFO named as a blob hung them.
TEST_F(StoreRecoveryTest, AStrayFileAndAFifoInTheBlobFolderStopNothing) {
  populate();
  { std::ofstream(store_dir() + "/blobs/README") << "not a shard\n"; }
  const std::string fifo_name = key_of(kEntries + 1).hex() + ".0123456789abcdef";
  const std::string fifo_shard = store_dir() + "/blobs/" + fifo_name.substr(0, 2);
  FileSystem::real().create_directories(fifo_shard, 0700);
  ASSERT_EQ(::mkfifo((fifo_shard + "/" + fifo_name).c_str(), 0600), 0);
  ASSERT_EQ(::unlink(index().c_str()), 0);
  auto store = open_store();
  for (int k = 0; k < kEntries; ++k) {
    std::optional<Entry> e = store->get(key_of(k));
    ASSERT_TRUE(e) << "entry " << k << " was lost";
    ASSERT_EQ(e->payload(), payload_of(k));
  }
  EXPECT_FALSE(store->get(key_of(kEntries + 1)));
  EXPECT_NO_THROW(store->cleanup());
  CleanupResult cleared;
  ASSERT_NO_THROW(cleared = store->clear());
  EXPECT_EQ(cleared.entries_removed, static_cast<uint64_t>(kEntries));
}

// An index replaced by an older copy of itself (a CI cache restored, a
// backup) holds no rows for what was stored since; those blobs are taken
// back as they are looked up, never recompiled (a review, session 8).
TEST_F(StoreRecoveryTest, AnOlderCopyOfTheIndexLosesNothingStoredSince) {
  populate(0, kEntries / 2);
  const std::string copy = dir_ / "older-index";
  { std::ofstream(copy, std::ios::binary) << std::ifstream(index(), std::ios::binary).rdbuf(); }
  populate(kEntries / 2, kEntries);
  for (const char* suffix : {"-wal", "-shm"}) ::unlink((index() + suffix).c_str());
  ASSERT_EQ(::rename(copy.c_str(), index().c_str()), 0);
  auto store = open_store();
  for (int k = 0; k < kEntries; ++k) {
    std::optional<Entry> e = store->get(key_of(k));
    ASSERT_TRUE(e) << "entry " << k << " was lost";
    ASSERT_EQ(e->payload(), payload_of(k)) << "entry " << k;
  }
  EXPECT_EQ(store->stats().entries, static_cast<uint64_t>(kEntries));
  EXPECT_TRUE(store->verify().problems.empty());
}

// The second review: a blob a clear left behind (one it could not remove,
// or a clear cut short) came back as a hit; `kcache -C` is the way out of a
// bad entry, so it must stay gone.
TEST_F(StoreRecoveryTest, ABlobAClearLeftBehindNeverComesBack) {
  populate(0, 3);
  const std::string kept = store_dir() + "/blobs/" + key_of(1).hex().substr(0, 2) + "/" +
                           blob_file_of(store_dir(), key_of(1));
  const std::string saved = dir_ / "saved-blob";
  { std::ofstream(saved, std::ios::binary) << std::ifstream(kept, std::ios::binary).rdbuf(); }
  ::sleep(1);  // the clear's second is after the blob's
  open_store()->clear();
  // As if the clear could not remove it: the same file, its old time.
  ASSERT_EQ(::rename(saved.c_str(), kept.c_str()), 0);
  struct stat st;
  ASSERT_EQ(::stat(kept.c_str(), &st), 0);
  struct timespec old_times[2] = {st.st_atim, {st.st_mtim.tv_sec - 5, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, kept.c_str(), old_times, 0), 0);
  auto store = open_store();
  EXPECT_FALSE(store->get(key_of(1))) << "a cleared entry came back";
  EXPECT_EQ(store->stats().entries, 0u);
  store->cleanup();
  EXPECT_FALSE(exists(kept)) << "cleanup leaves what a clear left";
}

TEST_F(StoreRecoveryTest, DeletedIndexIsRebuiltFromTheBlobs) {
  populate();
  ASSERT_EQ(::unlink(index().c_str()), 0);
  expect_everything_recovered();
}

TEST_F(StoreRecoveryTest, EmptiedIndexIsRebuiltFromTheBlobs) {
  populate();
  ASSERT_EQ(::truncate(index().c_str(), 0), 0);
  expect_everything_recovered();
}

TEST_F(StoreRecoveryTest, TruncatedIndexIsRebuiltFromTheBlobs) {
  populate();
  struct stat st;
  ASSERT_EQ(::stat(index().c_str(), &st), 0);
  ASSERT_GT(st.st_size, 4 * kPage) << "the index should span several pages";
  ASSERT_EQ(::truncate(index().c_str(), st.st_size / 2), 0);
  expect_everything_recovered();
}

// Page 3 is the entries table's root (meta is page 2): every lookup reads it.
TEST_F(StoreRecoveryTest, OneOverwrittenPageWithItsHeaderIntactIsRebuiltFromTheBlobs) {
  populate();
  overwrite(index(), 2 * kPage, kPage);
  expect_everything_recovered();
}

TEST_F(StoreRecoveryTest, OverwrittenHeaderIsRebuiltFromTheBlobs) {
  populate();
  overwrite(index(), 0, 100);
  expect_everything_recovered();
}

// Each damaged index moved aside is kept, two within one second too: the
// first holds the only copy of the counters and the size limit.
TEST_F(StoreRecoveryTest, TwoRebuildsWithinASecondKeepBothDamagedFiles) {
  populate();
  for (int round = 0; round < 2; ++round) {
    overwrite(index(), 0, 100);
    ASSERT_TRUE(open_store()->get(key_of(round)));
  }
  int aside = 0;
  for (const std::string& name : FileSystem::real().list_directory(store_dir())) {
    if (name.rfind("index.sqlite.corrupt.", 0) == 0) aside += 1;
  }
  EXPECT_EQ(aside, 2) << "a damaged index moved aside was replaced by the next";
}

TEST_F(StoreRecoveryTest, IndexReplacedByAFolderIsRebuiltFromTheBlobs) {
  populate();
  ASSERT_EQ(::unlink(index().c_str()), 0);
  ASSERT_EQ(::mkdir(index().c_str(), 0700), 0);
  expect_everything_recovered();
}

// Damage no lookup reads (the last-use index's root, page 4): verify finds
// it with quick_check and rebuilds; nothing is lost.
TEST_F(StoreRecoveryTest, VerifyFindsDamageNoLookupReadsAndRebuildsTheIndex) {
  populate();
  overwrite(index(), 3 * kPage, kPage);
  {
    auto store = open_store();
    VerifyResult verify = store->verify();
    ASSERT_FALSE(verify.problems.empty()) << "quick_check should have found the damage";
    EXPECT_NE(verify.problems[0].find("rebuilt from 200 blob files"), std::string::npos)
        << verify.problems[0];
    EXPECT_EQ(verify.entries_checked, static_cast<uint64_t>(kEntries));
  }
  auto store = open_store();
  EXPECT_TRUE(store->verify().problems.empty());
  for (int k = 0; k < kEntries; ++k) ASSERT_TRUE(store->get(key_of(k))) << k;
}

TEST_F(StoreRecoveryTest, ClearEmptiesTheStoreWhateverTheIndexHolds) {
  populate(0, 20);
  overwrite(index(), 0, 100);  // not a database any more
  auto store = open_store();
  CleanupResult cleared = store->clear();
  EXPECT_EQ(cleared.entries_removed, 20u);
  EXPECT_EQ(count_blob_files(store_dir()), 0);
  EXPECT_EQ(store->stats().entries, 0u);
}

TEST_F(StoreRecoveryTest, SizeLimitAndCountersSurviveARebuildWhenTheyStillRead) {
  {
    auto store = open_store();
    store->set_max_size(123456789);
    for (int k = 0; k < kEntries; ++k) store->put(entry_of(k));
    store->get(key_of(0));
  }
  overwrite(index(), 2 * kPage, kPage);  // entries' root: meta and counters still read
  auto store = open_store();
  ASSERT_TRUE(store->get(key_of(1)));
  StoreStats stats = store->stats();
  EXPECT_EQ(stats.max_size, 123456789u);
  EXPECT_EQ(stats.counter("stored"), kEntries);
  EXPECT_EQ(stats.counter("hits"), 2);
}

// A process keeps its Store while the index is deleted (`rm index.sqlite*`):
// what it stores afterwards is in the new index, and so is what it stored
// before (adopted from the blobs).
TEST_F(StoreRecoveryTest, IndexDeletedUnderARunningProcessKeepsWhatItStoresAfterwards) {
  {
    auto store = open_store();
    for (int k = 0; k < 10; ++k) store->put(entry_of(k));
    for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((index() + suffix).c_str());
    for (int k = 10; k < 20; ++k) store->put(entry_of(k));
    EXPECT_EQ(store->stats().entries, 20u);
  }
  ASSERT_EQ(warnings_.size(), 1u);
  warnings_.clear();
  auto store = open_store();
  for (int k = 0; k < 20; ++k) {
    std::optional<Entry> e = store->get(key_of(k));
    ASSERT_TRUE(e) << "entry " << k << " was lost";
    EXPECT_EQ(e->payload(), payload_of(k));
  }
  EXPECT_TRUE(store->verify().problems.empty());
  EXPECT_TRUE(warnings_.empty());
}

// `rm index.sqlite*` five times while four processes keep storing: every
// put a process finished is a hit afterwards, and verify finds nothing.
TEST_F(StoreRecoveryTest, IndexDeletedRepeatedlyWhileFourProcessesStoreLosesNoFinishedPut) {
  open_store();  // the store exists before the writers start
  std::vector<pid_t> writers;
  for (int w = 0; w < 4; ++w) {
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        auto store = Store::open(store_dir(), kcache::testing::quiet_store_options());
        for (int i = 0; i < 60; ++i) store->put(entry_of(1000 + w * 100 + i));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", w, e.what());
        code = 2;
      }
      std::fflush(nullptr);
      _exit(code);
    }
    writers.push_back(pid);
  }
  for (int round = 0; round < 5; ++round) {
    usleep(30000);
    for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((index() + suffix).c_str());
  }
  for (pid_t pid : writers) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer status " << status;
  }
  auto store = open_store();
  int lost = 0;
  for (int w = 0; w < 4; ++w) {
    for (int i = 0; i < 60; ++i) {
      std::optional<Entry> e = store->get(key_of(1000 + w * 100 + i));
      if (!e) {
        lost += 1;
      } else {
        EXPECT_EQ(e->payload(), payload_of(1000 + w * 100 + i));
      }
    }
  }
  EXPECT_EQ(lost, 0) << "of 240 finished puts";
  for (const std::string& p : store->verify().problems) ADD_FAILURE() << "verify: " << p;
}

// Blobs another process stored after the index it used was deleted (its row
// went into the deleted file): the next cleanup adopts them.
TEST_F(StoreRecoveryTest, CleanupAdoptsBlobsNoRowNamesAndCountsThem) {
  populate(0, 10);
  // Rows gone, blobs kept: as a writer leaves them when its index was
  // replaced between its blob write and its row.
  {
    auto store = open_store();
    for (int k = 0; k < 10; ++k) ASSERT_TRUE(store->info(key_of(k)));
  }
  std::string sql_dir = store_dir();
  // Drop the rows (not by a clear: what a clear leaves never comes back).
  run_sql(index(), "DELETE FROM entries; UPDATE totals SET total_size = 0, entries = 0;");
  ASSERT_EQ(std::system(("find " + sql_dir + "/blobs -type f -exec touch -d '1 hour ago' {} +")
                            .c_str()),
            0);
  // One corrupt stray too: removed and counted.
  std::string corrupt = sql_dir + "/blobs/00/" + key_of(99).hex() + ".0123456789abcdef";
  ::mkdir((sql_dir + "/blobs/00").c_str(), 0700);
  kcache::testing::write_file(corrupt, "not an entry");
  ASSERT_EQ(std::system(("touch -d '1 hour ago' " + corrupt).c_str()), 0);

  auto store = open_store();
  EXPECT_EQ(store->stats().entries, 0u);
  CleanupResult cleaned = store->cleanup();
  EXPECT_EQ(cleaned.stray_files_adopted, 10u);
  EXPECT_EQ(cleaned.stray_files_removed, 1u);
  EXPECT_EQ(store->stats().entries, 10u);
  for (int k = 0; k < 10; ++k) ASSERT_TRUE(store->get(key_of(k))) << k;
  EXPECT_FALSE(exists(corrupt));
}

// Issue 26 item 7: the index truncated while a program runs is damage to
// recover from, not a SIGBUS (the index is not memory-mapped).
TEST_F(StoreRecoveryTest, IndexTruncatedUnderARunningProcessIsRebuiltWithoutACrash) {
  populate(0, 50);
  auto store = open_store();
  ASSERT_TRUE(store->get(key_of(0)));
  ASSERT_EQ(::truncate(index().c_str(), 2 * kPage), 0);
  for (int k = 0; k < 50; ++k) {
    std::optional<Entry> e = store->get(key_of(k));
    ASSERT_TRUE(e) << "entry " << k;
    EXPECT_EQ(e->payload(), payload_of(k));
  }
  store.reset();
  EXPECT_LE(warnings_.size(), 1u);
  EXPECT_TRUE(open_store()->verify().problems.empty());
}

// Issue 26 item 6: a parent and its forked child store the same programs
// through the Store the parent opened. Blob names come from getrandom, the
// child reopens the index instead of using the parent's connection, and
// verify finds nothing lost.
TEST_F(StoreRecoveryTest, ForkedChildAndParentStoringTheSameEntriesLoseNothing) {
  auto store = open_store();
  for (int k = 0; k < 5; ++k) store->put(entry_of(k));
  ASSERT_TRUE(store->get(key_of(0)));  // a pending hit the child must not count again
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int code = 0;
    try {
      for (int k = 5; k < 40; ++k) store->put(entry_of(k));
      for (int k = 0; k < 40; ++k) {
        if (!store->get(key_of(k))) code = 3;
      }
      store.reset();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      code = 2;
    }
    std::fflush(nullptr);
    _exit(code);
  }
  for (int k = 5; k < 40; ++k) store->put(entry_of(k));
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  store.reset();

  auto again = open_store();
  VerifyResult verify = again->verify();  // `kcache verify`
  for (const std::string& p : verify.problems) ADD_FAILURE() << "verify: " << p;
  EXPECT_EQ(verify.entries_checked, 40u);
  for (int k = 0; k < 40; ++k) {
    std::optional<Entry> e = again->get(key_of(k));
    ASSERT_TRUE(e) << "entry " << k << " was lost";
    EXPECT_EQ(e->payload(), payload_of(k));
  }
  EXPECT_EQ(again->stats().counter("hits"), 1 + 40 + 40) << "the parent's pending hit counted twice";
}

TEST_F(StoreRecoveryTest, NetworkFileSystemIsSaidOnceAndUsesARollbackJournal) {
  StoreOptions options;
  options.warn = [this](const std::string& m) { warnings_.push_back(m); };
  options.network_file_system = [](const std::string&) { return std::string("NFS"); };
  {
    auto store = Store::open(store_dir(), options);
    store->put(entry_of(1));
    EXPECT_FALSE(exists(index() + "-wal")) << "WAL does not work across machines";
    EXPECT_FALSE(exists(index() + "-shm"));
    ASSERT_TRUE(store->get(key_of(1)));
  }
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("NFS"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("remote"), std::string::npos) << warnings_[0];
}

// -- a full disk ------------------------------------------------------------

// Runs `body` in a child with its own mount namespace and a 192 KiB tmpfs at
// `mount_point`, stderr going to `stderr_path`. 77: no namespace here.
int in_small_tmpfs(const std::string& mount_point, const std::string& stderr_path,
                   const std::function<int()>& body) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    const uid_t uid = getuid();
    const gid_t gid = getgid();
    if (unshare(CLONE_NEWNS) != 0) {
      if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) _exit(77);
      auto write = [](const std::string& path, const std::string& text) {
        std::ofstream f(path);
        f << text;
        return static_cast<bool>(f.flush());
      };
      write("/proc/self/setgroups", "deny");
      if (!write("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
          !write("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1")) {
        _exit(77);
      }
    }
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(77);
    if (mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=192k,mode=0700") != 0) _exit(77);
    int fd = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, 2) < 0) _exit(78);
    int code = 99;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      code = 98;
    }
    std::fflush(nullptr);
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(f, line);) out.push_back(line);
  return out;
}

// What a program sees when the store's disk fills: puts fail (the results are
// still used), earlier entries still hit, and stderr holds at most one line
// per reason, none about rolling back what SQLite already undid.
int fill_the_disk(const std::string& store_dir) {
  StorageOptions options;
  options.local_dir = store_dir;  // default sink: stderr, as a program has it
  Storage storage(options);
  if (!storage.local()) return 10;
  for (int k = 0; k < 5; ++k) storage.put(entry_of(k));
  for (int k = 5; k < 400; ++k) {
    storage.put(entry_of(k));
    storage.get(key_of(k % 5));
  }
  for (int k = 0; k < 5; ++k) {
    std::optional<Entry> e = storage.get(key_of(k));
    if (!e || e->payload() != payload_of(k)) return 11;
  }
  return 0;
}

// A review (F6): once the disk is full and the last writer has removed
// WAL's files, a new process could not open the index, and every hit was a
// miss. It now reads the index as it is.
int hits_on_a_full_disk(const std::string& mount_point) {
  const std::string store_dir = mount_point + "/store";
  {
    auto store = Store::open(store_dir);
    for (int k = 0; k < 5; ++k) store->put(entry_of(k));
  }
  int fd = ::open((mount_point + "/filler").c_str(), O_WRONLY | O_CREAT, 0600);
  if (fd < 0) return 10;
  char block[4096] = {};
  while (::write(fd, block, sizeof block) > 0) {
  }
  ::close(fd);
  if (exists(store_dir + "/index.sqlite-wal")) std::fprintf(stderr, "(the WAL file is there)\n");
  StorageOptions options;
  options.local_dir = store_dir;
  Storage storage(options);
  if (!storage.local()) return 11;
  for (int k = 0; k < 5; ++k) {
    std::optional<Entry> e = storage.get(key_of(k));
    if (!e || e->payload() != payload_of(k)) return 12;
  }
  return 0;
}

TEST_F(StoreRecoveryTest, AFullDiskKeepsHitsHitsInANewProcess) {
  const std::string mount_point = dir_ / "small";
  ASSERT_EQ(::mkdir(mount_point.c_str(), 0700), 0);
  const std::string err = dir_ / "stderr";
  int code = in_small_tmpfs(mount_point, err, [&] { return hits_on_a_full_disk(mount_point); });
  if (code == 77) GTEST_SKIP() << "cannot mount a tmpfs in a mount namespace here";
  for (const std::string& line : lines_of(err)) std::printf("full disk said: %s\n", line.c_str());
  EXPECT_EQ(code, 0);
}

TEST_F(StoreRecoveryTest, FullDiskSaysEachThingOnceAndNothingAboutRollbacks) {
  const std::string mount_point = dir_ / "small";
  ASSERT_EQ(::mkdir(mount_point.c_str(), 0700), 0);
  const std::string err = dir_ / "stderr";
  ::unsetenv("KCACHE_QUIET");
  int code = in_small_tmpfs(mount_point, err, [&] { return fill_the_disk(mount_point + "/store"); });
  if (code == 77) GTEST_SKIP() << "cannot mount a tmpfs in a mount namespace here";
  std::vector<std::string> lines = lines_of(err);
  for (const std::string& line : lines) std::printf("full disk said: %s\n", line.c_str());
  EXPECT_EQ(code, 0);
  ASSERT_FALSE(lines.empty()) << "a full disk should be said once";
  EXPECT_LE(lines.size(), 3u);
  std::set<std::string> seen;
  for (const std::string& line : lines) {
    EXPECT_EQ(line.find("rolling back"), std::string::npos) << line;
    EXPECT_TRUE(seen.insert(line).second) << "said twice: " << line;
  }

  ::setenv("KCACHE_QUIET", "1", 1);
  code = in_small_tmpfs(mount_point, err, [&] { return fill_the_disk(mount_point + "/store"); });
  ::unsetenv("KCACHE_QUIET");
  EXPECT_EQ(code, 0);
  std::vector<std::string> quiet = lines_of(err);
  EXPECT_TRUE(quiet.empty()) << "KCACHE_QUIET=1 printed: " << quiet[0];
}

}  // namespace
}  // namespace kcache::cache
