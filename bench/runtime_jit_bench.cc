// The runtime's optional loaders against what they replace, in one run on one
// GPU:
//   - kcache_jit on a miss (key, store lookup, NVRTC, store put, load) against
//     the raw NVRTC compile of the same input plus cuModuleLoadData;
//   - kcache_jit on a hit (key, store lookup, load) against cuModuleLoadData
//     of the same cubin: the price of not shipping the image;
//   - the store loader (fetch the entries by key, pick, load) against loading
//     the embedded bundle and against the raw load of the chosen cubin.
// Each pair is "<what>/raw" and "<what>/<variant>"; a ratio table follows the
// run (bench/runtime_ratio_reporter.h). The store is a fresh folder under
// $TMPDIR (page cache warm after the first lookup, as on a busy machine).
// Run from the runfiles root (it reads tests/runtime/*.kcb):
//   runtime_jit_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "bench/runtime_ratio_reporter.h"
#include "bundle/bundle.h"
#include "bundle/embedded.h"
#include "cache/format/entry.h"
#include "cache/storage.h"
#include "common/error.h"
#include "common/file_system.h"
#include "compiler/compiler.h"
#include "compiler/nvrtc/nvrtc.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/image_selection.h"
#include "runtime/jit/jit.h"
#include "runtime/module.h"
#include "runtime/registry.h"
#include "runtime/store_loader.h"
#include "tests/runtime/jit/test_kernels.h"

namespace {

using namespace kcache::runtime;

void check_raw(CUresult r, const char* call) { check(r, call, "benchmark"); }

std::string store_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp ? tmp : "/tmp") + "/kcache-jit-bench-XXXXXX";
  if (!mkdtemp(dir.data())) throw kcache::IoError("mkdtemp failed for " + dir);
  return dir;
}

jit::Jit& the_jit() {
  static jit::Jit* j = [] {
    jit::Options o;
    kcache::cache::StorageOptions storage;
    storage.local_dir = store_dir() + "/jit";
    o.storage = storage;
    return new jit::Jit(o);
  }();
  return *j;
}

kcache::cache::Storage& the_store() {
  static kcache::cache::Storage* s = [] {
    kcache::cache::StorageOptions options;
    options.local_dir = store_dir() + "/store";
    return new kcache::cache::Storage(options);
  }();
  return *s;
}

// cuModuleLoadData + cuModuleGetFunction + cuModuleUnload of `image`.
void raw_module_load(const std::string& image, const std::string& symbol) {
  const Driver& d = driver();
  CUmodule m;
  CUfunction fn;
  check_raw(d.cuModuleLoadData(&m, image.data()), "cuModuleLoadData");
  check_raw(d.cuModuleGetFunction(&fn, m, symbol.c_str()), "cuModuleGetFunction");
  benchmark::DoNotOptimize(fn);
  check_raw(d.cuModuleUnload(m), "cuModuleUnload");
}

void raw_library_load(const std::string& image, const std::string& symbol) {
  const Driver& d = driver();
  CUlibrary l;
  CUkernel k;
  CUfunction fn;
  check_raw(d.cuLibraryLoadData(&l, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
            "cuLibraryLoadData");
  check_raw(d.cuLibraryGetKernel(&k, l, symbol.c_str()), "cuLibraryGetKernel");
  check_raw(d.cuKernelGetFunction(&fn, k), "cuKernelGetFunction");
  benchmark::DoNotOptimize(fn);
  check_raw(d.cuLibraryUnload(l), "cuLibraryUnload");
}

// What NVRTC is handed for `source` on this device, as the precompiler hands it.
kcache::compiler::NvrtcInput nvrtc_input(const jit::Source& source, const std::string& arch) {
  kcache::compiler::NvrtcInput in;
  in.source_name = source.name;
  in.source = source.text;
  in.name_expressions = source.name_expressions;
  in.options.push_back("-arch=" + arch);
  kcache::compiler::CompileOptions o;
  o.std = source.std;
  o.defines = source.defines;
  for (const std::string& opt : kcache::compiler::canonical_options(o)) in.options.push_back(opt);
  for (const std::string& dir : the_jit().toolkit().include_dirs) in.options.push_back("-I" + dir);
  return in;
}

// `misses` iterations of the miss pair (each a real NVRTC compile), or none.
void register_jit(const std::string& label, const jit::Source& source, const std::string& kernel,
                  int misses) {
  const std::string arch = Device::current().arch().name();
  if (misses > 0) {
    // A miss every iteration: a macro no earlier iteration used.
    benchmark::RegisterBenchmark(
        ("JIT miss " + label + " (" + arch + ")/raw").c_str(),
        [source, arch, kernel](benchmark::State& state) {
          const kcache::compiler::Nvrtc& nvrtc =
              kcache::compiler::Nvrtc::open(the_jit().toolkit().nvrtc.path);
          static int salt = 0;
          for (auto _ : state) {
            jit::Source s = source;
            s.defines.push_back("KCACHE_BENCH_RAW_SALT=" + std::to_string(++salt));
            kcache::compiler::NvrtcOutput out = nvrtc.compile(nvrtc_input(s, arch));
            std::string symbol =
                out.lowered_names.empty() ? kernel : out.lowered_names[0].lowered_name;
            raw_module_load(out.image, symbol);
          }
        })
        ->Unit(benchmark::kMillisecond)
        ->Iterations(misses);
    benchmark::RegisterBenchmark(
        ("JIT miss " + label + " (" + arch + ")/kcache").c_str(),
        [source, kernel](benchmark::State& state) {
          static int salt = 0;
          for (auto _ : state) {
            jit::Source s = source;
            s.defines.push_back("KCACHE_BENCH_SALT=" + std::to_string(++salt));
            Module m = the_jit().load(s);
            benchmark::DoNotOptimize(m.function(kernel).handle());
          }
        })
        ->Unit(benchmark::kMillisecond)
        ->Iterations(misses);
  }
  // Hits: the store has it after this first load.
  jit::Compiled c = the_jit().compile(source);
  std::string image(c.entry.payload());
  std::string symbol =
      c.entry.lowered_names().empty() ? kernel : c.entry.lowered_names()[0].lowered_name;
  std::string what =
      "JIT hit " + label + " (" + arch + ", " + std::to_string(image.size() / 1024) + " KiB cubin)";
  benchmark::RegisterBenchmark((what + "/raw").c_str(), [image, symbol](benchmark::State& state) {
    for (auto _ : state) raw_module_load(image, symbol);
  })->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark((what + "/kcache").c_str(), [source,
                                                            kernel](benchmark::State& state) {
    for (auto _ : state) {
      Module m = the_jit().load(source);
      benchmark::DoNotOptimize(m.function(kernel).handle());
    }
  })->Unit(benchmark::kMicrosecond);
  // Where the hit's time goes: the compile() part (key, lookup, entry) alone.
  benchmark::RegisterBenchmark(("JIT hit " + label + ", compile() only").c_str(),
                               [source](benchmark::State& state) {
                                 for (auto _ : state) {
                                   jit::Compiled hit = the_jit().compile(source);
                                   benchmark::DoNotOptimize(hit.entry.payload().data());
                                 }
                               })
      ->Unit(benchmark::kMicrosecond);
}

// The fixture bundle `name`, embedded as `symbol`, loaded four ways.
void register_store_loader(const std::string& name, const std::string& symbol,
                           const std::string& kernel) {
  static std::vector<std::string>* keep = new std::vector<std::string>();
  keep->push_back(kcache::read_file("tests/runtime/" + name).value());
  kcache::bundle::Bundle b = kcache::bundle::parse(keep->back(), name);
  std::vector<kcache::cache::LoweredName> names;
  for (const kcache::bundle::LoweredName& n : b.lowered_names) {
    names.push_back({std::string(n.name_expression), std::string(n.lowered_name)});
  }
  std::vector<kcache::Hash128> keys = bundle_keys(b, name);
  for (size_t i = 0; i < keys.size(); ++i) {
    const kcache::bundle::Image& image = b.images[i];
    the_store().put(kcache::cache::Entry(keys[i],
                                         image.kind == kcache::bundle::ImageKind::ptx
                                             ? kcache::cache::TargetKind::ptx
                                             : kcache::cache::TargetKind::cubin,
                                         std::string(image.arch), 0, 0, image.data, names));
  }
  Selection s = select_image(b, Device::current().arch(), name);
  std::string image(b.images[s.index].data);
  std::string lowered(b.lowered(kernel));
  std::string sym = lowered.empty() ? kernel : lowered;
  std::vector<kcache::Hash128> chosen = {keys[s.index]};

  std::string what = "Load " + name + " (" + std::string(b.images[s.index].arch) + ", " +
                     std::to_string(image.size() / 1024) + " KiB; " + std::to_string(keys.size()) +
                     " images)";
  benchmark::RegisterBenchmark((what + "/raw").c_str(), [image, sym](benchmark::State& state) {
    bool library = driver().has_library_api();
    for (auto _ : state) {
      if (library) {
        raw_library_load(image, sym);
      } else {
        raw_module_load(image, sym);
      }
    }
  })->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark((what + "/kcache embedded").c_str(), [symbol, kernel](
                                                                        benchmark::State& state) {
    for (auto _ : state) {
      Module m = Module::load_embedded(symbol);
      benchmark::DoNotOptimize(m.function(kernel).handle());
    }
  })->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark((what + "/kcache store, every key").c_str(),
                               [keys, name, kernel](benchmark::State& state) {
                                 for (auto _ : state) {
                                   Module m = load_from_store(the_store(), keys, name);
                                   benchmark::DoNotOptimize(m.function(kernel).handle());
                                 }
                               })
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark((what + "/kcache store, chosen key").c_str(),
                               [chosen, name, kernel](benchmark::State& state) {
                                 for (auto _ : state) {
                                   Module m = load_from_store(the_store(), chosen, name);
                                   benchmark::DoNotOptimize(m.function(kernel).handle());
                                 }
                               })
      ->Unit(benchmark::kMicrosecond);
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
    header = "runtime_jit_bench on " + device.name() + " (" + device.arch().name() +
             "), driver CUDA " + std::to_string(d.version / 1000) + "." +
             std::to_string(d.version % 1000 / 10) + ", NVRTC " +
             the_jit().toolkit().version_string() + ", " + date;

    jit::Source saxpy;
    saxpy.name = "bench/scale.cu";
    saxpy.text = kcache::runtime::jit::testing::kScaleSource;
    register_jit("saxpy", saxpy, "saxpy", 10);
    jit::Source cub;
    cub.name = "bench/block_sum.cu";
    cub.text = kcache::runtime::jit::testing::kBlockSumSource;
    cub.name_expressions = {"block_sum<256>"};
    register_jit("CUB block_sum<256>", cub, "block_sum<256>", 3);

    register_store_loader("saxpy.kcb", "kcache_tests_runtime_saxpy", "saxpy");
    register_store_loader("cub_block.kcb", "kcache_tests_runtime_cub_block",
                          "block_sort_reduce<int, 4>");
  } catch (const kcache::Error& e) {
    std::fprintf(stderr, "runtime_jit_bench needs a CUDA GPU and the toolkit: %s\n", e.what());
    return 2;
  }
  kcache::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios(header);
  benchmark::Shutdown();
  return 0;
}
