// The drop-in's served disk (seal.h, SealPolicy::serve) through its path
// (compile_program) for names that climb with ".." out of a symbolic link's
// target (NVRTC follows the link, a lexical fold does not): in the program's
// folder, in an -I folder, across folders, in the program's own name, with
// hard links, and with the link moved between compiles. Every answer must be
// the real NVRTC's from the disk as it is at that moment.
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
using ServedDotDotThroughLinksTest = testing::ProgramVsNvrtcTest;

// The include's name is made by token pasting: only NVRTC knows it (the
// scanner's key does not hold the header's bytes; the probes do).
const char kComputed[] =
    "#define CAT(a, b) a##b\n#define STR(x) #x\n#define XSTR(x) STR(x)\n";

// B1. A symlink inside the program folder followed by "..": the kernel
// climbs out of the link's target, the seal records the lexically folded
// name (join_lexically): NVRTC reads deep/x.h, the key names A/x.h.
TEST_F(ServedDotDotThroughLinksTest, SymlinkThenDotDotInTheProgramFolder) {
  write("deep/sub/keep", "");
  write("deep/x.h", "#define VALUE 1\n");
  write("A/x.h", "#define VALUE 1\n");
  ASSERT_EQ(::symlink((dir_ / "deep/sub").c_str(), (dir_ / "A/s").c_str()), 0);
  const std::string source = std::string(kComputed) + "#define INC(n) STR(s/../n.h)\n" +
                             "#include INC(x)\n" + std::string(kKernel);
  expect_nvrtcs_answer(source, dir_ / "A/kern.cu", {"-arch=sm_90"});
  expect_nvrtcs_answer(source, dir_ / "A/kern.cu", {"-arch=sm_90"});
  write("deep/x.h", "#define VALUE 2\n");  // what NVRTC reads; A/x.h unchanged
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "A/kern.cu", {"-arch=sm_90"}))
      << "NVRTC reads deep/x.h, which changed: a stale hit";
}

// B2. The same through an -I folder: -I inc, include "s/../x.h" where inc/s
// links to deep/sub.
TEST_F(ServedDotDotThroughLinksTest, SymlinkThenDotDotInAnIncludeFolder) {
  write("deep/sub/keep", "");
  write("deep/x.h", "#define VALUE 3\n");
  write("inc/x.h", "#define VALUE 3\n");
  ASSERT_EQ(::symlink((dir_ / "deep/sub").c_str(), (dir_ / "inc/s").c_str()), 0);
  const std::string source = std::string(kComputed) + "#define INC(n) STR(s/../n.h)\n" +
                             "#include INC(x)\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  expect_nvrtcs_answer(source, dir_ / "src/kern.cu", options);
  expect_nvrtcs_answer(source, dir_ / "src/kern.cu", options);
  write("deep/x.h", "#define VALUE 4\n");
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "src/kern.cu", options))
      << "NVRTC reads deep/x.h, which changed: a stale hit";
}

// B3. Across folders: the shared entry says "program-folder:/x.h is absent"
// (the lexical fold of "s/../x.h"); in folder B, s is a link whose target's
// parent holds x.h: B's NVRTC reads it, the lookup stats B/x.h (absent).
TEST_F(ServedDotDotThroughLinksTest, SymlinkThenDotDotAcrossFolders) {
  write("inc/s/keep", "");
  write("inc/x.h", "#define VALUE 5\n");
  write("A/keep", "");
  const std::string source = std::string(kComputed) + "#define INC(n) STR(s/../n.h)\n" +
                             "#include INC(x)\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  expect_nvrtcs_answer(source, dir_ / "A/kern.cu", options);
  expect_nvrtcs_answer(source, dir_ / "A/kern.cu", options);
  write("other/sub/keep", "");
  write("other/x.h", "#define VALUE 6\n");
  write("B/keep", "");
  ASSERT_EQ(::symlink((dir_ / "other/sub").c_str(), (dir_ / "B/s").c_str()), 0);
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "B/kern.cu", options))
      << "B's NVRTC reads other/x.h through B/s/..: a stale hit";
  // And in A itself, once A/s appears.
  write("other2/sub/keep", "");
  write("other2/x.h", "#define VALUE 7\n");
  ASSERT_EQ(::symlink((dir_ / "other2/sub").c_str(), (dir_ / "A/s").c_str()), 0);
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "A/kern.cu", options))
      << "A's NVRTC reads other2/x.h through A/s/..: a stale hit";
}

// B3b. The program's own name climbs through a link: "S/../B/kern.cu"
// where S links to deep/sub. The kernel opens deep/B/x.h; the seal records
// the lexical fold B/x.h.
TEST_F(ServedDotDotThroughLinksTest, ProgramNameClimbsThroughALink) {
  write("deep/sub/keep", "");
  write("deep/B/x.h", "#define VALUE 24\n");
  write("B/x.h", "#define VALUE 24\n");
  ASSERT_EQ(::symlink((dir_ / "deep/sub").c_str(), (dir_ / "S").c_str()), 0);
  const std::string source =
      std::string(kComputed) + "#include XSTR(CAT(x, .h))\n" + std::string(kKernel);
  const std::string name = dir_ / "S/../B/kern.cu";
  expect_nvrtcs_answer(source, name, {"-arch=sm_90"});
  expect_nvrtcs_answer(source, name, {"-arch=sm_90"});
  write("deep/B/x.h", "#define VALUE 25\n");
  EXPECT_FALSE(expect_nvrtcs_answer(source, name, {"-arch=sm_90"}))
      << "NVRTC reads deep/B/x.h, which changed: a stale hit";
  write("B/x.h", "#define VALUE 26\n");
  expect_nvrtcs_answer(source, name, {"-arch=sm_90"});
}

// B1h/B3h. B1 and B3b with the lexical name a hard link to the file the
// kernel opens: the seal records the lexical name with the opened file's
// stat, which the lexical name's stat now matches. Then the opened name is
// replaced (a new file renamed over it): NVRTC reads the new one, the
// lookup stats the lexical name (the old inode, unchanged). Found safe:
// the seal's probe keeps NVRTC's unfolded "A/s/../x.h", which no lookup
// can hold (disk_path refuses ".."), so these never hit (a cost only), and
// the served name's stat differing from the snapshot stores nothing.
void replace(const std::string& path, const std::string& text) {
  std::ofstream(path + ".new", std::ios::binary) << text;
  ASSERT_EQ(::rename((path + ".new").c_str(), path.c_str()), 0);
}

TEST_F(ServedDotDotThroughLinksTest, SymlinkThenDotDotWithAHardLink) {
  write("deep/sub/keep", "");
  write("deep/x.h", "#define VALUE 27\n");
  write("A/keep", "");
  ASSERT_EQ(::link((dir_ / "deep/x.h").c_str(), (dir_ / "A/x.h").c_str()), 0);
  ASSERT_EQ(::symlink((dir_ / "deep/sub").c_str(), (dir_ / "A/s").c_str()), 0);
  const std::string source = std::string(kComputed) + "#define INC(n) STR(s/../n.h)\n" +
                             "#include INC(x)\n" + std::string(kKernel);
  compiler::testing::age();
  expect_nvrtcs_answer(source, dir_ / "A/kern.cu", {"-arch=sm_90"});
  expect_nvrtcs_answer(source, dir_ / "A/kern.cu", {"-arch=sm_90"});
  replace(dir_ / "deep/x.h", "#define VALUE 28\n");
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "A/kern.cu", {"-arch=sm_90"}))
      << "NVRTC reads the new deep/x.h; the key stats A/x.h: a stale hit";
}

TEST_F(ServedDotDotThroughLinksTest, ProgramNameClimbsThroughALinkWithAHardLink) {
  write("deep/sub/keep", "");
  write("deep/B/x.h", "#define VALUE 29\n");
  write("B/keep", "");
  ASSERT_EQ(::link((dir_ / "deep/B/x.h").c_str(), (dir_ / "B/x.h").c_str()), 0);
  ASSERT_EQ(::symlink((dir_ / "deep/sub").c_str(), (dir_ / "S").c_str()), 0);
  const std::string source =
      std::string(kComputed) + "#include XSTR(CAT(x, .h))\n" + std::string(kKernel);
  const std::string name = dir_ / "S/../B/kern.cu";
  compiler::testing::age();
  expect_nvrtcs_answer(source, name, {"-arch=sm_90"});
  expect_nvrtcs_answer(source, name, {"-arch=sm_90"});
  replace(dir_ / "deep/B/x.h", "#define VALUE 30\n");
  EXPECT_FALSE(expect_nvrtcs_answer(source, name, {"-arch=sm_90"}))
      << "NVRTC reads the new deep/B/x.h; the key stats B/x.h: a stale hit";
}

// C7. A relative program name through a linked folder, including "../y.h":
// NVRTC opens "sub/../y.h"; the link moves.
TEST_F(ServedDotDotThroughLinksTest, RelativeProgramNameDotDotThroughAMovingLink) {
  write("t1/d/.keep", "");
  write("t1/y.h", "#define VALUE 1\n");
  write("t2/d/.keep", "");
  write("t2/y.h", "#define VALUE 2\n");
  write("y.h", "#define VALUE 3\n");
  ASSERT_EQ(::symlink((dir_ / "t1/d").c_str(), (dir_ / "sub").c_str()), 0);
  const std::string source = "#include \"../y.h\"\n" + std::string(kKernel);
  InFolder in(dir_.path());
  expect_nvrtcs_answer(source, "sub/k.cu", {"-arch=sm_90"});
  expect_nvrtcs_answer(source, "sub/k.cu", {"-arch=sm_90"});
  ASSERT_EQ(::unlink((dir_ / "sub").c_str()), 0);
  ASSERT_EQ(::symlink((dir_ / "t2/d").c_str(), (dir_ / "sub").c_str()), 0);
  expect_nvrtcs_answer(source, "sub/k.cu", {"-arch=sm_90"});  // VALUE 2
}

}  // namespace
}  // namespace kcache::compiler
