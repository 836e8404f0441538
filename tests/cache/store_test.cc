#include "cache/local/store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <cstdlib>
#include <ctime>
#include <memory>

#include "cache/format/manifest.h"
#include "cache/storage.h"
#include "common/error.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cache {
namespace {

using kcache::testing::TempDir;

Hash128 key_of(const std::string& name) { return xxh3_128(name); }

Entry cubin(const std::string& key, const std::string& payload, uint32_t compile_ms = 100) {
  return Entry(key_of(key), TargetKind::cubin, "sm_90", compile_ms, 1763769600, payload);
}

// Every blob file in a store, as paths.
std::vector<std::string> blob_files(const std::string& dir) {
  std::vector<std::string> out;
  FileSystem& fs = FileSystem::real();
  for (const std::string& shard : fs.list_directory(dir + "/blobs")) {
    for (const std::string& name : fs.list_directory(dir + "/blobs/" + shard)) {
      out.push_back(dir + "/blobs/" + shard + "/" + name);
    }
  }
  return out;
}

void sql(const std::string& db_path, const std::string& statement) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, statement.c_str(), nullptr, nullptr, &err), SQLITE_OK)
      << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

// A manifest for `name`'s key, with one set, written as compiles write it.
Hash128 put_manifest(const std::string& store_dir, const std::string& name) {
  Manifest m(manifest_key(key_of(name)));
  m.add({ManifestAsk{"a.cuh", "k.cu", false, {ManifestHeader{"a.cuh", 7}}}});
  write_manifest_file(store_dir, m);
  return m.key();
}

void set_mtime(const std::string& path, int64_t unix_s) {
  const struct timespec times[2] = {{unix_s, 0}, {unix_s, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

bool exists(const std::string& path) { return FileSystem::real().stat(path).has_value(); }

class StoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<Store> open_store(uint64_t merge_deferred_one_in = 64) {
    StoreOptions options;
    options.warn = [this](const std::string& m) { warnings_.push_back(m); };
    options.clock = [this] { return now_; };
    options.merge_deferred_one_in = merge_deferred_one_in;
    return Store::open(dir_.path() + "/store", options);
  }
  std::string store_dir() const { return dir_.path() + "/store"; }

  TempDir dir_;
  std::vector<std::string> warnings_;
  int64_t now_ = static_cast<int64_t>(std::time(nullptr));  // file mtimes are real
};

TEST_F(StoreTest, PutThenGetReturnsTheSameEntry) {
  auto store = open_store();
  store->put(Entry(key_of("a"), TargetKind::ptx, "compute_90", 42, 7, ".version 9.0"));
  std::optional<Entry> got = store->get(key_of("a"));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->kind(), TargetKind::ptx);
  EXPECT_EQ(got->arch(), "compute_90");
  EXPECT_EQ(got->compile_ms(), 42u);
  EXPECT_EQ(got->created_unix_s(), 7);
  EXPECT_EQ(got->payload(), ".version 9.0");
}

TEST_F(StoreTest, MissIsNulloptNotAnError) {
  auto store = open_store();
  EXPECT_FALSE(store->get(key_of("nothing")));
}

TEST_F(StoreTest, FolderIsCreatedWithMode0700) {
  open_store();
  struct stat st;
  ASSERT_EQ(::stat(store_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(StoreTest, CountersSurviveReopeningAndCountHitsMissesAndTimeSaved) {
  {
    auto store = open_store();
    store->put(cubin("a", "x", 250));
    store->get(key_of("a"));
    store->get(key_of("a"));
    store->get(key_of("b"));
    store->count("nvrtc_invocations", 3);
  }
  auto store = open_store();
  StoreStats stats = store->stats();
  EXPECT_EQ(stats.counter("hits"), 2);
  EXPECT_EQ(stats.counter("misses"), 1);
  EXPECT_EQ(stats.counter("stored"), 1);
  EXPECT_EQ(stats.counter("compile_ms_saved"), 500);
  EXPECT_EQ(stats.counter("nvrtc_invocations"), 3);
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.bytes, cubin("a", "x").encoded().size());
  EXPECT_EQ(stats.max_size, kDefaultMaxSize);
}

std::string index_bytes(const std::string& dir) {
  return kcache::testing::read_file_or_die(dir + "/index.sqlite");
}

// A process that only had hits writes nothing to the index (no lock, no
// journal, no sync): its counters and LRU times go to a deferred file, which
// the next writer merges.
TEST_F(StoreTest, HitOnlyProcessWritesNothingToTheIndexAndItsCountsStillAddUp) {
  { open_store()->put(cubin("a", "x")); }
  const std::string before = index_bytes(store_dir());
  now_ += 50;
  const int64_t hit_at = now_;
  for (int process = 0; process < 3; ++process) {
    // Not the flush that merges the deferred files (one in 64 at random).
    auto store = open_store(/*merge_deferred_one_in=*/0);
    ASSERT_TRUE(store->get(key_of("a")));
  }
  EXPECT_EQ(index_bytes(store_dir()), before) << "a hit-only process wrote to the index";
  EXPECT_FALSE(exists(store_dir() + "/index.sqlite-wal"));
  EXPECT_FALSE(exists(store_dir() + "/index.sqlite-shm")) << "the index maps no -shm file";
  now_ += 50;
  { open_store()->put(cubin("b", "y")); }
  auto store = open_store();
  EXPECT_EQ(store->stats().counter("hits"), 3);
  EXPECT_EQ(store->info(key_of("a"))->last_used_unix_s, hit_at) << "the hits' LRU time";
}

// The flush that merges (one in StoreOptions::merge_deferred_one_in): the
// hits' counts and LRU times go into the index and no deferred file is left.
TEST_F(StoreTest, AMergingFlushEmptiesTheDeferredFolderIntoTheIndex) {
  { open_store()->put(cubin("a", "x")); }
  now_ += 50;
  const int64_t hit_at = now_;
  {
    auto store = open_store(/*merge_deferred_one_in=*/1);
    ASSERT_TRUE(store->get(key_of("a")));
  }
  std::vector<std::string> left;
  if (exists(store_dir() + "/deferred")) {
    left = kcache::FileSystem::real().list_directory(store_dir() + "/deferred");
  }
  EXPECT_TRUE(left.empty()) << left.size() << " deferred files left by a merging flush";
  auto store = open_store(/*merge_deferred_one_in=*/0);
  EXPECT_EQ(store->stats().counter("hits"), 1);
  EXPECT_EQ(store->info(key_of("a"))->last_used_unix_s, hit_at);
}

TEST_F(StoreTest, ZeroStatsKeepsEntries) {
  auto store = open_store();
  store->put(cubin("a", "x"));
  store->get(key_of("a"));
  store->zero_stats();
  StoreStats stats = store->stats();
  EXPECT_EQ(stats.counter("hits"), 0);
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_TRUE(store->get(key_of("a")));
}

TEST_F(StoreTest, ReplacingAnEntryKeepsOneFileAndCorrectTotals) {
  auto store = open_store();
  store->put(cubin("a", "first"));
  store->put(cubin("a", "second, longer"));
  EXPECT_EQ(store->get(key_of("a"))->payload(), "second, longer");
  EXPECT_EQ(blob_files(store_dir()).size(), 1u);
  EXPECT_EQ(store->stats().entries, 1u);
  EXPECT_EQ(store->stats().bytes, cubin("a", "second, longer").encoded().size());
}

TEST_F(StoreTest, CorruptBlobIsAMissAndIsRemoved) {
  const std::vector<std::pair<const char*, std::function<std::string(std::string)>>> damages = {
      {"flipped byte",
       [](std::string b) {
         b[b.size() / 2] ^= 1;
         return b;
       }},
      {"truncated", [](std::string b) { return b.substr(0, b.size() - 3); }},
      {"empty", [](std::string) { return std::string(); }},
  };
  for (const auto& [what, damage] : damages) {
    auto store = open_store();
    store->put(cubin(what, std::string(1000, 'p')));
    std::vector<std::string> files = blob_files(store_dir());
    ASSERT_EQ(files.size(), 1u);
    kcache::testing::write_file(files[0], damage(kcache::testing::read_file_or_die(files[0])));

    EXPECT_FALSE(store->get(key_of(what))) << what;
    EXPECT_FALSE(store->info(key_of(what))) << what << ": the row should be gone";
    EXPECT_TRUE(blob_files(store_dir()).empty()) << what << ": the file should be gone";
    EXPECT_EQ(store->stats().counter("corrupt_removed"), 1) << what;
    store->zero_stats();
  }
  // Said once per store folder and process, whichever Store met it.
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("corrupt"), std::string::npos) << warnings_[0];
}

TEST_F(StoreTest, BlobHoldingAnotherKeysEntryIsCorrupt) {
  auto store = open_store();
  store->put(cubin("a", "payload of a"));
  store->put(cubin("b", "payload of b"));
  std::string file_a, file_b;
  for (const std::string& f : blob_files(store_dir())) {
    (f.find(key_of("a").hex()) != std::string::npos ? file_a : file_b) = f;
  }
  kcache::testing::write_file(file_a, kcache::testing::read_file_or_die(file_b));
  EXPECT_FALSE(store->get(key_of("a")));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("holds the entry for " + key_of("b").hex()), std::string::npos)
      << warnings_[0];
  EXPECT_EQ(store->get(key_of("b"))->payload(), "payload of b");
}

TEST_F(StoreTest, MissingBlobFileIsAMiss) {
  auto store = open_store();
  store->put(cubin("a", "x"));
  ASSERT_EQ(std::remove(blob_files(store_dir())[0].c_str()), 0);
  EXPECT_FALSE(store->get(key_of("a")));
  EXPECT_EQ(store->stats().entries, 0u);
}

// The index is data too: a store folder restored by CI or shared may name any
// path as a blob. Reading, removing, clearing and verifying must never touch a
// file outside blobs/.
TEST_F(StoreTest, IndexNamingAPathOutsideBlobsNeverReachesThatFile) {
  const std::string victim = dir_.path() + "/victim";
  kcache::testing::write_file(victim, "precious");
  // blob_path() was blobs/<first two chars>/<file>: "../victim" reached dir_/victim.
  const std::string evil = "../victim";
  for (int round = 0; round < 4; ++round) {
    {
      auto store = open_store();
      store->put(cubin("a", "payload"));
      store->put(cubin("b", "payload"));
    }
    sql(store_dir() + "/index.sqlite", "UPDATE entries SET file = '" + evil + "'");
    auto store = open_store();
    switch (round) {
      case 0: {
        // The bad row is dropped, and the entry's own blob file, which no
        // row names then, is taken back (Store::get before a miss).
        std::optional<Entry> e = store->get(key_of("a"));
        ASSERT_TRUE(e);
        EXPECT_EQ(e->payload(), "payload");
        break;
      }
      case 1:
        EXPECT_TRUE(store->remove(key_of("a")));
        break;
      case 2:
        store->clear();
        break;
      case 3:
        EXPECT_EQ(store->verify().problems.size(), 2u);
        break;
    }
    EXPECT_EQ(kcache::testing::read_file_or_die(victim), "precious") << "round " << round;
    store->clear();
  }
  bool warned = false;
  for (const std::string& w : warnings_) warned |= w.find("not a blob name") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST_F(StoreTest, ArchFromATamperedIndexIsListedWithoutControlCharacters) {
  open_store()->put(cubin("a", "payload"));
  sql(store_dir() + "/index.sqlite", "UPDATE entries SET arch = 'sm_90' || char(27) || '[2J'");
  auto store = open_store();
  std::string arch = store->info(key_of("a"))->arch;
  EXPECT_EQ(arch, "sm_90\\x1b[2J");
  EXPECT_EQ(store->list().at(0).arch, arch);
}

TEST_F(StoreTest, GarbageIndexIsRebuiltFromBlobFilesWithOneWarning) {
  {
    auto store = open_store();
    store->put(cubin("a", "aaa"));
    store->put(cubin("b", "bbb"));
  }
  kcache::testing::write_file(store_dir() + "/index.sqlite", std::string(8192, 'g'));
  std::remove((store_dir() + "/index.sqlite-wal").c_str());
  std::remove((store_dir() + "/index.sqlite-shm").c_str());

  auto store = open_store();
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("rebuilt the index from 2 blob files"), std::string::npos)
      << warnings_[0];
  EXPECT_EQ(store->get(key_of("a"))->payload(), "aaa");
  EXPECT_EQ(store->get(key_of("b"))->payload(), "bbb");
  EXPECT_EQ(store->stats().entries, 2u);
  EXPECT_TRUE(store->verify().problems.empty());
}

TEST_F(StoreTest, StoreFromANewerIncompatibleKcacheIsRefused) {
  open_store();
  sql(store_dir() + "/index.sqlite",
      "UPDATE meta SET value = '99' WHERE name IN ('version', 'compatible_version')");
  try {
    open_store();
    FAIL() << "expected IncompatibleVersionError";
  } catch (const IncompatibleVersionError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("newer kcache"), std::string::npos) << msg;
    EXPECT_NE(msg.find(store_dir()), std::string::npos) << msg;
  }
}

TEST_F(StoreTest, NewerButCompatibleStoreOpens) {
  open_store();
  sql(store_dir() + "/index.sqlite", "UPDATE meta SET value = '7' WHERE name = 'version'");
  EXPECT_NO_THROW(open_store());
}

TEST_F(StoreTest, SizeCapEvictsLeastRecentlyUsedFirst) {
  auto store = open_store();
  const std::string payload(1000, 'x');
  const uint64_t entry_size = cubin("k", payload).encoded().size();
  store->set_max_size(entry_size * 3);
  store->put(cubin("old", payload));
  now_ += 10;
  store->put(cubin("middle", payload));
  now_ += 10;
  store->put(cubin("new", payload));
  now_ += 10;
  store->get(key_of("old"));  // now the most recently used
  store->flush();
  now_ += 10;
  store->put(cubin("newest", payload));  // over the cap: evict to 90%

  EXPECT_TRUE(store->info(key_of("old")));
  EXPECT_FALSE(store->info(key_of("middle")));
  EXPECT_FALSE(store->info(key_of("new")));
  EXPECT_TRUE(store->info(key_of("newest")));
  EXPECT_LE(store->stats().bytes, entry_size * 3);
  EXPECT_EQ(store->stats().counter("evicted"), 2);
  EXPECT_EQ(blob_files(store_dir()).size(), 2u);
}

TEST_F(StoreTest, LoweringTheCapEvictsImmediately) {
  auto store = open_store();
  for (int i = 0; i < 10; ++i) store->put(cubin(std::to_string(i), std::string(100, 'x')));
  store->set_max_size(cubin("k", std::string(100, 'x')).encoded().size() * 4);
  EXPECT_EQ(store->stats().entries, 4u);
}

TEST_F(StoreTest, EvictOlderThanRemovesOnlyOldEntries) {
  auto store = open_store();
  store->put(cubin("old", "o"));
  now_ += 3 * 86400;
  store->put(cubin("recent", "r"));
  now_ += 86400;
  CleanupResult r = store->evict_older_than(std::chrono::hours(48));
  EXPECT_EQ(r.entries_removed, 1u);
  EXPECT_FALSE(store->info(key_of("old")));
  EXPECT_TRUE(store->info(key_of("recent")));
}

TEST_F(StoreTest, ClearRemovesEveryEntryAndFile) {
  auto store = open_store();
  for (int i = 0; i < 5; ++i) store->put(cubin(std::to_string(i), "x"));
  EXPECT_EQ(store->clear().entries_removed, 5u);
  EXPECT_EQ(store->stats().entries, 0u);
  EXPECT_EQ(store->stats().bytes, 0u);
  EXPECT_TRUE(blob_files(store_dir()).empty());
}

TEST_F(StoreTest, CleanupRemovesOldStrayFilesButNotFreshOnes) {
  auto store = open_store();
  store->put(cubin("kept", "x"));
  FileSystem::real().create_directories(store_dir() + "/blobs/ab", 0700);
  kcache::testing::write_file(store_dir() + "/blobs/ab/stray.tmp.1", "partial");
  EXPECT_EQ(store->cleanup().stray_files_removed, 0u);  // might be a put in progress
  now_ += 3600;
  EXPECT_EQ(store->cleanup().stray_files_removed, 1u);
  EXPECT_TRUE(store->get(key_of("kept")));
}

TEST_F(StoreTest, VerifyReportsAndRemovesCorruptEntries) {
  auto store = open_store();
  store->put(cubin("good", "good"));
  store->put(cubin("bad", "bad"));
  std::string bad_file;
  for (const std::string& f : blob_files(store_dir())) {
    if (f.find(key_of("bad").hex()) != std::string::npos) bad_file = f;
  }
  kcache::testing::write_file(bad_file, "garbage");
  VerifyResult r = store->verify();
  EXPECT_EQ(r.entries_checked, 2u);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find(key_of("bad").hex()), std::string::npos) << r.problems[0];
  EXPECT_TRUE(store->verify().problems.empty());
  EXPECT_TRUE(store->get(key_of("good")));
}

TEST_F(StoreTest, EvictOlderThanRemovesOldManifestsAndKeepsYoungOnes) {
  auto store = open_store();
  const std::string old_path = manifest_path(store_dir(), put_manifest(store_dir(), "old"));
  const std::string young_path = manifest_path(store_dir(), put_manifest(store_dir(), "young"));
  set_mtime(old_path, now_ - 3 * 86400);
  CleanupResult r = store->evict_older_than(std::chrono::hours(48));
  EXPECT_EQ(r.manifests_removed, 1u);
  EXPECT_FALSE(exists(old_path));
  EXPECT_TRUE(exists(young_path));
}

TEST_F(StoreTest, ReadingAManifestRefreshesItsAgeForEviction) {
  auto store = open_store();
  const Hash128 key = put_manifest(store_dir(), "used");
  const std::string path = manifest_path(store_dir(), key);
  set_mtime(path, now_ - 3 * 86400);
  StorageOptions options;
  options.local_dir = store_dir();
  Storage storage(options);  // a lookup reads it: direct mode's hit path
  ASSERT_TRUE(storage.get_manifest(key));
  EXPECT_EQ(store->evict_older_than(std::chrono::hours(48)).manifests_removed, 0u);
  EXPECT_TRUE(exists(path));
}

TEST_F(StoreTest, CleanupRemovesStaleManifestTempFilesButNotFreshOnes) {
  auto store = open_store();
  const Hash128 key = put_manifest(store_dir(), "k");
  const std::string stale = manifest_path(store_dir(), key) + ".tmp.999.0";
  const std::string fresh = manifest_path(store_dir(), key) + ".tmp.999.1";
  kcache::testing::write_file(stale, "partial");
  kcache::testing::write_file(fresh, "partial");
  set_mtime(stale, now_ - 2 * 3600);  // a writer killed two hours ago
  EXPECT_EQ(store->cleanup().stray_files_removed, 1u);
  EXPECT_FALSE(exists(stale));
  EXPECT_TRUE(exists(fresh));  // may be a write in progress
  EXPECT_TRUE(exists(manifest_path(store_dir(), key)));
}

TEST_F(StoreTest, CorruptManifestIsReportedByVerifyAndRemovedByCleanup) {
  auto store = open_store();
  const std::string good = manifest_path(store_dir(), put_manifest(store_dir(), "good"));
  const Hash128 bad_key = put_manifest(store_dir(), "bad");
  const std::string bad = manifest_path(store_dir(), bad_key);
  kcache::testing::write_file(bad, "garbage");
  // A whole manifest under another key's name is as useless.
  const Hash128 moved_key = manifest_key(key_of("moved"));
  const std::string moved = manifest_path(store_dir(), moved_key);
  FileSystem::real().create_directories(moved.substr(0, moved.rfind('/')), 0700);
  ASSERT_EQ(::rename(good.c_str(), moved.c_str()), 0);
  put_manifest(store_dir(), "good");

  VerifyResult v = store->verify();
  EXPECT_EQ(v.manifests_checked, 3u);
  ASSERT_EQ(v.problems.size(), 2u);
  std::string all = v.problems[0] + "\n" + v.problems[1];
  EXPECT_NE(all.find("manifest " + bad_key.hex()), std::string::npos) << all;
  EXPECT_NE(all.find("manifest " + moved_key.hex()), std::string::npos) << all;
  EXPECT_FALSE(exists(bad));  // verify repairs, as for entries
  EXPECT_FALSE(exists(moved));
  EXPECT_TRUE(exists(good));
  EXPECT_TRUE(store->verify().problems.empty());

  kcache::testing::write_file(bad, "garbage again");
  EXPECT_EQ(store->cleanup().stray_files_removed, 1u);
  EXPECT_FALSE(exists(bad));
  EXPECT_TRUE(exists(good));
}

TEST_F(StoreTest, SizeCapEvictionRemovesManifestsOlderThanEveryEntryKept) {
  auto store = open_store();
  const std::string stale = manifest_path(store_dir(), put_manifest(store_dir(), "stale"));
  const std::string used = manifest_path(store_dir(), put_manifest(store_dir(), "used"));
  store->put(cubin("a", std::string(1000, 'a')));
  set_mtime(stale, now_ - 86400);  // last used before any entry
  now_ += 10;
  store->put(cubin("b", std::string(1000, 'b')));
  set_mtime(used, now_);
  store->set_max_size(store->stats().bytes - 1);  // evicts "a"
  EXPECT_FALSE(store->info(key_of("a")));
  EXPECT_FALSE(exists(stale));
  EXPECT_TRUE(exists(used));
  EXPECT_EQ(store->clear().manifests_removed, 1u);
  EXPECT_FALSE(exists(used));
}

TEST_F(StoreTest, ListShowsEveryEntryMostRecentlyUsedFirst) {
  auto store = open_store();
  store->put(cubin("a", "a"));
  now_ += 5;
  store->put(Entry(key_of("b"), TargetKind::ptx, "compute_90", 9, 1, "b"));
  std::vector<EntryInfo> all = store->list();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].key, key_of("b"));
  EXPECT_EQ(all[0].kind, TargetKind::ptx);
  EXPECT_EQ(all[0].arch, "compute_90");
  EXPECT_EQ(all[0].compile_ms, 9u);
  EXPECT_EQ(all[1].key, key_of("a"));
}

TEST_F(StoreTest, RemoveDeletesRowAndFile) {
  auto store = open_store();
  store->put(cubin("a", "a"));
  EXPECT_TRUE(store->remove(key_of("a")));
  EXPECT_FALSE(store->remove(key_of("a")));
  EXPECT_TRUE(blob_files(store_dir()).empty());
}

class DefaultDirTest : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("KCACHE_DIR");
    unsetenv("XDG_CACHE_HOME");
  }
};

TEST_F(DefaultDirTest, KcacheDirThenXdgThenHome) {
  setenv("HOME", "/home/someone", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("KCACHE_DIR", "/explicit", 1);
  EXPECT_EQ(default_store_dir(), "/explicit");
  unsetenv("KCACHE_DIR");
  EXPECT_EQ(default_store_dir(), "/xdg/kcache");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_store_dir(), "/home/someone/.cache/kcache");
}

}  // namespace
}  // namespace kcache::cache
