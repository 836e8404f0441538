#include "cache/format/entry.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/bytes.h"
#include "common/error.h"
#include "common/hash.h"

namespace kcache::cache {
namespace {

const Hash128 kKey = *Hash128::from_hex("00112233445566778899aabbccddeeff");
const LeanRecord kLean{LeanRecord::kAsked | LeanRecord::kLean, 154272, 1001};

Entry sample() {
  return Entry(kKey, TargetKind::cubin, "sm_90", 1234, 1763769600,
               std::string("\x7f"
                           "ELF cubin\0bytes",
                           16),
               {{"scale<float>", "_Z5scaleIfEvPT_S0_i"}}, kLean,
               "k.cu(3): warning #177-D: variable \"unused\" was declared but never referenced\n",
               "kernels/k.cu");
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
  EXPECT_EQ(e.lean(), kLean);
  EXPECT_EQ(e.format_version(), kEntryFormatVersion);
}

TEST(EntryTest, EveryLeanFormRoundTrips) {
  for (const LeanRecord& lean :
       {LeanRecord{}, LeanRecord{LeanRecord::kAsked, 0, 0},
        LeanRecord{LeanRecord::kAsked | LeanRecord::kDeclined, 0, 0},
        LeanRecord{LeanRecord::kAsked | LeanRecord::kLean, -12, 3}, LeanRecord::unknown_record()}) {
    Entry e =
        Entry::decode(Entry(kKey, TargetKind::ptx, "compute_90", 0, 0, "p", {}, lean).encoded());
    EXPECT_EQ(e.lean(), lean) << describe(lean);
  }
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

// NVRTC's log is kept (format 3); an older entry reads as having none.
TEST(EntryTest, TheLogRoundTripsAndOlderEntriesHaveNone) {
  EXPECT_EQ(Entry::decode(sample().encoded()).log(), sample().log());
  EXPECT_NE(sample().log(), "");
  for (uint16_t v : {1, 2}) {
    Entry e = Entry::decode(read_runfile("tests/cache/golden/entry_v" + std::to_string(v) + ".bin"));
    EXPECT_EQ(e.log(), "") << v;
  }
}

// The source's name is kept for `kcache ls` (format 4); an older entry
// reads as having none, and one a terminal would act on is refused.
TEST(EntryTest, TheSourceNameRoundTripsAndOlderEntriesHaveNone) {
  EXPECT_EQ(Entry::decode(sample().encoded()).source_name(), "kernels/k.cu");
  for (uint16_t v : {1, 2, 3}) {
    Entry e = Entry::decode(read_runfile("tests/cache/golden/entry_v" + std::to_string(v) + ".bin"));
    EXPECT_EQ(e.source_name(), "") << v;
  }
  EXPECT_FALSE(Entry::keeps_source_name("k\x1b[2J.cu"));
  EXPECT_THROW(Entry(kKey, TargetKind::ptx, "compute_90", 0, 0, "p", {}, {}, "", "a\nb"),
               InvalidArgument);
}

TEST(EntryTest, ALogThatWouldMoveTheTerminalIsCorruptAndRefused) {
  EXPECT_THROW(Entry(kKey, TargetKind::ptx, "compute_90", 0, 0, "p", {}, {}, "x\x1b[2Jy"),
               InvalidArgument);
  // A foreign writer's: the log's bytes replaced, the checksum recomputed.
  std::string bytes = sample().encoded();
  const std::string log = sample().log();
  bytes.replace(bytes.find(log), 1, "\x1b");
  ByteWriter checksum;
  checksum.u64(xxh3_64(std::string_view(bytes).substr(0, bytes.size() - 8)));
  bytes.replace(bytes.size() - 8, 8, checksum.data());
  try {
    Entry::decode(bytes, "entry E");
    ADD_FAILURE() << "decoded";
  } catch (const CorruptError& e) {
    EXPECT_NE(std::string(e.what()).find("log holds the control character 27"), std::string::npos)
        << e.what();
  }
}

// Entries written before the lean record existed read as "unknown", never as
// "off" (which would claim NVRTC's bytes).
TEST(EntryTest, Version1GoldenReadsWithAnUnknownLeanRecord) {
  Entry e = Entry::decode(read_runfile("tests/cache/golden/entry_v1.bin"));
  EXPECT_EQ(e.format_version(), 1);
  EXPECT_TRUE(e.lean().unknown());
  EXPECT_EQ(e.arch(), "sm_90");
  ASSERT_EQ(e.lowered_names().size(), 1u);
  EXPECT_EQ(e.payload(), std::string("\x7f"
                                     "ELF cubin\0bytes",
                                     16));
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

// `sample()` with its lean record replaced by these raw fields and the
// checksum recomputed: what a foreign writer could send.
std::string with_lean_fields(uint8_t flags, int64_t bytes_removed, uint32_t variables_removed) {
  std::string bytes = sample().encoded();
  const size_t payload = sample().payload().size();
  const size_t at = bytes.size() - 8 - payload - 8 - (4 + sample().source_name().size()) -
                    (4 + sample().log().size()) - LeanRecord::kSize;
  ByteWriter record;
  record.u8(flags);
  record.u64(static_cast<uint64_t>(bytes_removed));
  record.u32(variables_removed);
  bytes.replace(at, LeanRecord::kSize, record.data());
  ByteWriter checksum;
  checksum.u64(xxh3_64(std::string_view(bytes).substr(0, bytes.size() - 8)));
  bytes.replace(bytes.size() - 8, 8, checksum.data());
  return bytes;
}

std::string lean_corrupt_message(uint8_t flags, int64_t bytes_removed, uint32_t variables_removed) {
  try {
    Entry::decode(with_lean_fields(flags, bytes_removed, variables_removed), "entry E");
  } catch (const CorruptError& e) {
    return e.what();
  }
  return "decoded without error";
}

TEST(EntryTest, RawLeanFieldsOfAValidRecordDecode) {
  EXPECT_EQ(Entry::decode(with_lean_fields(0x03, 7, 2)).lean(),
            (LeanRecord{LeanRecord::kAsked | LeanRecord::kLean, 7, 2}));
}

TEST(EntryTest, LeanRecordOutsideItsFormsIsCorrupt) {
  struct Case {
    uint8_t flags;
    int64_t bytes;
    uint32_t variables;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {0x02, 10, 1, "lean flags 0x02 are not one of"},  // lean but never asked
           {0x07, 10, 1, "lean flags 0x07 are not one of"},  // lean and declined
           {0x10, 0, 0, "lean flags 0x10 are not one of"},
           {0x09, 0, 0, "lean flags 0x09 are not one of"},
           {0x03, (int64_t{1} << 30) + 1, 1, "lean bytes removed 1073741825 is beyond"},
           {0x03, -(int64_t{1} << 40), 1, "lean bytes removed -1099511627776 is beyond"},
           {0x03, 10, 0, "lean variables removed is 0 for a lean image"},
           {0x00, 10, 0, "with flags 0x00, which say the image is NVRTC's"},
           {0x01, 0, 5, "with flags 0x01, which say the image is NVRTC's"},
           {0x08, 1, 1, "with flags 0x08"},
       }) {
    std::string msg = lean_corrupt_message(c.flags, c.bytes, c.variables);
    EXPECT_NE(msg.find("entry E is corrupt"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.message), std::string::npos) << msg;
  }
}

TEST(EntryTest, NewEntryWithAnInvalidLeanRecordIsRefused) {
  EXPECT_THROW(Entry(kKey, TargetKind::cubin, "sm_90", 0, 0, "x", {}, LeanRecord{0x02, 1, 1}),
               InvalidArgument);
}

TEST(LeanRecordTest, DescribesEachForm) {
  EXPECT_EQ(describe(kLean), "-154,272 B, -1,001 variables");
  EXPECT_EQ(describe(LeanRecord{0x03, -1000, 1}), "+1,000 B, -1 variable");
  EXPECT_EQ(describe(LeanRecord{}), "off (NVRTC's bytes)");
  EXPECT_EQ(describe(LeanRecord{0x01, 0, 0}), "nothing to remove");
  EXPECT_EQ(describe(LeanRecord{0x05, 0, 0}), "not applied (NVRTC's bytes)");
  EXPECT_EQ(describe(LeanRecord::unknown_record()), "unknown (format 1)");
}

TEST(LeanRecordTest, NamesEachStateInOneWord) {
  EXPECT_STREQ(state_name(kLean), "lean");
  EXPECT_STREQ(state_name(LeanRecord{}), "off");
  EXPECT_STREQ(state_name(LeanRecord{0x01, 0, 0}), "nothing_to_remove");
  EXPECT_STREQ(state_name(LeanRecord{0x05, 0, 0}), "not_applied");
  EXPECT_STREQ(state_name(LeanRecord::unknown_record()), "unknown");
}

}  // namespace
}  // namespace kcache::cache
