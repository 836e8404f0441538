// kcache_jit on a real GPU: kernels specialised at run time (a macro, a
// template argument) compile for this device, launch and match the CPU; the
// next load (a new Jit, as a new process) is a store hit; a shipped bundle
// with no image for this GPU falls back to compiling the source.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "bundle/bundle.h"
#include "common/file_system.h"
#include "runtime/device.h"
#include "runtime/jit/jit.h"
#include "runtime/module.h"
#include "runtime/stream.h"
#include "tests/runtime/gpu_test_util.h"
#include "tests/runtime/jit/test_kernels.h"
#include "tests/testing/temp_dir.h"

namespace kcache::runtime::jit {
namespace {

using runtime::testing::DeviceBuffer;

class GpuJitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KCACHE_REQUIRE_GPU();
    Device(0).set_current();
  }

  std::unique_ptr<Jit> new_jit() {  // a fresh Storage and compiler, as a new process has
    Options o;
    cache::StorageOptions storage;
    storage.local_dir = dir_.path() + "/store";
    o.storage = storage;
    return std::make_unique<Jit>(o);
  }
  static int64_t nvrtc_invocations(Jit& jit) {
    jit.storage().local()->flush();
    return jit.storage().local()->stats().counter("nvrtc_invocations");
  }

  kcache::testing::TempDir dir_;
};

void check_scale(const Module& m, float factor, int offset) {
  const int n = 100000;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000);
  DeviceBuffer dx = DeviceBuffer::from(x);
  LaunchConfig config;
  config.block = 256;
  config.grid = (n + 255) / 256;
  launch(StreamRef::legacy_default(), config, m.function("scale<float>"), dx.get(), factor, n);
  std::vector<float> got = dx.to_vector<float>(n);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], x[i] * factor + static_cast<float>(offset)) << "at " << i;
  }
}

TEST_F(GpuJitTest, AKernelSpecialisedAtRunTimeIsCorrectAndTheNextLoadIsAStoreHit) {
  // A value only known at run time, different on different GPUs.
  int offset = Device::current().multiprocessor_count() % 17 + 1;
  Source s;
  s.name = "gpu_jit_test/scale.cu";
  s.text = testing::kScaleSource;
  s.defines = {"OFFSET=" + std::to_string(offset)};
  s.name_expressions = {"scale<float>"};

  std::unique_ptr<Jit> jit = new_jit();
  Compiled first = jit->compile(s);
  EXPECT_FALSE(first.hit);
  EXPECT_EQ(first.entry.arch(), Device::current().arch().name());
  Module m = jit->load(s);  // the same process: a hit already
  std::printf("offset %d: %s, image %s\n", offset, m.name().c_str(), m.image_arch().c_str());
  check_scale(m, 1.5f, offset);

  std::unique_ptr<Jit> next = new_jit();
  Module again = next->load(s);
  EXPECT_EQ(again.name(),
            "gpu_jit_test/scale.cu (JIT " + Device::current().arch().name() + ", store hit)");
  EXPECT_EQ(nvrtc_invocations(*next), 1);
  check_scale(again, -2.0f, offset);
}

TEST_F(GpuJitTest, CubBlockReduceWithABlockSizeChosenAtRunTime) {
  // 128 or 256 threads, from the device: a template argument known at run time.
  int block = Device::current().multiprocessor_count() % 2 ? 128 : 256;
  std::string expression = "block_sum<" + std::to_string(block) + ">";
  Source s;
  s.name = "gpu_jit_test/block_sum.cu";
  s.text = testing::kBlockSumSource;
  s.name_expressions = {expression};
  std::unique_ptr<Jit> jit = new_jit();
  Module m = jit->load(s);
  std::printf("%s: %s\n", expression.c_str(), m.name().c_str());

  const int blocks = 64, n = blocks * block;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = (i * 7919) % 1000 - 500;
  DeviceBuffer din = DeviceBuffer::from(in), dout(blocks * sizeof(int));
  LaunchConfig config;
  config.grid = blocks;
  config.block = static_cast<unsigned>(block);
  launch(StreamRef::legacy_default(), config, m.function(expression), din.get(), dout.get());
  std::vector<int> got = dout.to_vector<int>(blocks);
  for (int b = 0; b < blocks; ++b) {
    int want = 0;
    for (int i = 0; i < block; ++i) want += in[b * block + i];
    EXPECT_EQ(got[b], want) << "block " << b;
  }
  EXPECT_EQ(new_jit()->load(s).name(),
            "gpu_jit_test/block_sum.cu (JIT " + Device::current().arch().name() + ", store hit)");
}

TEST_F(GpuJitTest, ABundleWithNoImageForThisGpuFallsBackToCompilingTheSource) {
  if (Device::current().arch().major == 8) GTEST_SKIP() << "the sm_80 cubin would match";
  std::string bytes = read_file(runtime::testing::fixture("sm80_only.kcb")).value();
  Source s;
  s.name = "tests/runtime/kernels/saxpy.cu";
  s.path = "tests/runtime/kernels/saxpy.cu";
  std::unique_ptr<Jit> jit = new_jit();
  Module m = load_or_compile(bundle::parse(bytes, "sm80_only.kcb"), "sm80_only.kcb", s, jit.get());
  EXPECT_EQ(m.image_arch(), Device::current().arch().name());

  const int n = 4096;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i), y[i] = 1.0f;
  DeviceBuffer dx = DeviceBuffer::from(x), dy = DeviceBuffer::from(y);
  LaunchConfig config;
  config.block = 128;
  config.grid = n / 128;
  launch(StreamRef::legacy_default(), config, m.function("saxpy"), 2.0f, dx.get(), dy.get(), n);
  std::vector<float> got = dy.to_vector<float>(n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], 2.0f * x[i] + 1.0f) << "at " << i;
}

}  // namespace
}  // namespace kcache::runtime::jit
