// What a persistent-worker request may read: its action's declared inputs,
// compared as normalized execroot-relative paths (cli/declared_inputs.h).
#include "cli/declared_inputs.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/compiler/test_files.h"

namespace kcache::cli {
namespace {

using compiler::testing::test_dir;
using compiler::testing::write;

TEST(NormalizePathTest, RemovesDotsRepeatedSlashesAndTrailingSlashes) {
  EXPECT_EQ(normalize_path("a//b/./c/../d"), "a/b/d");
  EXPECT_EQ(normalize_path("./kernels/v9.cuh"), "kernels/v9.cuh");
  EXPECT_EQ(normalize_path("kernels/"), "kernels");
  EXPECT_EQ(normalize_path("kernels/sub/.."), "kernels");
  EXPECT_EQ(normalize_path("a/b/../../c"), "c");
  EXPECT_EQ(normalize_path("x.cuh"), "x.cuh");
}

TEST(NormalizePathTest, AnEmptyOrDotPathIsDot) {
  EXPECT_EQ(normalize_path(""), ".");
  EXPECT_EQ(normalize_path("."), ".");
  EXPECT_EQ(normalize_path("./."), ".");
  EXPECT_EQ(normalize_path("a/.."), ".");
}

TEST(NormalizePathTest, ARelativePathKeepsTheDotDotsItCannotTakeAway) {
  EXPECT_EQ(normalize_path("../x"), "../x");
  EXPECT_EQ(normalize_path("a/../../x"), "../x");
  EXPECT_EQ(normalize_path("../../a/./b"), "../../a/b");
  EXPECT_EQ(normalize_path(".."), "..");
}

TEST(NormalizePathTest, AnAbsolutePathStaysAbsoluteAndStopsAtTheRoot) {
  EXPECT_EQ(normalize_path("/"), "/");
  EXPECT_EQ(normalize_path("//"), "/");
  EXPECT_EQ(normalize_path("/.."), "/");
  EXPECT_EQ(normalize_path("/../a//b/"), "/a/b");
  EXPECT_EQ(normalize_path("/x/exec/./k/../v.cuh"), "/x/exec/v.cuh");
}

const std::string kExecroot = "/build/execroot/ws";

TEST(DeclaredInputsTest, ADeclaredPathMatchesHoweverItIsSpelled) {
  DeclaredInputs inputs({"kernels/k.cu", "kernels/v9.cuh"}, kExecroot);
  EXPECT_TRUE(inputs.contains("kernels/v9.cuh"));
  EXPECT_TRUE(inputs.contains("./kernels/v9.cuh"));
  EXPECT_TRUE(inputs.contains("kernels//v9.cuh"));
  EXPECT_TRUE(inputs.contains("kernels/sub/../v9.cuh"));
  EXPECT_TRUE(inputs.contains("./kernels/./k.cu"));
}

TEST(DeclaredInputsTest, AnUndeclaredPathIsRefused) {
  DeclaredInputs inputs({"kernels/k.cu"}, kExecroot);
  EXPECT_FALSE(inputs.contains("kernels/v9.cuh"));
  EXPECT_FALSE(inputs.contains("v9.cuh"));
  EXPECT_FALSE(inputs.contains("kernels"));        // a declared file's folder is not declared
  EXPECT_FALSE(inputs.contains("kernels/k.cuh"));  // a prefix, not a folder
}

TEST(DeclaredInputsTest, ADeclaredPathIsNormalizedToo) {
  DeclaredInputs inputs({"./gen//bazel-out/v.cuh", "lib/x/../y.cuh"}, kExecroot);
  EXPECT_TRUE(inputs.contains("gen/bazel-out/v.cuh"));
  EXPECT_TRUE(inputs.contains("lib/y.cuh"));
  EXPECT_FALSE(inputs.contains("lib/x/y.cuh"));
}

TEST(DeclaredInputsTest, FilesInADeclaredFolderAreDeclared) {
  DeclaredInputs inputs({"third_party/cutlass/include"}, kExecroot);
  EXPECT_TRUE(inputs.contains("third_party/cutlass/include/cutlass/gemm.h"));
  EXPECT_TRUE(inputs.contains("./third_party/cutlass/include"));
  EXPECT_FALSE(inputs.contains("third_party/cutlass/include2/x.h"));
  EXPECT_FALSE(inputs.contains("third_party/cutlass/README"));
}

TEST(DeclaredInputsTest, AnAbsolutePathUnderTheExecrootIsTakenRelativeToIt) {
  DeclaredInputs inputs({"kernels/v9.cuh"}, kExecroot + "/");
  EXPECT_TRUE(inputs.contains(kExecroot + "/kernels/v9.cuh"));
  EXPECT_TRUE(inputs.contains(kExecroot + "//kernels/./v9.cuh"));
  EXPECT_TRUE(inputs.contains(kExecroot + "/other/../kernels/v9.cuh"));
  EXPECT_FALSE(inputs.contains(kExecroot + "/kernels/v8.cuh"));
  EXPECT_FALSE(inputs.contains(kExecroot));
  EXPECT_FALSE(inputs.contains(kExecroot + "/../ws/kernels/v8.cuh"));
}

TEST(DeclaredInputsTest, AnAbsoluteDeclaredPathUnderTheExecrootIsTakenRelativeToIt) {
  DeclaredInputs inputs({kExecroot + "/kernels/./v9.cuh", "/elsewhere/x.cuh"}, kExecroot);
  EXPECT_TRUE(inputs.contains("kernels/v9.cuh"));
  EXPECT_TRUE(inputs.contains(kExecroot + "/kernels/v9.cuh"));
  EXPECT_FALSE(inputs.contains("elsewhere/x.cuh"));
}

TEST(DeclaredInputsTest, AnAbsolutePathOutsideTheExecrootIsReadableAsInASandbox) {
  DeclaredInputs inputs({"kernels/k.cu"}, kExecroot);
  EXPECT_TRUE(inputs.contains("/usr/include/stdio.h"));
  EXPECT_TRUE(inputs.contains("/build/execroot/ws2/kernels/v9.cuh"));  // a sibling, not under
  EXPECT_TRUE(inputs.contains(kExecroot + "/../other/x.cuh"));
}

TEST(DeclaredInputsTest, ARelativePathClimbingOutOfTheExecrootIsRefused) {
  DeclaredInputs inputs({"kernels/k.cu"}, kExecroot);
  EXPECT_FALSE(inputs.contains("../x.cuh"));
  EXPECT_FALSE(inputs.contains("kernels/../../ws/kernels/k.cu"));
  EXPECT_FALSE(inputs.contains(".."));
}

TEST(DeclaredInputsTest, MayReadNotesTheExistingFilesItRefused) {
  std::string dir = test_dir();
  write(dir, "kernels/k.cu", "");
  write(dir, "kernels/v9.cuh", "");
  write(dir, "kernels/declared.cuh", "");
  compiler::testing::ScopedCwd cwd(dir);
  DeclaredInputs inputs({"kernels/k.cu", "kernels/declared.cuh"}, dir);
  compiler::MayRead may_read = inputs.may_read();
  EXPECT_TRUE(may_read("kernels/declared.cuh"));
  EXPECT_TRUE(may_read(dir + "/kernels/declared.cuh"));
  EXPECT_FALSE(may_read("./kernels/v9.cuh"));
  EXPECT_FALSE(may_read("kernels/missing.cuh"));  // refused, but not there: no note
  EXPECT_FALSE(may_read("kernels"));              // a folder: no note
  EXPECT_EQ(inputs.refused(), std::vector<std::string>{"kernels/v9.cuh"});
}

TEST(DeclaredInputsTest, MayReadIsSafeFromSeveralThreads) {
  std::string dir = test_dir();
  for (int i = 0; i < 8; ++i) write(dir, "h" + std::to_string(i) + ".cuh", "");
  compiler::testing::ScopedCwd cwd(dir);
  DeclaredInputs inputs({"k.cu"}, dir);
  compiler::MayRead may_read = inputs.may_read();
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < 100; ++round) may_read("h" + std::to_string(i) + ".cuh");
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(inputs.refused().size(), 8u);
}

}  // namespace
}  // namespace kcache::cli
