// Loading by store key on a real GPU: the images of the saxpy and templated
// fixtures, stored under the keys their bundles list, are loaded by key, and
// the kernels launch and match the CPU (lowered names come from the entries).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "bundle/bundle.h"
#include "cache/format/entry.h"
#include "cache/storage.h"
#include "common/file_system.h"
#include "runtime/device.h"
#include "runtime/image_selection.h"
#include "runtime/module.h"
#include "runtime/store_loader.h"
#include "runtime/stream.h"
#include "tests/runtime/gpu_test_util.h"
#include "tests/testing/temp_dir.h"

namespace kcache::runtime {
namespace {

using testing::DeviceBuffer;
using testing::fixture;

class GpuStoreLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KCACHE_REQUIRE_GPU();
    Device(0).set_current();
    cache::StorageOptions options;
    options.local_dir = dir_.path() + "/store";
    storage_ = std::make_unique<cache::Storage>(options);
  }

  // Puts every image of the fixture `kcb` into the store, as `kcache compile`
  // with a store would have, and returns the bundle's keys.
  std::vector<Hash128> store_fixture(const std::string& kcb) {
    bytes_.push_back(read_file(fixture(kcb)).value());
    bundle::Bundle b = bundle::parse(bytes_.back(), kcb);
    std::vector<cache::LoweredName> names;
    for (const bundle::LoweredName& n : b.lowered_names) {
      names.push_back({std::string(n.name_expression), std::string(n.lowered_name)});
    }
    std::vector<Hash128> keys = bundle_keys(b, kcb);
    for (size_t i = 0; i < keys.size(); ++i) {
      const bundle::Image& image = b.images[i];
      storage_->put(cache::Entry(
          keys[i],
          image.kind == bundle::ImageKind::ptx ? cache::TargetKind::ptx : cache::TargetKind::cubin,
          std::string(image.arch), 0, 0, image.data, names));
    }
    expected_arch_ = b.images[select_image(b, Device::current().arch(), kcb).index].arch;
    return keys;
  }

  kcache::testing::TempDir dir_;
  std::unique_ptr<cache::Storage> storage_;
  std::vector<std::string> bytes_;
  std::string expected_arch_;
};

TEST_F(GpuStoreLoaderTest, SaxpyLoadedByKeyPicksTheBundlesImageAndMatchesTheCpu) {
  std::vector<Hash128> keys = store_fixture("saxpy.kcb");
  Module m = load_from_store(*storage_, keys, "saxpy.cu");
  EXPECT_EQ(m.image_arch(), expected_arch_);
  std::printf("%s: image %s\n", m.name().c_str(), m.image_arch().c_str());

  const int n = 1 << 16;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 100), y[i] = 0.5f;
  DeviceBuffer dx = DeviceBuffer::from(x), dy = DeviceBuffer::from(y);
  LaunchConfig config;
  config.block = 256;
  config.grid = n / 256;
  launch(StreamRef::legacy_default(), config, m.function("saxpy"), 3.0f, dx.get(), dy.get(), n);
  std::vector<float> got = dy.to_vector<float>(n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], 3.0f * x[i] + 0.5f) << "at " << i;
}

TEST_F(GpuStoreLoaderTest, TemplatedKernelsResolveThroughTheEntrysLoweredNames) {
  std::vector<Hash128> keys = store_fixture("templated.kcb");
  Module m = load_from_store(*storage_, keys, "templated.cu");
  EXPECT_EQ(m.lowered("scale<int>"), "_Z5scaleIiEvPT_S0_i");
  const int n = 1000;
  std::vector<int> x(n);
  for (int i = 0; i < n; ++i) x[i] = i;
  DeviceBuffer dx = DeviceBuffer::from(x);
  LaunchConfig config;
  config.block = 128;
  config.grid = (n + 127) / 128;
  launch(StreamRef::legacy_default(), config, m.function("scale<int>"), dx.get(), 7, n);
  std::vector<int> got = dx.to_vector<int>(n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], 7 * i) << "at " << i;
}

}  // namespace
}  // namespace kcache::runtime
