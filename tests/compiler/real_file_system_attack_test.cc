// Attacks on issue 27's served disk (seal.h, SealPolicy::serve) through the
// drop-in's path (compile_program): every answer must be the real NVRTC's
// from the disk as it is at that moment, and no hit may give an answer a
// fresh NVRTC compile would not give. Modelled on real_file_system_test.
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
using RealFileSystemAttackTest = testing::ProgramVsNvrtcTest;

// The include's name is made by token pasting: only NVRTC knows it (the
// scanner's key does not hold the header's bytes; the probes do).
const char kComputed[] =
    "#define CAT(a, b) a##b\n#define STR(x) #x\n#define XSTR(x) STR(x)\n";

// A1. An absolute -I folder beneath the program's folder: settle_entry
// writes its probes relative to the program folder ("program-folder:/inc/x.h")
// though NVRTC reached them through the absolute -I, which names A's folder
// whatever the program's name. A program of the same name in another folder
// with the same -I reads A/inc/x.h; the lookup checks B/inc/x.h.
TEST_F(RealFileSystemAttackTest, AbsoluteIncludeFolderInsideTheProgramFolderAcrossFolders) {
  write("A/inc/x.h", "#define VALUE 1\n");
  const std::string source =
      std::string(kComputed) + "#include XSTR(CAT(x, .h))\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "A/inc"};
  expect_cached_nvrtcs_answer(source, dir_ / "A/kern.cu", options);
  // B's folder holds a copy of the old header; the one NVRTC reads changes.
  write("B/inc/x.h", "#define VALUE 1\n");
  write("A/inc/x.h", "#define VALUE 2\n");
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "B/kern.cu", options))
      << "B's NVRTC reads A/inc/x.h, which changed: a stale hit";
}

// A2. The same through an absolute quoted include in the source: A/y.h
// (the scanner keys its bytes, unchanged) includes x.h next to itself by a
// computed name.
TEST_F(RealFileSystemAttackTest, AbsoluteQuotedIncludeOfTheProgramFolderAcrossFolders) {
  write("A/y.h", std::string(kComputed) + "#include XSTR(CAT(x, .h))\n");
  write("A/x.h", "#define VALUE 3\n");
  const std::string source = "#include \"" + dir_ / "A/y.h" + "\"\n" + std::string(kKernel);
  expect_cached_nvrtcs_answer(source, dir_ / "A/kern.cu", {"-arch=sm_90"});
  write("B/x.h", "#define VALUE 3\n");
  write("A/x.h", "#define VALUE 4\n");
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "B/kern.cu", {"-arch=sm_90"}))
      << "B's NVRTC reads A/x.h, which changed: a stale hit";
}

// A3. A computed quoted "../A/x.h": lexically beneath A when the program is
// in A, but from B it still names A/x.h (and the name check finds it through
// the -I folder inc, whose "../A/x.h" is A/x.h too).
TEST_F(RealFileSystemAttackTest, DotDotIncludeIntoTheProgramFolderAcrossFolders) {
  write("A/x.h", "#define VALUE 5\n");
  const std::string source = std::string(kComputed) + "#define INC(n) STR(../A/n.h)\n" +
                             "#include INC(x)\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  FileSystem::real().create_directories(dir_ / "inc", 0755);
  // (NVRTC's answer each time; the second is no hit, which costs time only)
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "A/kern.cu", options));
  expect_nvrtcs_answer(source, dir_ / "A/kern.cu", options);
  write("B/x.h", "#define VALUE 5\n");
  write("A/x.h", "#define VALUE 6\n");
  expect_nvrtcs_answer(source, dir_ / "B/kern.cu", options);
}

// A4. __has_include of a name that is a folder, then absent.
TEST_F(RealFileSystemAttackTest, HasIncludeOfAFolder) {
  const std::string source =
      "#if __has_include(\"d\")\n#define VALUE 1\n#else\n#define VALUE 2\n#endif\n" +
      std::string(kKernel);
  const std::string name = dir_ / "src/kern.cu";
  // kcache refuses to serve a folder (an Error: the drop-in asks the real
  // NVRTC then, shim.cc); what it answers is NVRTC's.
  auto check = [&] {
    cache::ProgramRecord want = real_->answer(source, name, {"-arch=sm_90"});
    try {
      ProgramResult got = through_kcache(source, name, {"-arch=sm_90"});
      EXPECT_EQ(got.record.log, want.log);
      EXPECT_EQ(got.record.output(cache::ProgramOutput::ptx),
                want.output(cache::ProgramOutput::ptx));
    } catch (const Error& e) {
      std::fprintf(stderr, "refused (the drop-in falls back): %s\n", e.what());
    }
  };
  FileSystem::real().create_directories(dir_ / "src/d", 0755);
  check();
  check();
  ::rmdir((dir_ / "src/d").c_str());
  check();
  check();
  FileSystem::real().create_directories(dir_ / "src/d", 0755);
  check();
}

// A5. CuPy-like: /tmp/tmpXXXX/kern.cu with a header next to it, the same
// source in two folders whose headers differ.
TEST_F(RealFileSystemAttackTest, CupyLikeFoldersWithDifferentNeighbours) {
  write("tmpa/cfg.h", "#define VALUE 10\n");
  write("tmpb/cfg.h", "#define VALUE 20\n");
  const std::string source = "#include \"cfg.h\"\n" + std::string(kKernel);
  expect_cached_nvrtcs_answer(source, dir_ / "tmpa/kern.cu", {"-arch=sm_90"});
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "tmpb/kern.cu", {"-arch=sm_90"}));
  write("tmpc/cfg.h", "#define VALUE 10\n");
  // (a miss: the name check finds no cfg.h, so the entry is tmpa's own)
  expect_nvrtcs_answer(source, dir_ / "tmpc/kern.cu", {"-arch=sm_90"});
  write("tmpc/cfg.h", "#define VALUE 30\n");
  expect_nvrtcs_answer(source, dir_ / "tmpc/kern.cu", {"-arch=sm_90"});
}

// A6. Relative -I and a relative name while the working folder changes.
TEST_F(RealFileSystemAttackTest, RelativeIncludeFolderAfterChdir) {
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
TEST_F(RealFileSystemAttackTest, SymlinkedIncludeFolderRetargeted) {
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
TEST_F(RealFileSystemAttackTest, HeaderAppearsEarlierInTheSearchOrder) {
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
TEST_F(RealFileSystemAttackTest, DateInAHeaderReachedByAComputedInclude) {
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
TEST_F(RealFileSystemAttackTest, InMemoryHeaderThenDisk) {
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

// A11. A1 through a lookup record (the store aged): the second compile in B.
TEST_F(RealFileSystemAttackTest, AbsoluteIncludeFolderInsideTheProgramFolderWithRecords) {
  write("A/inc/x.h", "#define VALUE 71\n");
  write("B/inc/x.h", "#define VALUE 71\n");
  storage_.reset();
  cache::StorageOptions so;
  so.local_dir = dir_ / "store2";
  compiler::testing::age();
  storage_ = std::make_unique<cache::Storage>(so);
  compiler::testing::age();
  const std::string source =
      std::string(kComputed) + "#include XSTR(CAT(x, .h))\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "A/inc"};
  expect_cached_nvrtcs_answer(source, dir_ / "A/kern.cu", options);
  expect_nvrtcs_answer(source, dir_ / "A/kern.cu", options);
  expect_nvrtcs_answer(source, dir_ / "B/kern.cu", options);  // A's answer: right
  expect_nvrtcs_answer(source, dir_ / "B/kern.cu", options);
  write("A/inc/x.h", "#define VALUE 72\n");
  compiler::testing::age();
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "B/kern.cu", options))
      << "B's NVRTC reads A/inc/x.h, which changed: a stale hit";
  expect_nvrtcs_answer(source, dir_ / "B/kern.cu", options);
}

}  // namespace
}  // namespace kcache::compiler
