// Fuzzes cache::ProgramRecord::decode, which reads the payload of entries the
// drop-in libnvrtc stores and fetches from remotes that may lie. Beyond "no
// crash, no sanitizer report, only kcache::Error on bad input", checks what
// decode promises: every bound of program_record.h holds, and an accepted
// record encodes back to exactly the same bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cache/format/program_record.h"
#include "common/error.h"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "program_record_fuzzer: broken promise: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kcache::cache::ProgramRecord;
  std::string input(reinterpret_cast<const char*>(data), size);
  try {
    ProgramRecord p = ProgramRecord::decode(input);
    check(p.compile_result <= kcache::cache::kMaxNvrtcResult, "compile_result bound");
    for (const ProgramRecord::Output& o : p.outputs) {
      check(o.size_result <= kcache::cache::kMaxNvrtcResult, "size_result bound");
      check(o.size_result == 0 || o.bytes.empty(), "bytes only behind a successful size");
    }
    check(p.encode() == input, "an accepted record encodes to the same bytes");
  } catch (const kcache::Error&) {
    // Rejected with a typed error: what bad input must get.
  }
  return 0;
}
