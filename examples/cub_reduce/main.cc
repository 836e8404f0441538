// Sums a vector with the CUB block-reduce kernel embedded by cuda_kernel,
// for three template instances picked by name expression, and checks each
// sum against the CPU.
//
//   bazel run //examples/cub_reduce
//
// Without a GPU it prints one line saying why and exits with status 2.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "examples/cub_reduce/block_reduce_kernel.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/module.h"
#include "runtime/registry.h"
#include "runtime/stream.h"

namespace {

using namespace kcache::runtime;

class Buffer {
 public:
  explicit Buffer(size_t bytes) {
    check(driver().cuMemAlloc(&ptr_, bytes), "cuMemAlloc", "reduce buffer");
  }
  ~Buffer() { driver().cuMemFree(ptr_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  CUdeviceptr get() const { return ptr_; }

 private:
  CUdeviceptr ptr_ = 0;
};

// Runs block_reduce<T, Threads, Items> over `values` and returns whether the
// GPU's sum (the partial sums added on the host) equals the CPU's.
template <typename T, int Threads, int Items>
bool reduce(const Module& module, const std::vector<T>& values, const char* type) {
  std::string expression = "block_reduce<" + std::string(type) + ", " + std::to_string(Threads) +
                           ", " + std::to_string(Items) + ">";
  Function kernel = module.function(expression);
  const int n = static_cast<int>(values.size());
  const int per_block = Threads * Items;
  const int blocks = (n + per_block - 1) / per_block;
  Buffer in(n * sizeof(T)), partial(blocks * sizeof(T));
  const Driver& d = driver();
  check(d.cuMemcpyHtoD(in.get(), values.data(), n * sizeof(T)), "cuMemcpyHtoD", expression);

  Stream stream = Stream::create();
  Event start = Event::create(), end = Event::create();
  LaunchConfig config;
  config.grid = static_cast<unsigned>(blocks);
  config.block = Threads;
  start.record(stream);
  launch(stream, config, kernel, in.get(), partial.get(), n);
  end.record(stream);
  stream.synchronize();

  std::vector<T> partials(blocks);
  check(d.cuMemcpyDtoH(partials.data(), partial.get(), blocks * sizeof(T)), "cuMemcpyDtoH",
        expression);
  // Both sides in double: the orders differ, the values are small integers, so
  // any order gives the exact sum.
  double gpu = 0, cpu = 0;
  for (T p : partials) gpu += static_cast<double>(p);
  for (T v : values) cpu += static_cast<double>(v);
  bool ok = gpu == cpu;
  std::printf("%-30s %d values, %d blocks: GPU %.0f, CPU %.0f, %s (kernel %.3f ms)\n",
              expression.c_str(), n, blocks, gpu, cpu, ok ? "equal" : "DIFFERENT",
              elapsed_ms(start, end));
  return ok;
}

template <typename T>
std::vector<T> values(int n) {
  std::vector<T> v(n);
  // 0..100: every partial sum (at most 102,400) is exact in float.
  for (int i = 0; i < n; ++i) v[i] = static_cast<T>((i * 37) % 101);
  return v;
}

int run() {
  Device device = Device::current();
  const Module& module = embedded_module(kcache_examples_cub_reduce_block_reduce_kernel().symbol);
  std::printf("CUB block reduce on %s (%s), image %s (%s)\n", device.name().c_str(),
              device.arch().name().c_str(), module.image_arch().c_str(), to_string(module.match()));
  const int n = 10'000'000;
  bool ok = reduce<float, 256, 4>(module, values<float>(n), "float");
  ok &= reduce<int, 128, 8>(module, values<int>(n), "int");
  ok &= reduce<double, 256, 2>(module, values<double>(n), "double");
  return ok ? 0 : 1;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const kcache::DriverError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return e.result() == 0 ? 2 : 1;
  } catch (const kcache::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
