// A new process's time to its first finished CUB kernel, loaded from a kcache
// bundle file: driver load and cuInit, the primary context, the module (lean
// images by default, or NVRTC's own with a --no-lean bundle), one launch of
// bench/kernels/first_launch_cub.cu's block_sort and a synchronize.
// runtime_first_launch_cub.py runs it against CuPy and cuda.core on the same
// source. Prints one JSON line; exits 1 if the blocks did not come out sorted.
//
//   runtime_first_launch_cub BUNDLE.kcb
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "common/error.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/module.h"
#include "runtime/stream.h"

int main(int argc, char** argv) {
  using Clock = std::chrono::steady_clock;
  using namespace kcache::runtime;
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  if (argc != 2) {
    std::fprintf(stderr, "usage: runtime_first_launch_cub BUNDLE.kcb\n");
    return 2;
  }
  constexpr int kBlocks = 1024, kTile = 128 * 4, kCount = kBlocks * kTile;
  std::vector<int> host(kCount);
  for (int i = 0; i < kCount; ++i) host[i] = static_cast<int>((i * 2654435761u) >> 7);
  Clock::time_point t0 = Clock::now();
  try {
    const Driver& d = driver();
    Device(0).set_current();
    Clock::time_point t1 = Clock::now();
    Module module = Module::load_file(argv[1]);
    Function sort = module.function("block_sort");
    Clock::time_point t2 = Clock::now();
    CUdeviceptr in, out;
    check(d.cuMemAlloc(&in, kCount * sizeof(int)), "cuMemAlloc", "in");
    check(d.cuMemAlloc(&out, kCount * sizeof(int)), "cuMemAlloc", "out");
    check(d.cuMemcpyHtoD(in, host.data(), kCount * sizeof(int)), "cuMemcpyHtoD", "in");
    LaunchConfig config;
    config.grid = kBlocks;
    config.block = 128;
    launch(StreamRef::legacy_default(), config, sort, in, out);
    StreamRef::legacy_default().synchronize();
    Clock::time_point t3 = Clock::now();
    std::vector<int> sorted(kCount);
    check(d.cuMemcpyDtoH(sorted.data(), out, kCount * sizeof(int)), "cuMemcpyDtoH", "out");
    for (int b = 0; b < kBlocks; ++b) {
      std::vector<int> want(host.begin() + b * kTile, host.begin() + (b + 1) * kTile);
      std::sort(want.begin(), want.end());
      if (!std::equal(want.begin(), want.end(), sorted.begin() + b * kTile)) {
        std::fprintf(stderr, "runtime_first_launch_cub: block %d is not sorted\n", b);
        return 1;
      }
    }
    std::printf(
        "{\"first_launch_ms\": %.3f, \"driver_and_context_ms\": %.3f, \"module_ms\": %.3f, "
        "\"alloc_launch_sync_ms\": %.3f, \"image\": \"%s\"}\n",
        ms(t3 - t0), ms(t1 - t0), ms(t2 - t1), ms(t3 - t2), module.image_arch().c_str());
    return 0;
  } catch (const kcache::Error& e) {
    std::fprintf(stderr, "runtime_first_launch_cub: %s\n", e.what());
    return 1;
  }
}
