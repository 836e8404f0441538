// `kcache bundle`, run as a user runs it.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "bundle/bundle.h"
#include "common/lean_record.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cli {
namespace {

using kcache::testing::run_command;
using kcache::testing::TempDir;

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

class BundleCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Bundle fields are views: the strings they view must outlive serialize().
    const std::string key_a(32, 'a'), key_b(32, 'b');
    bundle::Bundle b;
    b.source_name = "scale.cu";
    b.compiler_identity = "nvrtc test";
    b.images.push_back({bundle::ImageKind::cubin, "sm_90", key_a, "CUBIN",
                        LeanRecord{LeanRecord::kAsked | LeanRecord::kLean, 154272, 1001}});
    b.images.push_back(
        {bundle::ImageKind::ptx, "compute_90", key_b, ".version", LeanRecord{LeanRecord::kAsked}});
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
  EXPECT_EQ(j["format_version"], bundle::kFormatVersion);
  EXPECT_EQ(j["images"][0]["lean"]["state"], "lean");
  EXPECT_EQ(j["images"][0]["lean"]["bytes_removed"], 154272);
  EXPECT_EQ(j["images"][0]["lean"]["variables_removed"], 1001);
  EXPECT_EQ(j["images"][1]["lean"]["state"], "nothing_to_remove");
  EXPECT_EQ(j["images"][1]["lean"]["bytes_removed"], 0);
}

// Issue 10: per image, the bytes and variables the lean pass removed, or why
// the image is NVRTC's.
TEST_F(BundleCommandTest, ShowsWhatTheLeanPassDidPerImage) {
  auto r = run_command({kcache::testing::kcache_binary(), "bundle", dir_ / "k.kcb"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line, cubin, ptx;
  while (std::getline(lines, line)) {
    if (line.find("sm_90 ") != std::string::npos) cubin = line;
    if (line.find("compute_90 ") != std::string::npos) ptx = line;
  }
  EXPECT_NE(cubin.find("lean: -154,272 B, -1,001 variables"), std::string::npos) << r.out;
  EXPECT_NE(ptx.find("lean: nothing to remove"), std::string::npos) << r.out;

  const std::string key(32, 'c');
  bundle::Bundle b;
  b.images.push_back({bundle::ImageKind::cubin, "sm_80", key, "A", LeanRecord{}});
  b.images.push_back({bundle::ImageKind::cubin, "sm_90", key, "B",
                      LeanRecord{LeanRecord::kAsked | LeanRecord::kDeclined}});
  kcache::testing::write_file(dir_ / "nvrtc.kcb", bundle::serialize(b));
  r = run_command({kcache::testing::kcache_binary(), "bundle", dir_ / "nvrtc.kcb"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("sm_80 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lean: off (NVRTC's bytes)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lean: not applied (NVRTC's bytes)"), std::string::npos) << r.out;
  r = run_command(
      {kcache::testing::kcache_binary(), "--format", "json", "bundle", dir_ / "nvrtc.kcb"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["images"][0]["lean"]["state"], "off");
  EXPECT_EQ(j["images"][1]["lean"]["state"], "not_applied");
}

// A bundle from before the lean record (format 1, embedded in binaries built
// then) still shows, its lean state unknown.
TEST_F(BundleCommandTest, Format1BundleShowsTheLeanStateAsUnknown) {
  const std::string v1 = "tests/bundle/golden/v1.kcb";
  auto r = run_command({kcache::testing::kcache_binary(), "bundle", v1});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(format 1)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lean: unknown (format 1)"), std::string::npos) << r.out;
  r = run_command({kcache::testing::kcache_binary(), "--format", "json", "bundle", v1});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["format_version"], 1);
  EXPECT_EQ(j["images"][0]["lean"]["state"], "unknown");
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

// The reported bug, reproduced as reported: a bundle someone else built, with
// valid (recomputed) checksums and "../../pwned" as an arch, made
// `kcache bundle evil.kcb --extract out/` write two folders above out/.
TEST_F(BundleCommandTest, ExtractNeverWritesOutsideItsFolder) {
  const std::string out = dir_ / "a/b/out";
  for (const char* arch : {"../../pwned", "../pwned", "/tmp/pwned", "sm_90/../../../pwned"}) {
    bundle::Bundle b;
    b.images.push_back({bundle::ImageKind::cubin, arch, "", "EVIL"});
    const std::string bytes = bundle::serialize(b);  // checksums recomputed, as an attacker would
    kcache::testing::write_file(dir_ / "evil.kcb", bytes);
    auto r = run_command(
        {kcache::testing::kcache_binary(), "bundle", dir_ / "evil.kcb", "--extract", out});
    EXPECT_EQ(r.exit_code, 1) << arch;
    EXPECT_NE(r.err.find("is not an arch"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("\n"), r.err.size() - 1) << "one line: " << r.err;
    for (const char* leak : {"a/pwned.cubin", "pwned.cubin", "a/b/pwned.cubin"}) {
      EXPECT_FALSE(exists(dir_ / leak)) << arch << " wrote " << leak;
    }
    EXPECT_FALSE(exists(out)) << "nothing is created for a bad bundle";
  }
}

TEST_F(BundleCommandTest, ExtractReplacesASymlinkInsteadOfWritingThroughIt) {
  const std::string out = dir_ / "out";
  ASSERT_EQ(::mkdir(out.c_str(), 0755), 0);
  kcache::testing::write_file(dir_ / "victim", "precious");
  ASSERT_EQ(::symlink((dir_ / "victim").c_str(), (out + "/sm_90.cubin").c_str()), 0);
  auto r =
      run_command({kcache::testing::kcache_binary(), "bundle", dir_ / "k.kcb", "--extract", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(kcache::testing::read_file_or_die(dir_ / "victim"), "precious");
  struct stat st {};
  ASSERT_EQ(::lstat((out + "/sm_90.cubin").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(kcache::testing::read_file_or_die(out + "/sm_90.cubin"), "CUBIN");
}

TEST_F(BundleCommandTest, ExtractOfAValidBundleWritesExactlyItsImages) {
  const std::string out = dir_ / "out";
  auto r =
      run_command({kcache::testing::kcache_binary(), "bundle", dir_ / "k.kcb", "--extract", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("-> " + out + "/sm_90.cubin"), std::string::npos) << r.out;
  std::vector<std::string> names;
  for (DIR* d = ::opendir(out.c_str()); d != nullptr;) {
    dirent* e = ::readdir(d);
    if (e == nullptr) {
      ::closedir(d);
      break;
    }
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"compute_90.ptx", "sm_90.cubin"}));
}

// Bundles cuda_kernel compiled (tests/runtime, tests/cli:several): their
// kernels, read from the PTX, as the generated headers declare them.
nlohmann::json kernels_of(const std::string& bundle) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  std::string path = std::string(srcdir ? srcdir : ".") + "/" + (workspace ? workspace : "") + "/" +
                     bundle;
  // --format after the verb, as `kcache bundle --format json X.kcb`.
  auto r = run_command({kcache::testing::kcache_binary(), "bundle", "--format", "json", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  return j.contains("kernels_unknown") ? nlohmann::json{{"unknown", j["kernels_unknown"]}}
                                       : j["kernels"];
}

TEST_F(BundleCommandTest, JsonListsTheKernelsOfASingleSourceBundle) {
  EXPECT_EQ(kernels_of("tests/runtime/saxpy.kcb"), nlohmann::json::parse(R"([
    {"name": "saxpy", "param_sizes": [4, 8, 8, 4]},
    {"name": "spin", "param_sizes": [8, 8]}
  ])"));
}

TEST_F(BundleCommandTest, JsonListsTheKernelsOfEachBundleOfSeveralSources) {
  EXPECT_EQ(kernels_of("tests/cli/several_first.kcb"), nlohmann::json::parse(R"([
    {"name": "first", "param_sizes": [16, 8]}
  ])"));
  EXPECT_EQ(kernels_of("tests/cli/several_second.kcb"), nlohmann::json::parse(R"([
    {"name": "second", "param_sizes": [8, 2, 8]},
    {"name": "nothing", "param_sizes": []}
  ])"));
}

TEST_F(BundleCommandTest, JsonNamesKernelsOfNameExpressionsByTheirLoweredNames) {
  nlohmann::json kernels = kernels_of("tests/runtime/templated.kcb");
  ASSERT_TRUE(kernels.is_array()) << kernels;
  std::map<std::string, nlohmann::json> by_expression;
  for (const auto& k : kernels) by_expression[k.value("name_expression", "")] = k;
  ASSERT_EQ(by_expression.size(), 3u) << kernels;
  EXPECT_EQ(by_expression["scale<float>"]["name"], "_Z5scaleIfEvPT_S0_i");
  EXPECT_EQ(by_expression["scale<float>"]["param_sizes"], nlohmann::json::parse("[8, 4, 4]"));
  EXPECT_EQ(by_expression["scale<double>"]["param_sizes"], nlohmann::json::parse("[8, 8, 4]"));
  EXPECT_EQ(by_expression["scale<int>"]["name"], "_Z5scaleIiEvPT_S0_i");
}

TEST_F(BundleCommandTest, WithoutPtxTheKernelsAreNotListedAndItSaysWhy) {
  nlohmann::json kernels = kernels_of("tests/runtime/sm80_only.kcb");
  EXPECT_NE(kernels.value("unknown", "").find("no PTX"), std::string::npos) << kernels;
}

}  // namespace
}  // namespace kcache::cli
