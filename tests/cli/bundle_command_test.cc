// `kcache bundle`, run as a user runs it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bundle/bundle.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cli {
namespace {

using kcache::testing::run_command;
using kcache::testing::TempDir;

class BundleCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Bundle fields are views: the strings they view must outlive serialize().
    const std::string key_a(32, 'a'), key_b(32, 'b');
    bundle::Bundle b;
    b.source_name = "scale.cu";
    b.compiler_identity = "nvrtc test";
    b.images.push_back({bundle::ImageKind::cubin, "sm_90", key_a, "CUBIN"});
    b.images.push_back({bundle::ImageKind::ptx, "compute_90", key_b, ".version"});
    b.lowered_names.push_back({"scale<float>", "_Z5scaleIfEvPT_"});
    kcache::testing::write_file(dir_ / "k.kcb", bundle::serialize(b));
  }
  TempDir dir_;
};

TEST_F(BundleCommandTest, ListsImagesAndNamesAndExtractsImages) {
  auto r = run_command(
      {kcache::testing::kcache_binary(), "bundle", dir_ / "k.kcb", "--extract", dir_ / "out"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Source:   scale.cu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cubin  sm_90"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("scale<float> = _Z5scaleIfEvPT_"), std::string::npos) << r.out;
  EXPECT_EQ(kcache::testing::read_file_or_die(dir_ / "out/sm_90.cubin"), "CUBIN");
  EXPECT_EQ(kcache::testing::read_file_or_die(dir_ / "out/compute_90.ptx"), ".version");
}

TEST_F(BundleCommandTest, JsonOutput) {
  auto r =
      run_command({kcache::testing::kcache_binary(), "--format", "json", "bundle", dir_ / "k.kcb"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["images"].size(), 2u);
  EXPECT_EQ(j["lowered_names"]["scale<float>"], "_Z5scaleIfEvPT_");
}

TEST_F(BundleCommandTest, DamagedBundleFailsWithOneLineNamingTheFile) {
  std::string bytes = kcache::testing::read_file_or_die(dir_ / "k.kcb");
  bytes[bytes.size() / 2] ^= 1;
  kcache::testing::write_file(dir_ / "bad.kcb", bytes);
  auto r = run_command({kcache::testing::kcache_binary(), "bundle", dir_ / "bad.kcb"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("kcache bundle: " + (dir_ / "bad.kcb") + " is corrupt"), std::string::npos)
      << r.err;
}

TEST_F(BundleCommandTest, MissingBundleIsNotFound) {
  auto r = run_command({kcache::testing::kcache_binary(), "bundle", dir_ / "none.kcb"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kcache::cli
