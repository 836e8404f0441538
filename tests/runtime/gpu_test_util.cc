#include "tests/runtime/gpu_test_util.h"

#include <cstdlib>

#include "common/error.h"
#include "runtime/device.h"
#include "runtime/driver.h"

namespace kcache::runtime::testing {

std::string why_no_gpu() {
  try {
    driver();
    if (Device::count() == 0) return "no CUDA device visible: this test needs a GPU";
    return "";
  } catch (const Error& e) {
    return std::string(
               "skipped, this test needs a CUDA GPU (run tools/gpu_check.sh on a GPU "
               "machine): ") +
           e.what();
  }
}

bool gpu_expected() {
  const char* v = std::getenv("KCACHE_EXPECT_GPU");
  return v && std::string(v) == "1";
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  current_context();
  check(driver().cuMemAlloc(&ptr_, bytes), "cuMemAlloc", "a test buffer");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) driver().cuMemFree(ptr_);
}

void DeviceBuffer::upload(const void* data, size_t bytes) {
  check(driver().cuMemcpyHtoD(ptr_, data, bytes), "cuMemcpyHtoD", "a test buffer");
}

void DeviceBuffer::download(void* data, size_t bytes) const {
  check(driver().cuMemcpyDtoH(data, ptr_, bytes), "cuMemcpyDtoH", "a test buffer");
}

void DeviceBuffer::zero() {
  check(driver().cuMemsetD8(ptr_, 0, bytes_), "cuMemsetD8", "a test buffer");
}

std::string fixture(const std::string& name) { return "tests/runtime/" + name; }

}  // namespace kcache::runtime::testing
