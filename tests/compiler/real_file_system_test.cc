// Issue 27: the drop-in's NVRTC reads the real file system (seal.h,
// SealPolicy::serve), and the key covers every byte it reads. Each case goes
// through the drop-in's path (compile_program) and compares every answer
// (result code, log, PTX) with the real NVRTC's from the same files, options
// and working folder: first as a miss, then as a hit, then after the disk
// changed (a miss again, or a hit only where NVRTC's answer is unchanged).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/storage.h"
#include "common/error.h"
#include "common/file_system.h"
#include "compiler/program.h"
#include "compiler/seal/seal.h"
#include "compiler/toolkit.h"
#include "tests/compiler/program_vs_nvrtc.h"
#include "tests/testing/temp_dir.h"

namespace kcache::compiler {
namespace {

using testing::InFolder;
using testing::kKernel;
using RealFileSystemTest = testing::ProgramVsNvrtcTest;

TEST_F(RealFileSystemTest, AToolkitHeaderWithoutItsIncludeFolderFailsAsInNvrtc) {
  // NVRTC 13 searches no toolkit folder it was not given: CCCL fails.
  const std::string source =
      "#include <cuda/std/cstdint>\n#define VALUE 1\n" + std::string(kKernel);
  expect_cached_nvrtcs_answer(source, dir_ / "k.cu", {"-arch=sm_90"});
  // With the toolkit's include folder alone: what NVRTC finds there, as NVRTC.
  expect_cached_nvrtcs_answer(source, dir_ / "k.cu",
                              {"-arch=sm_90", "-I" + toolkit_.include_dirs.front()});
  // A header NVRTC has built in needs no folder.
  expect_cached_nvrtcs_answer("#include <cuda_fp16.h>\n#define VALUE 2\n" + std::string(kKernel),
                              dir_ / "k.cu", {"-arch=sm_90"});
}

TEST_F(RealFileSystemTest, AComputedRelativeHasIncludeSeesTheDisk) {
  const std::string source =
      "#define CFG \"cfg.h\"\n"
      "#if __has_include(CFG)\n#include CFG\n#define VALUE CFG_VALUE\n#else\n#define VALUE 1\n"
      "#endif\n" +
      std::string(kKernel);
  const std::string name = dir_ / "src/k.cu";
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  write("src/cfg.h", "#define CFG_VALUE 7\n");  // next to the program
  expect_cached_nvrtcs_answer(source, name, options);
  ::unlink((dir_ / "src/cfg.h").c_str());  // gone: found in the -I folder
  write("inc/cfg.h", "#define CFG_VALUE 900\n");
  EXPECT_FALSE(expect_nvrtcs_answer(source, name, options));
  ::unlink((dir_ / "inc/cfg.h").c_str());  // nowhere: false
  EXPECT_FALSE(expect_nvrtcs_answer(source, name, options));
  EXPECT_TRUE(expect_nvrtcs_answer(source, name, options));
  write("src/cfg.h", "#define CFG_VALUE 8\n");  // back, other bytes
  EXPECT_FALSE(expect_nvrtcs_answer(source, name, options));
}

TEST_F(RealFileSystemTest, FileOfAnIncludeFolderHeaderIsNvrtcs) {
  write("inc/u.h", "__device__ const char where[] = __FILE__;\n#define VALUE where[3]\n");
  const std::string source = "#include \"u.h\"\n" + std::string(kKernel);
  expect_cached_nvrtcs_answer(source, dir_ / "k.cu", {"-arch=sm_90", "-I" + dir_ / "inc"});
  // Relative -I and a relative program name, from the working folder.
  InFolder in(dir_.path());
  expect_cached_nvrtcs_answer(source, "k.cu", {"-arch=sm_90", "-Iinc"});
  expect_cached_nvrtcs_answer(source, "k.cu", {"-arch=sm_90", "-I./inc"});
}

TEST_F(RealFileSystemTest, IncludeNextContinuesInTheNextFolder) {
  write("a/x.h", "#include_next <x.h>\n#define A_VALUE 3\n");
  write("b/x.h", "#define B_VALUE 40\n");
  const std::string source =
      "#include <x.h>\n#define VALUE (A_VALUE + B_VALUE)\n" + std::string(kKernel);
  expect_cached_nvrtcs_answer(source, dir_ / "k.cu",
                              {"-arch=sm_90", "-I" + dir_ / "a", "-I" + dir_ / "b"});
  write("b/x.h", "#define B_VALUE 41\n");  // the second folder's header edited
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "k.cu",
                                    {"-arch=sm_90", "-I" + dir_ / "a", "-I" + dir_ / "b"}));
}

// `#include "../y.h"` in an -I header: NVRTC opens "<inc>/sub/../y.h",
// which the kernel resolves on disk. A later process must hit (it once never
// did: every lookup refused a ".." part), and an edit of y.h, or a link that
// moves where "sub/.." leads, must be seen.
TEST_F(RealFileSystemTest, AParentFolderIncludeHitsAndFollowsTheDisk) {
  write("inc/sub/x.h", "#pragma once\n#include \"../y.h\"\n");
  write("inc/y.h", "#define VALUE 7\n");
  const std::string source = "#include <sub/x.h>\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  expect_cached_nvrtcs_answer(source, dir_ / "k.cu", options);
  write("inc/y.h", "#define VALUE 8\n");  // same size, other bytes
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
  EXPECT_TRUE(expect_nvrtcs_answer(source, dir_ / "k.cu", options));

  // "sub" a link: "sub/.." is the link target's parent, not "inc".
  write("there/deep/x.h", "#pragma once\n#include \"../y.h\"\n");
  write("there/y.h", "#define VALUE 9\n");
  write("elsewhere/deep/x.h", "#pragma once\n#include \"../y.h\"\n");
  write("elsewhere/y.h", "#define VALUE 10\n");
  write("linked/.keep", "");
  ASSERT_EQ(::symlink((dir_ / "there/deep").c_str(), (dir_ / "linked/sub").c_str()), 0);
  const std::vector<std::string> linked = {"-arch=sm_90", "-I" + dir_ / "linked"};
  expect_cached_nvrtcs_answer(source, dir_ / "k.cu", linked);
  ASSERT_EQ(::unlink((dir_ / "linked/sub").c_str()), 0);
  ASSERT_EQ(::symlink((dir_ / "elsewhere/deep").c_str(), (dir_ / "linked/sub").c_str()), 0);
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "k.cu", linked)) << "the link moved";
  EXPECT_TRUE(expect_nvrtcs_answer(source, dir_ / "k.cu", linked));
}

// A real one: cooperative_groups/reduce.h includes "../cooperative_groups.h",
// under the toolkit's include folder named by the usual -I.
TEST_F(RealFileSystemTest, CooperativeGroupsReduceHits) {
  const std::string source =
      "#include <cooperative_groups.h>\n#include <cooperative_groups/reduce.h>\n"
      "namespace cg = cooperative_groups;\n"
      "extern \"C\" __global__ void k(const int* in, int* out) {\n"
      "  auto warp = cg::tiled_partition<32>(cg::this_thread_block());\n"
      "  int v = cg::reduce(warp, in[threadIdx.x], cg::plus<int>());\n"
      "  if (warp.thread_rank() == 0) out[0] = v;\n}\n";
  std::vector<std::string> options = {"-arch=sm_90"};
  for (const std::string& d : toolkit_.include_dirs) options.push_back("-I" + d);
  ASSERT_EQ(real_->answer(source, "k.cu", options).compile_result, 0) << "the kernel compiles";
  expect_cached_nvrtcs_answer(source, dir_ / "k.cu", options);
}

// A program named by an absolute name in the working folder (a tool naming
// os.path.abspath("k.cu")): NVRTC's names in the working folder
// (__nv_name_map) are then beneath the program's folder too. They are not
// the folder's, so the entry is every folder's: another folder hits.
TEST_F(RealFileSystemTest, AProgramInTheWorkingFolderIsSharedWithOtherFolders) {
  write("a/.keep", "");
  write("b/.keep", "");
  const std::string source = "#define VALUE 5\n" + std::string(kKernel);
  {
    InFolder in(dir_ / "a");
    EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "a/k.cu", {"-arch=sm_90"}));
  }
  InFolder in(dir_ / "b");
  EXPECT_TRUE(expect_nvrtcs_answer(source, dir_ / "b/k.cu", {"-arch=sm_90"}))
      << "the entry is every folder's";
}

// ... but what NVRTC finds beside the program stays the program folder's,
// found (a quoted include) or not (then found in an -I folder), and an -I
// into the working folder is that folder's by its absolute name.
TEST_F(RealFileSystemTest, BesideAProgramInTheWorkingFolderIsStillTheFolders) {
  write("a/h.h", "#define VALUE 1\n");
  write("b/h.h", "#define VALUE 2\n");
  write("inc/g.h", "#define VALUE 3\n");
  write("b/g.h", "#define VALUE 4\n");
  write("a/i.h", "#define VALUE 6\n");
  const std::string beside = "#include \"h.h\"\n" + std::string(kKernel);
  const std::string searched = "#include \"g.h\"\n" + std::string(kKernel);
  const std::string by_i = "#include <i.h>\n" + std::string(kKernel);
  const std::vector<std::string> arch = {"-arch=sm_90"}, inc = {"-arch=sm_90", "-I" + dir_ / "inc"},
                                 into_a = {"-arch=sm_90", "-I" + dir_ / "a"};
  {
    InFolder in(dir_ / "a");
    expect_cached_nvrtcs_answer(beside, dir_ / "a/k.cu", arch);
    expect_cached_nvrtcs_answer(searched, dir_ / "a/k.cu", inc);
    expect_cached_nvrtcs_answer(by_i, dir_ / "a/k.cu", into_a);
  }
  InFolder in(dir_ / "b");
  expect_nvrtcs_answer(beside, dir_ / "b/k.cu", arch);     // b's h.h: VALUE 2
  expect_nvrtcs_answer(searched, dir_ / "b/k.cu", inc);    // b's g.h: VALUE 4
  // (A file found beneath the program's folder keeps the entry the folder's:
  // docs/KEYS.md, "Residual limits".)
  expect_nvrtcs_answer(by_i, dir_ / "b/k.cu", into_a);  // a's i.h, by -I
  write("a/i.h", "#define VALUE 7\n");
  EXPECT_FALSE(expect_nvrtcs_answer(by_i, dir_ / "b/k.cu", into_a)) << "a's i.h edited";
}

TEST_F(RealFileSystemTest, TwoSameNamedHeadersInTwoFolders) {
  write("inc/a/x.cuh", "#pragma once\n#include \"config.h\"\n#define AX A_CONFIG\n");
  write("inc/a/config.h", "#pragma once\n#define A_CONFIG 3\n");
  write("inc/b/y.cuh", "#pragma once\n#include \"config.h\"\n#define BY B_CONFIG\n");
  write("inc/b/config.h", "#pragma once\n#define B_CONFIG 500\n");
  expect_cached_nvrtcs_answer(
      "#include <a/x.cuh>\n#include <b/y.cuh>\n#define VALUE (AX + BY)\n" + std::string(kKernel),
      dir_ / "k.cu", {"-arch=sm_90", "-I" + dir_ / "inc"});
}

TEST_F(RealFileSystemTest, AComputedIncludeTheScannerCannotSeeIsKeyedByItsBytes) {
  // The include's name is made by token pasting: only NVRTC knows it.
  write("inc/part_a.h", "#define VALUE 11\n");
  const std::string source =
      "#define CAT(a, b) a##b\n#define STR(x) #x\n#define XSTR(x) STR(x)\n"
      "#include XSTR(CAT(part_, a.h))\n" +
      std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  expect_cached_nvrtcs_answer(source, dir_ / "k.cu", options);
  write("inc/part_a.h", "#define VALUE 12\n");  // same size, other bytes
  EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
  EXPECT_TRUE(expect_nvrtcs_answer(source, dir_ / "k.cu", options));
}

TEST_F(RealFileSystemTest, AProgramsInMemoryHeaderComesBeforeTheDisk) {
  write("inc/m.h", "#define VALUE 5\n");
  const std::string source = "#include \"m.h\"\n" + std::string(kKernel);
  const std::vector<cache::Header> headers = {{"m.h", "#define VALUE 6\n"}};
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc"};
  cache::ProgramRecord want = real_->answer(source, dir_ / "k.cu", options, headers);
  for (int round = 0; round < 2; ++round) {
    Compiler compiler(toolkit_, storage_.get());
    ProgramSource p;
    p.source = source;
    p.name = dir_ / "k.cu";
    p.headers = headers;
    ProgramOptions mapped = program_options(p, options);
    ASSERT_EQ(mapped.unsupported, "");
    ProgramResult got = compile_program(compiler, mapped.options);
    EXPECT_EQ(got.hit, round == 1);
    EXPECT_EQ(got.record.log, want.log);
    EXPECT_EQ(got.record.output(cache::ProgramOutput::ptx), want.output(cache::ProgramOutput::ptx));
  }
}

// Only regular files are served: a FIFO or a device reached by a computed
// include is an error naming it (the drop-in then leaves the program to the
// real NVRTC), never a hang or an endless read.
// A file served a second time in one process is served from itself, not a
// copy (seal.cc, SnapshotCache): NVRTC then sees the file's own inode where
// it saw a new memfd before. Its answers stay NVRTC's either way, here for
// #pragma once reached by two spellings of one header and for a guarded one.
TEST_F(RealFileSystemTest, PragmaOnceByTwoSpellingsAsNvrtcWhetherCopiedOrServedFromTheFile) {
  write("inc/once.h", "#pragma once\n__device__ int once_defined = 1;\n");
  write("inc/guarded.h", "#ifndef GUARDED\n#define GUARDED\n__device__ int guarded = 2;\n#endif\n");
  write("src/readme", "");  // the program's folder ("../inc" is taken from it)
  ASSERT_EQ(::symlink((dir_ / "inc").c_str(), (dir_ / "alias").c_str()), 0);
  set_snapshot_settle_margin_for_testing(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past the stamps' granularity
  for (int value = 1; value <= 3; ++value) {  // copied, then served from the files
    const std::string source = "#include \"" + dir_ / "inc/once.h" + "\"\n#include \"" +
                               dir_ / "alias/once.h" + "\"\n#include \"../inc/guarded.h\"\n" +
                               "#include \"" + dir_ / "alias/guarded.h" + "\"\n#define VALUE " +
                               std::to_string(value) + "\n" + std::string(kKernel);
    EXPECT_FALSE(expect_nvrtcs_answer(source, dir_ / "src/k.cu", {"-arch=sm_90"}));
  }
  set_snapshot_settle_margin_for_testing(int64_t{2} * 1000000000);
}

TEST_F(RealFileSystemTest, AFifoOrADeviceIsAnErrorNotAHang) {
  const std::string fifo = dir_ / "pipe.h";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Each named so kcache's scanner sees it (it refuses it before NVRTC runs)
  // and so only NVRTC does (the include's name made by token pasting: the
  // seal refuses to serve it).
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    for (bool pasted : {false, true}) {
      const std::string slash = path.substr(0, path.rfind('/') + 1);
      const std::string base = path.substr(path.rfind('/') + 1);
      const std::string source =
          (pasted ? "#define CAT(a, b) a##b\n#define STR(x) #x\n#define XSTR(x) STR(x)\n"
                    "#define F XSTR(CAT(" +
                        slash + ", " + base + "))\n"
                  : "#define F \"" + path + "\"\n") +
          "#include F\n#define VALUE 1\n" + std::string(kKernel);
      auto done = std::async(std::launch::async, [&] {
        try {
          through_kcache(source, dir_ / "k.cu", {"-arch=sm_90"});
          return std::string("no error");
        } catch (const Error& e) {
          return std::string(e.what());
        }
      });
      ASSERT_EQ(done.wait_for(std::chrono::seconds(60)), std::future_status::ready) << path;
      std::string what = done.get();
      EXPECT_NE(what.find(path), std::string::npos) << what;
      EXPECT_NE(what.find(path == fifo ? "a FIFO" : "a device"), std::string::npos) << what;
      if (pasted) {
        EXPECT_NE(what.find("NVRTC opened"), std::string::npos) << what;
      }
    }
  }
}

}  // namespace
}  // namespace kcache::compiler
