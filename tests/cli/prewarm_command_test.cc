// `kcache prewarm` over a folder and over a manifest: plain progress lines
// when stderr is not a terminal, a summary, failures reported and counted.
#include <gtest/gtest.h>

#include "cache/local/store.h"
#include "common/file_system.h"
#include "tests/compiler/test_files.h"
#include "tests/testing/run_command.h"

namespace kcache::cli {
namespace {

using compiler::testing::test_dir;
using compiler::testing::write;
using kcache::testing::CommandResult;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string tiny_kernel(const std::string& name) {
  return "extern \"C\" __global__ void " + name + "(int* p) { *p = KCACHE_VALUE; }\n";
}

class PrewarmCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_dir();
    write(dir_, "kernels/a.cu", tiny_kernel("a"));
    write(dir_, "kernels/sub/b.cu", tiny_kernel("b"));
    write(dir_, "kernels/not_a_kernel.txt", "ignored");
  }

  CommandResult kcache(std::vector<std::string> args) {
    // Relative paths, as in a workspace root: prewarm takes them as given.
    compiler::testing::ScopedCwd cwd(dir_);
    args.insert(args.begin(), {kcache::testing::kcache_binary(), "--dir", dir_ + "/store"});
    return kcache::testing::run_command(args);
  }

  int64_t counter(const std::string& name) {
    return cache::Store::open(dir_ + "/store")->stats().counter(name);
  }

  std::string dir_;
};

TEST_F(PrewarmCommandTest, FolderCompilesEveryKernelThenEveryOneHits) {
  CommandResult first =
      kcache({"prewarm", "kernels", "--arch", "sm_80,sm_90", "-D", "KCACHE_VALUE=1"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(contains(first.err, "] miss kernels/a.cu (2 of 2 targets compiled")) << first.err;
  EXPECT_TRUE(contains(first.err, "] miss kernels/sub/b.cu")) << first.err;
  EXPECT_TRUE(contains(first.err, "kcache prewarm: 2 kernels in ")) << first.err;
  EXPECT_TRUE(contains(first.err, ": 0 hits, 2 misses; targets: 0 hits, 4 compiled")) << first.err;
  EXPECT_FALSE(contains(first.err, "\r")) << "no progress bar when stderr is not a terminal";
  EXPECT_EQ(counter("nvrtc_invocations"), 4);

  CommandResult second =
      kcache({"prewarm", "kernels", "--arch", "sm_80,sm_90", "-D", "KCACHE_VALUE=1"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_TRUE(contains(second.err, "] hit  kernels/a.cu")) << second.err;
  EXPECT_TRUE(contains(second.err, ": 2 hits, 0 misses; targets: 4 hits, 0 compiled"))
      << second.err;
  EXPECT_TRUE(contains(second.err, "compile time saved by hits: ")) << second.err;
  EXPECT_EQ(counter("nvrtc_invocations"), 4);

  // What prewarm stored is what `kcache compile` then finds.
  CommandResult compile = kcache({"--format", "json", "compile", "kernels/a.cu", "--arch", "sm_90",
                                  "-D", "KCACHE_VALUE=1", "-o", "a.kcb"});
  ASSERT_EQ(compile.exit_code, 0) << compile.err;
  EXPECT_TRUE(contains(compile.out, "\"hits\": 1")) << compile.out;
}

// Kernels with the same text and a header of the same name but other bytes
// in each folder share a precompiled header's source prefix: NVRTC checks
// the prefix and options, not the in-memory headers, so a PCH made for one
// must not be used for the others (each result equals a --no-store compile).
TEST_F(PrewarmCommandTest, APchIsNotReusedAcrossHeadersOfTheSameNameWithOtherBytes) {
  const std::string source =
      "#include \"config.h\"\n#include <cuda/std/limits>\n"
      "extern \"C\" __global__ void k(int* o) { *o = VAL; }\n";
  for (const char* d : {"a", "b", "c"}) {
    write(dir_, std::string("pw/") + d + "/k.cu", source);
    write(dir_, std::string("pw/") + d + "/config.h",
          std::string("#define VAL ") + std::to_string(10 * (d[0] - 'a' + 1)) + "\n");
  }
  CommandResult warm = kcache({"prewarm", "pw", "--ptx", "compute_80", "-j", "1"});
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  for (const char* d : {"a", "b", "c"}) {
    const std::string k = std::string("pw/") + d + "/k.cu";
    CommandResult hit = kcache({"compile", k, "--ptx", "compute_80", "-o", "hit.kcb"});
    CommandResult fresh =
        kcache({"compile", k, "--ptx", "compute_80", "--no-store", "-o", "fresh.kcb"});
    ASSERT_EQ(hit.exit_code, 0) << hit.err;
    ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
    EXPECT_EQ(FileSystem::real().read_file(dir_ + "/hit.kcb"),
              FileSystem::real().read_file(dir_ + "/fresh.kcb"))
        << k << ": prewarm stored another folder's config.h";
  }
}

// What a PCH froze from its maker must match where it is used (issue 27):
// __BASE_FILE__ in a header of the prefix names the maker's source, so two
// sources sharing the prefix must not share the PCH; each entry names its
// own file, equal to a --no-store compile (which uses no PCH).
TEST_F(PrewarmCommandTest, APchThatFrozeItsMakersBaseFileIsNotUsedForAnotherSource) {
  write(dir_, "pw/base.h",
        "#pragma once\n#include <cuda/std/limits>\n__device__ char base_file[] = __BASE_FILE__;\n");
  const std::string source =
      "#include \"base.h\"\n"
      "extern \"C\" __global__ void k(char* o) { o[0] = base_file[0]; }\n";
  const char* const names[] = {"first.cu", "second.cu", "third.cu"};
  for (const char* n : names) write(dir_, std::string("pw/") + n, source);
  CommandResult warm = kcache({"prewarm", "pw", "--ptx", "compute_80", "-j", "1"});
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  for (const char* n : names) {
    const std::string k = std::string("pw/") + n;
    CommandResult hit = kcache({"compile", k, "--ptx", "compute_80", "-o", "hit.kcb"});
    CommandResult fresh =
        kcache({"compile", k, "--ptx", "compute_80", "--no-store", "-o", "fresh.kcb"});
    ASSERT_EQ(hit.exit_code, 0) << hit.err;
    ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
    EXPECT_EQ(FileSystem::real().read_file(dir_ + "/hit.kcb"),
              FileSystem::real().read_file(dir_ + "/fresh.kcb"))
        << k << ": prewarm stored another source's __BASE_FILE__";
  }
}

TEST_F(PrewarmCommandTest, ManifestLinesAreCompileCommandLines) {
  write(dir_, "kernels.txt",
        "# kernels this team builds\n"
        "\n"
        "kernels/a.cu -D KCACHE_VALUE=2\n"
        "kcache compile kernels/sub/b.cu --arch sm_90 '-DKCACHE_VALUE=3'\n"
        "/usr/bin/kcache compile kernels/a.cu -D KCACHE_VALUE=4 -o a4.kcb\n");
  CommandResult r = kcache({"--format", "json", "prewarm", "kernels.txt", "--arch", "sm_80"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "\"kernels\": 3")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"target_misses\": 3")) << r.out;  // b.cu's --arch replaced sm_80
  EXPECT_TRUE(read_file(dir_ + "/a4.kcb").has_value());
}

TEST_F(PrewarmCommandTest, FailuresAreReportedAndTheRestStillWarms) {
  write(dir_, "kernels/broken.cu", "extern \"C\" __global__ void k() { nope; }\n");
  CommandResult r =
      kcache({"prewarm", "kernels", "--arch", "sm_80", "-D", "KCACHE_VALUE=1", "-j", "2"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_TRUE(contains(r.err, "kernels/broken.cu(1): error: identifier \"nope\" is undefined"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "FAILED kernels/broken.cu")) << r.err;
  EXPECT_TRUE(contains(r.err, "3 kernels in ")) << r.err;
  EXPECT_TRUE(contains(r.err, "0 hits, 2 misses, 1 failed")) << r.err;
  EXPECT_EQ(cache::Store::open(dir_ + "/store")->stats().entries, 2u);
}

TEST_F(PrewarmCommandTest, BadManifestLineIsAUsageErrorNamingTheLine) {
  write(dir_, "kernels.txt", "kernels/a.cu --arch sm_80\nkernels/b.cu --no-such-flag\n");
  CommandResult r = kcache({"prewarm", "kernels.txt"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "kernels.txt:2: ")) << r.err;
  EXPECT_EQ(counter("nvrtc_invocations"), 0);
}

TEST_F(PrewarmCommandTest, KernelWithoutATargetIsAUsageError) {
  CommandResult r = kcache({"prewarm", "kernels"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "no target")) << r.err;
  r = kcache({"prewarm", "nothere"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "nothere does not exist")) << r.err;
}

}  // namespace
}  // namespace kcache::cli
