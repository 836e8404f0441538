// Fuzzes cache::Entry::decode, which reads bytes from the local store's blob
// files, from `kcache import` archives and from remote servers that may lie.
// Beyond "no crash, no sanitizer report, only kcache::Error on bad input",
// checks what decode promises: the payload view lies inside the entry, and an
// accepted entry encodes back to exactly the same bytes.
//
// Each input is also tried with its trailing checksum recomputed, so that
// mutations reach the field parsing behind the checksum gate.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cache/entry.h"
#include "common/error.h"
#include "common/hash.h"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "entry_fuzzer: broken promise: %s\n", what);
    std::abort();
  }
}

void check_decode(const std::string& bytes) {
  try {
    kcache::cache::Entry e = kcache::cache::Entry::decode(bytes, "fuzz input");
    std::string_view payload = e.payload();
    check(payload.data() >= e.encoded().data() &&
              payload.data() + payload.size() <= e.encoded().data() + e.encoded().size(),
          "payload inside the entry");
    kcache::cache::Entry again(e.key(), e.kind(), e.arch(), e.compile_ms(), e.created_unix_s(),
                               payload, e.lowered_names());
    check(again.encoded() == bytes, "encode(decode(x)) == x");
  } catch (const kcache::Error&) {
    // CorruptError or IncompatibleVersionError: what bad input must give.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  check_decode(bytes);
  if (bytes.size() >= 8) {
    std::string fixed = bytes;
    uint64_t sum = kcache::xxh3_64(std::string_view(fixed).substr(0, fixed.size() - 8));
    for (int i = 0; i < 8; ++i) fixed[fixed.size() - 8 + i] = static_cast<char>(sum >> (8 * i));
    if (fixed != bytes) check_decode(fixed);
  }
  return 0;
}
