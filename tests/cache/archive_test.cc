#include "cache/format/archive.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/bytes.h"
#include "common/error.h"
#include "common/hash.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cache {
namespace {

using kcache::testing::TempDir;

// Odd entries lean, even ones with nothing to remove: lean records (entry
// format 2) travel through archives intact.
LeanRecord lean_of(int k) {
  return k % 2 ? LeanRecord{LeanRecord::kAsked | LeanRecord::kLean, 1000 + k,
                            static_cast<uint32_t>(k)}
               : LeanRecord{LeanRecord::kAsked, 0, 0};
}

Entry entry_of(int k) {
  return Entry(xxh3_128("k" + std::to_string(k)), TargetKind::cubin, "sm_90", 5, 1,
               std::string(100 + k * 10, static_cast<char>('a' + k)), {}, lean_of(k));
}

std::string read_runfile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ArchiveTest : public ::testing::Test {
 protected:
  std::unique_ptr<Store> open(const std::string& name) {
    StoreOptions options;
    options.warn = [](const std::string& m) { ADD_FAILURE() << m; };
    return Store::open(dir_ / name, options);
  }
  // An archive of entries 0..n-1 exported from a fresh store.
  std::string make_archive(int n) {
    auto source = open("source");
    for (int k = 0; k < n; ++k) source->put(entry_of(k));
    std::string path = dir_ / "ci.kcarchive";
    ExportResult r = export_archive(*source, path);
    EXPECT_EQ(r.entries, static_cast<uint64_t>(n));
    return path;
  }
  TempDir dir_;
};

TEST_F(ArchiveTest, ExportThenImportIntoAnotherStoreCopiesEveryEntry) {
  std::string path = make_archive(5);
  auto target = open("target");
  ImportResult r = import_archive(*target, path);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.imported, 5u);
  EXPECT_TRUE(r.problems.empty());
  for (int k = 0; k < 5; ++k) {
    EXPECT_EQ(target->get(entry_of(k).key())->payload(), entry_of(k).payload());
    EXPECT_EQ(target->get(entry_of(k).key())->lean(), lean_of(k));
  }
}

// A store written by an older kcache holds format 1 entries; they export,
// import and hit as they are, their lean record unknown.
TEST_F(ArchiveTest, Format1EntriesTravelAsTheyAre) {
  Entry old = Entry::decode(read_runfile("tests/cache/golden/entry_v1.bin"));
  ASSERT_EQ(old.format_version(), 1);
  auto source = open("source");
  source->put(old);
  source->put(entry_of(1));
  std::string path = dir_ / "mixed.kcarchive";
  EXPECT_EQ(export_archive(*source, path).entries, 2u);
  auto target = open("target");
  ImportResult r = import_archive(*target, path);
  EXPECT_EQ(r.imported, 2u);
  std::optional<Entry> back = target->get(old.key());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->encoded(), old.encoded());
  EXPECT_TRUE(back->lean().unknown());
  EXPECT_EQ(target->get(entry_of(1).key())->lean(), lean_of(1));
}

TEST_F(ArchiveTest, ExportLeavesStatisticsAlone) {
  auto source = open("source");
  source->put(entry_of(1));
  export_archive(*source, dir_ / "a");
  EXPECT_EQ(source->stats().counter("hits"), 0);
}

TEST_F(ArchiveTest, ImportSkipsEntriesAlreadyPresent) {
  std::string path = make_archive(3);
  auto target = open("target");
  target->put(entry_of(1));
  ImportResult r = import_archive(*target, path);
  EXPECT_EQ(r.imported, 2u);
  EXPECT_EQ(r.already_present, 1u);
}

TEST_F(ArchiveTest, TruncatedArchiveImportsTheEntriesBeforeTheDamage) {
  std::string path = make_archive(4);
  std::string bytes = kcache::testing::read_file_or_die(path);
  kcache::testing::write_file(path, bytes.substr(0, bytes.size() - 200));
  auto target = open("target");
  ImportResult r = import_archive(*target, path);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.imported, 3u);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("truncated"), std::string::npos) << r.problems[0];
  EXPECT_TRUE(target->verify().problems.empty());
}

TEST_F(ArchiveTest, DamagedEntryIsRejectedAndTheRestImported) {
  std::string path = make_archive(3);
  std::string bytes = kcache::testing::read_file_or_die(path);
  bytes[bytes.find(std::string(110, 'b')) + 5] ^= 1;  // inside entry 1's payload
  kcache::testing::write_file(path, bytes);
  auto target = open("target");
  ImportResult r = import_archive(*target, path);
  EXPECT_EQ(r.imported, 2u);
  EXPECT_EQ(r.rejected, 1u);
  EXPECT_FALSE(r.complete) << "the archive checksum must fail too";
  EXPECT_FALSE(target->info(entry_of(1).key()));
}

TEST_F(ArchiveTest, NotAnArchiveIsACorruptErrorNamingTheFile) {
  kcache::testing::write_file(dir_ / "junk", "definitely not an archive");
  auto target = open("target");
  try {
    import_archive(*target, dir_ / "junk");
    FAIL();
  } catch (const CorruptError& e) {
    EXPECT_NE(std::string(e.what()).find(dir_ / "junk"), std::string::npos) << e.what();
  }
}

TEST_F(ArchiveTest, MissingArchiveIsAnIoError) {
  auto target = open("target");
  EXPECT_THROW(import_archive(*target, dir_ / "missing"), IoError);
}

// An archive as anyone can write one, every checksum valid (format in archive.h).
std::string craft_archive(const std::vector<std::string>& encoded_entries) {
  ByteWriter w;
  w.bytes(std::string_view("KCARCHV\0", 8));
  w.u16(kArchiveFormatVersion);
  for (const std::string& e : encoded_entries) {
    w.u8(1);
    w.u64(e.size());
    w.bytes(e);
  }
  w.u8(0);
  w.u64(encoded_entries.size());
  Hash128 digest = xxh3_128(w.data());
  w.u64(digest.high);
  w.u64(digest.low);
  return w.take();
}

TEST_F(ArchiveTest, EntryWithAForgedArchIsRejectedAndTheRestImported) {
  const Entry evil(xxh3_128("evil"), TargetKind::cubin, "../../pwned", 5, 1, "EVIL");
  const Entry mislabelled(xxh3_128("ptx"), TargetKind::cubin, "compute_90", 5, 1, "PTX?");
  kcache::testing::write_file(dir_ / "evil.kcarchive",
                              craft_archive({entry_of(0).encoded(), evil.encoded(),
                                             mislabelled.encoded(), entry_of(2).encoded()}));
  auto target = open("target");
  ImportResult r = import_archive(*target, dir_ / "evil.kcarchive");
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.imported, 2u);
  EXPECT_EQ(r.rejected, 2u);
  ASSERT_EQ(r.problems.size(), 2u);
  EXPECT_NE(r.problems[0].find("entry 2 of " + (dir_ / "evil.kcarchive") + " is corrupt"),
            std::string::npos)
      << r.problems[0];
  EXPECT_NE(r.problems[0].find("arch \"../../pwned\" is not an arch"), std::string::npos)
      << r.problems[0];
  EXPECT_NE(r.problems[1].find("a cubin labelled compute_90"), std::string::npos) << r.problems[1];
  EXPECT_FALSE(target->info(evil.key()).has_value());
  EXPECT_FALSE(target->info(mislabelled.key()).has_value());
  EXPECT_EQ(target->list().size(), 2u);
}

}  // namespace
}  // namespace kcache::cache
