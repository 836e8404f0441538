// Internal: reporting failures where throwing is not allowed (destructors).
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <cuda.h>

#include <string>
#include <string_view>

namespace kcache::runtime::detail {

// Writes "kcache: <call> failed on <subject>: <NAME>" to stderr, unless
// `result` is CUDA_ERROR_DEINITIALIZED: at process exit the driver shuts down
// before static destructors run, and what they would free is gone already.
void log_failure(CUresult result, std::string_view call, std::string_view subject) noexcept;

// "stream 0x7f...", for error messages.
std::string describe(const char* what, const void* handle);

}  // namespace kcache::runtime::detail
