#include "cache/format/lookup_note.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "common/file_system.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cache {
namespace {

LookupNote sample() {
  LookupNote n;
  n.key = *Hash128::from_hex("00112233445566778899aabbccddeeff");
  n.source_hash = *Hash128::from_hex("ffeeddccbbaa99887766554433221100");
  n.toolkit = "NVRTC 13.0; include folders /usr/local/cuda/include";
  n.options = {"-std=c++17", "-DN=4", "-Iinc"};
  n.targets = {"sm_90", "compute_90"};
  n.headers = {{"/src/inc/v.h", 0x0123456789abcdefull}, {"/src/inc/w.h", 42}};
  return n;
}

std::string read_runfile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool same(const LookupNote& a, const LookupNote& b) {
  return a.key == b.key && a.source_hash == b.source_hash && a.toolkit == b.toolkit &&
         a.options == b.options && a.targets == b.targets && a.headers == b.headers;
}

TEST(LookupNoteTest, RoundTripsEveryField) {
  EXPECT_TRUE(same(LookupNote::decode(sample().encode(), "note"), sample()));
}

// Fails when the bytes written change. If intended, bump
// kLookupNoteFormatVersion and add golden/lookup_note_v<N>.bin (written to
// $TEST_UNDECLARED_OUTPUTS_DIR).
TEST(LookupNoteTest, MatchesGoldenFileForThisFormatVersion) {
  std::string name = "lookup_note_v" + std::to_string(kLookupNoteFormatVersion) + ".bin";
  std::string actual = sample().encode();
  if (const char* out = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
    std::ofstream(std::string(out) + "/" + name, std::ios::binary) << actual;
  }
  std::string golden = read_runfile("tests/cache/golden/" + name);
  ASSERT_FALSE(golden.empty()) << "missing tests/cache/golden/" << name;
  EXPECT_EQ(actual, golden) << "the note format changed without a kLookupNoteFormatVersion bump";
}

TEST(LookupNoteTest, EveryFlippedByteAndTruncationIsCorrupt) {
  const std::string bytes = sample().encode();
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] ^= 0x01;
    EXPECT_ANY_THROW(LookupNote::decode(bad, "note")) << i;
    EXPECT_ANY_THROW(LookupNote::decode(bytes.substr(0, i), "note")) << i;
  }
}

// A note is a message's source: another source's in the same slot, or a
// damaged file, reads as no note.
TEST(LookupNoteTest, ANoteOfAnotherKeyOrADamagedOneReadsAsNone) {
  testing::TempDir dir;
  LookupNote a = sample();
  write_lookup_note(dir.path(), a);
  ASSERT_TRUE(read_lookup_note(dir.path(), a.key));
  EXPECT_TRUE(same(*read_lookup_note(dir.path(), a.key), a));
  LookupNote b = a;
  b.key.high += 1;  // the same slot (key.low), another source
  write_lookup_note(dir.path(), b);
  EXPECT_FALSE(read_lookup_note(dir.path(), a.key));
  EXPECT_TRUE(read_lookup_note(dir.path(), b.key));
  write_file_atomically(dir.path() + "/notes/" + std::to_string(b.key.low % kNoteSlots), "junk");
  EXPECT_FALSE(read_lookup_note(dir.path(), b.key));
}

TEST(LookupNoteTest, TextATerminalWouldActOnIsRefused) {
  LookupNote n = sample();
  n.options.push_back("-DX=\x1b[2J");
  EXPECT_THROW(n.encode(), InvalidArgument);
}

}  // namespace
}  // namespace kcache::cache
