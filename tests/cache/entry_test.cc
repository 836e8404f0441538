#include "cache/entry.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace kcache::cache {
namespace {

const Hash128 kKey = *Hash128::from_hex("00112233445566778899aabbccddeeff");

Entry sample() {
  return Entry(kKey, TargetKind::cubin, "sm_90", 1234, 1763769600,
               std::string("\x7f"
                           "ELF cubin\0bytes",
                           16),
               {{"scale<float>", "_Z5scaleIfEvPT_S0_i"}});
}

std::string read_runfile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(EntryTest, RoundTripsEveryField) {
  Entry e = Entry::decode(sample().encoded());
  EXPECT_EQ(e.key(), kKey);
  EXPECT_EQ(e.kind(), TargetKind::cubin);
  EXPECT_EQ(e.arch(), "sm_90");
  EXPECT_EQ(e.compile_ms(), 1234u);
  EXPECT_EQ(e.created_unix_s(), 1763769600);
  EXPECT_EQ(e.payload(), std::string("\x7f"
                                     "ELF cubin\0bytes",
                                     16));
  ASSERT_EQ(e.lowered_names().size(), 1u);
  EXPECT_EQ(e.lowered_names()[0].name_expression, "scale<float>");
  EXPECT_EQ(e.lowered_names()[0].lowered_name, "_Z5scaleIfEvPT_S0_i");
}

TEST(EntryTest, PtxAndEmptyPayloadRoundTrip) {
  Entry e = Entry::decode(Entry(kKey, TargetKind::ptx, "compute_90", 0, 0, "").encoded());
  EXPECT_EQ(e.kind(), TargetKind::ptx);
  EXPECT_EQ(e.payload(), "");
  EXPECT_TRUE(e.lowered_names().empty());
}

// Fails when the bytes written change. If intended, bump kEntryFormatVersion
// and add golden/entry_v<N>.bin (written to $TEST_UNDECLARED_OUTPUTS_DIR).
TEST(EntryTest, MatchesGoldenFileForThisFormatVersion) {
  std::string name = "entry_v" + std::to_string(kEntryFormatVersion) + ".bin";
  std::string actual = sample().encoded();
  if (const char* out = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
    std::ofstream(std::string(out) + "/" + name, std::ios::binary) << actual;
  }
  std::string golden = read_runfile("tests/cache/golden/" + name);
  ASSERT_FALSE(golden.empty()) << "missing tests/cache/golden/" << name;
  EXPECT_EQ(actual, golden) << "the entry format changed without a kEntryFormatVersion bump";
  for (uint16_t v = 1; v <= kEntryFormatVersion; ++v) {
    EXPECT_NO_THROW(
        Entry::decode(read_runfile("tests/cache/golden/entry_v" + std::to_string(v) + ".bin")));
  }
}

TEST(EntryTest, EveryFlippedByteIsCorrupt) {
  const std::string bytes = sample().encoded();
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string damaged = bytes;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x01);
    EXPECT_THROW(Entry::decode(damaged), Error) << "flip at byte " << i;
  }
}

TEST(EntryTest, EveryTruncationIsCorrupt) {
  const std::string bytes = sample().encoded();
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(Entry::decode(bytes.substr(0, n)), CorruptError) << n << " bytes";
  }
}

TEST(EntryTest, CorruptMessageNamesTheEntry) {
  try {
    Entry::decode("", "entry 0123");
    FAIL();
  } catch (const CorruptError& e) {
    EXPECT_NE(std::string(e.what()).find("entry 0123"), std::string::npos) << e.what();
  }
}

TEST(EntryTest, NewerFormatIsIncompatible) {
  std::string bytes = sample().encoded();
  bytes[8] = static_cast<char>(kEntryFormatVersion + 1);
  EXPECT_THROW(Entry::decode(bytes), IncompatibleVersionError);
}

// Entries come from remotes and archives; the checksum is no signature (an
// Entry built here has a valid one), so what the fields hold is checked too.
std::string corrupt_message(TargetKind kind, const std::string& arch,
                            std::vector<LoweredName> names = {}) {
  try {
    Entry::decode(Entry(kKey, kind, arch, 0, 0, "x", std::move(names)).encoded(), "entry E");
  } catch (const CorruptError& e) {
    return e.what();
  }
  return "decoded without error";
}

TEST(EntryTest, ArchOutsideTheGrammarIsCorrupt) {
  for (const std::string& arch :
       std::vector<std::string>{"../../pwned", "/etc/x", "sm_90\n", std::string("sm_90\0", 6), "",
                                "sm_9", "compute_90/.."}) {
    std::string msg = corrupt_message(TargetKind::cubin, arch);
    EXPECT_NE(msg.find("entry E is corrupt"), std::string::npos) << msg;
    EXPECT_NE(msg.find("is not an arch"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(EntryTest, KindThatContradictsTheArchIsCorrupt) {
  EXPECT_NE(corrupt_message(TargetKind::cubin, "compute_90").find("a cubin labelled compute_90"),
            std::string::npos);
  EXPECT_NE(corrupt_message(TargetKind::ptx, "sm_90a").find("PTX labelled sm_90a"),
            std::string::npos);
}

TEST(EntryTest, LoweredNamesWithControlCharactersAreCorrupt) {
  EXPECT_NE(corrupt_message(TargetKind::cubin, "sm_90", {{"f\n[fake log line]", "_Z1fv"}})
                .find("name expression \"f\\x0a[fake log line]\" holds a control character"),
            std::string::npos);
  EXPECT_NE(corrupt_message(TargetKind::cubin, "sm_90", {{"f", "\x1b[2J"}})
                .find("lowered name \"\\x1b[2J\" holds a control character"),
            std::string::npos);
  EXPECT_NE(
      corrupt_message(TargetKind::cubin, "sm_90", {{"", "_Z1fv"}}).find("name expression is empty"),
      std::string::npos);
}

}  // namespace
}  // namespace kcache::cache
