// Shared by the GPU tests: skipping without a GPU, device memory, fixtures.
#pragma once

#include <cuda.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace kcache::runtime::testing {

// Empty if a driver and at least one device are there, else why not.
std::string why_no_gpu();

// True when tools/gpu_check.sh runs the tests: a missing GPU is then a failure,
// not a skip, so a GPU run cannot pass by skipping everything.
bool gpu_expected();

// Skips the test with a clear message without a GPU (fails under gpu_check.sh).
#define KCACHE_REQUIRE_GPU()                                          \
  do {                                                                \
    std::string why_ = ::kcache::runtime::testing::why_no_gpu();      \
    if (!why_.empty()) {                                              \
      if (::kcache::runtime::testing::gpu_expected()) FAIL() << why_; \
      GTEST_SKIP() << why_;                                           \
    }                                                                 \
  } while (0)

// Device memory for a test; freed in the destructor.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, 0)), bytes_(other.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;

  CUdeviceptr get() const { return ptr_; }
  void upload(const void* data, size_t bytes);
  void download(void* data, size_t bytes) const;
  void zero();

  template <typename T>
  static DeviceBuffer from(const std::vector<T>& v) {
    DeviceBuffer b(v.size() * sizeof(T));
    b.upload(v.data(), v.size() * sizeof(T));
    return b;
  }
  template <typename T>
  std::vector<T> to_vector(size_t n) const {
    std::vector<T> v(n);
    download(v.data(), n * sizeof(T));
    return v;
  }

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_;
};

// A fixture file's runfiles path: "tests/runtime/<name>".
std::string fixture(const std::string& name);

}  // namespace kcache::runtime::testing
