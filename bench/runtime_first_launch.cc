// Time from the start of main to the first kernel finished, in a new process:
// driver load and cuInit, the primary context, the embedded saxpy bundle's
// module, one launch and a synchronize. runtime_first_launch.py runs it
// against CuPy's RawModule (cache hit) and cuda.core's Program.compile.
// Prints one JSON line.
//
// Built a second time with KCACHE_FIRST_LAUNCH_JIT (runtime_first_launch_jit
// SOURCE): the module comes from kcache_jit instead, compiled from SOURCE on a
// store miss and loaded from the store ($KCACHE_DIR) on a hit.
#include <chrono>
#include <cstdio>
#include <vector>

#include "common/error.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/module.h"
#include "runtime/registry.h"
#include "runtime/stream.h"
#ifdef KCACHE_FIRST_LAUNCH_JIT
#include "runtime/jit/jit.h"
#endif

int main(int argc, char** argv) {
  using Clock = std::chrono::steady_clock;
  using namespace kcache::runtime;
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  Clock::time_point t0 = Clock::now();
  try {
    const Driver& d = driver();
    Device(0).set_current();
    Clock::time_point t1 = Clock::now();
#ifdef KCACHE_FIRST_LAUNCH_JIT
    if (argc != 2) {
      std::fprintf(stderr, "usage: runtime_first_launch_jit SAXPY_SOURCE\n");
      return 2;
    }
    jit::Source source;
    source.name = "saxpy.cu";
    source.path = argv[1];
    Module module = jit::default_jit().load(source);
    Function saxpy = module.function("saxpy");
#else
    (void)argc;
    (void)argv;
    Function saxpy = embedded_module("kcache_tests_runtime_saxpy").function("saxpy");
#endif
    Clock::time_point t2 = Clock::now();
    const int n = 1 << 20;
    CUdeviceptr x, y;
    check(d.cuMemAlloc(&x, n * sizeof(float)), "cuMemAlloc", "x");
    check(d.cuMemAlloc(&y, n * sizeof(float)), "cuMemAlloc", "y");
    LaunchConfig config;
    config.grid = (n + 255) / 256;
    config.block = 256;
    launch(StreamRef::legacy_default(), config, saxpy, 2.0f, x, y, n);
    StreamRef::legacy_default().synchronize();
    Clock::time_point t3 = Clock::now();
    std::printf(
        "{\"first_launch_ms\": %.3f, \"driver_and_context_ms\": %.3f, \"module_ms\": %.3f, "
        "\"alloc_launch_sync_ms\": %.3f}\n",
        ms(t3 - t0), ms(t1 - t0), ms(t2 - t1), ms(t3 - t2));
    return 0;
  } catch (const kcache::Error& e) {
    std::fprintf(stderr, "runtime_first_launch: %s\n", e.what());
    return 1;
  }
}
