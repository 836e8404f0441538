#include "cache/format/manifest.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "common/bytes.h"
#include "common/error.h"

namespace kcache::cache {
namespace {

const Hash128 kKey = *Hash128::from_hex("00112233445566778899aabbccddeeff");

ManifestSet set_of(const std::string& header, uint64_t hash) {
  return {{"v7.cuh", "k.cu", false, {{"v7.cuh", hash}, {header, 42}}},
          {"sys.h", "v7.cuh", true, {{"sys.h", 7}}}};
}

ManifestSet set_with_probes() {
  ManifestSet with_probes = set_of("other.cuh", 1);
  ManifestProbe read{"toolkit0:cuda/std/cstdint",
                     true,
                     {0x1122334455667788ull, 0x99aabbccddeeff00ull},
                     2049,
                     123456,
                     512,
                     1700000000123456789ull,
                     1700000001123456789ull};
  ManifestProbe absent{"/abs/config.h", false, {}, 0, 0, 0, 0, 0};
  ManifestProbe absent_in_folder{
      "toolkit1:cub/x.cuh", false, {}, 2049, 77, 0, 1700000000000000001ull, 1700000000000000002ull};
  absent_in_folder.has_folder = true;
  absent_in_folder.folder_depth = 1;
  with_probes.probes = {absent, read, absent_in_folder};
  with_probes.results = {{true, "sm_90", true, {0x0102030405060708ull, 0x1112131415161718ull}},
                         {false, "compute_90", false, {7, 8}}};
  return with_probes;
}

Manifest sample() {
  Manifest m(kKey);
  m.add(set_of("deep.cuh", 0x0123456789abcdefull));
  m.add(set_with_probes());
  return m;
}

std::string read_runfile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The grammar of manifest.h, written independently, so a test can craft
// manifests with a valid checksum and any field it likes.
struct RawAsk {
  std::string spelling, includer;
  uint8_t angled = 0;
  std::vector<std::pair<std::string, uint64_t>> headers;
};
std::string craft(const std::vector<std::vector<RawAsk>>& sets,
                  uint16_t version = kManifestFormatVersion, const Hash128& key = kKey) {
  ByteWriter w;
  w.bytes(kManifestMagic);
  w.u16(version);
  w.u16(0);
  for (uint64_t half : {key.high, key.low}) {
    for (int shift = 56; shift >= 0; shift -= 8) w.u8(static_cast<uint8_t>(half >> shift));
  }
  w.u32(static_cast<uint32_t>(sets.size()));
  for (const auto& set : sets) {
    w.u32(static_cast<uint32_t>(set.size()));
    for (const RawAsk& a : set) {
      w.str(a.spelling);
      w.str(a.includer);
      w.u8(a.angled);
      w.u32(static_cast<uint32_t>(a.headers.size()));
      for (const auto& [name, hash] : a.headers) {
        w.str(name);
        w.u64(hash);
      }
    }
    if (version >= 2) w.u32(0);  // probes: none
    if (version >= 3) w.u32(0);  // results: none
  }
  uint64_t checksum = xxh3_64(w.data());
  w.u64(checksum);
  return w.take();
}

RawAsk ask(const std::string& name = "v.cuh") { return {name, "k.cu", 0, {{name, 1}}}; }

std::string corrupt_message(const std::string& bytes) {
  try {
    Manifest::decode(bytes, kKey, "manifest M");
  } catch (const CorruptError& e) {
    return e.what();
  }
  return "decoded without error";
}

TEST(ManifestTest, RoundTripsEveryFieldNewestFirst) {
  Manifest m = Manifest::decode(sample().encode(), kKey);
  EXPECT_EQ(m.key(), kKey);
  ASSERT_EQ(m.sets().size(), 2u);
  EXPECT_EQ(m.sets()[0], set_with_probes());
  EXPECT_EQ(m.sets()[0].probes.size(), 3u);
  EXPECT_EQ(m.sets()[1], set_of("deep.cuh", 0x0123456789abcdefull));
  EXPECT_TRUE(m.sets()[0][1].angled);
  EXPECT_EQ(m.encode(), sample().encode());
}

TEST(ManifestTest, ARepeatedSetMovesToTheFrontOnce) {
  Manifest m = sample();
  m.add(set_of("deep.cuh", 0x0123456789abcdefull));
  ASSERT_EQ(m.sets().size(), 2u);
  EXPECT_EQ(m.sets()[0], set_of("deep.cuh", 0x0123456789abcdefull));
}

TEST(ManifestTest, KeepsTheNewestSixteenSets) {
  Manifest m(kKey);
  for (uint64_t i = 0; i < 17; ++i) m.add(set_of("h.cuh", i));
  ASSERT_EQ(m.sets().size(), kMaxManifestSets);
  EXPECT_EQ(m.sets().front(), set_of("h.cuh", 16));
  EXPECT_EQ(m.sets().back(), set_of("h.cuh", 1));
  EXPECT_EQ(Manifest::decode(m.encode(), kKey).sets(), m.sets());
}

TEST(ManifestTest, ASetOutsideTheBoundsIsNotAdded) {
  Manifest m(kKey);
  EXPECT_THROW(m.add({}), InvalidArgument);
  EXPECT_THROW(m.add({{"a\nb", "k.cu", false, {{"a", 1}}}}), InvalidArgument);
  EXPECT_THROW(m.add({{"a", "k.cu", false, {}}}), InvalidArgument);
  EXPECT_THROW(m.add(ManifestSet(kMaxManifestAsks + 1, {"a", "k.cu", false, {{"a", 1}}})),
               InvalidArgument);
  EXPECT_TRUE(m.sets().empty());
}

// One ask bringing `headers` headers with 4,000-byte names: ~4 KB each.
ManifestSet big_set(size_t headers, uint64_t tag) {
  ManifestAsk a{"v.cuh", "k.cu", false, {}};
  for (size_t i = 0; i < headers; ++i) {
    a.headers.push_back({std::to_string(i) + std::string(4000, 'h'), tag});
  }
  return {a};
}

TEST(ManifestTest, StaysUnderItsByteBoundByDroppingTheOldestSets) {
  Manifest m(kKey);
  for (uint64_t i = 0; i < 5; ++i) m.add(big_set(256, i));  // ~1 MB each
  EXPECT_LE(m.encode().size(), kMaxManifestBytes);
  ASSERT_EQ(m.sets().size(), 4u);
  EXPECT_EQ(m.sets().front(), big_set(256, 4));
  EXPECT_EQ(Manifest::decode(m.encode(), kKey).sets(), m.sets());
}

TEST(ManifestTest, ASetLargerThanAWholeManifestIsRefused) {
  Manifest m(kKey);
  m.add(set_of("h.cuh", 1));
  EXPECT_THROW(m.add(big_set(1100, 2)), InvalidArgument);
  EXPECT_EQ(m.sets().size(), 1u);  // what it held is kept
}

TEST(ManifestTest, BytesOverTheBoundAreCorruptBeforeAnyParsing) {
  std::string bytes = sample().encode();
  bytes.resize(kMaxManifestBytes + 1);
  EXPECT_NE(corrupt_message(bytes).find("more than a manifest may hold"), std::string::npos)
      << corrupt_message(bytes);
}

// Fails when the bytes written change. If intended, bump kManifestFormatVersion
// and add golden/manifest_v<N>.bin (written to $TEST_UNDECLARED_OUTPUTS_DIR).
TEST(ManifestTest, MatchesGoldenFileForThisFormatVersion) {
  std::string name = "manifest_v" + std::to_string(kManifestFormatVersion) + ".bin";
  std::string actual = sample().encode();
  if (const char* out = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
    std::ofstream(std::string(out) + "/" + name, std::ios::binary) << actual;
  }
  std::string golden = read_runfile("tests/cache/golden/" + name);
  ASSERT_FALSE(golden.empty()) << "missing tests/cache/golden/" << name;
  EXPECT_EQ(actual, golden) << "the manifest format changed without a kManifestFormatVersion bump";
  for (uint16_t v = 1; v <= kManifestFormatVersion; ++v) {
    EXPECT_NO_THROW(Manifest::decode(
        read_runfile("tests/cache/golden/manifest_v" + std::to_string(v) + ".bin"), kKey));
  }
}

TEST(ManifestTest, ProbesRoundTripAndASetMayHoldOnlyProbes) {
  Manifest m = Manifest::decode(sample().encode(), kKey);
  ASSERT_EQ(m.sets().size(), 2u);
  EXPECT_EQ(m.sets()[0].probes, sample().sets()[0].probes);
  EXPECT_EQ(m.sets()[0].probes.size(), 3u);
  Manifest only(kKey);
  ManifestSet probes_only;
  probes_only.probes = {{"toolkit0:cub/cub.cuh", false, {}, 0, 0, 0, 0, 0}};
  only.add(probes_only);
  EXPECT_EQ(Manifest::decode(only.encode(), kKey).sets()[0], probes_only);
  EXPECT_THROW(only.add(ManifestSet{}), InvalidArgument);  // neither asks nor probes
}

TEST(ManifestTest, ResultsRoundTripAndAreBounded) {
  Manifest m = Manifest::decode(sample().encode(), kKey);
  EXPECT_EQ(m.sets()[0].results, set_with_probes().results);
  EXPECT_TRUE(m.sets()[1].results.empty());
  ManifestSet bad = set_with_probes();
  bad.results.assign(kMaxManifestResults + 1, bad.results.front());
  EXPECT_THROW(m.add(bad), InvalidArgument);
  bad = set_with_probes();
  bad.results[0].arch = "sm\n90";
  bad.results[0].arch[2] = '\n';
  EXPECT_THROW(m.add(bad), InvalidArgument);
  // A result kind or flag out of range is a CorruptError naming it.
  std::string bytes = sample().encode();
  std::string key_bytes;  // the first result's key, to find it in the bytes
  for (uint64_t half :
       {sample().sets()[0].results[0].key.high, sample().sets()[0].results[0].key.low}) {
    for (int shift = 56; shift >= 0; shift -= 8) key_bytes += static_cast<char>(half >> shift);
  }
  size_t at = bytes.find(key_bytes);
  ASSERT_NE(at, std::string::npos);
  bytes[at - 1] = 2;  // any_name
  bytes.resize(bytes.size() - 8);
  ByteWriter w;
  w.bytes(bytes);
  w.u64(xxh3_64(bytes));
  EXPECT_NE(corrupt_message(w.data()).find("result any_name is 2"), std::string::npos)
      << corrupt_message(w.data());
}

TEST(ManifestTest, AManifestWithoutResultsIsWrittenAsFormatTwo) {
  // Readable by a kcache from before format 3 (one sharing the store or the remote).
  Manifest m(kKey);
  m.add(set_of("deep.cuh", 0x0123456789abcdefull));
  m.add(set_of("other.cuh", 1));
  std::string bytes = m.encode();
  EXPECT_EQ(static_cast<uint8_t>(bytes[8]) | static_cast<uint8_t>(bytes[9]) << 8, 2);
  EXPECT_EQ(Manifest::decode(bytes, kKey).sets(), m.sets());
  // Byte for byte what format 2 wrote: the sample without its results is
  // the format-2 golden file.
  Manifest no_results(kKey);
  no_results.add(set_of("deep.cuh", 0x0123456789abcdefull));
  ManifestSet probes = set_with_probes();
  probes.results.clear();
  no_results.add(probes);
  EXPECT_EQ(no_results.encode(), read_runfile("tests/cache/golden/manifest_v2.bin"));
}

TEST(ManifestTest, AFormatOneManifestReadsWithoutProbes) {
  Manifest m = Manifest::decode(craft({{ask()}}, 1), kKey);
  ASSERT_EQ(m.sets().size(), 1u);
  EXPECT_TRUE(m.sets()[0].probes.empty());
}

TEST(ManifestTest, TheCraftedGrammarMatchesTheWriter) {
  Manifest m(kKey);
  m.add({{"v.cuh", "k.cu", false, {{"v.cuh", 1}}}});
  EXPECT_EQ(craft({{ask()}}, 2), m.encode());  // no results: format 2's bytes
  EXPECT_EQ(Manifest::decode(craft({{ask()}}), kKey).sets(), m.sets());  // format 3 reads too
}

TEST(ManifestTest, EveryFlippedBitIsCorrupt) {
  const std::string bytes = sample().encode();
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = bytes;
      damaged[i] = static_cast<char>(damaged[i] ^ (1 << bit));
      EXPECT_THROW(Manifest::decode(damaged, kKey), Error) << "byte " << i << " bit " << bit;
    }
  }
}

TEST(ManifestTest, EveryTruncationIsCorrupt) {
  const std::string bytes = sample().encode();
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(Manifest::decode(bytes.substr(0, n), kKey), CorruptError) << n << " bytes";
  }
  EXPECT_THROW(Manifest::decode(bytes + "x", kKey), CorruptError);
}

TEST(ManifestTest, NewerFormatIsIncompatible) {
  EXPECT_THROW(Manifest::decode(craft({{ask()}}, kManifestFormatVersion + 1), kKey),
               IncompatibleVersionError);
}

TEST(ManifestTest, AManifestFiledUnderAnotherKeyIsCorrupt) {
  const Hash128 other = *Hash128::from_hex("ffeeddccbbaa99887766554433221100");
  std::string msg = corrupt_message(craft({{ask()}}, 1, other));
  EXPECT_NE(msg.find("manifest M is corrupt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("holds the manifest for ffeedd"), std::string::npos) << msg;
}

// The checksum is no signature: what each field holds is checked too, and the
// message names the field.
TEST(ManifestTest, EachBoundNamesItsField) {
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(corrupt_message(craft({})), "set count is 0"));
  std::vector<std::vector<RawAsk>> many(kMaxManifestSets + 1);
  for (size_t i = 0; i < many.size(); ++i) many[i] = {ask("h" + std::to_string(i))};
  EXPECT_TRUE(has(corrupt_message(craft(many)), "set count 17 is more than 16"));
  EXPECT_TRUE(has(corrupt_message(craft({{}, {ask(std::string(40, 'a'))}}, 1)), "ask count is 0"));
  // Format 2: a set may hold only probes, but not nothing at all.
  EXPECT_TRUE(has(corrupt_message(craft({{}, {ask(std::string(40, 'a'))}})), "set 0 is empty"));
  EXPECT_TRUE(has(corrupt_message(craft({std::vector<RawAsk>(kMaxManifestAsks + 1, ask())})),
                  "ask count 65 is more than 64"));
  RawAsk no_headers = ask();
  no_headers.headers.clear();
  EXPECT_TRUE(has(corrupt_message(craft({{no_headers, ask()}})), "header count is 0"));
  RawAsk angled = ask();
  angled.angled = 2;
  EXPECT_TRUE(has(corrupt_message(craft({{angled}})), "angled is 2"));
  EXPECT_TRUE(has(corrupt_message(craft({{ask("")}})), "spelling is empty"));
  EXPECT_TRUE(has(corrupt_message(craft({{ask(std::string(kMaxManifestNameBytes + 1, 'a'))}})),
                  "spelling is 4097 bytes"));
  RawAsk nul = ask();
  nul.includer = std::string("k\0.cu", 5);
  EXPECT_TRUE(has(corrupt_message(craft({{nul}})), "includer \"k\\x00.cu\" holds a control"));
  RawAsk esc = ask();
  esc.headers[0].first = "\x1b[2J";
  EXPECT_TRUE(has(corrupt_message(craft({{esc}})), "header name"));
  EXPECT_TRUE(has(corrupt_message(craft({{ask()}, {ask()}})), "set 1 repeats an earlier one"));
}

TEST(ManifestTest, ManifestKeysAreNotTheScannerKey) {
  EXPECT_NE(manifest_key(kKey), kKey);
  EXPECT_EQ(manifest_key(kKey), manifest_key(kKey));
}

}  // namespace
}  // namespace kcache::cache

namespace kcache::cache {
namespace {

// A lookup record as compiler_records.cc writes one: one set of probes, no
// asks, its results.
Manifest record_sample() {
  ManifestSet set;
  set.probes = set_with_probes().probes;
  set.results = set_with_probes().results;
  Manifest m(kKey);
  m.add(set);
  return m;
}

std::optional<std::vector<ManifestResult>> read_in_place(const std::string& bytes,
                                                         std::vector<ManifestProbe>* seen,
                                                         size_t hold_first = SIZE_MAX) {
  return read_lookup_record(bytes, kKey, "record R", [&](const ProbeView& v) {
    seen->push_back(v.owned());
    return seen->size() <= hold_first;
  });
}

TEST(LookupRecordReadTest, ARecordReadInPlaceGivesWhatItsDecodeGives) {
  const std::string bytes = record_sample().encode();
  std::vector<ManifestProbe> seen;
  std::optional<std::vector<ManifestResult>> results = read_in_place(bytes, &seen);
  ASSERT_TRUE(results);
  const Manifest manifest = Manifest::decode(bytes, kKey);
  const ManifestSet& decoded = manifest.sets().front();
  EXPECT_EQ(seen, decoded.probes);
  EXPECT_EQ(*results, decoded.results);
}

TEST(LookupRecordReadTest, ReadingStopsAtTheFirstProbeThatDoesNotHold) {
  std::vector<ManifestProbe> seen;
  EXPECT_FALSE(read_in_place(record_sample().encode(), &seen, 1));
  EXPECT_EQ(seen.size(), 2u);  // the second said no; the third was never read
}

TEST(LookupRecordReadTest, AManifestThatIsNoRecordGivesNoResults) {
  std::vector<ManifestProbe> seen;
  EXPECT_FALSE(read_in_place(sample().encode(), &seen));  // two sets, with asks
  Manifest one_with_asks(kKey);
  one_with_asks.add(set_with_probes());
  EXPECT_FALSE(read_in_place(one_with_asks.encode(), &seen));
  Manifest no_results(kKey);  // format 2: no results to answer with
  ManifestSet probes_only;
  probes_only.probes = set_with_probes().probes;
  no_results.add(probes_only);
  EXPECT_FALSE(read_in_place(no_results.encode(), &seen));
  EXPECT_TRUE(seen.empty());
}

// A damaged record is refused before any probe is handed out (the checksum
// comes first), whatever bit or length: no stat is made for it.
TEST(LookupRecordReadTest, ADamagedRecordIsCorruptBeforeAnyProbe) {
  const std::string bytes = record_sample().encode();
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = bytes;
      damaged[i] = static_cast<char>(damaged[i] ^ (1 << bit));
      std::vector<ManifestProbe> seen;
      EXPECT_THROW(read_in_place(damaged, &seen), Error) << "byte " << i << " bit " << bit;
      EXPECT_TRUE(seen.empty()) << "byte " << i << " bit " << bit;
    }
  }
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<ManifestProbe> seen;
    EXPECT_THROW(read_in_place(bytes.substr(0, n), &seen), CorruptError) << n << " bytes";
    EXPECT_TRUE(seen.empty()) << n << " bytes";
  }
}

// Behind a valid checksum (a record crafted, or written by a faulty
// writer): a field out of bounds is a CorruptError naming it, as decode's.
TEST(LookupRecordReadTest, AFieldOutOfBoundsBehindAValidChecksumIsCorrupt) {
  std::string bytes = record_sample().encode();
  const std::string path = "/abs/config.h";
  const size_t at = bytes.find(path);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 4] = '\n';  // a control character in a probe's path
  bytes.resize(bytes.size() - 8);
  ByteWriter w;
  w.bytes(bytes);
  w.u64(xxh3_64(bytes));
  std::vector<ManifestProbe> seen;
  try {
    read_in_place(w.data(), &seen);
    FAIL() << "a path with a newline was read";
  } catch (const CorruptError& e) {
    EXPECT_NE(std::string(e.what()).find("probe path"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kcache::cache
