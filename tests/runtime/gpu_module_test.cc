// Modules on a real GPU: every fixture kernel loaded from a bundle (embedded or
// .kcb), launched and checked against a CPU reference; image selection, PTX
// fallback, the registry and load_all(); occupancy sanity (exact figures are
// compared with cuda.core by occupancy_vs_cuda_core.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bundle/bundle.h"
#include "bundle/embedded.h"
#include "common/error.h"
#include "common/file_system.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/module.h"
#include "runtime/occupancy.h"
#include "runtime/registry.h"
#include "runtime/stream.h"
#include "tests/runtime/gpu_test_util.h"

namespace kcache::runtime {
namespace {

using testing::DeviceBuffer;
using testing::fixture;

class GpuModuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KCACHE_REQUIRE_GPU();
    Device(0).set_current();
  }
};

// The image find_image picks for this GPU from a .kcb fixture.
std::string expected_arch(const std::string& kcb) {
  static std::vector<std::string> keep;  // parsed views point into these
  keep.push_back(read_file(fixture(kcb)).value());
  bundle::Bundle b = bundle::parse(keep.back(), kcb);
  auto s = find_image(b, Device::current().arch());
  return s ? std::string(b.images[s->index].arch) : "none";
}

void run_saxpy(const Function& f, StreamRef stream, const LaunchConfig& base = {}) {
  const int n = 1 << 20;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = 0.5f * static_cast<float>(i % 1000);
    y[i] = 2.0f + static_cast<float>(i % 7);
  }
  DeviceBuffer dx = DeviceBuffer::from(x), dy = DeviceBuffer::from(y);
  LaunchConfig config = base;
  config.block = 256;
  config.grid = (n + 255) / 256;
  const float a = 3.0f;
  launch(stream, config, f, a, dx.get(), dy.get(), n);
  stream.synchronize();
  std::vector<float> got = dy.to_vector<float>(n);
  for (int i = 0; i < n; ++i) {
    ASSERT_FLOAT_EQ(got[i], std::fma(a, x[i], y[i])) << "at " << i;
  }
}

TEST_F(GpuModuleTest, EmbeddedSaxpyMatchesTheCpuReference) {
  const Module& m = embedded_module("kcache_tests_runtime_saxpy");
  EXPECT_EQ(m.image_arch(), expected_arch("saxpy.kcb"));
  std::printf("saxpy on %s (%s): image %s, %s, %s\n", Device::current().name().c_str(),
              Device::current().arch().name().c_str(), m.image_arch().c_str(), to_string(m.match()),
              m.uses_library_api() ? "cuLibraryLoadData" : "cuModuleLoad");
  Stream s = Stream::create();
  run_saxpy(m.function("saxpy"), s);
}

// Checked launches (module.h): on a driver with cuFuncGetParamInfo a launch
// whose arguments do not match saxpy(float, const float*, float*, int) is an
// error and nothing runs; the right one runs.
TEST_F(GpuModuleTest, AWrongLaunchIsAnErrorAndTheRightOneRuns) {
  const Module& m = embedded_module("kcache_tests_runtime_saxpy");
  Function f = m.function("saxpy");
  std::printf("driver CUDA %d: parameters %s\n", driver().version,
              f.params().known ? "known" : "unknown (launches unchecked)");
  if (!f.params().known) GTEST_SKIP() << "this driver has no cuFuncGetParamInfo (CUDA < 12.4)";
  ASSERT_EQ(f.params().params.size(), 4u);
  std::vector<float> y(256, 1.0f);
  DeviceBuffer dy = DeviceBuffer::from(y);
  LaunchConfig config;
  config.block = 256;
  try {
    launch(StreamRef::legacy_default(), config, f, 2.0f, dy.get());
    FAIL() << "two arguments for four parameters launched";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("2 arguments given, the kernel takes 4"),
              std::string::npos)
        << e.what();
  }
  try {
    launch(StreamRef::legacy_default(), config, f, 2.0, dy.get(), dy.get(), 256);
    FAIL() << "a double for a float launched";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 0 is 4 bytes, the argument given is 8 bytes"),
              std::string::npos)
        << e.what();
  }
  Stream s = Stream::create();
  run_saxpy(f, s);
}

TEST_F(GpuModuleTest, OnA90DeviceTheArchSpecificCubinIsChosen) {
  DeviceArch arch = Device::current().arch();
  if (arch.major != 9 || arch.minor != 0) GTEST_SKIP() << "needs an sm_90 GPU";
  const Module& m = embedded_module("kcache_tests_runtime_saxpy");
  EXPECT_EQ(m.image_arch(), "sm_90a");
  EXPECT_EQ(m.match(), Match::exact_cubin);
}

TEST_F(GpuModuleTest, LoadsTheLibraryApiWhereTheDriverHasIt) {
  const Module& m = embedded_module("kcache_tests_runtime_saxpy");
  EXPECT_EQ(m.uses_library_api(), driver().has_library_api());
}

TEST_F(GpuModuleTest, ClusterLaunchRunsSaxpy) {
  if (Device::current().arch().major < 9) GTEST_SKIP() << "clusters need sm_90+";
  LaunchConfig config;
  config.cluster = {2, 1, 1};
  run_saxpy(embedded_module("kcache_tests_runtime_saxpy").function("saxpy"), Stream::create(),
            config);
}

uint16_t half_bits(float f) {  // exact for the small multiples of 1/8 used below
  if (f == 0.0f) return 0;
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  uint32_t exponent = ((b >> 23) & 0xff) - 127 + 15;
  return static_cast<uint16_t>(((b >> 16) & 0x8000) | (exponent << 10) | ((b >> 13) & 0x3ff));
}

TEST_F(GpuModuleTest, KcbFileHalfDotWithCooperativeGridSyncMatchesTheCpu) {
  Module m = Module::load_file(fixture("half_cg.kcb"));
  EXPECT_EQ(m.image_arch(), expected_arch("half_cg.kcb"));
  Function f = m.function("half_dot");
  const int n = 1 << 16;
  std::vector<uint16_t> a(n), b(n);
  double reference = 0;
  for (int i = 0; i < n; ++i) {
    float x = 0.25f * static_cast<float>(i % 7), y = 0.5f * static_cast<float>(i % 5);
    a[i] = half_bits(x);
    b[i] = half_bits(y);
    reference += static_cast<double>(x) * y;  // every product and sum is exact
  }
  // A cooperative grid must be co-resident: size it with the occupancy API.
  const unsigned block = 256;
  int per_sm = f.occupancy().max_active_blocks_per_multiprocessor(block, 0);
  ASSERT_GT(per_sm, 0);
  unsigned grid = std::min<unsigned>(64, per_sm * Device::current().multiprocessor_count());
  DeviceBuffer da = DeviceBuffer::from(a), db = DeviceBuffer::from(b);
  DeviceBuffer partial(grid * sizeof(float)), result(sizeof(float));
  LaunchConfig config;
  config.grid = grid;
  config.block = block;
  config.cooperative = true;
  Stream s = Stream::create();
  launch(s, config, f, da.get(), db.get(), partial.get(), result.get(), n);
  s.synchronize();
  EXPECT_EQ(result.to_vector<float>(1)[0], static_cast<float>(reference));
}

template <typename T>
void check_block_sort_reduce(const Module& m, const std::string& expression, int items) {
  SCOPED_TRACE(expression);
  const int threads = 128, blocks = 8, per_block = threads * items, n = blocks * per_block;
  std::vector<T> in(n);
  uint32_t state = 12345;
  for (T& v : in) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<T>((state >> 8) % 1000);  // small integers: float sums stay exact
  }
  DeviceBuffer din = DeviceBuffer::from(in), sorted(n * sizeof(T)), sums(blocks * sizeof(T));
  Function f = m.function(expression);
  LaunchConfig config;
  config.grid = blocks;
  config.block = threads;
  launch(StreamRef::legacy_default(), config, f, din.get(), sorted.get(), sums.get());
  StreamRef::legacy_default().synchronize();
  std::vector<T> got = sorted.to_vector<T>(n), got_sums = sums.to_vector<T>(blocks);
  for (int blk = 0; blk < blocks; ++blk) {
    std::vector<T> want(in.begin() + blk * per_block, in.begin() + (blk + 1) * per_block);
    T sum = 0;
    for (T v : want) sum += v;
    std::sort(want.begin(), want.end());
    ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin() + blk * per_block))
        << "block " << blk;
    EXPECT_EQ(got_sums[blk], sum) << "block " << blk;
  }
}

TEST_F(GpuModuleTest, CubBlockSortAndReduceThroughNameExpressions) {
  const Module& m = embedded_module("kcache_tests_runtime_cub_block");
  check_block_sort_reduce<int>(m, "block_sort_reduce<int, 4>", 4);
  check_block_sort_reduce<int>(m, "block_sort_reduce<int, 16>", 16);
  check_block_sort_reduce<unsigned>(m, "block_sort_reduce<unsigned int, 4>", 4);
  check_block_sort_reduce<float>(m, "block_sort_reduce<float, 16>", 16);
  check_block_sort_reduce<double>(m, "block_sort_reduce<double, 4>", 4);
}

template <typename T>
void check_scale(const Module& m, const std::string& expression, T factor) {
  SCOPED_TRACE(expression);
  const int n = 10000;
  std::vector<T> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<T>(i % 100);
  DeviceBuffer dx = DeviceBuffer::from(x);
  LaunchConfig config;
  config.grid = (n + 127) / 128;
  config.block = 128;
  launch(StreamRef::legacy_default(), config, m.function(expression), dx.get(), factor, n);
  std::vector<T> got = dx.to_vector<T>(n);  // cuMemcpyDtoH waits for the legacy stream
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], x[i] * factor) << "at " << i;
}

TEST_F(GpuModuleTest, TemplatedKernelThroughNameExpressions) {
  const Module& m = embedded_module("kcache_tests_runtime_templated");
  EXPECT_EQ(m.lowered("scale<float>"), "_Z5scaleIfEvPT_S0_i");
  check_scale<float>(m, "scale<float>", 1.5f);
  check_scale<int>(m, "scale<int>", -3);
  check_scale<double>(m, "scale<double>", 0.25);
}

TEST_F(GpuModuleTest, FallsBackToPtxWhenNoCubinMatches) {
  if (Device::current().arch().major == 8) GTEST_SKIP() << "the sm_80 cubin would match";
  Module m = Module::load_file(fixture("ptx_fallback.kcb"));
  EXPECT_EQ(m.match(), Match::ptx);
  EXPECT_EQ(m.image_arch(), "compute_80");
  EXPECT_EQ(m.image_kind(), bundle::ImageKind::ptx);
  run_saxpy(m.function("saxpy"), StreamRef::legacy_default());
}

TEST_F(GpuModuleTest, NoImageForThisGpuNamesItsArchAndTheImages) {
  if (Device::current().arch().major == 8) GTEST_SKIP() << "the sm_80 cubin would match";
  try {
    Module::load_file(fixture("sm80_only.kcb"));
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(Device::current().arch().name()), std::string::npos) << m;
    EXPECT_NE(m.find("cubin sm_80"), std::string::npos) << m;
    EXPECT_NE(m.find("sm80_only.kcb"), std::string::npos) << m;
  }
}

TEST_F(GpuModuleTest, UnknownKernelIsNotFoundNamingTheBundle) {
  try {
    embedded_module("kcache_tests_runtime_templated").function("scale<char>");
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("embedded bundle kcache_tests_runtime_templated"), std::string::npos) << m;
    EXPECT_NE(m.find("scale<float>"), std::string::npos) << m;
  }
}

TEST_F(GpuModuleTest, RegistryLoadsOnceAcrossThreads) {
  std::vector<const Module*> seen(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&, i] {
      Device(0).set_current();
      seen[i] = &embedded_module("kcache_tests_runtime_cub_block");
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Module* m : seen) EXPECT_EQ(m, seen[0]);
}

TEST_F(GpuModuleTest, LoadAllLoadsEveryLinkedBundleOnce) {
  size_t linked = bundle::embedded_bundles().size();
  EXPECT_EQ(linked, 3u);  // saxpy, templated, cub_block
  EXPECT_EQ(load_all(), linked);
  size_t after = loaded_module_count();
  EXPECT_GE(after, linked);
  EXPECT_EQ(load_all(), linked);
  EXPECT_EQ(loaded_module_count(), after);
  for (const bundle::EmbeddedBundle& b : bundle::embedded_bundles()) {
    embedded_module(b.symbol);
  }
  EXPECT_EQ(loaded_module_count(), after);
}

TEST_F(GpuModuleTest, OccupancyFiguresAreConsistent) {
  Function f = embedded_module("kcache_tests_runtime_saxpy").function("saxpy");
  Occupancy o = f.occupancy();
  int blocks = o.max_active_blocks_per_multiprocessor(256, 0);
  EXPECT_GE(blocks, 1);
  EXPECT_LE(blocks, 2048 / 256);
  MaxPotentialBlockSize p = o.max_potential_block_size(0, 0);
  EXPECT_GT(p.min_grid_size, 0);
  EXPECT_GT(p.max_block_size, 0);
  EXPECT_LE(p.max_block_size, 1024);
  // A per-block-size function that returns a constant gives the constant's answer.
  MaxPotentialBlockSize q = o.max_potential_block_size([](int) { return size_t{2048}; }, 0);
  MaxPotentialBlockSize r = o.max_potential_block_size(size_t{2048}, 0);
  EXPECT_EQ(q.max_block_size, r.max_block_size);
  EXPECT_EQ(q.min_grid_size, r.min_grid_size);
  size_t smem = o.available_dynamic_shared_memory_per_block(2, 256);
  EXPECT_GT(smem, 0u);
  // With exactly that much, two blocks still fit.
  EXPECT_GE(o.max_active_blocks_per_multiprocessor(256, smem), 2);
  if (Device::current().arch().major >= 9) {
    LaunchConfig config;
    config.grid = 32;
    config.block = 128;
    EXPECT_GE(o.max_potential_cluster_size(config), 2);
    config.cluster = {2, 1, 1};
    EXPECT_GT(o.max_active_clusters(config), 0);
  }
}

}  // namespace
}  // namespace kcache::runtime
