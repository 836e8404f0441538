// The runtime's wrappers against the raw driver calls they wrap, in one run on
// one GPU: module load from a bundle vs cuModuleLoadData / cuLibraryLoadData
// of the same cubin, is_complete vs cuStreamQuery / cuEventQuery, elapsed vs
// cuEventElapsedTime, occupancy vs cuOccupancy*, launch vs cuLaunchKernel.
//
// Each pair is registered as "<what>/raw" and "<what>/kcache"; after the run a
// table of medians (over --benchmark_repetitions) and their ratio is printed.
// Run from the runfiles root (it reads tests/runtime/*.kcb):
//   runtime_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "bench/runtime_ratio_reporter.h"
#include "bundle/bundle.h"
#include "common/error.h"
#include "common/file_system.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/image_selection.h"
#include "runtime/module.h"
#include "runtime/occupancy.h"
#include "runtime/stream.h"

namespace {

using namespace kcache::runtime;

void check_raw(CUresult r, const char* call) { kcache::runtime::check(r, call, "benchmark"); }

// A fixture bundle and the exact image kcache picks from it on this GPU.
struct Fixture {
  std::string name;
  std::string kernel;
  std::string bytes;  // the .kcb
  std::string image;  // the chosen cubin, copied to an aligned buffer by std::string
  std::string arch;
};

Fixture load_fixture(const std::string& name, const std::string& kernel) {
  Fixture f;
  f.name = name;
  f.kernel = kernel;
  f.bytes = kcache::read_file("tests/runtime/" + name).value();
  kcache::bundle::Bundle b = kcache::bundle::parse(f.bytes, name);
  Selection s = select_image(b, Device(0).arch(), name);
  f.image = std::string(b.images[s.index].data);
  f.arch = std::string(b.images[s.index].arch);
  std::string symbol(b.lowered(kernel));
  if (!symbol.empty()) f.kernel = symbol;
  return f;
}

void register_module_load(const Fixture& f) {
  const std::string what = "ModuleLoad " + f.name + " (" + f.arch + ", " +
                           std::to_string(f.image.size() / 1024) + " KiB)";
  benchmark::RegisterBenchmark((what + "/raw").c_str(), [f](benchmark::State& state) {
    const Driver& d = driver();
    for (auto _ : state) {
      CUmodule m;
      CUfunction fn;
      check_raw(d.cuModuleLoadData(&m, f.image.data()), "cuModuleLoadData");
      check_raw(d.cuModuleGetFunction(&fn, m, f.kernel.c_str()), "cuModuleGetFunction");
      benchmark::DoNotOptimize(fn);
      check_raw(d.cuModuleUnload(m), "cuModuleUnload");
    }
  })->Unit(benchmark::kMicrosecond);
  if (driver().has_library_api()) {
    benchmark::RegisterBenchmark((what + " cuLibrary/raw").c_str(), [f](benchmark::State& state) {
      const Driver& d = driver();
      for (auto _ : state) {
        CUlibrary l;
        CUkernel k;
        CUfunction fn;
        check_raw(d.cuLibraryLoadData(&l, f.image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
                  "cuLibraryLoadData");
        check_raw(d.cuLibraryGetKernel(&k, l, f.kernel.c_str()), "cuLibraryGetKernel");
        check_raw(d.cuKernelGetFunction(&fn, k), "cuKernelGetFunction");
        benchmark::DoNotOptimize(fn);
        check_raw(d.cuLibraryUnload(l), "cuLibraryUnload");
      }
    })->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark((what + "/kcache").c_str(), [f](benchmark::State& state) {
    for (auto _ : state) {
      // parse (every checksum) + select + load + look up + unload
      Module m = Module::load_bytes(f.bytes, f.name);
      Function fn = m.function(f.kernel);
      benchmark::DoNotOptimize(fn.handle());
    }
  })->Unit(benchmark::kMicrosecond);
  // Where kcache's extra time goes: verifying the bundle (bundle::parse checks
  // the whole-bundle and every image's XXH3), and loading from a bundle
  // parsed beforehand.
  benchmark::RegisterBenchmark(("BundleParse " + f.name + " (" +
                                std::to_string(f.bytes.size() / 1024) + " KiB, all checksums)")
                                   .c_str(),
                               [f](benchmark::State& state) {
                                 for (auto _ : state) {
                                   kcache::bundle::Bundle b =
                                       kcache::bundle::parse(f.bytes, f.name);
                                   benchmark::DoNotOptimize(b.images.data());
                                 }
                               })
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(("ModuleLoad " + f.name + " from an already parsed Bundle").c_str(),
                               [f](benchmark::State& state) {
                                 kcache::bundle::Bundle b = kcache::bundle::parse(f.bytes, f.name);
                                 for (auto _ : state) {
                                   Module m = Module::load(b, f.name);
                                   Function fn = m.function(f.kernel);
                                   benchmark::DoNotOptimize(fn.handle());
                                 }
                               })
      ->Unit(benchmark::kMicrosecond);
  // Same pair for cuLibraryLoadData, so the API's own cost is not charged to kcache.
  if (driver().has_library_api()) {
    benchmark::RegisterBenchmark((what + " cuLibrary/kcache").c_str(),
                                 [f](benchmark::State& state) {
                                   for (auto _ : state) {
                                     Module m = Module::load_bytes(f.bytes, f.name);
                                     Function fn = m.function(f.kernel);
                                     benchmark::DoNotOptimize(fn.handle());
                                   }
                                 })
        ->Unit(benchmark::kMicrosecond);
  }
}

struct Queries {
  Stream stream = Stream::create();
  Event start = Event::create();
  Event end = Event::create();
  Queries() {
    start.record(stream);
    end.record(stream);
    stream.synchronize();
  }
};

Queries& queries() {
  static Queries* q = new Queries();
  return *q;
}

void register_queries() {
  benchmark::RegisterBenchmark("StreamQuery (idle stream)/raw", [](benchmark::State& state) {
    const Driver& d = driver();
    CUstream s = queries().stream.get();
    for (auto _ : state) benchmark::DoNotOptimize(d.cuStreamQuery(s));
  });
  benchmark::RegisterBenchmark("StreamQuery (idle stream)/kcache", [](benchmark::State& state) {
    StreamRef s = queries().stream;
    for (auto _ : state) benchmark::DoNotOptimize(s.is_complete());
  });
  benchmark::RegisterBenchmark("EventQuery (completed)/raw", [](benchmark::State& state) {
    const Driver& d = driver();
    CUevent e = queries().end.get();
    for (auto _ : state) benchmark::DoNotOptimize(d.cuEventQuery(e));
  });
  benchmark::RegisterBenchmark("EventQuery (completed)/kcache", [](benchmark::State& state) {
    EventRef e = queries().end;
    for (auto _ : state) benchmark::DoNotOptimize(e.is_complete());
  });
  benchmark::RegisterBenchmark("EventElapsedTime/raw", [](benchmark::State& state) {
    const Driver& d = driver();
    CUevent a = queries().start.get(), b = queries().end.get();
    float ms;
    for (auto _ : state) {
      benchmark::DoNotOptimize(d.cuEventElapsedTime(&ms, a, b));
      benchmark::DoNotOptimize(ms);
    }
  });
  benchmark::RegisterBenchmark("EventElapsedTime/kcache", [](benchmark::State& state) {
    EventRef a = queries().start, b = queries().end;
    for (auto _ : state) benchmark::DoNotOptimize(elapsed_ms(a, b));
  });
}

void register_kernel_calls(const Fixture& saxpy) {
  // Kept for the whole run: the functions point into it.
  static Module* module = new Module(Module::load_bytes(saxpy.bytes, saxpy.name));
  static Function fn = module->function("saxpy");

  benchmark::RegisterBenchmark(
      "OccupancyMaxActiveBlocksPerMultiprocessor/raw", [](benchmark::State& state) {
        const Driver& d = driver();
        int blocks;
        for (auto _ : state) {
          benchmark::DoNotOptimize(
              d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn.handle(), 256, 0));
          benchmark::DoNotOptimize(blocks);
        }
      });
  benchmark::RegisterBenchmark(
      "OccupancyMaxActiveBlocksPerMultiprocessor/kcache", [](benchmark::State& state) {
        for (auto _ : state) {
          benchmark::DoNotOptimize(fn.occupancy().max_active_blocks_per_multiprocessor(256, 0));
        }
      });
  benchmark::RegisterBenchmark("OccupancyMaxPotentialBlockSize/raw", [](benchmark::State& state) {
    const Driver& d = driver();
    int grid, block;
    for (auto _ : state) {
      benchmark::DoNotOptimize(
          d.cuOccupancyMaxPotentialBlockSize(&grid, &block, fn.handle(), nullptr, 0, 0));
      benchmark::DoNotOptimize(block);
    }
  });
  benchmark::RegisterBenchmark(
      "OccupancyMaxPotentialBlockSize/kcache", [](benchmark::State& state) {
        for (auto _ : state) {
          benchmark::DoNotOptimize(fn.occupancy().max_potential_block_size(0, 0).max_block_size);
        }
      });
  benchmark::RegisterBenchmark(
      "OccupancyAvailableDynamicSMemPerBlock/raw", [](benchmark::State& state) {
        const Driver& d = driver();
        size_t bytes;
        for (auto _ : state) {
          benchmark::DoNotOptimize(
              d.cuOccupancyAvailableDynamicSMemPerBlock(&bytes, fn.handle(), 2, 256));
          benchmark::DoNotOptimize(bytes);
        }
      });
  benchmark::RegisterBenchmark(
      "OccupancyAvailableDynamicSMemPerBlock/kcache", [](benchmark::State& state) {
        for (auto _ : state) {
          benchmark::DoNotOptimize(
              fn.occupancy().available_dynamic_shared_memory_per_block(2, 256));
        }
      });

  // Launch cost on the host: a one-block saxpy of 0 elements, synchronised
  // every 256 launches (in both) so the queue never fills.
  benchmark::RegisterBenchmark("LaunchKernel (saxpy, n=0)/raw", [](benchmark::State& state) {
    const Driver& d = driver();
    CUstream s = queries().stream.get();
    float a = 1;
    CUdeviceptr p = 0;
    int n = 0;
    void* args[] = {&a, &p, &p, &n};
    int64_t i = 0;
    for (auto _ : state) {
      d.cuLaunchKernel(fn.handle(), 1, 1, 1, 32, 1, 1, 0, s, args, nullptr);
      if (++i % 256 == 0) d.cuStreamSynchronize(s);
    }
    d.cuStreamSynchronize(s);
  });
  benchmark::RegisterBenchmark("LaunchKernel (saxpy, n=0)/kcache", [](benchmark::State& state) {
    StreamRef s = queries().stream;
    LaunchConfig config;
    config.block = 32;
    CUdeviceptr p = 0;
    int64_t i = 0;
    for (auto _ : state) {
      launch(s, config, fn, 1.0f, p, p, 0);
      if (++i % 256 == 0) s.synchronize();
    }
    s.synchronize();
  });
  // What checking the arguments (module.h) costs: launch() against
  // launch_raw(), which is launch() before the check.
  benchmark::RegisterBenchmark("Launch checked (saxpy, n=0)/raw", [](benchmark::State& state) {
    StreamRef s = queries().stream;
    LaunchConfig config;
    config.block = 32;
    float a = 1;
    CUdeviceptr p = 0;
    int n = 0;
    void* args[] = {&a, &p, &p, &n, nullptr};
    int64_t i = 0;
    for (auto _ : state) {
      launch_raw(s, config, fn, args);
      if (++i % 256 == 0) s.synchronize();
    }
    s.synchronize();
  });
  benchmark::RegisterBenchmark("Launch checked (saxpy, n=0)/kcache", [](benchmark::State& state) {
    StreamRef s = queries().stream;
    LaunchConfig config;
    config.block = 32;
    CUdeviceptr p = 0;
    int64_t i = 0;
    for (auto _ : state) {
      launch(s, config, fn, 1.0f, p, p, 0);
      if (++i % 256 == 0) s.synchronize();
    }
    s.synchronize();
    state.SetLabel(fn.params().known ? "checked" : "unchecked: no cuFuncGetParamInfo");
  });
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::string header;
  try {
    Device device(0);
    device.set_current();
    const Driver& d = driver();
    char date[32];
    std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof(date), "%Y-%m-%d", std::gmtime(&now));
    header = "runtime_bench on " + device.name() + " (" + device.arch().name() + "), driver CUDA " +
             std::to_string(d.version / 1000) + "." + std::to_string(d.version % 1000 / 10) + ", " +
             date;
    Fixture saxpy = load_fixture("saxpy.kcb", "saxpy");
    Fixture cub = load_fixture("cub_block.kcb", "block_sort_reduce<int, 4>");
    register_module_load(saxpy);
    register_module_load(cub);
    register_queries();
    register_kernel_calls(saxpy);
  } catch (const kcache::Error& e) {
    std::fprintf(stderr, "runtime_bench needs a CUDA GPU: %s\n", e.what());
    return 2;
  }
  kcache::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios(header);
  benchmark::Shutdown();
  return 0;
}
