// Issue 19: CuTe and CUTLASS through `kcache compile`, lean by default, as
// small as nvcc's. NVRTC keeps every constexpr static member and variable
// template CuTe instantiates (a CuTe GEMM's NVRTC cubin: ~513 KiB, ~2,960 ELF
// symbols); the lean cubin must be within 2x nvcc's bytes and carry at most a
// few dozen symbols, and a user's variable in namespace cuda must survive.
//
// Needs the CUTLASS 4.x headers of the `nvidia-cutlass` wheel, which
// tools/install_deps.sh installs into /opt/kcache-cutlass
// ($KCACHE_CUTLASS_DIR overrides); without them every test skips, saying so.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/toolkit.h"
#include "tests/compiler/test_files.h"
#include "tests/testing/run_command.h"

namespace kcache::compiler {
namespace {

using kcache::testing::CommandResult;
using kcache::testing::run_command;

const std::string kKernels = "tests/compiler/kernels/cutlass/";
// A few dozen: nvcc's cubins of these kernels have 21-25.
constexpr size_t kMaxSymbols = 48;

std::string cutlass_include() {
  const char* dir = std::getenv("KCACHE_CUTLASS_DIR");
  return std::string(dir && *dir ? dir : "/opt/kcache-cutlass") + "/cutlass_library/source/include";
}

struct Cubin {
  size_t bytes = 0;
  std::set<std::string> symbols;
  size_t symbol_count = 0;  // readelf's entries, the null one and sections included
};

// binutils' readelf, found on $PATH (run_command does not search it).
std::string readelf() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (::access((dir + "/readelf").c_str(), X_OK) == 0) return dir + "/readelf";
  }
  return "/usr/bin/readelf";
}

// The symbol table as `readelf -sW` prints it.
Cubin inspect(const std::string& path) {
  Cubin c;
  c.bytes = std::filesystem::file_size(path);
  CommandResult r = run_command({readelf(), "-sW", path});
  EXPECT_EQ(r.exit_code, 0) << "readelf -sW " << path << ": " << r.err;
  std::istringstream lines(r.out);
  // "  10: 0000000000000000  1152 FUNC GLOBAL DEFAULT [<other>: 0x10] 11 cute_gemm":
  // the name is the last field, when there are more than 7.
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.empty() || f[0].size() < 2 || f[0].back() != ':' ||
        f[0].find_first_not_of("0123456789") != f[0].size() - 1) {
      continue;
    }
    ++c.symbol_count;
    if (f.size() > 7) c.symbols.insert(f.back());
  }
  return c;
}

class CutlassLeanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(cutlass_include() + "/cute/tensor.hpp")) {
      GTEST_SKIP() << "no CUTLASS headers at " << cutlass_include()
                   << ": run tools/install_deps.sh (the nvidia-cutlass wheel) or set "
                      "KCACHE_CUTLASS_DIR";
    }
    dir_ = testing::test_dir();
    nvcc_ = find_toolkit("").root + "/bin/nvcc";
  }

  // `kcache compile` of `source` for sm_90 (lean unless `extra` says
  // --no-lean); returns the cubin's path.
  // With `ptx` "compute_90" the bundle holds the PTX too, beside the cubin.
  std::string kcache_cubin(const std::string& source, const std::string& name,
                           const std::vector<std::string>& extra = {},
                           const std::string& ptx = "none") {
    std::string bundle = dir_ + "/" + name + ".kcb";
    std::vector<std::string> argv = {kcache::testing::kcache_binary(),
                                     "compile",
                                     "--no-store",
                                     "--arch",
                                     "sm_90",
                                     "--ptx",
                                     ptx,
                                     "--std",
                                     "c++17",
                                     "--nvrtc-opt=-default-device",
                                     "-I",
                                     cutlass_include(),
                                     "-o",
                                     bundle};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(kKernels + source);
    CommandResult c = run_command(argv);
    EXPECT_EQ(c.exit_code, 0) << c.err;
    CommandResult b = run_command(
        {kcache::testing::kcache_binary(), "bundle", "--extract", dir_ + "/" + name, bundle});
    EXPECT_EQ(b.exit_code, 0) << b.err;
    bundle_listing_ = b.out;
    return dir_ + "/" + name + "/sm_90.cubin";
  }

  std::string nvcc_cubin(const std::string& source) {
    if (::access(nvcc_.c_str(), X_OK) != 0) {
      ADD_FAILURE() << "no nvcc at " << nvcc_ << ": the comparison needs the toolkit's nvcc";
      return "";
    }
    std::string out = dir_ + "/nvcc-" + source + ".cubin";
    std::filesystem::create_directories(dir_ + "/nvcc-tmp");
    CommandResult r = run_command({nvcc_, "-cubin", "-arch=sm_90", "-std=c++17",
                                   "-I" + cutlass_include(), kKernels + source, "-o", out},
                                  {{"TMPDIR", dir_ + "/nvcc-tmp"}});
    EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
    return out;
  }

  // The lean cubin against nvcc's; returns the lean one.
  Cubin expect_as_lean_as_nvcc(const std::string& source, const std::string& entry,
                               size_t max_symbols = kMaxSymbols) {
    Cubin lean = inspect(kcache_cubin(source, "lean"));
    EXPECT_NE(bundle_listing_.find("lean: -"), std::string::npos)
        << "the bundle must record a lean image: " << bundle_listing_;
    Cubin nvcc = inspect(nvcc_cubin(source));
    EXPECT_TRUE(lean.symbols.count(entry)) << "the kernel " << entry << " is missing";
    EXPECT_LE(lean.bytes, 2 * nvcc.bytes)
        << source << ": lean cubin " << lean.bytes << " B, nvcc's " << nvcc.bytes << " B";
    EXPECT_LE(lean.symbol_count, max_symbols) << source << ": lean cubin " << lean.symbol_count
                                              << " symbols, nvcc's " << nvcc.symbol_count;
    std::cerr << source << ": lean " << lean.bytes << " B, " << lean.symbol_count
              << " symbols; nvcc " << nvcc.bytes << " B, " << nvcc.symbol_count << " symbols\n";
    return lean;
  }

  std::string dir_, nvcc_, bundle_listing_;
};

TEST_F(CutlassLeanTest, CuteGemmIsAsLeanAsNvccsAndKeepsTheUsersVariable) {
  Cubin lean = expect_as_lean_as_nvcc("cute_gemm.cu", "cute_gemm");
  // namespace cuda { namespace my { __device__ int knob = 11; } }, unreferenced.
  EXPECT_TRUE(lean.symbols.count("_ZN4cuda2my4knobE"))
      << "a user's variable in namespace cuda must stay for cuModuleGetGlobal";
  // What NVRTC's image carries and the lean one must not: cute::C<1>::value.
  Cubin full = inspect(kcache_cubin("cute_gemm.cu", "full", {"--no-lean"}));
  EXPECT_TRUE(full.symbols.count("_ZN4cute1CILi1EE5valueE"));
  EXPECT_FALSE(lean.symbols.count("_ZN4cute1CILi1EE5valueE"));
  EXPECT_TRUE(full.symbols.count("_ZN4cuda2my4knobE"));
  EXPECT_GT(full.symbol_count, 10 * lean.symbol_count);
}

TEST_F(CutlassLeanTest, CutlassEpilogueIsAsLeanAsNvccs) {
  expect_as_lean_as_nvcc("cutlass_epilogue.cu", "cutlass_epilogue");
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// CUTLASS 2.x (issue 27): its "mma.h" names cutlass/arch/mma.h beside
// mma_sm70.h and the toolkit's WMMA header from wmma.h; kcache refused it.
// Now it compiles, as lean as nvcc's, and through a store the second compile
// is a hit.
TEST_F(CutlassLeanTest, Cutlass2GemmCompilesAsLeanAsNvccsAndHits) {
  // nvcc's cubin has 27 symbols; the lean one the same sections and kernels,
  // none of CUTLASS's class constants (cutlass::MatrixCoord::kRow, ...).
  Cubin lean = expect_as_lean_as_nvcc("cutlass2_gemm.cu", "cutlass2_gemm", 32);
  for (const std::string& symbol : lean.symbols) {
    EXPECT_NE(symbol.rfind("_ZN7cutlass", 0), 0u) << "a CUTLASS class constant stayed: " << symbol;
  }
  const std::string store = dir_ + "/store";
  for (int round = 0; round < 2; ++round) {
    CommandResult c = run_command(
        {kcache::testing::kcache_binary(), "compile", "--arch", "sm_90", "--ptx", "none", "--std",
         "c++17", "--nvrtc-opt=-default-device", "-I", cutlass_include(), "-o",
         dir_ + "/stored.kcb", kKernels + "cutlass2_gemm.cu"},
        {{"KCACHE_DIR", store}});
    ASSERT_EQ(c.exit_code, 0) << c.err;
  }
  CommandResult s = run_command({kcache::testing::kcache_binary(), "-s"}, {{"KCACHE_DIR", store}});
  EXPECT_NE(s.out.find("Hits:                      1 / 2"), std::string::npos) << s.out;
}

// What the lean pass removes from CUTLASS 2.x's image are variable
// declarations only: its PTX is NVRTC's without some `.global` lines (every
// kernel's text as it was), which nvJitLink assembles into the lean cubin;
// among them the class constants NVRTC's image carries.
TEST_F(CutlassLeanTest, Cutlass2GemmsLeanKernelsAreNvrtcsWithoutTheClassConstants) {
  const std::string lean_path = kcache_cubin("cutlass2_gemm.cu", "lean", {}, "compute_90");
  const std::string full_path =
      kcache_cubin("cutlass2_gemm.cu", "full", {"--no-lean"}, "compute_90");
  std::vector<std::string> lean_ptx = lines_of(dir_ + "/lean/compute_90.ptx");
  std::vector<std::string> full_ptx = lines_of(dir_ + "/full/compute_90.ptx");
  size_t j = 0, removed = 0, class_constants = 0;
  for (const std::string& line : full_ptx) {
    if (j < lean_ptx.size() && line == lean_ptx[j]) {
      ++j;
      continue;
    }
    ASSERT_EQ(line.rfind(".global ", 0), 0u)
        << "the lean PTX lost a line that declares no variable: " << line;
    ++removed;
    // A non-template member of a class of namespace cutlass: `_ZN7cutlass...E`, no `I...E`.
    size_t name = line.find(" _ZN7cutlass");
    if (name == std::string::npos) continue;
    std::string symbol = line.substr(name + 1, line.find_first_of(" ;[", name + 1) - name - 1);
    if (symbol.find('I') == std::string::npos) ++class_constants;
  }
  EXPECT_EQ(j, lean_ptx.size()) << "the lean PTX has lines NVRTC's has not";
  EXPECT_GE(class_constants, 90u) << "CUTLASS's class constants must go";
  std::cerr << "cutlass2_gemm.cu: " << removed << " variables removed, " << class_constants
            << " of them CUTLASS class constants\n";
  Cubin lean = inspect(lean_path), full = inspect(full_path);
  for (const char* kernel : {"cutlass2_gemm", "cutlass2_gemm_smem"}) {
    EXPECT_TRUE(lean.symbols.count(kernel)) << kernel;
  }
  for (const char* constant :
       {"_ZN7cutlass11MatrixCoord4kRowE", "_ZN7cutlass4arch4Sm8021kMinComputeCapabilityE",
        "_ZN7cutlass6layout8RowMajor5kRankE"}) {
    EXPECT_TRUE(full.symbols.count(constant)) << constant << " is not in NVRTC's image";
    EXPECT_FALSE(lean.symbols.count(constant)) << constant << " stayed";
  }
  std::cerr << "cutlass2_gemm.cu: NVRTC " << full.bytes << " B, " << full.symbol_count
            << " symbols; lean " << lean.bytes << " B, " << lean.symbol_count << "\n";
}

// Beside CUTLASS's class constants, which go, a user's variables of every
// kind stay: in a namespace named like a CUTLASS class, zero-initialised, in
// namespace cutlass, __constant__, a non-const static data member (a device
// variable under -default-device), and a constant the text cannot decide.
TEST_F(CutlassLeanTest, Cutlass2LeanImageKeepsTheUsersVariablesOfEveryKind) {
  Cubin lean = inspect(kcache_cubin("cutlass2_user_vars.cu", "lean"));
  Cubin full = inspect(kcache_cubin("cutlass2_user_vars.cu", "full", {"--no-lean"}));
  for (const char* kept : {"_ZN4user8RowMajor5kRankE", "_ZN4user4zeroE", "_ZN4user4knobE",
                           "_ZN7cutlass9user_knobE", "user_constant", "_ZN8Counters4hitsE",
                           "_ZN4Tile5kSizeE"}) {
    EXPECT_TRUE(full.symbols.count(kept)) << kept << " is not in NVRTC's image";
    EXPECT_TRUE(lean.symbols.count(kept)) << kept << " must stay for cuModuleGetGlobal";
  }
  // cutlass::layout::RowMajor::kRank stays too: `user::RowMajor` is a namespace.
  EXPECT_TRUE(lean.symbols.count("_ZN7cutlass6layout8RowMajor5kRankE"));
  for (const char* gone : {"_ZN7cutlass11MatrixCoord4kRowE", "_ZN7cutlass11MatrixCoord7kColumnE"}) {
    EXPECT_TRUE(full.symbols.count(gone)) << gone << " is not in NVRTC's image";
    EXPECT_FALSE(lean.symbols.count(gone)) << gone << ": a class constant stayed";
  }
}

}  // namespace
}  // namespace kcache::compiler
