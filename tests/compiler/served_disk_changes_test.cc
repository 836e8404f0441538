// The drop-in's served disk (seal.h, SealPolicy::serve) through its path
// (compile_program) while the disk changes between compiles: the working
// folder, a symlinked -I folder retargeted, a header appearing earlier in the
// search order, __DATE__ behind a computed include, an in-memory header
// leaving the disk's. Every answer must be the real NVRTC's from the disk as
// it is at that moment; no hit may give an answer a fresh compile would not.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cache/storage.h"
#include "common/error.h"
#include "common/file_system.h"
#include "compiler/program.h"
#include "compiler/toolkit.h"
#include "tests/compiler/program_vs_nvrtc.h"
#include "tests/testing/temp_dir.h"

namespace kcache::compiler {
namespace {

using testing::InFolder;
using testing::kKernel;
using ServedDiskChangesTest = testing::ProgramVsNvrtcTest;

// A6. Relative -I and a relative name while the working folder changes.
TEST_F(ServedDiskChangesTest, RelativeIncludeFolderAfterChdir) {
  write("w1/inc/x.h", "#define VALUE 31\n");
  write("w2/inc/x.h", "#define VALUE 32\n");
  const std::string source = "#include <x.h>\n" + std::string(kKernel);
  {
    InFolder in(dir_ / "w1");
    expect_cached_nvrtcs_answer(source, "kern.cu", {"-arch=sm_90", "-Iinc"});
  }
  {
    InFolder in(dir_ / "w2");
    expect_nvrtcs_answer(source, "kern.cu", {"-arch=sm_90", "-Iinc"});
    write("w2/inc/x.h", "#define VALUE 31\n");
    expect_nvrtcs_answer(source, "kern.cu", {"-arch=sm_90", "-Iinc"});
  }
}

// A7. A symlinked -I folder retargeted between compiles.
TEST_F(ServedDiskChangesTest, SymlinkedIncludeFolderRetargeted) {
  write("t1/x.h", "#define VALUE 41\n");
  write("t2/x.h", "#define VALUE 42\n");
  ASSERT_EQ(::symlink((dir_ / "t1").c_str(), (dir_ / "link").c_str()), 0);
  const std::string source = "#include <x.h>\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "link"};
  expect_cached_nvrtcs_answer(source, dir_ / "k.cu", options);
  ::unlink((dir_ / "link").c_str());
  ASSERT_EQ(::symlink((dir_ / "t2").c_str(), (dir_ / "link").c_str()), 0);
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
  // A file symlink retargeted to an identical-size header.
  write("t3/y.h", "#define VALUE 43\n");
  write("t4/y.h", "#define VALUE 44\n");
  ASSERT_EQ(::symlink((dir_ / "t3/y.h").c_str(), (dir_ / "t1/y.h").c_str()), 0);
  ::unlink((dir_ / "link").c_str());
  ASSERT_EQ(::symlink((dir_ / "t1").c_str(), (dir_ / "link").c_str()), 0);
  const std::string s2 = "#include <y.h>\n" + std::string(kKernel);
  expect_cached_nvrtcs_answer(s2, dir_ / "k.cu", options);
  ::unlink((dir_ / "t1/y.h").c_str());
  ASSERT_EQ(::symlink((dir_ / "t4/y.h").c_str(), (dir_ / "t1/y.h").c_str()), 0);
  EXPECT_FALSE(expect_nvrtcs_answer(s2, dir_ / "k.cu", options));
}

// A8. A header appearing in an earlier -I folder; #include_next continuing.
TEST_F(ServedDiskChangesTest, HeaderAppearsEarlierInTheSearchOrder) {
  write("b/x.h", "#define VALUE 51\n");
  FileSystem::real().create_directories(dir_ / "a", 0755);
  const std::string source = "#include <x.h>\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "a", "-I" + dir_ / "b"};
  expect_cached_nvrtcs_answer(source, dir_ / "k.cu", options);
  write("a/x.h", "#include_next <x.h>\n#undef VALUE\n#define VALUE 52\n");
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
  EXPECT_TRUE(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
  ::unlink((dir_ / "a/x.h").c_str());
  EXPECT_TRUE(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
}

// A9. __DATE__ in a header reached only through a computed include.
TEST_F(ServedDiskChangesTest, DateInAHeaderReachedByAComputedInclude) {
  write("inc/d_x.h", "__device__ const char day[] = __DATE__;\n#define VALUE day[0]\n");
  const std::string source =
      "#define CAT(a, b) a##b\n#define STR(x) #x\n#define XSTR(x) STR(x)\n"
      "#include XSTR(CAT(d_, x.h))\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  expect_nvrtcs_answer(source, dir_ / "k.cu", options);
  expect_nvrtcs_answer(source, dir_ / "k.cu", options);
}

// A10. An in-memory header shadowing a disk one, then the in-memory one
// gone: the disk's.
TEST_F(ServedDiskChangesTest, InMemoryHeaderThenDisk) {
  write("src/m.h", "#define VALUE 61\n");
  const std::string source = "#include \"m.h\"\n" + std::string(kKernel);
  const std::string name = dir_ / "src/kern.cu";
  EXPECT_FALSE(expect_nvrtcs_answer(source, name, {"-arch=sm_90"}, {{"m.h", "#define VALUE 62\n"}}));
  EXPECT_TRUE(expect_nvrtcs_answer(source, name, {"-arch=sm_90"}, {{"m.h", "#define VALUE 62\n"}}));
  EXPECT_FALSE(expect_nvrtcs_answer(source, name, {"-arch=sm_90"}));
  write("src/m.h", "#define VALUE 63\n");
  EXPECT_TRUE(expect_nvrtcs_answer(source, name, {"-arch=sm_90"}, {{"m.h", "#define VALUE 62\n"}}));
  EXPECT_FALSE(expect_nvrtcs_answer(source, name, {"-arch=sm_90"}));
}

}  // namespace
}  // namespace kcache::compiler
