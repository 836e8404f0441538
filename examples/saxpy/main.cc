// Loads the saxpy kernel that cuda_kernel compiled and embedded in this
// binary, runs y = a * x + y on the GPU and checks it against the CPU.
//
//   bazel run //examples/saxpy
//
// Without a GPU it prints one line saying why and exits with status 2.
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/error.h"
#include "examples/saxpy/saxpy_kernel.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/module.h"
#include "runtime/registry.h"
#include "runtime/stream.h"

namespace {

using namespace kcache::runtime;

// Device memory freed on scope exit.
class Buffer {
 public:
  explicit Buffer(size_t bytes) {
    check(driver().cuMemAlloc(&ptr_, bytes), "cuMemAlloc", "saxpy buffer");
  }
  ~Buffer() { driver().cuMemFree(ptr_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  CUdeviceptr get() const { return ptr_; }

 private:
  CUdeviceptr ptr_ = 0;
};

int run() {
  // Loads every bundle linked into the binary up front (here, one).
  load_all();
  Device device = Device::current();
  const Module& module = embedded_module(kcache_examples_saxpy_saxpy_kernel().symbol);
  // Named through the header cuda_kernel generated: a misspelt kernel or a
  // wrong argument does not compile (module.function("saxpy") is checked at
  // run time only).
  Kernel saxpy = module.function(kcache_examples_saxpy_saxpy_kernel_kernels::saxpy);

  const int n = 1 << 20;
  const float a = 2.5f;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 1000) * 0.25f;
    y[i] = static_cast<float>(i % 7);
  }
  Buffer dx(n * sizeof(float)), dy(n * sizeof(float));
  const Driver& d = driver();
  check(d.cuMemcpyHtoD(dx.get(), x.data(), n * sizeof(float)), "cuMemcpyHtoD", "x");
  check(d.cuMemcpyHtoD(dy.get(), y.data(), n * sizeof(float)), "cuMemcpyHtoD", "y");

  Stream stream = Stream::create();
  LaunchConfig config;
  config.block = 256;
  config.grid = (n + 255) / 256;
  launch(stream, config, saxpy, a, dx.get(), dy.get(), n);
  stream.synchronize();

  std::vector<float> got(n);
  check(d.cuMemcpyDtoH(got.data(), dy.get(), n * sizeof(float)), "cuMemcpyDtoH", "y");
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += got[i] != std::fma(a, x[i], y[i]);
  std::printf("saxpy on %s (%s), image %s (%s): %d elements, %d wrong\n", device.name().c_str(),
              device.arch().name().c_str(), module.image_arch().c_str(), to_string(module.match()),
              n, wrong);
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const kcache::DriverError& e) {
    // "no CUDA driver found: ..." on a machine without one.
    std::fprintf(stderr, "%s\n", e.what());
    return e.result() == 0 ? 2 : 1;
  } catch (const kcache::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
