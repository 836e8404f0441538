// One spelling that names two headers in one compile. kcache's scanner keys
// the second under an alias (includes.h, kAliasPrefix); the drop-in's NVRTC
// reads the real file system (issue 27), so it finds each by itself. Each case
// goes through the drop-in's path (compile_program) twice, a miss and a hit,
// and every answer (result, log, PTX) must equal the real NVRTC's from the
// files on disk with the same -I folders.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cache/storage.h"
#include "common/file_system.h"
#include "compiler/program.h"
#include "compiler/toolkit.h"
#include "tests/compiler/real_nvrtc.h"
#include "tests/testing/temp_dir.h"

namespace kcache::compiler {
namespace {

class SameSpellingTest : public RealNvrtcTest {
 protected:

  // kcache's answer (miss, then hit) against NVRTC's, for `source` named
  // dir/k.cu with `options`.
  void expect_nvrtcs_answer(const std::string& source, const std::vector<std::string>& options) {
    const std::string name = dir_ / "k.cu";
    cache::ProgramRecord want = real_->answer(source, name, options);
    ASSERT_EQ(want.compile_result, 0) << want.log;  // the case must compile with NVRTC
    cache::StorageOptions so;
    so.local_dir = dir_ / "store";
    cache::Storage storage(so);
    for (int round = 0; round < 2; ++round) {
      Compiler compiler(toolkit_, &storage);
      ProgramSource p;
      p.source = source;
      p.name = name;
      ProgramOptions mapped = program_options(p, options);
      ASSERT_EQ(mapped.unsupported, "");
      ProgramResult got;
      ASSERT_NO_THROW(got = compile_program(compiler, mapped.options));
      EXPECT_EQ(got.hit, round == 1);
      EXPECT_EQ(got.record.compile_result, want.compile_result) << got.record.log;
      EXPECT_EQ(got.record.log, want.log);
      EXPECT_EQ(got.record.output(cache::ProgramOutput::ptx), want.output(cache::ProgramOutput::ptx));
    }
  }

};

const char kKernel[] = "extern \"C\" __global__ void k(int* p) { p[0] = VALUE; }\n";

TEST_F(SameSpellingTest, TwoFoldersEachWithTheirOwnConfigH) {
  write("inc/a/x.cuh", "#pragma once\n#include \"config.h\"\n#define AX A_CONFIG\n");
  write("inc/a/config.h", "#pragma once\n#define A_CONFIG 3\n");
  write("inc/b/y.cuh", "#pragma once\n#include \"config.h\"\n#define BY B_CONFIG\n");
  write("inc/b/config.h", "#pragma once\n#define B_CONFIG 500\n");
  expect_nvrtcs_answer("#include <a/x.cuh>\n#include <b/y.cuh>\n#define VALUE (AX + BY)\n" +
                           std::string(kKernel),
                       {"-arch=sm_90", "-I" + dir_ / "inc"});
}

TEST_F(SameSpellingTest, AUserMmaHNextToItsIncluderAndTheToolkitsMmaH) {
  // CUTLASS 2.x: cutlass/arch/mma_sm70.h includes "mma.h" (its neighbour),
  // cutlass/arch/wmma.h includes <mma.h> (the toolkit's WMMA header).
  write("inc/lib/mma.h", "#pragma once\n#define LIB_MMA 7\n");
  write("inc/lib/uses_own.h", "#pragma once\n#include \"mma.h\"\n");
  write("inc/lib/uses_toolkit.h", "#pragma once\n#include <mma.h>\n");
  // NVRTC finds <mma.h> through -I to the toolkit, as CUTLASS users pass it.
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + dir_ / "inc",
                                            "-I" + toolkit_.include_dirs.front()};
  const std::string wmma = "#define VALUE (LIB_MMA + (int)sizeof(nvcuda::wmma::fragment<"
                           "nvcuda::wmma::accumulator, 16, 16, 16, float>))\n";
  // Both orders: the user's first, then the toolkit's; and the other way.
  expect_nvrtcs_answer(
      "#include <lib/uses_own.h>\n#include <lib/uses_toolkit.h>\n" + wmma + kKernel, options);
  expect_nvrtcs_answer(
      "#include <lib/uses_toolkit.h>\n#include <lib/uses_own.h>\n" + wmma + kKernel, options);
}

TEST_F(SameSpellingTest, ASpellingTakenByAnotherFileIsHandedUnderAnAlias) {
  // "cfg.h" from a/ and from b/ are different files; b/cfg.h's path beneath
  // the -I folder ("b/cfg.h") is taken too, by c/b/cfg.h included as <b/cfg.h>
  // through the second -I folder: the alias is the kcache-alias name.
  write("inc/a/x.cuh", "#pragma once\n#include \"cfg.h\"\n");
  write("inc/a/cfg.h", "#pragma once\n#define ONE 1\n");
  write("inc/b/y.cuh", "#pragma once\n#include \"cfg.h\"\n");
  write("inc/b/cfg.h", "#pragma once\n#define TWO 20\n");
  write("inc2/b/cfg.h", "#pragma once\n#define THREE 300\n");
  expect_nvrtcs_answer(
      "#include <b/cfg.h>\n#include <a/x.cuh>\n#include <b/y.cuh>\n#define VALUE (ONE + TWO + "
      "THREE)\n" + std::string(kKernel),
      {"-arch=sm_90", "-I" + dir_ / "inc2", "-I" + dir_ / "inc"});
}

// The CUTLASS 2.x GEMM of cutlass_lean_test through the drop-in's path, with
// the options a CUTLASS user gives NVRTC (its include folder and the
// toolkit's). Skipped without the nvidia-cutlass headers (install_deps.sh).
TEST_F(SameSpellingTest, ACutlass2GemmAnswersAsNvrtc) {
  const char* env = std::getenv("KCACHE_CUTLASS_DIR");
  const std::string include =
      std::string(env && *env ? env : "/opt/kcache-cutlass") + "/cutlass_library/source/include";
  std::ifstream kernel("tests/compiler/kernels/cutlass/cutlass2_gemm.cu", std::ios::binary);
  if (!std::ifstream(include + "/cutlass/gemm/kernel/default_gemm.h") || !kernel) {
    GTEST_SKIP() << "no CUTLASS headers at " << include << " (tools/install_deps.sh)";
  }
  std::stringstream source;
  source << kernel.rdbuf();
  std::vector<std::string> options = {"-arch=sm_90", "-std=c++17", "-default-device",
                                      "-I" + include};
  for (const std::string& d : toolkit_.include_dirs) options.push_back("-I" + d);
  expect_nvrtcs_answer(source.str(), options);
}

}  // namespace
}  // namespace kcache::compiler
