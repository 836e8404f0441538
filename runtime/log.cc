#include "runtime/log.h"

#include <cstdio>

#include "runtime/driver.h"

namespace kcache::runtime::detail {

void log_failure(CUresult result, std::string_view call, std::string_view subject) noexcept {
  if (result == CUDA_SUCCESS || result == CUDA_ERROR_DEINITIALIZED) return;
  try {
    std::string name = result_name(result);
    std::fprintf(stderr, "kcache: %.*s failed on %.*s: %s (ignored in a destructor)\n",
                 static_cast<int>(call.size()), call.data(), static_cast<int>(subject.size()),
                 subject.data(), name.c_str());
  } catch (...) {
    // Out of memory while building the message: nothing more can be done.
  }
}

std::string describe(const char* what, const void* handle) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%s %p", what, handle);
  return buffer;
}

}  // namespace kcache::runtime::detail
