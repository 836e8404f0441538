// The store under the conditions CI machines produce: many processes at once,
// processes killed mid-write, a read-only folder, a full disk.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>

#include "cache/storage.h"
#include "cache/local/store.h"
#include "common/error.h"
#include "tests/cache/store_samples.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cache {
namespace {

using kcache::testing::become_nobody;
using kcache::testing::in_child;
using kcache::testing::SampleEntries;
using kcache::testing::TempDir;

constexpr int kKeys = 40;

// The one right payload for each key, 1 KB to 61 KB.
const SampleEntries kSamples{"key", 1000, 1537, 60000, 10, 1};
Hash128 key_of(int k) { return kSamples.key(k); }
std::string payload_of(int k) { return kSamples.payload(k); }
Entry entry_of(int k) { return kSamples.entry(k); }

// Every key is either missing or has exactly its payload; verify is clean.
void expect_consistent(const std::string& dir) {
  StoreOptions options;
  options.warn = [](const std::string& m) { ADD_FAILURE() << "unexpected warning: " << m; };
  auto store = Store::open(dir, options);
  VerifyResult verify = store->verify();
  for (const std::string& p : verify.problems) ADD_FAILURE() << "verify: " << p;
  uint64_t bytes = 0;
  for (const EntryInfo& info : store->list()) bytes += info.size;
  EXPECT_EQ(store->stats().bytes, bytes) << "running total drifted from the rows";
  for (int k = 0; k < kKeys; ++k) {
    std::optional<Entry> e = store->get(key_of(k));
    if (e) {
      EXPECT_EQ(e->payload(), payload_of(k)) << "wrong bytes for key " << k;
    }
  }
}

// One worker's mixed workload; returns non-zero on any wrong byte or error.
int mixed_workload(const std::string& dir, unsigned seed, int operations) {
  std::mt19937 rng(seed);
  auto store = Store::open(dir);
  for (int i = 0; i < operations; ++i) {
    int k = static_cast<int>(rng() % kKeys);
    switch (rng() % 10) {
      case 0:
      case 1:
      case 2:
      case 3:
      case 4: {
        std::optional<Entry> e = store->get(key_of(k));
        if (e && e->payload() != payload_of(k)) {
          std::fprintf(stderr, "wrong bytes for key %d\n", k);
          return 2;
        }
        break;
      }
      case 5:
      case 6:
      case 7:
        store->put(entry_of(k));
        break;
      case 8:
        store->remove(key_of(k));
        break;
      default:
        store->cleanup();
        break;
    }
  }
  return 0;
}

TEST(StoreReliabilityTest, EightProcessesMixingPutGetAndEvictSeeOnlyRightBytes) {
  TempDir dir;
  const std::string store_dir = dir / "store";
  Store::open(store_dir)->set_max_size(400 * 1024);  // small: puts keep evicting

  std::vector<pid_t> children;
  for (unsigned worker = 0; worker < 8; ++worker) {
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      int code = 98;
      try {
        code = mixed_workload(store_dir, worker + 1, 600);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "worker %u: %s\n", worker, e.what());
      }
      std::fflush(nullptr);
      _exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "worker failed, status " << status;
  }
  expect_consistent(store_dir);
  auto store = Store::open(store_dir);
  StoreStats stats = store->stats();
  EXPECT_GT(stats.counter("evicted"), 0) << "the workload should have evicted";
  EXPECT_GT(stats.counter("hits"), 0);
  EXPECT_LE(stats.bytes, 400u * 1024);
}

TEST(StoreReliabilityTest, WriterKilledAtRandomPointsLeavesAConsistentStore) {
  TempDir dir;
  const std::string store_dir = dir / "store";
  Store::open(store_dir)->set_max_size(300 * 1024);
  std::mt19937 rng(12345);
  for (int round = 0; round < 60; ++round) {
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      try {
        mixed_workload(store_dir, static_cast<unsigned>(round) + 100, 1 << 30);
      } catch (...) {
      }
      _exit(0);
    }
    // Early kills land in open(); later ones mid-put, mid-eviction, mid-commit.
    usleep(static_cast<useconds_t>(rng() % 40000));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "round " << round << ": the writer was not killed";

    // The store opens after every kill, verify finds nothing wrong, and no
    // torn entry is ever returned.
    StoreOptions options;
    options.warn = [round](const std::string& m) {
      ADD_FAILURE() << "round " << round << ": " << m;
    };
    auto store = Store::open(store_dir, options);
    for (const std::string& p : store->verify().problems)
      ADD_FAILURE() << "round " << round << ": " << p;
    for (int k = 0; k < kKeys; ++k) {
      std::optional<Entry> e = store->get(key_of(k));
      if (e) {
        ASSERT_EQ(e->payload(), payload_of(k)) << "round " << round << ", key " << k;
      }
    }
  }
  expect_consistent(store_dir);
}

TEST(StoreReliabilityTest, FullDiskFailsThePutOnceAndLosesNothing) {
  TempDir dir;
  const std::string store_dir = dir / "store";
  {
    auto store = Store::open(store_dir);
    for (int k = 0; k < 5; ++k) store->put(entry_of(k));
  }
  int code = in_child([&] {
    // `ulimit -f`: writes past 32 KB fail with EFBIG instead of killing us.
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {32 * 1024, 32 * 1024};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return 10;
    std::vector<std::string> warnings;
    StorageOptions options;
    options.local_dir = store_dir;
    options.warn = [&](const std::string& m) { warnings.push_back(m); };
    Storage storage(options);
    storage.put(entry_of(30));  // 47 KB: cannot be written
    storage.put(entry_of(31));  // again: no second warning
    if (warnings.size() != 1) return 11;
    if (warnings[0].find("File too large") == std::string::npos) {
      std::fprintf(stderr, "warning was: %s\n", warnings[0].c_str());
      return 12;
    }
    for (int k = 0; k < 5; ++k) {
      std::optional<Entry> e = storage.get(key_of(k));
      if (!e || e->payload() != payload_of(k)) return 13;  // earlier entries still served
    }
    return 0;
  });
  EXPECT_EQ(code, 0);
  expect_consistent(store_dir);
  auto store = Store::open(store_dir);
  EXPECT_EQ(store->stats().entries, 5u) << "entries stored before the disk filled were lost";
  EXPECT_FALSE(store->info(key_of(30)));
}

// Drops root, so that permissions apply (root may write anything).
bool become_unprivileged() { return geteuid() != 0 || become_nobody(); }

TEST(StoreReliabilityTest, ReadOnlyFolderServesHitsAndRefusesWritesWithOneWarning) {
  TempDir dir(TempDir::Where::world_traversable_tmp);
  const std::string store_dir = dir / "store";
  {
    auto store = Store::open(store_dir);
    for (int k = 0; k < 3; ++k) store->put(entry_of(k));
  }
  // Readable by everyone, writable by no one but root.
  ASSERT_EQ(
      std::system(("chmod 0755 " + dir.path() + " && chmod -R a+rX,a-w " + store_dir).c_str()), 0);

  int code = in_child([&] {
    if (!become_unprivileged()) return 20;
    std::vector<std::string> warnings;
    StorageOptions options;
    options.local_dir = store_dir;
    options.warn = [&](const std::string& m) { warnings.push_back(m); };
    Storage storage(options);
    if (!storage.local() || !storage.local()->read_only()) return 21;
    for (int k = 0; k < 3; ++k) {
      std::optional<Entry> e = storage.get(key_of(k));
      if (!e || e->payload() != payload_of(k)) return 22;
    }
    storage.put(entry_of(9));
    storage.put(entry_of(10));
    if (warnings.size() != 1 || warnings[0].find("read-only") == std::string::npos) {
      for (const std::string& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
      return 23;
    }
    try {
      storage.local()->put(entry_of(9));
      return 24;
    } catch (const IoError& e) {
      if (std::string(e.what()).find("read-only") == std::string::npos) return 25;
    }
    return 0;
  });
  if (code == 20) GTEST_SKIP() << "cannot drop root privileges here to make a folder read-only";
  EXPECT_EQ(code, 0);
  ASSERT_EQ(std::system(("chmod -R u+w " + store_dir).c_str()), 0);
  expect_consistent(store_dir);
  EXPECT_EQ(Store::open(store_dir)->stats().entries, 3u);
}

// A review (session 8, F7): a read-only store whose index was lost said
// "cannot create a store", though its blobs were all there.
TEST(StoreReliabilityTest, AReadOnlyStoreWithoutItsIndexSaysSoAndHowToRebuildIt) {
  TempDir dir(TempDir::Where::world_traversable_tmp);
  const std::string store_dir = dir / "store";
  {
    auto store = Store::open(store_dir);
    for (int k = 0; k < 3; ++k) store->put(entry_of(k));
  }
  for (const char* suffix : {"", "-wal", "-shm"}) {
    ::unlink((store_dir + "/index.sqlite" + suffix).c_str());
  }
  ASSERT_EQ(
      std::system(("chmod 0755 " + dir.path() + " && chmod -R a+rX,a-w " + store_dir).c_str()), 0);
  int code = in_child([&] {
    if (!become_unprivileged()) return 20;
    try {
      Store::open(store_dir);
      return 21;
    } catch (const IoError& e) {
      std::string m = e.what();
      if (m.find("index is missing") == std::string::npos || m.find("writable") == std::string::npos) {
        std::fprintf(stderr, "message: %s\n", m.c_str());
        return 22;
      }
    }
    return 0;
  });
  if (code == 20) GTEST_SKIP() << "cannot drop root privileges here to make a folder read-only";
  EXPECT_EQ(code, 0);
  ASSERT_EQ(std::system(("chmod -R u+w " + store_dir).c_str()), 0);
  EXPECT_EQ(Store::open(store_dir)->stats().entries, 3u) << "rebuilt once writable";
}

TEST(StoreReliabilityTest, UnusableFolderDisablesCachingWithOneWarning) {
  TempDir dir;
  kcache::testing::write_file(dir / "file", "a file where the store folder should be");
  std::vector<std::string> warnings;
  StorageOptions options;
  options.local_dir = dir / "file/store";
  options.warn = [&](const std::string& m) { warnings.push_back(m); };
  Storage storage(options);
  EXPECT_EQ(storage.local(), nullptr);
  EXPECT_FALSE(storage.get(key_of(1)));
  storage.put(entry_of(1));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("continuing without the cache"), std::string::npos) << warnings[0];
}

}  // namespace
}  // namespace kcache::cache
