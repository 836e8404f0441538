// The runtime against a fake libcuda (fake_cuda/fake_cuda.cc): what it asks
// the driver for, with which ABI versions, and how it maps every answer. Runs
// on machines without a GPU. Built twice: as a CUDA 13.0 driver and, with
// FAKE_CUDA_VERSION=11080, as a driver without cuLibraryLoadData.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bundle/bundle.h"
#include "bundle/embedded.h"
#include "common/error.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/module.h"
#include "runtime/occupancy.h"
#include "runtime/registry.h"
#include "runtime/stream.h"

#ifndef FAKE_CUDA_VERSION
#define FAKE_CUDA_VERSION 13000
#endif

namespace kcache::runtime {
namespace {

constexpr const char* kFake = "tests/runtime/libfake_cuda.so";
constexpr bool kNewDriver = FAKE_CUDA_VERSION >= 12080;

// The fake's control functions.
struct Fake {
  void (*set_query_result)(int);
  void (*set_capability)(int, int);
  int (*requested_version)(const char*);
  const char* (*last_image)();
  const char* (*last_symbol)();
  int (*live_modules)();
  int (*live_libraries)();
  int (*live_streams)();
  int (*live_events)();
  void (*last_launch)(unsigned*);
  CUstream (*last_launch_stream)();
  int (*last_launch_param_count)();
  unsigned long long (*last_launch_param)(int);
  int (*b2d_call_count)();
  void (*set_params)(const size_t*, const size_t*, int);
  int (*param_info_calls)();
};

template <typename F>
void bind(void* handle, F& slot, const char* name) {
  slot = reinterpret_cast<F>(dlsym(handle, name));
  if (!slot) throw std::runtime_error(std::string("fake_cuda lacks ") + name);
}

Fake& fake() {
  static Fake f = [] {
    void* h = dlopen(kFake, RTLD_NOW | RTLD_LOCAL);
    if (!h) throw std::runtime_error(std::string("cannot open the fake driver: ") + dlerror());
    Fake f{};
    bind(h, f.set_query_result, "fake_cuda_set_query_result");
    bind(h, f.set_capability, "fake_cuda_set_capability");
    bind(h, f.requested_version, "fake_cuda_requested_version");
    bind(h, f.last_image, "fake_cuda_last_image");
    bind(h, f.last_symbol, "fake_cuda_last_symbol");
    bind(h, f.live_modules, "fake_cuda_live_modules");
    bind(h, f.live_libraries, "fake_cuda_live_libraries");
    bind(h, f.live_streams, "fake_cuda_live_streams");
    bind(h, f.live_events, "fake_cuda_live_events");
    bind(h, f.last_launch, "fake_cuda_last_launch");
    bind(h, f.last_launch_stream, "fake_cuda_last_launch_stream");
    bind(h, f.last_launch_param_count, "fake_cuda_last_launch_param_count");
    bind(h, f.last_launch_param, "fake_cuda_last_launch_param");
    bind(h, f.b2d_call_count, "fake_cuda_b2d_call_count");
    bind(h, f.set_params, "fake_cuda_set_params");
    bind(h, f.param_info_calls, "fake_cuda_param_info_calls");
    return f;
  }();
  return f;
}

class FakeDriverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("KCACHE_LIBCUDA", kFake, 1);
    setenv("FAKE_CUDA_VERSION", std::to_string(FAKE_CUDA_VERSION).c_str(), 1);
  }
  void SetUp() override {
    fake().set_capability(9, 0);
    fake().set_query_result(CUDA_SUCCESS);
    fake().set_params(nullptr, nullptr, -1);
  }
};

// Bundles whose "images" are text naming their symbols, which is all the fake
// looks at.
struct TestBundle {
  std::vector<std::string> archs, datas;
  std::vector<std::pair<std::string, std::string>> names;
  std::string bytes;

  TestBundle& image(const std::string& arch, const std::string& data) {
    archs.push_back(arch);
    datas.push_back(data);
    return *this;
  }
  TestBundle& lowered(const std::string& expression, const std::string& symbol) {
    names.emplace_back(expression, symbol);
    return *this;
  }
  const std::string& serialize() {
    bundle::Bundle b;
    b.source_name = "test.cu";
    for (size_t i = 0; i < archs.size(); ++i) {
      auto kind =
          archs[i].rfind("compute_", 0) == 0 ? bundle::ImageKind::ptx : bundle::ImageKind::cubin;
      b.images.push_back({kind, archs[i], "", datas[i]});
    }
    for (const auto& [e, s] : names) b.lowered_names.push_back({e, s});
    bytes = bundle::serialize(b);
    return bytes;
  }
};

TEST_F(FakeDriverTest, AsksForEveryEntryPointAtTheVersionOfItsTypedef) {
  const Driver& d = driver();
  EXPECT_EQ(d.version, FAKE_CUDA_VERSION);
  EXPECT_EQ(fake().requested_version("cuMemAlloc"), 3020);       // cuMemAlloc_v2
  EXPECT_EQ(fake().requested_version("cuStreamDestroy"), 4000);  // cuStreamDestroy_v2
  EXPECT_EQ(fake().requested_version("cuEventDestroy"), 4000);   // cuEventDestroy_v2
  EXPECT_EQ(fake().requested_version("cuDevicePrimaryCtxRelease"), 11000);
  EXPECT_EQ(fake().requested_version("cuOccupancyMaxActiveClusters"), 11070);
  if (kNewDriver) {
    EXPECT_EQ(fake().requested_version("cuEventElapsedTime"), 12080);
    EXPECT_EQ(fake().requested_version("cuLibraryLoadData"), 12000);
    EXPECT_TRUE(d.has_library_api());
  } else {
    // Never asked above the driver's version (that is an error, not a miss).
    EXPECT_EQ(fake().requested_version("cuEventElapsedTime"), 2000);
    EXPECT_EQ(fake().requested_version("cuLibraryLoadData"), -1);
    EXPECT_FALSE(d.has_library_api());
  }
}

TEST_F(FakeDriverTest, ThreadWithoutAContextGetsDeviceZerosPrimaryContext) {
  std::thread([] {
    CUcontext c = current_context();
    EXPECT_NE(c, nullptr);
    EXPECT_EQ(c, Device(0).primary_context());
  }).join();
}

TEST_F(FakeDriverTest, DeviceOrdinalOutOfRangeIsNotFoundSayingHowManyThereAre) {
  try {
    Device d(3);
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    EXPECT_NE(std::string(e.what()).find("sees 1 device"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Device(0).name(), "Fake GPU");
  EXPECT_EQ(Device(0).arch().name(), "sm_90");
}

TEST_F(FakeDriverTest, LoadPicksTheImageForTheDevicesCapability) {
  fake().set_capability(8, 9);
  TestBundle b;
  b.image("sm_80", "cubin sm_80 saxpy").image("sm_86", "cubin sm_86 saxpy");
  b.image("compute_80", "ptx compute_80 saxpy");
  Module m = Module::load_bytes(b.serialize(), "saxpy.kcb");
  EXPECT_STREQ(fake().last_image(), "cubin sm_86 saxpy");
  EXPECT_EQ(m.image_arch(), "sm_86");
  EXPECT_EQ(m.image_kind(), bundle::ImageKind::cubin);
  EXPECT_EQ(m.match(), Match::compatible_cubin);
  EXPECT_EQ(m.uses_library_api(), kNewDriver);
  EXPECT_EQ(m.name(), "saxpy.kcb");

  fake().set_capability(12, 0);
  Module ptx = Module::load_bytes(b.serialize(), "saxpy.kcb");
  EXPECT_STREQ(fake().last_image(), "ptx compute_80 saxpy");
  EXPECT_EQ(ptx.match(), Match::ptx);
}

TEST_F(FakeDriverTest, NoImageForTheDeviceNamesItsArch) {
  fake().set_capability(7, 5);
  TestBundle b;
  b.image("sm_90", "cubin saxpy");
  try {
    Module::load_bytes(b.serialize(), "saxpy.kcb");
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("sm_75"), std::string::npos) << m;
    EXPECT_NE(m.find("cubin sm_90"), std::string::npos) << m;
  }
}

TEST_F(FakeDriverTest, ModulesUnloadWhenDestroyedAndMovesTransferOwnership) {
  TestBundle b;
  b.image("sm_90", "cubin saxpy");
  int before = fake().live_modules();
  {
    Module a = Module::load_bytes(b.serialize(), "a.kcb");
    EXPECT_EQ(fake().live_modules(), before + 1);
    Module moved = std::move(a);
    EXPECT_EQ(fake().live_modules(), before + 1);
    Module other = Module::load_bytes(b.serialize(), "b.kcb");
    EXPECT_EQ(fake().live_modules(), before + 2);
    other = std::move(moved);  // other's own module is unloaded
    EXPECT_EQ(fake().live_modules(), before + 1);
    EXPECT_EQ(other.name(), "a.kcb");
  }
  EXPECT_EQ(fake().live_modules(), before);
}

TEST_F(FakeDriverTest, NameExpressionsReachTheDriverAsTheirLoweredSymbol) {
  TestBundle b;
  b.image("sm_90", "cubin _Z5scaleIfEvPT_S0_i saxpy");
  b.lowered("scale<float>", "_Z5scaleIfEvPT_S0_i");
  Module m = Module::load_bytes(b.serialize(), "templated.kcb");
  Function f = m.function("scale<float>");
  EXPECT_STREQ(fake().last_symbol(), "_Z5scaleIfEvPT_S0_i");
  EXPECT_EQ(f.name(), "scale<float>");
  EXPECT_EQ(f.describe(), "scale<float> in templated.kcb");
  EXPECT_EQ(m.lowered("scale<float>"), "_Z5scaleIfEvPT_S0_i");
  Function g = m.function("saxpy");  // not an expression: a plain symbol
  EXPECT_STREQ(fake().last_symbol(), "saxpy");
  EXPECT_NE(f.handle(), nullptr);
  EXPECT_NE(g.handle(), nullptr);
}

TEST_F(FakeDriverTest, UnknownKernelIsNotFoundNamingTheModuleAndItsExpressions) {
  TestBundle b;
  b.image("sm_90", "cubin _Z5scaleIfEvPT_S0_i");
  b.lowered("scale<float>", "_Z5scaleIfEvPT_S0_i");
  Module m = Module::load_bytes(b.serialize(), "templated.kcb");
  try {
    m.function("scale<int>");
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("no kernel scale<int> in templated.kcb (cubin sm_90)"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("its name expressions: scale<float>"), std::string::npos) << msg;
  }
}

TEST_F(FakeDriverTest, PtxTheDriverRejectsIsADriverErrorWithTheJitLog) {
  fake().set_capability(12, 0);
  TestBundle b;
  b.image("compute_80", "bad ptx");
  try {
    Module::load_bytes(b.serialize(), "bad.kcb");
    FAIL() << "expected DriverError";
  } catch (const DriverError& e) {
    std::string m = e.what();
    EXPECT_EQ(e.result(), CUDA_ERROR_INVALID_PTX);
    EXPECT_NE(m.find("ptx compute_80 image of bad.kcb: CUDA_ERROR_INVALID_PTX"), std::string::npos)
        << m;
    if (kNewDriver) {
      EXPECT_NE(m.find("JIT log:\nptxas fatal: fake syntax error"), std::string::npos) << m;
    }
  }
}

TEST_F(FakeDriverTest, LoadImageTakesUnalignedUnterminatedBytes) {
  std::string text = "xcubin saxpy and more";
  Module m = Module::load_image(bundle::ImageKind::cubin, "sm_90",
                                std::string_view(text).substr(1, 11), "store entry 0123");
  EXPECT_STREQ(fake().last_image(), "cubin saxpy");
  EXPECT_EQ(m.name(), "store entry 0123");
  EXPECT_EQ(m.match(), Match::exact_cubin);
}

Function saxpy_function(Module& m) { return m.function("saxpy"); }

TEST_F(FakeDriverTest, LaunchPassesTheConfigStreamAndArgumentsAsGiven) {
  TestBundle b;
  b.image("sm_90", "cubin saxpy");
  Module m = Module::load_bytes(b.serialize(), "saxpy.kcb");
  Function f = saxpy_function(m);
  Stream s = Stream::create();
  LaunchConfig config;
  config.grid = {4, 2, 1};
  config.block = 128;
  config.shared_memory_bytes = 256;
  launch(s, config, f, CUdeviceptr{0x1234}, 2.5, uint64_t{7});
  unsigned got[12];
  fake().last_launch(got);
  EXPECT_EQ(got[0], 4u);
  EXPECT_EQ(got[1], 2u);
  EXPECT_EQ(got[3], 128u);
  EXPECT_EQ(got[4], 1u);
  EXPECT_EQ(got[6], 256u);
  EXPECT_EQ(got[7], 0u) << "plain launches use cuLaunchKernel";
  EXPECT_EQ(fake().last_launch_stream(), s.get());
  ASSERT_EQ(fake().last_launch_param_count(), 3);
  EXPECT_EQ(fake().last_launch_param(0), 0x1234u);
  double d;
  unsigned long long bits = fake().last_launch_param(1);
  std::memcpy(&d, &bits, sizeof(d));
  EXPECT_EQ(d, 2.5);
  EXPECT_EQ(fake().last_launch_param(2), 7u);
}

// saxpy(float a, const float* x, float* y, int n) as the driver describes it.
void describe_saxpy() {
  const size_t offsets[] = {0, 8, 16, 24}, sizes[] = {4, 8, 8, 4};
  fake().set_params(offsets, sizes, 4);
}

// The message of the InvalidArgument `launch` throws, or "" if it launched.
template <typename... Args>
std::string launch_error(const Function& f, const Args&... args) {
  try {
    launch(StreamRef::legacy_default(), LaunchConfig{1, 32}, f, args...);
    return "";
  } catch (const InvalidArgument& e) {
    return e.what();
  }
}

TEST_F(FakeDriverTest, LaunchWithTheKernelsParameterTypesGoesThrough) {
  describe_saxpy();
  TestBundle b;
  b.image("sm_90", "cubin saxpy");
  Module m = Module::load_bytes(b.serialize(), "saxpy.kcb");
  Function f = saxpy_function(m);
  float* x = nullptr;
  CUdeviceptr y = 0x10;
  if (!kNewDriver) {
    EXPECT_FALSE(f.params().known) << "a CUDA 11.8 driver has no cuFuncGetParamInfo";
    EXPECT_EQ(launch_error(f, 2.0, x), "") << "unchecked where the driver cannot describe them";
    return;
  }
  ASSERT_TRUE(f.params().known);
  EXPECT_EQ(f.params().params.size(), 4u);
  EXPECT_EQ(launch_error(f, 2.0f, x, y, 1000), "");
  EXPECT_EQ(fake().last_launch_param_count(), 4);
}

TEST_F(FakeDriverTest, LaunchWithTooFewArgumentsIsAnErrorNamingTheKernel) {
  if (!kNewDriver) GTEST_SKIP() << "no cuFuncGetParamInfo in a CUDA 11.8 driver";
  describe_saxpy();
  TestBundle b;
  b.image("sm_90", "cubin saxpy");
  Module m = Module::load_bytes(b.serialize(), "saxpy.kcb");
  CUdeviceptr y = 0x10;
  EXPECT_EQ(launch_error(saxpy_function(m), 2.0f, y),
            "launching saxpy in saxpy.kcb: 2 arguments given, the kernel takes 4 (parameter "
            "sizes: 4, 8, 8, 4 bytes)");
}

TEST_F(FakeDriverTest, LaunchWithTooManyArgumentsIsAnError) {
  if (!kNewDriver) GTEST_SKIP() << "no cuFuncGetParamInfo in a CUDA 11.8 driver";
  describe_saxpy();
  TestBundle b;
  b.image("sm_90", "cubin saxpy");
  Module m = Module::load_bytes(b.serialize(), "saxpy.kcb");
  CUdeviceptr p = 0x10;
  EXPECT_EQ(launch_error(saxpy_function(m), 2.0f, p, p, 1, 5),
            "launching saxpy in saxpy.kcb: 5 arguments given, the kernel takes 4 (parameter "
            "sizes: 4, 8, 8, 4 bytes)");
}

TEST_F(FakeDriverTest, LaunchWithAWrongSizeNamesTheParameterAndBothSizes) {
  if (!kNewDriver) GTEST_SKIP() << "no cuFuncGetParamInfo in a CUDA 11.8 driver";
  describe_saxpy();
  TestBundle b;
  b.image("sm_90", "cubin saxpy");
  Module m = Module::load_bytes(b.serialize(), "saxpy.kcb");
  Function f = saxpy_function(m);
  CUdeviceptr p = 0x10;
  EXPECT_EQ(launch_error(f, 2.0, p, p, 1).rfind(
                "launching saxpy in saxpy.kcb: parameter 0 is 4 bytes, the argument given is 8 "
                "bytes",
                0),
            0u)
      << launch_error(f, 2.0, p, p, 1);
  EXPECT_NE(launch_error(f, 2.0f, p, p, size_t{1}).find("parameter 3 is 4 bytes, the argument "
                                                       "given is 8 bytes"),
            std::string::npos);
}

TEST_F(FakeDriverTest, LaunchWithAnOverAlignedArgumentIsAnError) {
  if (!kNewDriver) GTEST_SKIP() << "no cuFuncGetParamInfo in a CUDA 11.8 driver";
  // k(int, Pair) with struct Pair { int a, b; }: 8 bytes at offset 4.
  const size_t offsets[] = {0, 4}, sizes[] = {4, 8};
  fake().set_params(offsets, sizes, 2);
  TestBundle b;
  b.image("sm_90", "cubin saxpy");
  Module m = Module::load_bytes(b.serialize(), "saxpy.kcb");
  struct Pair {
    int a, b;
  };
  EXPECT_EQ(launch_error(saxpy_function(m), 1, Pair{2, 3}), "");
  EXPECT_EQ(launch_error(saxpy_function(m), 1, 2.0),
            "launching saxpy in saxpy.kcb: parameter 1 (8 bytes at offset 4) cannot hold the "
            "argument given, 8 bytes aligned to 8: pass the parameter's exact type");
}

TEST_F(FakeDriverTest, ParametersAreReadOnceAtLookUpNotPerLaunch) {
  if (!kNewDriver) GTEST_SKIP() << "no cuFuncGetParamInfo in a CUDA 11.8 driver";
  describe_saxpy();
  TestBundle b;
  b.image("sm_90", "cubin saxpy");
  Module m = Module::load_bytes(b.serialize(), "saxpy.kcb");
  Function f = saxpy_function(m);
  const int after_lookup = fake().param_info_calls();
  CUdeviceptr p = 0x10;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(launch_error(f, 2.0f, p, p, i), "");
  saxpy_function(m);  // looked up again: the module already knows them
  EXPECT_EQ(fake().param_info_calls(), after_lookup);
}

TEST_F(FakeDriverTest, ClustersAndCooperativeLaunchesGoThroughLaunchKernelEx) {
  TestBundle b;
  b.image("sm_90", "cubin saxpy");
  Module m = Module::load_bytes(b.serialize(), "saxpy.kcb");
  LaunchConfig config;
  config.grid = 8;
  config.block = 64;
  config.cluster = {2, 1, 1};
  config.cooperative = true;
  launch(StreamRef::legacy_default(), config, saxpy_function(m), CUdeviceptr{1});
  unsigned got[12];
  fake().last_launch(got);
  EXPECT_EQ(got[7], 1u);
  EXPECT_EQ(got[8], 2u);
  EXPECT_EQ(got[9], 1u);
  EXPECT_EQ(got[11], 1u);
  EXPECT_EQ(fake().last_launch_stream(), CU_STREAM_LEGACY);
}

TEST_F(FakeDriverTest, LaunchFailureNamesTheKernelAndModule) {
  TestBundle b;
  b.image("sm_90", "cubin saxpy");
  Module m = Module::load_bytes(b.serialize(), "saxpy.kcb");
  LaunchConfig config;
  config.block = 2048;
  try {
    launch(StreamRef::legacy_default(), config, saxpy_function(m));
    FAIL() << "expected DriverError";
  } catch (const DriverError& e) {
    EXPECT_NE(std::string(e.what()).find("cuLaunchKernel failed on saxpy in saxpy.kcb"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(FakeDriverTest, IsCompleteMapsNotReadyToFalseAndOtherErrorsToThrows) {
  Stream s = Stream::create();
  Event e = Event::create();
  fake().set_query_result(CUDA_SUCCESS);
  EXPECT_TRUE(s.is_complete());
  EXPECT_TRUE(e.is_complete());
  fake().set_query_result(CUDA_ERROR_NOT_READY);
  EXPECT_FALSE(s.is_complete());
  EXPECT_FALSE(e.is_complete());
  fake().set_query_result(CUDA_ERROR_ILLEGAL_ADDRESS);
  for (int which = 0; which < 2; ++which) {
    try {
      which == 0 ? (void)s.is_complete() : (void)e.is_complete();
      FAIL() << "expected DriverError";
    } catch (const DriverError& error) {
      std::string m = error.what();
      EXPECT_EQ(error.result(), CUDA_ERROR_ILLEGAL_ADDRESS);
      EXPECT_EQ(error.result_name(), "CUDA_ERROR_ILLEGAL_ADDRESS");
      EXPECT_NE(m.find(which == 0 ? "cuStreamQuery failed on stream 0x"
                                  : "cuEventQuery failed on event 0x"),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("an illegal memory access was encountered"), std::string::npos) << m;
      EXPECT_NE(m.find("compute-sanitizer"), std::string::npos) << m;
    }
  }
}

TEST_F(FakeDriverTest, StreamOptionsReachTheDriver) {
  Stream blocking = Stream::create({/*non_blocking=*/false, /*priority=*/-3});
  EXPECT_EQ(blocking.flags(), static_cast<unsigned>(CU_STREAM_DEFAULT));
  EXPECT_EQ(blocking.priority(), -3);
  Stream plain = Stream::create();
  EXPECT_EQ(plain.flags(), static_cast<unsigned>(CU_STREAM_NON_BLOCKING));
  EXPECT_EQ(Stream::priority_range(), std::make_pair(0, -5));
}

TEST_F(FakeDriverTest, StreamsAndEventsAreDestroyedExactlyOnce) {
  int streams = fake().live_streams(), events = fake().live_events();
  {
    Stream a = Stream::create();
    Stream b = std::move(a);
    EXPECT_EQ(a.get(), nullptr);
    Stream c = Stream::create();
    c = std::move(b);
    EXPECT_EQ(fake().live_streams(), streams + 1);
    Event e = Event::create();
    Event f = std::move(e);
    EXPECT_EQ(fake().live_events(), events + 1);
    StreamRef view = c;  // views do not own
    EXPECT_EQ(view, c);
    CUstream raw = Stream::create().release();
    Stream adopted = Stream::adopt(raw);
    EXPECT_EQ(fake().live_streams(), streams + 2);
  }
  EXPECT_EQ(fake().live_streams(), streams);
  EXPECT_EQ(fake().live_events(), events);
}

TEST_F(FakeDriverTest, ElapsedIsInMillisecondsAndAsAChronoDuration) {
  Event start = Event::create(), end = Event::create();
  EXPECT_FLOAT_EQ(elapsed_ms(start, end), 1.5f);
  EXPECT_FLOAT_EQ(elapsed(start, end).count(), 1.5f);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::microseconds>(elapsed(start, end)).count(),
            1500);
  fake().set_query_result(CUDA_ERROR_NOT_READY);
  try {
    elapsed_ms(start, end);
    FAIL() << "expected DriverError";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.result_name(), "CUDA_ERROR_NOT_READY");
  }
}

TEST_F(FakeDriverTest, OccupancyQueriesPassTheirArgumentsThrough) {
  TestBundle b;
  b.image("sm_90", "cubin saxpy");
  Module m = Module::load_bytes(b.serialize(), "saxpy.kcb");
  Occupancy o = saxpy_function(m).occupancy();
  EXPECT_EQ(o.max_active_blocks_per_multiprocessor(256, 0), 8);
  EXPECT_EQ(o.max_active_blocks_per_multiprocessor(128, 57 * 1024), 4);
  EXPECT_EQ(o.available_dynamic_shared_memory_per_block(4, 128), 57u * 1024);
  MaxPotentialBlockSize p = o.max_potential_block_size(0, 0);
  EXPECT_EQ(p.max_block_size, 1024);
  EXPECT_EQ(p.min_grid_size, 132 * 2);
  LaunchConfig config;
  config.grid = 132;
  config.block = 256;
  EXPECT_EQ(o.max_potential_cluster_size(config), 16);
  config.cluster = {2, 1, 1};
  EXPECT_EQ(o.max_active_clusters(config), 66);
  Stream s = Stream::create();
  EXPECT_EQ(o.max_active_clusters(config, s), 66);
  config.cluster = {0, 0, 0};
  try {
    o.max_active_clusters(config);
    FAIL() << "expected DriverError";
  } catch (const DriverError& e) {
    EXPECT_NE(std::string(e.what()).find("cuOccupancyMaxActiveClusters failed on saxpy in"),
              std::string::npos)
        << e.what();
  }
}

size_t smem_per_thread(int block_size) { return static_cast<size_t>(block_size) * 100; }

TEST_F(FakeDriverTest, MaxPotentialBlockSizeTakesAPerBlockSizeSharedMemoryFunction) {
  TestBundle b;
  b.image("sm_90", "cubin saxpy");
  Module m = Module::load_bytes(b.serialize(), "saxpy.kcb");
  Occupancy o = saxpy_function(m).occupancy();
  // A plain function and a lambda with captures give the same answer.
  MaxPotentialBlockSize by_pointer = o.max_potential_block_size(smem_per_thread, 0);
  int calls = 0;
  size_t per_thread = 100;
  MaxPotentialBlockSize by_lambda = o.max_potential_block_size(
      [&](int block_size) {
        ++calls;
        return static_cast<size_t>(block_size) * per_thread;
      },
      0);
  EXPECT_EQ(by_pointer.max_block_size, by_lambda.max_block_size);
  EXPECT_EQ(by_pointer.min_grid_size, by_lambda.min_grid_size);
  EXPECT_EQ(calls, fake().b2d_call_count());
  EXPECT_GT(calls, 1);
  // An exception in the callable comes back out, not through the driver.
  EXPECT_THROW(o.max_potential_block_size([](int) -> size_t { throw std::logic_error("x"); }, 0),
               std::logic_error);
}

TEST_F(FakeDriverTest, RegistryLoadsEachEmbeddedBundleOncePerContextAcrossThreads) {
  static TestBundle b;
  b.image("sm_90", "cubin saxpy registry");
  static const std::string bytes = b.serialize();
  alignas(16) static unsigned char data[4096];
  ASSERT_LT(bytes.size(), sizeof(data));
  std::memcpy(data, bytes.data(), bytes.size());
  bundle::register_embedded({"kcache_fake_registry", data, bytes.size()});

  size_t before = loaded_module_count();
  std::vector<const Module*> seen(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&, i] { seen[i] = &embedded_module("kcache_fake_registry"); });
  }
  for (std::thread& t : threads) t.join();
  for (const Module* m : seen) EXPECT_EQ(m, seen[0]);
  EXPECT_EQ(loaded_module_count(), before + 1);
  EXPECT_EQ(seen[0]->name(), "embedded bundle kcache_fake_registry");

  // load_all loads what is not loaded yet and nothing twice.
  size_t linked = bundle::embedded_bundles().size();
  EXPECT_EQ(load_all(), linked);
  EXPECT_EQ(loaded_module_count(), before + linked);
  EXPECT_EQ(load_all(), linked);
  EXPECT_EQ(loaded_module_count(), before + linked);
  EXPECT_EQ(&embedded_module("kcache_fake_registry"), seen[0]);
}

TEST_F(FakeDriverTest, AFailedRegistryLoadIsRetriedNextTime) {
  static std::string bad = [] {
    TestBundle b;
    b.image("sm_90", "cubin saxpy");
    return b.serialize();
  }();
  alignas(16) static unsigned char data[4096];
  std::memcpy(data, bad.data(), bad.size());
  bundle::register_embedded({"kcache_fake_retry", data, bad.size()});
  fake().set_capability(7, 5);  // nothing in the bundle runs
  EXPECT_THROW(embedded_module("kcache_fake_retry"), NotFound);
  fake().set_capability(9, 0);
  EXPECT_EQ(embedded_module("kcache_fake_retry").image_arch(), "sm_90");
}

}  // namespace
}  // namespace kcache::runtime
