// The `kcache` admin flags and verbs, run as a user runs them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "cache/format/manifest.h"
#include "cache/local/store.h"
#include "common/lean_record.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cli {
namespace {

using kcache::testing::CommandResult;
using kcache::testing::TempDir;

class AdminTest : public ::testing::Test {
 protected:
  CommandResult kcache(std::vector<std::string> args) {
    args.insert(args.begin(), {kcache::testing::kcache_binary(), "--dir", store_dir()});
    return kcache::testing::run_command(args);
  }
  std::string store_dir() const { return dir_ / "store"; }
  // Puts entries straight through the store API, as a compile would.
  void populate(int n) {
    auto store = cache::Store::open(store_dir());
    for (int k = 0; k < n; ++k) store->put(entry(k));
  }
  // Odd entries lean (what the lean pass removed is shown by `kcache show`).
  static cache::Entry entry(int k) {
    return cache::Entry(
        xxh3_128(std::to_string(k)), cache::TargetKind::cubin, "sm_90", 1500, 1,
        std::string(1000, 'x'), {},
        k % 2 ? LeanRecord{LeanRecord::kAsked | LeanRecord::kLean, 154272, 1001} : LeanRecord{});
  }
  TempDir dir_;
};

TEST_F(AdminTest, ShowStatsCountsHitsAndTimeSaved) {
  populate(2);
  {
    auto store = cache::Store::open(store_dir());
    store->get(entry(0).key());
    store->get(xxh3_128("missing"));
  }
  CommandResult r = kcache({"-s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Local store: " + store_dir()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 / 2 (50.0 %)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NVRTC time saved, summed:  1.5 s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Entries:                   2"), std::string::npos) << r.out;
}

TEST_F(AdminTest, ShowStatsAsJsonIsMachineReadable) {
  populate(3);
  CommandResult r = kcache({"-s", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["entries"], 3);
  EXPECT_EQ(j["dir"], store_dir());
  EXPECT_EQ(j["counters"]["stored"], 3);
  EXPECT_EQ(j["max_size"], 5ull << 30);
}

TEST_F(AdminTest, ZeroStatsThenShow) {
  populate(1);
  CommandResult r = kcache({"-z", "-s", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["counters"]["stored"], 0);
  EXPECT_EQ(j["entries"], 1);
}

TEST_F(AdminTest, ListAndShowPrintFullKeys) {
  populate(2);
  CommandResult ls = kcache({"ls"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find(entry(0).key().hex()), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find(entry(1).key().hex()), std::string::npos) << ls.out;

  CommandResult show = kcache({"show", entry(1).key().hex(), "--payload-out", dir_ / "cubin"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("Arch:        sm_90"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("Lean:        -154,272 B, -1,001 variables"), std::string::npos)
      << show.out;
  EXPECT_EQ(kcache::testing::read_file_or_die(dir_ / "cubin"), std::string(1000, 'x'));
  show = kcache({"show", entry(0).key().hex()});
  EXPECT_NE(show.out.find("Lean:        off (NVRTC's bytes)"), std::string::npos) << show.out;
  show = kcache({"--format", "json", "show", entry(1).key().hex()});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("\"state\": \"lean\""), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("\"variables_removed\": 1001"), std::string::npos) << show.out;
}

TEST_F(AdminTest, ShowOfAnUnknownOrMalformedKeyFailsWithOneLine) {
  populate(1);
  CommandResult missing = kcache({"show", std::string(32, '0')});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err,
            "kcache show: no entry " + std::string(32, '0') + " in " + store_dir() + "\n");
  CommandResult malformed = kcache({"show", "abc"});
  EXPECT_EQ(malformed.exit_code, 2);
  EXPECT_NE(malformed.err.find("32 hex digits"), std::string::npos) << malformed.err;
}

TEST_F(AdminTest, VerifyRemovesCorruptEntriesAndExitsOne) {
  populate(2);
  CommandResult clean = kcache({"verify"});
  EXPECT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_NE(clean.out.find("Checked 2 entries and 0 manifests: all intact"), std::string::npos)
      << clean.out;

  std::string hex = entry(0).key().hex();
  std::string shard = store_dir() + "/blobs/" + hex.substr(0, 2);
  std::string file = shard + "/" + FileSystem::real().list_directory(shard)[0];
  kcache::testing::write_file(file, "garbage");
  CommandResult dirty = kcache({"verify"});
  EXPECT_EQ(dirty.exit_code, 1);
  EXPECT_NE(dirty.out.find(hex), std::string::npos) << dirty.out;
  EXPECT_EQ(kcache({"verify"}).exit_code, 0) << "the corrupt entry should be gone";
}

TEST_F(AdminTest, VerifyReportsACorruptManifestAndEvictOlderThanRemovesOldOnes) {
  populate(1);
  cache::Manifest manifest(cache::manifest_key(xxh3_128("kernel")));
  manifest.add({cache::ManifestAsk{"a.cuh", "k.cu", false, {cache::ManifestHeader{"a.cuh", 7}}}});
  cache::write_manifest_file(store_dir(), manifest);
  const std::string path = cache::manifest_path(store_dir(), manifest.key());
  kcache::testing::write_file(path, "garbage");
  CommandResult dirty = kcache({"verify"});
  EXPECT_EQ(dirty.exit_code, 1);
  EXPECT_NE(dirty.out.find("manifest " + manifest.key().hex()), std::string::npos) << dirty.out;
  EXPECT_FALSE(FileSystem::real().stat(path)) << "verify removes it, as a corrupt entry";

  cache::write_manifest_file(store_dir(), manifest);
  CommandResult young = kcache({"--evict-older-than", "1d"});
  EXPECT_NE(young.out.find("and 0 manifests not used for 1d"), std::string::npos) << young.out;
  const struct timespec old[2] = {{1, 0}, {1, 0}};  // 1970
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), old, 0), 0);
  CommandResult evicted = kcache({"--evict-older-than", "1d"});
  EXPECT_NE(evicted.out.find("and 1 manifests not used for 1d"), std::string::npos) << evicted.out;
  EXPECT_FALSE(FileSystem::real().stat(path));
}

TEST_F(AdminTest, ExportImportMovesEntriesBetweenStores) {
  populate(4);
  CommandResult exp = kcache({"export", dir_ / "ci.kca"});
  ASSERT_EQ(exp.exit_code, 0) << exp.err;
  EXPECT_NE(exp.out.find("Exported 4 entries"), std::string::npos) << exp.out;

  CommandResult imp = kcache::testing::run_command(
      {kcache::testing::kcache_binary(), "--dir", dir_ / "other", "import", dir_ / "ci.kca"});
  ASSERT_EQ(imp.exit_code, 0) << imp.err;
  EXPECT_NE(imp.out.find("Imported 4 entries"), std::string::npos) << imp.out;
  EXPECT_EQ(cache::Store::open(dir_ / "other")->stats().entries, 4u);
}

TEST_F(AdminTest, ImportOfAMissingFileIsAUsageError) {
  CommandResult r = kcache({"import", dir_ / "nope.kca"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nope.kca"), std::string::npos) << r.err;
}

TEST_F(AdminTest, ClearMaxSizeAndEvictOlderThan) {
  populate(5);
  CommandResult m = kcache({"-M", "3k"});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_NE(m.out.find("Set the size limit to 3.0 KiB"), std::string::npos) << m.out;
  EXPECT_LE(cache::Store::open(store_dir())->stats().bytes, 3u * 1024);

  EXPECT_EQ(kcache({"--evict-older-than", "1d"}).exit_code, 0);  // all were just used
  EXPECT_GT(cache::Store::open(store_dir())->stats().entries, 0u);

  CommandResult c = kcache({"-C"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(cache::Store::open(store_dir())->stats().entries, 0u);
}

TEST_F(AdminTest, BadSizeIsAUsageErrorThatShowsTheGrammar) {
  CommandResult r = kcache({"-M", "5X"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("invalid size \"5X\""), std::string::npos) << r.err;
}

TEST_F(AdminTest, NoArgumentsIsAUsageError) {
  CommandResult r = kcache({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--help"), std::string::npos) << r.err;
}

TEST_F(AdminTest, HelpDocumentsExitCodes) {
  CommandResult r = kcache({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Exit codes:"), std::string::npos) << r.out;
}

TEST_F(AdminTest, StoreFromANewerKcacheExitsFour) {
  populate(1);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((store_dir() + "/index.sqlite").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE meta SET value='99' WHERE name='compatible_version'", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  CommandResult r = kcache({"-s"});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("newer kcache"), std::string::npos) << r.err;
}

// Blob files no row names (their rows went into an index deleted under a
// writer): `-c` indexes them again and says how many; `-s` then counts them.
TEST_F(AdminTest, CleanupAdoptsBlobFilesTheIndexDoesNotNameAndSaysHowMany) {
  populate(3);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((store_dir() + "/index.sqlite").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DELETE FROM entries; UPDATE totals SET total_size = 0, entries = 0",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  // Older than the grace period that protects a put in progress.
  ASSERT_EQ(std::system(("find " + store_dir() + "/blobs -type f -exec touch -d '1 hour ago' {} +")
                            .c_str()),
            0);
  CommandResult r = kcache({"-c"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("adopted 3 blob files the index did not name"), std::string::npos) << r.out;
  CommandResult stats = kcache({"-s"});
  EXPECT_NE(stats.out.find("Entries:                   3"), std::string::npos) << stats.out;
}

TEST_F(AdminTest, ParamsFileArgumentsAreExpanded) {
  populate(1);
  kcache::testing::write_file(dir_ / "args", "--format\njson\n-s\n");
  CommandResult r = kcache({"@" + (dir_ / "args")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["entries"], 1);
}

}  // namespace
}  // namespace kcache::cli
