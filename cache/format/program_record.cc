#include "cache/format/program_record.h"

#include "common/bytes.h"
#include "common/error.h"

namespace kcache::cache {
namespace {

const char* const kOutputNames[kProgramOutputs] = {"ptx", "cubin", "ltoir", "optixir"};

}  // namespace

std::string ProgramRecord::encode() const {
  auto check = [](bool ok, const std::string& what) {
    if (!ok) throw InvalidArgument("program record: " + what);
  };
  check(compile_result <= kMaxNvrtcResult, "compile result out of range");
  check(log.size() <= kMaxProgramOutputBytes, "log larger than 1 GiB");
  ByteWriter w;
  w.bytes(kProgramRecordMagic);
  w.u16(kProgramRecordVersion);
  w.u32(compile_result);
  w.str(log);
  for (size_t i = 0; i < kProgramOutputs; ++i) {
    const Output& o = outputs[i];
    check(o.size_result <= kMaxNvrtcResult, std::string(kOutputNames[i]) + " result out of range");
    check(o.bytes.size() <= kMaxProgramOutputBytes,
          std::string(kOutputNames[i]) + " larger than 1 GiB");
    check(o.size_result == 0 || o.bytes.empty(),
          std::string(kOutputNames[i]) + " has bytes but its size call failed");
    w.u32(o.size_result);
    w.str(o.bytes);
  }
  return w.take();
}

ProgramRecord ProgramRecord::decode(std::string_view bytes, const std::string& what) {
  ByteReader r(bytes, what);
  if (r.bytes(kProgramRecordMagic.size(), "magic") != kProgramRecordMagic) {
    r.fail("bad magic (not a program record)");
  }
  uint16_t version = r.u16("version");
  if (version == 0) r.fail("version 0");
  if (version > kProgramRecordVersion) {
    throw IncompatibleVersionError(what + " has format version " + std::to_string(version) +
                                   "; this kcache reads up to " +
                                   std::to_string(kProgramRecordVersion) + ": upgrade kcache");
  }
  ProgramRecord p;
  p.compile_result = r.u32("compile_result");
  if (p.compile_result > kMaxNvrtcResult) r.fail("compile_result out of range");
  uint32_t log_size = r.u32("log");
  if (log_size > kMaxProgramOutputBytes) r.fail("log larger than 1 GiB");
  p.log = std::string(r.bytes(log_size, "log"));
  for (size_t i = 0; i < kProgramOutputs; ++i) {
    Output& o = p.outputs[i];
    o.size_result = r.u32(kOutputNames[i]);
    if (o.size_result > kMaxNvrtcResult)
      r.fail(std::string(kOutputNames[i]) + " result out of range");
    uint32_t size = r.u32(kOutputNames[i]);
    if (size > kMaxProgramOutputBytes) r.fail(std::string(kOutputNames[i]) + " larger than 1 GiB");
    if (size != 0 && o.size_result != 0) {
      r.fail(std::string(kOutputNames[i]) + " has bytes but its size call failed");
    }
    o.bytes = std::string(r.bytes(size, kOutputNames[i]));
  }
  r.expect_end();
  return p;
}

}  // namespace kcache::cache
