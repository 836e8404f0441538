// Fuzzes parse_remote_headers (the grpc:// remote's headers file). Beyond "no
// crash, only kcache::Error on bad input", checks what the parser promises:
// at most kMaxRemoteHeaders headers, lowercase names of the allowed
// characters, printable non-empty values.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cache/remote/reapi/headers.h"
#include "common/error.h"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "remote_headers_fuzzer: broken promise: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto headers = kcache::cache::parse_remote_headers(text, "fuzz input");
    check(headers.size() <= kcache::cache::kMaxRemoteHeaders, "bounded");
    for (const auto& [name, value] : headers) {
      check(!name.empty() && !value.empty(), "non-empty");
      check(name.rfind("grpc-", 0) != 0, "no reserved names");
      for (char c : name) {
        check((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.',
              "name characters");
      }
      for (char c : value) check(c >= 0x20 && c <= 0x7e, "printable value");
    }
  } catch (const kcache::Error&) {
    // Rejected input: fine.
  }
  return 0;
}
