// Second round of attacks on issue 27's served disk (seal.h, SealPolicy::serve) through the
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
using RealFileSystemAttack2Test = testing::ProgramVsNvrtcTest;

// The include's name is made by token pasting: only NVRTC knows it (the
// scanner's key does not hold the header's bytes; the probes do).
const char kComputed[] =
    "#define CAT(a, b) a##b\n#define STR(x) #x\n#define XSTR(x) STR(x)\n";

// Refusals (kcache::Error) are the drop-in's cue to ask the real NVRTC
// (shim.cc): only an answer kcache gives must be NVRTC's.
#define ALLOW_REFUSAL(stmt)                                                  \
  try {                                                                      \
    stmt;                                                                    \
  } catch (const Error& e) {                                                 \
    std::fprintf(stderr, "refused (the drop-in falls back): %s\n", e.what()); \
  }

// B1. A symlink inside the program folder followed by "..": the kernel
// climbs out of the link's target, the seal records the lexically folded
// name (join_lexically): NVRTC reads deep/x.h, the key names A/x.h.
TEST_F(RealFileSystemAttack2Test, SymlinkThenDotDotInTheProgramFolder) {
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
TEST_F(RealFileSystemAttack2Test, SymlinkThenDotDotInAnIncludeFolder) {
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
TEST_F(RealFileSystemAttack2Test, SymlinkThenDotDotAcrossFolders) {
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
TEST_F(RealFileSystemAttack2Test, ProgramNameClimbsThroughALink) {
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

TEST_F(RealFileSystemAttack2Test, SymlinkThenDotDotWithAHardLink) {
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

TEST_F(RealFileSystemAttack2Test, ProgramNameClimbsThroughALinkWithAHardLink) {
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

// B4. The program folder's name a prefix of an -I folder's (/tmp/a vs
// /tmp/ab): ab's header is not the program folder's.
TEST_F(RealFileSystemAttack2Test, ProgramFolderIsAPrefixOfAnIncludeFolder) {
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
TEST_F(RealFileSystemAttack2Test, DoubleSlashAndDotNames) {
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
TEST_F(RealFileSystemAttack2Test, SymlinkedProgramFolder) {
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
TEST_F(RealFileSystemAttack2Test, RelativeNameAndRelativeIncludeOfItsFolder) {
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

// B8. A 0-byte header, then one that grows; a header named like a library
// (lib*.so*: never served, own()); a header over 64 MiB.
TEST_F(RealFileSystemAttack2Test, EmptyHeaderThenContent) {
  write("inc/e.h", "");
  const std::string source = std::string(kComputed) + "#include XSTR(CAT(e, .h))\n" +
                             "#ifndef VALUE\n#define VALUE 17\n#endif\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  expect_cached_nvrtcs_answer(source, dir_ / "k.cu", options);
  write("inc/e.h", "#define VALUE 18\n");
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
}

TEST_F(RealFileSystemAttack2Test, HeaderNamedLikeALibrary) {
  write("inc/libx.so", "#define VALUE 19\n");
  const std::string source = std::string(kComputed) + "#include XSTR(CAT(libx, .so))\n" +
                             std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  ALLOW_REFUSAL(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
  ALLOW_REFUSAL(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
  write("inc/libx.so", "#define VALUE 20\n");
}

TEST_F(RealFileSystemAttack2Test, HasIncludeOfALibraryName) {
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  write("inc/keep", "");
  const std::string s2 = "#if __has_include(\"liby.so.1\")\n#define VALUE 1\n#else\n"
                         "#define VALUE 2\n#endif\n" + std::string(kKernel);
  ALLOW_REFUSAL(expect_nvrtcs_answer(s2, dir_ / "k.cu", options));
  ALLOW_REFUSAL(expect_nvrtcs_answer(s2, dir_ / "k.cu", options));
  write("inc/liby.so.1", "\n");
  ALLOW_REFUSAL(expect_nvrtcs_answer(s2, dir_ / "k.cu", options));
}

// B11. An include of a file under /etc and /proc (never served, own()):
// NVRTC reads them; Landlock judges kcache's.
TEST_F(RealFileSystemAttack2Test, IncludeUnderEtcAndProc) {
  auto source = [](const std::string& file) {
    return "#if __has_include(\"" + file + "\")\n#define VALUE 1\n#else\n#define VALUE 2\n#endif\n" +
           std::string(kKernel);
  };
  // A file under /etc is served like any other: NVRTC's answer, cached.
  EXPECT_FALSE(expect_nvrtcs_answer(source("/etc/passwd"), dir_ / "k.cu", {"-arch=sm_90"}));
  EXPECT_TRUE(expect_nvrtcs_answer(source("/etc/passwd"), dir_ / "k.cu", {"-arch=sm_90"}));
  // A pseudo-file of the kernel's has no snapshot: an error naming it, and
  // the drop-in leaves the program to the real NVRTC (never a wrong answer).
  for (int i = 0; i < 2; ++i) {
    try {
      through_kcache(source("/proc/self/comm"), dir_ / "k.cu", {"-arch=sm_90"});
      ADD_FAILURE() << "a /proc file was answered through the cache";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("/proc/self/comm"), std::string::npos) << e.what();
    }
  }
}

TEST_F(RealFileSystemAttack2Test, HeaderOver64MiB) {
  std::string big = "#define VALUE 21\n";
  big += std::string((size_t{64} << 20) + 10 - big.size(), '\n');
  write("inc/big.h", big);
  const std::string source = std::string(kComputed) + "#include XSTR(CAT(big, .h))\n" +
                             std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  for (int i = 0; i < 2; ++i) {
    cache::ProgramRecord want = real_->answer(source, dir_ / "k.cu", options);
    try {
      ProgramResult got = through_kcache(source, dir_ / "k.cu", options);
      EXPECT_EQ(got.record.log, want.log);
      EXPECT_EQ(got.record.output(cache::ProgramOutput::ptx),
                want.output(cache::ProgramOutput::ptx));
    } catch (const Error& e) {
      std::fprintf(stderr, "refused (the drop-in falls back): %s\n", e.what());
    }
  }
}

// B9. A header under /dev/shm.
TEST_F(RealFileSystemAttack2Test, HeaderUnderDevShm) {
  std::string shm = "/dev/shm/kcache-attack2-" + std::to_string(::getpid());
  FileSystem::real().create_directories(shm, 0755);
  std::ofstream(shm + "/x.h") << "#define VALUE 22\n";
  const std::string source =
      std::string(kComputed) + "#include XSTR(CAT(x, .h))\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + shm};
  ALLOW_REFUSAL(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
  ALLOW_REFUSAL(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
  std::ofstream(shm + "/x.h") << "#define VALUE 23\n";
  ALLOW_REFUSAL(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
  ::unlink((shm + "/x.h").c_str());
  ::rmdir(shm.c_str());
}

// B10. Lookup records of a shared entry: C compiles with -I A/inc (absolute,
// outside C: shared, keyed by the absolute name). A's lookups hit it, and
// the lookup record made there writes A/inc/x.h relative to A's folder
// (DiskObservations::probes, "program-folder:/inc/x.h"). B's lookup through
// that record checks B/inc/x.h, while B's NVRTC reads A/inc/x.h.
TEST_F(RealFileSystemAttack2Test, LookupRecordOfASharedEntryMadeInTheIncludeFolder) {
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
