// Loading by store key (runtime/store_loader.h) against a real store in a
// temporary folder and the fake driver: which entry is chosen for the device,
// lowered names carried by the entry, the remote tier, and the errors.
#include "runtime/store_loader.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bundle/bundle.h"
#include "cache/format/entry.h"
#include "cache/remote/remote.h"
#include "cache/storage.h"
#include "cache/local/store.h"
#include "common/error.h"
#include "common/hash.h"
#include "runtime/module.h"
#include "tests/runtime/fake_cuda/fake_cuda_control.h"
#include "tests/testing/temp_dir.h"

namespace kcache::runtime {
namespace {

using testing::fake_cuda;
using testing::last_image_starts_with;

// A remote kept in memory, as the remote tier's own tests do.
class MemoryBackend : public cache::RemoteBackend {
 public:
  std::optional<std::string> get(const Hash128& key) override {
    auto it = objects.find(key.hex());
    if (it == objects.end()) return std::nullopt;
    return it->second;
  }
  bool exists(const Hash128& key) override { return objects.count(key.hex()) > 0; }
  void put(const Hash128& key, std::string_view object) override {
    objects[key.hex()] = std::string(object);
  }
  bool remove(const Hash128& key) override { return objects.erase(key.hex()) > 0; }
  std::string url_of(const Hash128& key) const override { return "memory://" + key.hex(); }
  std::map<std::string, std::string> objects;
};

Hash128 key_of(const std::string& name) { return xxh3_128(name); }

// An entry whose "image" is text naming its symbols: all the fake looks at.
cache::Entry entry(const std::string& arch, const std::string& payload,
                   std::vector<cache::LoweredName> names = {}) {
  cache::TargetKind kind =
      arch.rfind("compute_", 0) == 0 ? cache::TargetKind::ptx : cache::TargetKind::cubin;
  return cache::Entry(key_of(arch + payload), kind, arch, 10, 0, payload, std::move(names));
}

class StoreLoaderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setenv("KCACHE_LIBCUDA", testing::kFakeCuda, 1); }

  void SetUp() override {
    fake_cuda().set_capability(9, 0);
    cache::StorageOptions options;
    options.local_dir = dir_.path() + "/store";
    storage_ = std::make_unique<cache::Storage>(options);
    ASSERT_NE(storage_->local(), nullptr);
  }

  // Stores each entry and returns their keys, in order.
  std::vector<Hash128> put(const std::vector<cache::Entry>& entries) {
    std::vector<Hash128> keys;
    for (const cache::Entry& e : entries) {
      storage_->put(e);
      keys.push_back(e.key());
    }
    return keys;
  }

  kcache::testing::TempDir dir_;
  std::unique_ptr<cache::Storage> storage_;
};

TEST_F(StoreLoaderTest, LoadsTheEntryThatSuitsTheDeviceAsABundleWould) {
  std::vector<Hash128> keys =
      put({entry("sm_80", "cubin sm_80 saxpy"), entry("sm_90", "cubin sm_90 saxpy"),
           entry("compute_90", "ptx compute_90 saxpy")});
  Module m = load_from_store(*storage_, keys, "saxpy.cu");
  EXPECT_TRUE(last_image_starts_with("cubin sm_90 saxpy")) << fake_cuda().last_image();
  EXPECT_EQ(m.image_arch(), "sm_90");
  EXPECT_EQ(m.image_kind(), bundle::ImageKind::cubin);
  EXPECT_EQ(m.name(), "saxpy.cu (store entry " + keys[1].hex() + ")");
  m.function("saxpy");

  fake_cuda().set_capability(8, 6);
  EXPECT_EQ(load_from_store(*storage_, keys, "saxpy.cu").image_arch(), "sm_80");
  fake_cuda().set_capability(12, 0);
  EXPECT_EQ(load_from_store(*storage_, keys, "saxpy.cu").image_arch(), "compute_90");
}

TEST_F(StoreLoaderTest, PickFromStoreSaysHowTheImageMatched) {
  std::vector<Hash128> keys =
      put({entry("sm_80", "cubin sm_80 k"), entry("compute_80", "ptx compute_80 k")});
  StoreImage exact = pick_from_store(*storage_, keys, DeviceArch{8, 0}, "k.cu");
  EXPECT_EQ(exact.entry.arch(), "sm_80");
  EXPECT_EQ(exact.match, Match::exact_cubin);
  EXPECT_EQ(pick_from_store(*storage_, keys, DeviceArch{8, 9}, "k.cu").match,
            Match::compatible_cubin);
  StoreImage ptx = pick_from_store(*storage_, keys, DeviceArch{9, 0}, "k.cu");
  EXPECT_EQ(ptx.entry.arch(), "compute_80");
  EXPECT_EQ(ptx.match, Match::ptx);
}

TEST_F(StoreLoaderTest, NameExpressionsResolveThroughTheEntrysLoweredNames) {
  std::vector<Hash128> keys =
      put({entry("sm_90", "cubin _Z5scaleIfEvPT_S0_i", {{"scale<float>", "_Z5scaleIfEvPT_S0_i"}})});
  Module m = load_from_store(*storage_, keys, "templated.cu");
  EXPECT_EQ(m.lowered("scale<float>"), "_Z5scaleIfEvPT_S0_i");
  EXPECT_EQ(m.function("scale<float>").name(), "scale<float>");
}

TEST_F(StoreLoaderTest, KeysMissingFromTheStoreAreSkipped) {
  std::vector<Hash128> keys = put({entry("sm_90", "cubin sm_90 saxpy")});
  keys.insert(keys.begin(), key_of("never stored"));
  EXPECT_EQ(load_from_store(*storage_, keys, "saxpy.cu").image_arch(), "sm_90");
}

TEST_F(StoreLoaderTest, NoKeyInTheStoreListsTheKeysAndTheStore) {
  std::vector<Hash128> keys = {key_of("a"), key_of("b")};
  try {
    load_from_store(*storage_, keys, "saxpy.cu");
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("none of the 2 store entries of saxpy.cu"), std::string::npos) << m;
    EXPECT_NE(m.find(keys[0].hex()), std::string::npos) << m;
    EXPECT_NE(m.find(keys[1].hex()), std::string::npos) << m;
    EXPECT_NE(m.find(dir_.path() + "/store"), std::string::npos) << m;
    EXPECT_NE(m.find("no remote"), std::string::npos) << m;
  }
}

TEST_F(StoreLoaderTest, NothingForTheDeviceNamesItsArchAndWhatWasFound) {
  fake_cuda().set_capability(7, 5);
  std::vector<Hash128> keys = put({entry("sm_90", "cubin sm_90 saxpy")});
  try {
    load_from_store(*storage_, keys, "saxpy.cu");
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("sm_75"), std::string::npos) << m;
    EXPECT_NE(m.find("cubin sm_90"), std::string::npos) << m;
    EXPECT_NE(m.find("saxpy.cu"), std::string::npos) << m;
  }
}

TEST_F(StoreLoaderTest, AnEntryOnlyInTheRemoteIsFetchedAndKeptLocally) {
  auto backend = std::make_unique<MemoryBackend>();
  MemoryBackend* objects = backend.get();
  cache::RemoteOptions remote_options;
  remote_options.url = "http://cache.example";
  auto remote = std::make_unique<cache::Remote>(remote_options, std::move(backend), "");
  cache::Entry only_remote = entry("sm_90", "cubin sm_90 from the remote saxpy");
  remote->put(only_remote);
  ASSERT_EQ(objects->objects.size(), 1u);

  cache::StorageOptions options;
  options.local_dir = dir_.path() + "/fresh";
  cache::Storage storage(options, std::move(remote));
  Module m = load_from_store(storage, {only_remote.key()}, "saxpy.cu");
  EXPECT_TRUE(last_image_starts_with("cubin sm_90 from the remote")) << fake_cuda().last_image();
  ASSERT_NE(storage.local(), nullptr);
  EXPECT_TRUE(storage.local()->info(only_remote.key()).has_value())
      << "a remote hit is written to the local store";
}

TEST_F(StoreLoaderTest, BundleKeysAreTheKeysOfItsImages) {
  bundle::Bundle b;
  std::string k1 = key_of("1").hex(), k2 = key_of("2").hex();
  b.images.push_back({bundle::ImageKind::cubin, "sm_90", k1, "x"});
  b.images.push_back({bundle::ImageKind::ptx, "compute_90", k2, "y"});
  std::vector<Hash128> keys = bundle_keys(b, "saxpy.kcb");
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0].hex(), k1);
  EXPECT_EQ(keys[1].hex(), k2);

  b.images.push_back({bundle::ImageKind::cubin, "sm_80", "", "z"});
  try {
    bundle_keys(b, "saxpy.kcb");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("cubin sm_80 image of saxpy.kcb has no store key"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace kcache::runtime
