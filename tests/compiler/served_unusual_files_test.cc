// The drop-in's served disk (seal.h, SealPolicy::serve) through its path
// (compile_program) for names that are not plain headers: a folder, an empty
// header, names like libraries (never served), files under /etc, /proc and
// /dev/shm, a header over 64 MiB. Every answer kcache gives must be the real
// NVRTC's; a refusal leaves the program to the real NVRTC.
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
using ServedUnusualFilesTest = testing::ProgramVsNvrtcTest;

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

// A4. __has_include of a name that is a folder, then absent.
TEST_F(ServedUnusualFilesTest, HasIncludeOfAFolder) {
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

// B8. A 0-byte header, then one that grows; a header named like a library
// (lib*.so*: never served, own()); a header over 64 MiB.
TEST_F(ServedUnusualFilesTest, EmptyHeaderThenContent) {
  write("inc/e.h", "");
  const std::string source = std::string(kComputed) + "#include XSTR(CAT(e, .h))\n" +
                             "#ifndef VALUE\n#define VALUE 17\n#endif\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  expect_cached_nvrtcs_answer(source, dir_ / "k.cu", options);
  write("inc/e.h", "#define VALUE 18\n");
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
}

TEST_F(ServedUnusualFilesTest, HeaderNamedLikeALibrary) {
  write("inc/libx.so", "#define VALUE 19\n");
  const std::string source = std::string(kComputed) + "#include XSTR(CAT(libx, .so))\n" +
                             std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  ALLOW_REFUSAL(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
  ALLOW_REFUSAL(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
  write("inc/libx.so", "#define VALUE 20\n");
}

TEST_F(ServedUnusualFilesTest, HasIncludeOfALibraryName) {
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
TEST_F(ServedUnusualFilesTest, IncludeUnderEtcAndProc) {
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

TEST_F(ServedUnusualFilesTest, HeaderOver64MiB) {
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
TEST_F(ServedUnusualFilesTest, HeaderUnderDevShm) {
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

// The driver's JIT cache ($HOME/.nv, $CUDA_CACHE_PATH): a live driver in the
// process has NVRTC read its index, which the driver rewrites whenever it
// JIT-compiles anything. Served, the seal answers "no such file" there
// (SealPolicy::hidden_folders), so NVRTC compiles as without a cache, and
// the entry is keyed by that, not by the index's bytes: a rewrite loses no
// hit (on an H200 it lost gpu_jit_test's reload). Held only where the
// lookup's environment puts the same path in the driver's cache. A
// header-named file there is a user's: served, and keyed by its bytes.
TEST_F(ServedUnusualFilesTest, TheDriversCacheIsAnsweredAbsentAndItsWritesLoseNoHit) {
  write("home/.nv/ComputeCache/index", "the driver's index, first");
  write("home/.nv/value.h", "#define FROM_HEADER 30\n");
  const std::string index = dir_ / "home/.nv/ComputeCache/index";
  const std::string header = dir_ / "home/.nv/value.h";
  const std::string source = "#include \"" + header + "\"\n#if __has_include(\"" + index +
                             "\")\n#define VALUE (FROM_HEADER + 1)\n#else\n#define VALUE "
                             "(FROM_HEADER + 2)\n#endif\n" + std::string(kKernel);
  const std::string name = dir_ / "src/kern.cu";
  testing::ScopedEnv home("HOME", dir_ / "home");
  auto compile = [&] { return through_kcache(source, name, {"-arch=sm_90"}); };
  ProgramResult first = compile();
  EXPECT_FALSE(first.hit);
  EXPECT_NE(value_line(first.record).find(", 32;"), std::string::npos)
      << "NVRTC found the driver's index absent: " << value_line(first.record);
  EXPECT_TRUE(compile().hit);
  write("home/.nv/ComputeCache/index", "the driver's index, rewritten by the driver");
  ProgramResult after_write = compile();
  EXPECT_TRUE(after_write.hit) << "the index's bytes are no input";
  EXPECT_EQ(value_line(after_write.record), value_line(first.record));
  {
    testing::ScopedEnv elsewhere("HOME", dir_ / "other-home");
    EXPECT_FALSE(compile().hit)
        << "where the path is no longer the driver's cache, NVRTC would read it";
  }
  write("home/.nv/value.h", "#define FROM_HEADER 40\n");
  ProgramResult header_changed = compile();
  EXPECT_FALSE(header_changed.hit) << "a header there is keyed by its bytes";
  EXPECT_NE(value_line(header_changed.record).find(", 42;"), std::string::npos)
      << value_line(header_changed.record);
}

// An entry made where a file was no driver's cache is no hit where the
// lookup's environment puts it in the driver's cache: a compile there is
// answered "no such file" (a review found the manifest held it by its bytes).
TEST_F(ServedUnusualFilesTest, AFileReadWhereItWasNoDriversCacheIsNoHitWhereItIs) {
  write("jit/config", "#define FROM_CONFIG 52\n");
  const std::string config = dir_ / "jit/config";
  const std::string source = "#if __has_include(\"" + config + "\")\n#include \"" + config +
                             "\"\n#define VALUE FROM_CONFIG\n#else\n#define VALUE 51\n#endif\n" +
                             std::string(kKernel);
  const std::string name = dir_ / "src/kern.cu";
  auto compile = [&] { return through_kcache(source, name, {"-arch=sm_90"}); };
  {
    testing::ScopedEnv elsewhere("CUDA_CACHE_PATH", dir_ / "elsewhere");
    ProgramResult read = compile();
    EXPECT_NE(value_line(read.record).find(", 52;"), std::string::npos) << value_line(read.record);
    EXPECT_TRUE(compile().hit);
  }
  testing::ScopedEnv here("CUDA_CACHE_PATH", dir_ / "jit");
  ProgramResult hidden = compile();
  EXPECT_FALSE(hidden.hit) << "the entry that read jit/config";
  EXPECT_NE(value_line(hidden.record).find(", 51;"), std::string::npos)
      << value_line(hidden.record);
}

// The driver's cache inside the working folder (HOME there). A name NVRTC
// gave relative to the working folder: its `own:` line names this
// checkout's path, while in another checkout the same relative name is no
// driver's: not stored. The driver's own absolute name ($HOME's) is the same
// for every compile in this environment: stored (a review found every GPU
// program started from $HOME stored nothing).
TEST_F(ServedUnusualFilesTest, TheDriversCacheInsideTheWorkingFolderIsStoredOnlyByAbsoluteNames) {
  write("w/.nv/ComputeCache/flag", "#define FROM_FLAG 62\n");
  testing::ScopedEnv home("HOME", dir_ / "w");
  InFolder in(dir_ / "w");
  const std::string relative =
      "#if __has_include(\".nv/ComputeCache/flag\")\n#include \".nv/ComputeCache/flag\"\n"
      "#define VALUE FROM_FLAG\n#else\n#define VALUE 61\n#endif\n" + std::string(kKernel);
  ProgramResult first = through_kcache(relative, "kern.cu", {"-arch=sm_90"});
  EXPECT_NE(value_line(first.record).find(", 61;"), std::string::npos) << value_line(first.record);
  EXPECT_NE(first.not_stored.find("driver's JIT cache"), std::string::npos) << first.not_stored;
  EXPECT_FALSE(through_kcache(relative, "kern.cu", {"-arch=sm_90"}).hit);

  const std::string index = dir_ / "w/.nv/ComputeCache/index";
  write("w/.nv/ComputeCache/index", "the driver's index");
  const std::string absolute = "#if __has_include(\"" + index + "\")\n#define VALUE 63\n#else\n" +
                               "#define VALUE 64\n#endif\n" + std::string(kKernel);
  ProgramResult made = through_kcache(absolute, "kern2.cu", {"-arch=sm_90"});
  EXPECT_NE(value_line(made.record).find(", 64;"), std::string::npos) << value_line(made.record);
  EXPECT_EQ(made.not_stored, "");
  EXPECT_TRUE(through_kcache(absolute, "kern2.cu", {"-arch=sm_90"}).hit);

  // A program in that folder by name: stored, not shared with programs of
  // other folders (NVRTC names a quoted include there absolutely too).
  const std::string named = dir_ / "w/kern3.cu";
  ProgramResult in_home = through_kcache(absolute, named, {"-arch=sm_90"});
  EXPECT_EQ(in_home.not_stored, "");
  EXPECT_FALSE(in_home.any_name);
  EXPECT_TRUE(through_kcache(absolute, named, {"-arch=sm_90"}).hit);
}

}  // namespace
}  // namespace kcache::compiler
