// One store used by many processes, threads and users at once: its index
// files damaged under them, a second user reading it, root and a user
// writing it in turn, many threads meeting one trouble.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "cache/storage.h"
#include "cache/local/store.h"
#include "common/error.h"
#include "tests/cache/store_samples.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cache {
namespace {

using kcache::testing::become_nobody;
using kcache::testing::SampleEntries;
using kcache::testing::start_child;
using kcache::testing::TempDir;
using kcache::testing::wait_for;

constexpr int kKeys = 40;
const SampleEntries kSamples{"sharing", 1000, 977, 30000, 10, 1};
Hash128 key_of(int k) { return kSamples.key(k); }
std::string payload_of(int k) { return kSamples.payload(k); }
Entry entry_of(int k) { return kSamples.entry(k); }
StoreOptions quiet() { return kcache::testing::quiet_store_options(); }

// Puts and gets; any wrong byte or error fails the child.
int look_up_and_write(const std::string& dir, unsigned seed) {
  std::mt19937 rng(seed);
  auto store = Store::open(dir, quiet());
  for (int i = 0; i < 300; ++i) {
    int k = static_cast<int>(rng() % kKeys);
    if (rng() % 3 == 0) {
      store->put(entry_of(k));
    } else if (std::optional<Entry> e = store->get(key_of(k)); e && e->payload() != payload_of(k)) {
      std::fprintf(stderr, "wrong bytes for key %d\n", k);
      return 2;
    }
  }
  return 0;
}

TEST(StoreSharingTest, ShmTruncatedAndDeletedInALoopKillsNoProcessAndLosesNoResult) {
  TempDir dir;
  const std::string store_dir = dir / "store";
  {
    auto store = Store::open(store_dir, quiet());
    for (int k = 0; k < kKeys; k += 2) store->put(entry_of(k));
  }
  std::vector<pid_t> workers;
  for (unsigned w = 0; w < 4; ++w) {
    workers.push_back(start_child([&, w] { return look_up_and_write(store_dir, 100 + w); }));
  }
  const std::string shm = store_dir + "/index.sqlite-shm";
  // Until the workers are done: a truncation where a process may have the
  // file mapped, then a deletion.
  for (int round = 0; round < 400; ++round) {
    int fd = ::open(shm.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
    usleep(2000);
    if (round % 4 == 3) ::unlink(shm.c_str());
    int status = 0;
    bool any_running = false;
    for (pid_t pid : workers) any_running |= waitpid(pid, &status, WNOHANG | WNOWAIT) == 0;
    if (!any_running) break;
  }
  for (pid_t pid : workers) EXPECT_EQ(wait_for(pid), 0) << "a worker died (>128: of a signal)";
  auto store = Store::open(store_dir, quiet());
  for (const std::string& problem : store->verify().problems) ADD_FAILURE() << problem;
  for (int k = 0; k < kKeys; k += 2) {
    std::optional<Entry> e = store->get(key_of(k));
    ASSERT_TRUE(e) << "key " << k << " was stored before the workers started";
    EXPECT_EQ(e->payload(), payload_of(k));
  }
}

// The writer keeps the store open (a Bazel worker, a long build): what it
// stored must be visible to a user who may read the store but not write it.
TEST(StoreSharingTest, SecondUserReadingAStoreAnotherUserIsFillingGetsHits) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to drop to a second user (uid 65534)";
  TempDir dir(TempDir::Where::world_traversable_tmp);
  const std::string store_dir = dir / "store";
  auto writer = Store::open(store_dir, quiet());
  for (int k = 0; k < 3; ++k) writer->put(entry_of(k));
  ASSERT_EQ(std::system(("chmod 0755 " + dir.path() + " && chmod -R a+rX " + store_dir).c_str()),
            0);
  std::vector<std::string> said;
  int code = wait_for(start_child([&] {
    if (!become_nobody()) return 20;
    StorageOptions options;
    options.local_dir = store_dir;
    options.warn = [&](const std::string& m) {
      said.push_back(m);
      std::fprintf(stderr, "said: %s\n", m.c_str());
    };
    Storage storage(options);
    if (!storage.local()) return 21;
    if (!storage.local()->read_only()) return 22;
    for (int k = 0; k < 3; ++k) {
      std::optional<Entry> e = storage.get(key_of(k));
      if (!e || e->payload() != payload_of(k)) return 23;
    }
    // Said once that it is read-only, and nothing else.
    if (said.size() != 1 || said[0].find("read-only") == std::string::npos) return 24;
    return 0;
  }));
  if (code == 20) GTEST_SKIP() << "cannot drop root privileges to uid 65534 here";
  EXPECT_EQ(code, 0) << "21: no store; 22: not read-only; 23: a miss; 24: messages";
}

// Root compiles into a user's store, then the user does: both store and hit.
TEST(StoreSharingTest, RootThenTheStoresOwnerBothStoreAndHit) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to drop to the store's owner (uid 65534)";
  TempDir dir(TempDir::Where::world_traversable_tmp);
  const std::string store_dir = dir / "store";
  ASSERT_EQ(std::system(("chmod 0755 " + dir.path() + " && mkdir -m 0700 " + store_dir +
                         " && chown 65534:65534 " + store_dir)
                            .c_str()),
            0);
  std::vector<std::string> said;
  StorageOptions options;
  options.local_dir = store_dir;
  options.warn = [&](const std::string& m) { said.push_back(m); };
  {
    Storage root(options);
    for (int k = 0; k < 8; ++k) root.put(entry_of(k));
    for (int k = 0; k < 8; ++k) ASSERT_TRUE(root.get(key_of(k)));
  }
  for (const std::string& m : said) ADD_FAILURE() << "root: " << m;
  int code = wait_for(start_child([&] {
    if (!become_nobody()) return 20;
    said.clear();
    Storage user(options);
    if (!user.local() || user.local()->read_only()) return 21;
    for (int k = 0; k < 8; ++k) {
      std::optional<Entry> e = user.get(key_of(k));
      if (!e || e->payload() != payload_of(k)) return 22;
    }
    for (int k = 8; k < kKeys; ++k) user.put(entry_of(k));
    for (int k = 8; k < kKeys; ++k) {
      if (!user.get(key_of(k))) return 23;
    }
    user.local()->stats();
    for (const std::string& m : said) std::fprintf(stderr, "user was told: %s\n", m.c_str());
    return said.empty() ? 0 : 24;
  }));
  if (code == 20) GTEST_SKIP() << "cannot drop root privileges to uid 65534 here";
  EXPECT_EQ(code, 0) << "21: read-only; 22: root's entries missed; 23: own entries missed; 24: "
                        "warnings";
}

TEST(StoreSharingTest, GroupSharedStoreFolderGivesItsGroupAndModeToWhatIsMadeInIt) {
  TempDir dir;
  const std::string store_dir = dir / "store";
  ASSERT_EQ(::mkdir(store_dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(store_dir.c_str(), 02770), 0);
  { Store::open(store_dir, quiet())->put(entry_of(1)); }
  struct stat st;
  ASSERT_EQ(::stat((store_dir + "/blobs").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 02770u) << "blobs/";
  ASSERT_EQ(::stat((store_dir + "/index.sqlite").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0060, 0060u) << "the index is written by every member of the group";
  const std::string shard = store_dir + "/blobs/" + key_of(1).hex().substr(0, 2);
  ASSERT_EQ(::stat(shard.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 02770u) << "a shard folder";
}

TEST(StoreSharingTest, UmaskSettingDecidesTheModeOfNewFolders) {
  TempDir dir;
  const std::string store_dir = dir / "store";
  StoreOptions options = quiet();
  options.umask = 002;
  { Store::open(store_dir, options)->put(entry_of(1)); }
  struct stat st;
  ASSERT_EQ(::stat(store_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0775u) << "the store folder";
  ASSERT_EQ(::stat((store_dir + "/blobs").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0775u) << "blobs/";
}

// A program that closed its standard descriptors (a daemon) finds them closed
// after the store opened, wrote and read its index: SQLite never takes 0-2
// for its files and fills a free one with /dev/null for good instead.
TEST(StoreSharingTest, StandardDescriptorsClosedByTheProgramStayClosed) {
  TempDir dir;
  const std::string store_dir = dir / "store";
  { Store::open(store_dir, quiet())->put(entry_of(0)); }
  int code = wait_for(start_child([&] {
    for (int fd = 0; fd <= 2; ++fd) ::close(fd);
    {
      auto store = Store::open(store_dir, quiet());
      for (int k = 1; k < 4; ++k) store->put(entry_of(k));
      for (int k = 0; k < 4; ++k) {
        if (!store->get(key_of(k))) return 21;
      }
      store->stats();
    }
    for (int fd = 0; fd <= 2; ++fd) {
      if (::fcntl(fd, F_GETFD) != -1) return 30 + fd;
    }
    return 0;
  }));
  EXPECT_EQ(code, 0) << "21: a miss; 30 + n: descriptor n was open afterwards";
}

// Each thread has a Store of its own (a Store is used by one thread at a
// time) and meets the same trouble: one line in the process, not one each.
TEST(StoreSharingTest, EightThreadsMeetingOneReasonSayItOnce) {
  TempDir dir;
  const std::string store_dir = dir / "store";
  {
    auto store = Store::open(store_dir, quiet());
    for (int k = 0; k < 8; ++k) store->put(entry_of(k));
  }
  // Every blob damaged: each thread's lookup finds a corrupt entry.
  ASSERT_EQ(std::system(("for f in $(find " + store_dir +
                         "/blobs -type f); do printf 'damaged' > $f; done")
                            .c_str()),
            0);
  std::mutex mutex;
  std::vector<std::string> said;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      StoreOptions options;
      options.warn = [&](const std::string& m) {
        std::lock_guard<std::mutex> lock(mutex);
        said.push_back(m);
      };
      auto store = Store::open(store_dir, options);
      EXPECT_FALSE(store->get(key_of(t)));
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("corrupt"), std::string::npos) << said[0];
}

}  // namespace
}  // namespace kcache::cache
