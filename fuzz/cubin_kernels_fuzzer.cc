// Fuzzes compiler/image/cubin_kernels.h (the ELF symbol reader `kcache ls`
// runs on entries from remotes and archives). Beyond "no crash", checks what
// it promises: at most kMaxCubinKernels names, each 1 to kMaxEntryNameBytes
// bytes without NUL, and the same answer twice.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/image/cubin_kernels.h"
#include "compiler/image/ptx_entries.h"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "cubin_kernels_fuzzer: broken promise: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> names = kcache::compiler::cubin_kernels(bytes);
  check(names.size() <= kcache::compiler::kMaxCubinKernels, "too many names");
  for (const std::string& n : names) {
    check(!n.empty() && n.size() <= kcache::compiler::kMaxEntryNameBytes, "a name's size");
    check(n.find('\0') == std::string::npos, "a NUL in a name");
  }
  check(kcache::compiler::cubin_kernels(bytes) == names, "not deterministic");
  return 0;
}
