// The drop-in's served disk (seal.h, SealPolicy::serve) through its path
// (compile_program) where a program's folder decides what NVRTC reads: one
// program name or source in two folders, -I folders beneath or beside the
// program's, and the program folder spelled through links, "//", "/./" or
// relative names. Every answer must be the real NVRTC's from the disk as it
// is at that moment; no hit may give an answer a fresh compile would not.
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
using ServedProgramFolderTest = testing::ProgramVsNvrtcTest;

// The include's name is made by token pasting: only NVRTC knows it (the
// scanner's key does not hold the header's bytes; the probes do).
const char kComputed[] =
    "#define CAT(a, b) a##b\n#define STR(x) #x\n#define XSTR(x) STR(x)\n";

// A1. An absolute -I folder beneath the program's folder: settle_entry
// writes its probes relative to the program folder ("program-folder:/inc/x.h")
// though NVRTC reached them through the absolute -I, which names A's folder
// whatever the program's name. A program of the same name in another folder
// with the same -I reads A/inc/x.h; the lookup checks B/inc/x.h.
TEST_F(ServedProgramFolderTest, AbsoluteIncludeFolderInsideTheProgramFolderAcrossFolders) {
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
TEST_F(ServedProgramFolderTest, AbsoluteQuotedIncludeOfTheProgramFolderAcrossFolders) {
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
TEST_F(ServedProgramFolderTest, DotDotIncludeIntoTheProgramFolderAcrossFolders) {
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

// A5. CuPy-like: /tmp/tmpXXXX/kern.cu with a header next to it, the same
// source in two folders whose headers differ.
TEST_F(ServedProgramFolderTest, CupyLikeFoldersWithDifferentNeighbours) {
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

// A11. A1 through a lookup record (the store aged): the second compile in B.
TEST_F(ServedProgramFolderTest, AbsoluteIncludeFolderInsideTheProgramFolderWithRecords) {
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

// B4. The program folder's name a prefix of an -I folder's (/tmp/a vs
// /tmp/ab): ab's header is not the program folder's.
TEST_F(ServedProgramFolderTest, ProgramFolderIsAPrefixOfAnIncludeFolder) {
  write("a/keep", "");
  write("ab/x.h", "#define VALUE 8\n");
  write("b/keep", "");
  const std::string source =
      std::string(kComputed) + "#include XSTR(CAT(x, .h))\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "ab"};
  expect_cached_nvrtcs_answer(source, dir_ / "a/kern.cu", options);
  expect_nvrtcs_answer(source, dir_ / "b/kern.cu", options);
  write("ab/x.h", "#define VALUE 9\n");
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "b/kern.cu", options));
  write("b/x.h", "#define VALUE 10\n");
  expect_nvrtcs_answer(source, dir_ / "b/kern.cu", options);
}

// B5. Names with "//" and "/./" for the program and the -I folder beneath it.
TEST_F(ServedProgramFolderTest, DoubleSlashAndDotNames) {
  write("A/inc/x.h", "#define VALUE 11\n");
  write("B/inc/x.h", "#define VALUE 11\n");
  const std::string source =
      std::string(kComputed) + "#include XSTR(CAT(x, .h))\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_.path() + "//A/./inc"};
  expect_nvrtcs_answer(source, dir_.path() + "/./A//kern.cu", options);
  expect_nvrtcs_answer(source, dir_.path() + "/./A//kern.cu", options);
  expect_nvrtcs_answer(source, dir_ / "B/kern.cu", options);
  write("A/inc/x.h", "#define VALUE 12\n");
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "B/kern.cu", options))
      << "B reads A/inc/x.h, which changed";
  expect_nvrtcs_answer(source, dir_.path() + "/B/../B/kern.cu", options);
}

// B6. A symlinked program folder: L -> A; the program named L/kern.cu with
// -I A/inc (the real name of L/inc).
TEST_F(ServedProgramFolderTest, SymlinkedProgramFolder) {
  write("A/inc/x.h", "#define VALUE 13\n");
  write("B/inc/x.h", "#define VALUE 13\n");
  ASSERT_EQ(::symlink((dir_ / "A").c_str(), (dir_ / "L").c_str()), 0);
  const std::string source =
      std::string(kComputed) + "#include XSTR(CAT(inc/x, .h))\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "A"};
  expect_nvrtcs_answer(source, dir_ / "L/kern.cu", options);
  expect_nvrtcs_answer(source, dir_ / "L/kern.cu", options);
  expect_nvrtcs_answer(source, dir_ / "B/kern.cu", options);
  write("A/inc/x.h", "#define VALUE 14\n");
  expect_nvrtcs_answer(source, dir_ / "B/kern.cu", options);  // B/inc/x.h: its own
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "L/kern.cu", options));
  write("B/inc/x.h", "#define VALUE 15\n");
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "B/kern.cu", options));
}

// B7. A relative program name with the working folder moving; quoted
// include found through a relative -I that is the program folder.
TEST_F(ServedProgramFolderTest, RelativeNameAndRelativeIncludeOfItsFolder) {
  write("w1/A/x.h", "#define VALUE 15\n");
  write("w2/A/x.h", "#define VALUE 16\n");
  const std::string source =
      std::string(kComputed) + "#include XSTR(CAT(x, .h))\n" + std::string(kKernel);
  {
    InFolder in(dir_ / "w1");
    expect_nvrtcs_answer(source, "A/kern.cu", {"-arch=sm_90", "-IA"});
    expect_nvrtcs_answer(source, "A/kern.cu", {"-arch=sm_90", "-IA"});
    expect_nvrtcs_answer(source, "kern.cu", {"-arch=sm_90", "-IA"});
  }
  {
    InFolder in(dir_ / "w2");
    expect_nvrtcs_answer(source, "A/kern.cu", {"-arch=sm_90", "-IA"});
    expect_nvrtcs_answer(source, "kern.cu", {"-arch=sm_90", "-IA"});
  }
}

// B10. Lookup records of a shared entry: C compiles with -I A/inc (absolute,
// outside C: shared, keyed by the absolute name). A's lookups hit it, and
// the lookup record made there writes A/inc/x.h relative to A's folder
// (DiskObservations::probes, "program-folder:/inc/x.h"). B's lookup through
// that record checks B/inc/x.h, while B's NVRTC reads A/inc/x.h.
TEST_F(ServedProgramFolderTest, LookupRecordOfASharedEntryMadeInTheIncludeFolder) {
  write("A/inc/x.h", "#define VALUE 81\n");
  write("B/inc/x.h", "#define VALUE 81\n");
  write("C/keep", "");
  storage_.reset();
  cache::StorageOptions so;
  so.local_dir = dir_ / "store2";
  compiler::testing::age();
  storage_ = std::make_unique<cache::Storage>(so);
  compiler::testing::age();
  // A computed include that pastes nothing: a source with `##` is never
  // shared by every name (compiler_name_check.cc), and this case is about one
  // that is.
  const std::string source = "#define STR(x) #x\n#define XSTR(x) STR(x)\n#define HDR x.h\n"
                             "#include XSTR(HDR)\n" +
                             std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "A/inc"};
  expect_cached_nvrtcs_answer(source, dir_ / "C/kern.cu", options);
  compiler::testing::age();
  EXPECT_TRUE(expect_nvrtcs_answer(source, dir_ / "A/kern.cu", options));
  EXPECT_TRUE(expect_nvrtcs_answer(source, dir_ / "A/kern.cu", options));
  compiler::testing::age();
  EXPECT_TRUE(expect_nvrtcs_answer(source, dir_ / "B/kern.cu", options));
  write("A/inc/x.h", "#define VALUE 82\n");
  compiler::testing::age();
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "B/kern.cu", options))
      << "B's NVRTC reads A/inc/x.h, which changed: a stale hit";
  expect_nvrtcs_answer(source, dir_ / "B/kern.cu", options);
}

}  // namespace
}  // namespace kcache::compiler
