#include "cache/format/program_record.h"

#include <gtest/gtest.h>

#include "common/bytes.h"
#include "common/error.h"

namespace kcache::cache {
namespace {

ProgramRecord sample() {
  ProgramRecord p;
  p.compile_result = 0;
  p.log = "kernel.cu(3): warning #177-D: variable \"x\" was declared but never referenced\n";
  static constexpr char kPtx[] = ".version 9.0\n.target sm_90\n";  // NVRTC's PTX ends in a NUL
  p.output(ProgramOutput::ptx) = {0, std::string(kPtx, sizeof kPtx)};
  p.output(ProgramOutput::cubin) = {0, std::string("\x7f"
                                                   "ELF\0\x01",
                                                   6)};
  p.output(ProgramOutput::ltoir) = {3, ""};  // NVRTC_ERROR_INVALID_INPUT: no -dlto
  p.output(ProgramOutput::optixir) = {3, ""};
  return p;
}

TEST(ProgramRecordTest, RoundTripsEveryField) {
  ProgramRecord p = sample();
  EXPECT_EQ(ProgramRecord::decode(p.encode()), p);
  ProgramRecord failed;
  failed.compile_result = 6;  // NVRTC_ERROR_COMPILATION
  failed.log = "bad.cu(1): error: expected a \";\"\n";
  for (auto& o : failed.outputs) o.size_result = 3;
  EXPECT_EQ(ProgramRecord::decode(failed.encode()), failed);
}

TEST(ProgramRecordTest, EveryTruncationIsCorrupt) {
  std::string bytes = sample().encode();
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(ProgramRecord::decode(bytes.substr(0, n)), CorruptError) << n;
  }
  EXPECT_THROW(ProgramRecord::decode(bytes + "x"), CorruptError);
}

TEST(ProgramRecordTest, OutOfRangeResultsAndBytesBehindAFailedSizeAreCorrupt) {
  ProgramRecord p = sample();
  std::string bytes = p.encode();
  std::string bad_result = bytes;
  bad_result[10] = 18;  // compile_result, one past NVRTC's last code
  EXPECT_THROW(ProgramRecord::decode(bad_result), CorruptError);

  ByteWriter w;
  w.bytes(kProgramRecordMagic);
  w.u16(kProgramRecordVersion);
  w.u32(0);
  w.str("");
  w.u32(3);  // PTX size failed ...
  w.str("but bytes follow");
  for (int i = 0; i < 3; ++i) {
    w.u32(3);
    w.str("");
  }
  EXPECT_THROW(ProgramRecord::decode(w.data()), CorruptError);
  p.output(ProgramOutput::ptx).size_result = 3;
  EXPECT_THROW(p.encode(), InvalidArgument);
}

TEST(ProgramRecordTest, NewerVersionIsIncompatibleWrongMagicCorrupt) {
  std::string bytes = sample().encode();
  std::string newer = bytes;
  newer[8] = static_cast<char>(kProgramRecordVersion + 1);
  EXPECT_THROW(ProgramRecord::decode(newer), IncompatibleVersionError);
  std::string magic = bytes;
  magic[0] = 'X';
  EXPECT_THROW(ProgramRecord::decode(magic), CorruptError);
}

}  // namespace
}  // namespace kcache::cache
