// Never a wrong hit: NVRTC reads user files only through the headers kcache
// hands it (nvrtc.h's sealing), headers it asks for are found the way NVRTC
// would find them, and every cached result equals a compile without a store
// (`--no-store`) of the files as they are now. One test per preprocessor case.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <regex>

#include "cache/storage.h"
#include "common/error.h"
#include "common/file_system.h"
#include "compiler/compiler.h"
#include "compiler/nvrtc/nvrtc.h"
#include "compiler/toolkit.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::ScopedCwd;
using testing::test_dir;
using testing::write;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const char kStringize[] = "#define STR2(x) #x\n#define STR(x) STR2(x)\n";
const char kKernel[] = "extern \"C\" __global__ void k(int* p) { *p = V; }\n";

class SealedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_dir();
    cache::StorageOptions options;
    options.local_dir = dir_ + "/store";
    storage_ = std::make_unique<cache::Storage>(options);
    toolkit_ = find_toolkit("");
    cached_ = std::make_unique<Compiler>(toolkit_, storage_.get());
    fresh_ = std::make_unique<Compiler>(toolkit_, nullptr);
  }

  CompileOptions options(const std::string& source = "k.cu") {
    CompileOptions o;
    o.source_path = dir_ + "/" + source;
    o.source_name = source;
    o.working_folder = dir_;
    o.ptx_arch = "compute_80";
    return o;
  }

  // Compiles through the store twice (a miss or a hit, then surely a hit
  // where storable) and once without a store: all three bundles are equal.
  CompileResult exact(const CompileOptions& o) {
    CompileResult want = fresh_->compile(o);
    CompileResult first = cached_->compile(o);
    CompileResult second = cached_->compile(o);
    EXPECT_EQ(first.bundle, want.bundle) << "a cached compile differs from a fresh one";
    EXPECT_EQ(second.bundle, want.bundle) << "a hit differs from a fresh compile";
    EXPECT_EQ(second.targets[0].key, want.targets[0].key);
    return second;
  }

  std::string ptx(const CompileResult& r) { return std::string(r.targets[0].entry->payload()); }

  // The constant the kernel stores (`*p = V`), as the PTX moves it.
  static std::string stored_value(const std::string& ptx) {
    std::smatch m;
    if (!std::regex_search(ptx, m, std::regex(R"(mov\.u32\s+%r\d+,\s*(-?\d+);)"))) return "none";
    return m[1];
  }

  // What a real compiler gives: `nvcc -ptx` of the same files, run in dir_
  // with the same -I folders (nvcc preprocesses with the host compiler, so
  // this is GCC's #include_next / #line rule). Empty with a reason if the
  // toolkit has no nvcc.
  std::string nvcc_value(const CompileOptions& o) {
    std::string nvcc = toolkit_.root + "/bin/nvcc";
    if (::access(nvcc.c_str(), X_OK) != 0) return "";
    std::string cmd = "cd '" + dir_ + "' && '" + nvcc + "' -ptx -arch=compute_80";
    if (!o.std.empty()) cmd += " -std=" + o.std;
    for (const std::string& d : o.include_dirs) cmd += " -I '" + d + "'";
    for (const std::string& d : o.defines) cmd += " '-D" + d + "'";
    cmd += " '" + o.source_path + "' -o nvcc.ptx 2> nvcc.log";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file(dir_ + "/nvcc.log").value_or("");
    return stored_value(read_file(dir_ + "/nvcc.ptx").value_or(""));
  }

  // The cached value equals a compile without a store, and nvcc's.
  void expect_like_nvcc(const CompileOptions& o, const std::string& want) {
    CompileResult r = exact(o);
    EXPECT_EQ(stored_value(ptx(r)), want);
    std::string nvcc = nvcc_value(o);
    if (nvcc.empty()) {
      std::fprintf(stderr, "no nvcc in %s: the nvcc comparison was skipped\n", toolkit_.root.c_str());
    } else {
      EXPECT_EQ(nvcc, want) << "nvcc -ptx disagrees";
    }
  }

  std::string dir_;
  Toolkit toolkit_;
  std::unique_ptr<cache::Storage> storage_;
  std::unique_ptr<Compiler> cached_, fresh_;
};

// The issue's report: a header chosen by a stringized -D, edited after a miss.
TEST_F(SealedTest, ComputedStringizedIncludeSelectedByDefineIsKeyedByItsContent) {
  write(dir_, "k.cu", std::string(kStringize) + "#include STR(VARIANT.cuh)\n" + kKernel);
  write(dir_, "v7.cuh", "#define V 7\n");
  CompileOptions o = options();
  o.archs = {"sm_80"};
  o.defines = {"VARIANT=v7"};
  CompileResult before = exact(o);
  write(dir_, "v7.cuh", "#define V 9\n");
  CompileResult after = exact(o);
  EXPECT_NE(after.bundle, before.bundle) << "the edited header was not compiled";
  EXPECT_NE(after.targets[0].key, before.targets[0].key);
}

TEST_F(SealedTest, ComputedMacroIncludeSelectedByDefine) {
  write(dir_, "k.cu", std::string("#include HEADER\n") + kKernel);
  write(dir_, "a.cuh", "#define V 1\n");
  write(dir_, "b.cuh", "#define V 2\n");
  CompileOptions o = options();
  o.defines = {"HEADER=\"a.cuh\""};
  CompileResult a = exact(o);
  o.defines = {"HEADER=\"b.cuh\""};
  CompileResult b = exact(o);
  EXPECT_NE(ptx(a), ptx(b));
}

TEST_F(SealedTest, HasIncludeTrueThenFalse) {
  write(dir_, "k.cu",
        "#if __has_include(\"opt.cuh\")\n#include \"opt.cuh\"\n#else\n#define V 1\n#endif\n" +
            std::string(kKernel));
  write(dir_, "opt.cuh", "#define V 2\n");
  CompileResult with = exact(options());
  ASSERT_EQ(std::remove((dir_ + "/opt.cuh").c_str()), 0);
  CompileResult without = exact(options());
  EXPECT_NE(with.targets[0].key, without.targets[0].key);
  EXPECT_NE(ptx(with), ptx(without));
}

TEST_F(SealedTest, ComputedHasIncludeFindsTheFileAndKeysIt) {
  // A probe no scanner reads: NVRTC finds the file itself, and it is keyed.
  write(dir_, "k.cu",
        "#define OPT \"opt.cuh\"\n#if __has_include(OPT)\n#include OPT\n#else\n#define V 1\n"
        "#endif\n" +
            std::string(kKernel));
  write(dir_, "opt.cuh", "#define V 2\n");
  EXPECT_EQ(stored_value(ptx(exact(options()))), "2");
  ASSERT_EQ(std::remove((dir_ + "/opt.cuh").c_str()), 0);
  EXPECT_EQ(stored_value(ptx(exact(options()))), "1");
}

TEST_F(SealedTest, IfdefBranchesFollowTheDefines) {
  write(dir_, "k.cu",
        "#ifdef USE_A\n#include \"a.cuh\"\n#else\n#include \"b.cuh\"\n#endif\n" +
            std::string(kKernel));
  write(dir_, "a.cuh", "#define V 1\n");
  write(dir_, "b.cuh", "#define V 2\n");
  CompileOptions o = options();
  CompileResult b = exact(o);
  o.defines = {"USE_A"};
  CompileResult a = exact(o);
  EXPECT_NE(ptx(a), ptx(b));
}

TEST_F(SealedTest, IncludesInIfZeroAndInCommentsAreHarmless) {
  write(dir_, "k.cu",
        "#if 0\n#include \"dead.cuh\"\n#include \"gone.cuh\"\n#endif\n// #include \"c.cuh\"\n"
        "/* #include \"c.cuh\" */\n#define V 3\n" +
            std::string(kKernel));
  write(dir_, "dead.cuh", "#error never compiled\n");
  write(dir_, "c.cuh", "#error never compiled\n");
  CompileResult r = exact(options());
  write(dir_, "dead.cuh", "#error edited, still never compiled\n");
  EXPECT_EQ(ptx(exact(options())), ptx(r));
}

// Issue 9's less over-keying: a header included only under `#if 0` (or in a
// comment) is not read by NVRTC, so editing or deleting it keeps the key, and the
// hit is still what a compile without a store gives. The #else is live.
TEST_F(SealedTest, EditingAHeaderIncludedOnlyUnderIfZeroKeepsTheKey) {
  write(dir_, "k.cu",
        "#if 0\n#include \"debug.cuh\"\n#else\n#include \"live.cuh\"\n#endif\n"
        "// #include \"commented.cuh\"\n" +
            std::string(kKernel));
  write(dir_, "live.cuh", "#define V 1\n");
  write(dir_, "debug.cuh", "#define V 99\n");
  write(dir_, "commented.cuh", "#define V 98\n");
  CompileOptions o = options();
  CompileResult before = exact(o);
  auto expect_hit_equal_to_fresh = [&](const char* what) {
    CompileResult want = fresh_->compile(o);
    CompileResult hit = cached_->compile(o);
    EXPECT_EQ(hit.hits(), 1) << what;
    EXPECT_EQ(hit.targets[0].key, before.targets[0].key) << what;
    EXPECT_EQ(want.targets[0].key, before.targets[0].key) << what;
    EXPECT_EQ(hit.bundle, want.bundle) << what;
    EXPECT_EQ(hit.bundle, before.bundle) << what;
  };
  write(dir_, "debug.cuh", "#define V 100\n#error debugging only\n");
  write(dir_, "commented.cuh", "#error never compiled\n");
  expect_hit_equal_to_fresh("dead headers edited");
  ASSERT_EQ(std::remove((dir_ + "/debug.cuh").c_str()), 0);
  expect_hit_equal_to_fresh("a dead header deleted");
  write(dir_, "live.cuh", "#define V 2\n");
  CompileResult after = exact(o);
  EXPECT_NE(after.targets[0].key, before.targets[0].key) << "the #else of #if 0 is live";
  EXPECT_NE(ptx(after), ptx(before));
}

TEST_F(SealedTest, SameNameInTwoIncludeFoldersAndNextToTheIncluder) {
  write(dir_, "k.cu", std::string("#include \"x.cuh\"\n") + kKernel);
  write(dir_, "x.cuh", "#define V 1\n");
  write(dir_, "inc1/x.cuh", "#define V 2\n");
  write(dir_, "inc2/x.cuh", "#define V 3\n");
  CompileOptions o = options();
  o.include_dirs = {dir_ + "/inc1", dir_ + "/inc2"};
  CompileResult next_to = exact(o);
  ASSERT_EQ(std::remove((dir_ + "/x.cuh").c_str()), 0);
  CompileResult first_i = exact(o);
  ASSERT_EQ(std::remove((dir_ + "/inc1/x.cuh").c_str()), 0);
  CompileResult second_i = exact(o);
  EXPECT_NE(ptx(next_to), ptx(first_i));
  EXPECT_NE(ptx(first_i), ptx(second_i));
}

TEST_F(SealedTest, ComputedIncludeSearchesTheIncludersFolderThenIncludeFoldersInOrder) {
  write(dir_, "k.cu", std::string("#include \"lib/h.cuh\"\n") + kKernel);
  write(dir_, "inc/lib/h.cuh", std::string(kStringize) + "#include STR(PART.cuh)\n");
  write(dir_, "inc/lib/p.cuh", "#define V 1\n");
  write(dir_, "inc2/p.cuh", "#define V 2\n");
  CompileOptions o = options();
  o.include_dirs = {dir_ + "/inc", dir_ + "/inc2"};
  o.defines = {"PART=p"};
  CompileResult next_to = exact(o);
  ASSERT_EQ(std::remove((dir_ + "/inc/lib/p.cuh").c_str()), 0);
  CompileResult from_i = exact(o);
  EXPECT_NE(ptx(next_to), ptx(from_i));
}

TEST_F(SealedTest, UserHeaderNamedLikeAToolkitHeader) {
  write(dir_, "k.cu", std::string("#include \"math_constants.h\"\n") + kKernel);
  write(dir_, "math_constants.h", "#define V 5\n");
  CompileResult r = exact(options());
  write(dir_, "math_constants.h", "#define V 6\n");
  EXPECT_NE(ptx(exact(options())), ptx(r));
}

TEST_F(SealedTest, BackslashNewlineInsideAnInclude) {
  write(dir_, "k.cu", std::string("#include \\\n  \"a.cuh\"\n") + kKernel);
  write(dir_, "a.cuh", "#define V 1\n");
  CompileResult r = exact(options());
  write(dir_, "a.cuh", "#define V 2\n");
  EXPECT_NE(ptx(exact(options())), ptx(r));
}

TEST_F(SealedTest, TwentyLevelNesting) {
  write(dir_, "k.cu", std::string("#include \"n0.cuh\"\n") + kKernel);
  for (int i = 0; i < 20; ++i) {
    write(dir_, "n" + std::to_string(i) + ".cuh",
          "#include \"n" + std::to_string(i + 1) + ".cuh\"\n");
  }
  write(dir_, "n20.cuh", "#define V 20\n");
  CompileResult r = exact(options());
  write(dir_, "n20.cuh", "#define V 21\n");
  EXPECT_NE(ptx(exact(options())), ptx(r));
}

TEST_F(SealedTest, GuardedCycles) {
  write(dir_, "k.cu", std::string("#include \"a.cuh\"\n") + kKernel);
  write(dir_, "a.cuh", "#ifndef A\n#define A\n#include \"b.cuh\"\n#define V B\n#endif\n");
  write(dir_, "b.cuh", "#ifndef B_\n#define B_\n#include \"a.cuh\"\n#define B 4\n#endif\n");
  CompileResult r = exact(options());
  write(dir_, "b.cuh", "#ifndef B_\n#define B_\n#include \"a.cuh\"\n#define B 5\n#endif\n");
  EXPECT_NE(ptx(exact(options())), ptx(r));
}

TEST_F(SealedTest, PragmaOnce) {
  write(dir_, "k.cu", std::string("#include \"a.cuh\"\n#include \"a.cuh\"\n") + kKernel);
  write(dir_, "a.cuh", "#pragma once\n#define V 1\nstruct Once {};\n");
  CompileResult r = exact(options());
  write(dir_, "a.cuh", "#pragma once\n#define V 2\nstruct Once {};\n");
  EXPECT_NE(ptx(exact(options())), ptx(r));
}

TEST_F(SealedTest, AbsoluteAndRelativeSourcePaths) {
  write(dir_, "src/k.cu", std::string(kStringize) + "#include STR(W.cuh)\n" + kKernel);
  write(dir_, "src/w.cuh", "#define V 1\n");
  CompileOptions absolute;
  absolute.source_path = dir_ + "/src/k.cu";  // logical name: the absolute path
  absolute.ptx_arch = "compute_80";
  absolute.defines = {"W=w"};
  exact(absolute);
  ScopedCwd cwd(dir_);
  CompileOptions relative = absolute;
  relative.source_path = "src/k.cu";
  exact(relative);
}

// Paths beneath the working folder are keyed relative to it.
TEST_F(SealedTest, AMovedCheckoutKeepsItsKeys) {
  for (const std::string& root : {std::string("one"), std::string("two")}) {
    write(dir_, root + "/src/k.cu", std::string("#include <lib.cuh>\n") + kKernel);
    write(dir_, root + "/inc/lib.cuh", "#define V 1\n");
  }
  CompileOptions o;
  o.source_name = "src/k.cu";
  o.ptx_arch = "compute_80";
  o.include_dirs = {"inc"};
  o.source_path = dir_ + "/one/src/k.cu";
  o.working_folder = dir_ + "/one";
  CompileResult one = exact(o);
  o.source_path = dir_ + "/two/src/k.cu";
  o.working_folder = dir_ + "/two";
  CompileResult two = cached_->compile(o);
  EXPECT_EQ(two.hits(), 1);
  EXPECT_EQ(two.targets[0].key, one.targets[0].key);
}

// Decoys in the working directory, next to the header's spelling and in
// folders kcache was not given: NVRTC reads none of them.
TEST_F(SealedTest, DecoyHeadersAreNeverRead) {
  const std::string decoy = "#error a decoy was read\n";
  write(dir_, "src/k.cu", std::string("#include \"lib/h.cuh\"\n") + kKernel);
  write(dir_, "inc/lib/h.cuh", "#define NEXT \"w.cuh\"\n#include NEXT\n");
  write(dir_, "inc/lib/w.cuh", "#define V 1\n");
  write(dir_, "w.cuh", decoy);        // the working directory
  write(dir_, "lib/w.cuh", decoy);    // next to the header's spelling
  write(dir_, "other/w.cuh", decoy);  // a folder kcache was not given
  ScopedCwd cwd(dir_);
  CompileOptions o;
  o.source_path = "src/k.cu";
  o.ptx_arch = "compute_80";
  o.include_dirs = {"inc"};
  exact(o);
  // The real one gone: a clear error, not a decoy.
  ASSERT_EQ(std::remove((dir_ + "/inc/lib/w.cuh").c_str()), 0);
  for (Compiler* c : {cached_.get(), fresh_.get()}) {
    try {
      c->compile(o);
      FAIL() << "compiled without w.cuh";
    } catch (const CompileError& e) {
      EXPECT_TRUE(contains(e.what(),
                           "\"w.cuh\" (included from inc/lib/h.cuh:2) was not found in: "
                           "inc/lib, inc"))
          << e.what();
      EXPECT_FALSE(contains(e.log(), "decoy")) << e.log();
    }
  }
}

// NVRTC itself, without kcache's resolution: a handed header's relative
// include is not served from the working directory.
TEST_F(SealedTest, NvrtcDoesNotReadTheWorkingDirectory) {
  write(dir_, "w.cuh", "#define V 1\n");
  ScopedCwd cwd(dir_);
  NvrtcInput input;
  input.source_name = dir_ + "/k.cu";
  input.source = "#include \"v.cuh\"\n#include \"w.cuh\"\n";
  input.headers = {{"v.cuh", "#include \"w.cuh\"\n"}};
  input.options = {"-arch=compute_80"};
  input.want_cubin = false;
  try {
    Nvrtc::open(toolkit_.nvrtc.path).compile(input);
    FAIL() << "NVRTC read ./w.cuh";
  } catch (const CompileError& e) {
    EXPECT_TRUE(contains(e.log(), "cannot open source file \"w.cuh\"")) << e.log();
    // Users see their own name, not the sealed one.
    EXPECT_TRUE(contains(e.log(), "in the compilation of \"" + dir_ + "/k.cu\"")) << e.log();
    EXPECT_FALSE(contains(e.log(), "kcache-sealed")) << e.log();
  }
  input.headers.push_back({"w.cuh", "#define V 2\n"});
  EXPECT_TRUE(Nvrtc::open(toolkit_.nvrtc.path).compile(input).sealed);
}

TEST_F(SealedTest, AComputedIncludeFoundNowhereNamesItTheIncluderAndTheFolders) {
  write(dir_, "k.cu", std::string(kStringize) + "\n#include STR(NAME.cuh)\n" + kKernel);
  CompileOptions o = options();
  o.defines = {"NAME=nowhere"};
  o.include_dirs = {dir_ + "/inc"};
  try {
    cached_->compile(o);
    FAIL();
  } catch (const CompileError& e) {
    // Named as NVRTC names them: the includer by its name, the folders
    // from the working folder.
    EXPECT_TRUE(contains(e.what(), "\"nowhere.cuh\" (included from k.cu:4) was not found in: ., " +
                                       dir_ + "/inc"))
        << e.what();
  }
}

// -- issue 18: preprocessor semantics as a compiler gives them ----------------

// A backslash + CR LF joins lines like backslash + LF: the `#if 0` and the
// `#endif` below are inside line comments, so the __has_include group is
// live: V is 2, as nvcc gives.
TEST_F(SealedTest, CrLfSpliceBeforeIfZeroKeepsTheGroupLive) {
  write(dir_, "k.cu",
        "// x \\\r\n#if 0\r\n#if __has_include(\"opt.cuh\")\r\n#include \"opt.cuh\"\r\n#else\r\n"
        "#define V 3\r\n#endif\r\n// y \\\r\n#endif\r\n"
        "extern \"C\" __global__ void k(int* p) { *p = V; }\r\n");
  write(dir_, "opt.cuh", "#define V 2\r\n");
  CompileOptions o = options();
  expect_like_nvcc(o, "2");
  EXPECT_EQ(cached_->keys(o), fresh_->keys(o));
  write(dir_, "opt.cuh", "#define V 4\r\n");
  expect_like_nvcc(o, "4");
}

// `#include_next` goes on after the -I folder the current header was found
// in (d1 -> d2 -> d3), as nvcc -I d1 -I d2 -I d3 does; a header edited at the
// end of the chain changes the result.
TEST_F(SealedTest, IncludeNextContinuesAfterTheHeadersFolder) {
  write(dir_, "k.cu",
        "#include <x.h>\nextern \"C\" __global__ void k(int* p) { *p = A * 100 + B * 10 + C; }\n");
  write(dir_, "d1/x.h", "#pragma once\n#include_next <x.h>\n#define A 1\n");
  write(dir_, "d2/x.h", "#ifndef D2\n#define D2\n#include_next \\\n  <x.h>\n#define B 2\n#endif\n");
  write(dir_, "d3/x.h", "#define C 3\n");
  CompileOptions o = options();
  o.include_dirs = {"d1", "d2", "d3"};
  ScopedCwd cwd(dir_);
  expect_like_nvcc(o, "123");
  write(dir_, "d3/x.h", "#define C 4\n");
  expect_like_nvcc(o, "124");
  // The order of -I decides: d2 first skips d1.
  o.include_dirs = {"d2", "d1", "d3"};
  write(dir_, "k.cu", "#include <x.h>\nextern \"C\" __global__ void k(int* p) { *p = B * 10 + C; }\n");
  expect_like_nvcc(o, "24");
}

// The same from a header NVRTC asks for (a computed include) and from one
// found next to its includer (its #include_next starts at the first -I).
TEST_F(SealedTest, IncludeNextInAnAskedHeaderAndNextToTheIncluder) {
  write(dir_, "k.cu",
        "#include HEADER\n#include \"local.h\"\n"
        "extern \"C\" __global__ void k(int* p) { *p = Y * 100 + L; }\n");
  write(dir_, "d1/y.h", "#include_next <y.h>\n");
  write(dir_, "d2/y.h", "#define Y 7\n");
  write(dir_, "local.h", "#include_next <local.h>\n");
  write(dir_, "d2/local.h", "#define L 5\n");
  CompileOptions o = options();
  o.include_dirs = {"d1", "d2"};
  o.defines = {"HEADER=<y.h>"};
  ScopedCwd cwd(dir_);
  expect_like_nvcc(o, "705");
  write(dir_, "d2/y.h", "#define Y 8\n");
  expect_like_nvcc(o, "805");
}

// `#line` renames the file in NVRTC's complaints but not the folder a quoted
// include is searched in: the computed include below is src/w.cuh (nvcc's
// answer too), not other/w.cuh and not inc/w.cuh.
TEST_F(SealedTest, LineDirectiveDoesNotMoveTheIncludeSearch) {
  write(dir_, "src/k.cu",
        "#line 1 \"other/gen.cu\"\n#define H \"w.cuh\"\n#include H\n" + std::string(kKernel));
  write(dir_, "src/w.cuh", "#define V 1\n");
  write(dir_, "other/w.cuh", "#define V 2\n");
  write(dir_, "inc/w.cuh", "#define V 3\n");
  CompileOptions o;
  o.source_path = "src/k.cu";
  o.ptx_arch = "compute_80";
  o.include_dirs = {"inc"};
  ScopedCwd cwd(dir_);
  expect_like_nvcc(o, "1");
  write(dir_, "src/w.cuh", "#define V 4\n");
  expect_like_nvcc(o, "4");
}

// Two files in different folders that NVRTC names alike: a clear error.
// -- issue 18: time macros, as ccache treats them -----------------------------

int64_t counter(cache::Storage& s, const std::string& name) {
  return s.local()->stats().counter(name);
}

// __TIME__ in the source or __TIMESTAMP__ / __TIME__ in a header NVRTC read
// (literally or through a computed include): compiled every time, never
// stored, counted (the source's as a time-macro compile: it is never looked
// up either, a hit would be another second's stamp; a header's as an
// uncached compile, found by the seal in the bytes NVRTC read). The stamp is
// unused here, so each result still equals a compile without a store.
TEST_F(SealedTest, TimeMacroIsCompiledNeverStoredAndCounted) {
  const std::string time_source =
      "#include \"t.cuh\"\n#include HEADER\n#define STAMP __TIME__\n" + std::string(kKernel);
  write(dir_, "k.cu", time_source);
  write(dir_, "t.cuh", "#define V 1\n");
  write(dir_, "asked.cuh", "// no time here\n");
  CompileOptions o = options();
  o.defines = {"HEADER=\"asked.cuh\""};
  for (const char* where : {"source", "included header", "computed include"}) {
    if (std::string(where) == "included header") {
      write(dir_, "k.cu", "#include \"t.cuh\"\n#include HEADER\n" + std::string(kKernel));
      write(dir_, "t.cuh", "#define V 1\n#define STAMP __TIMESTAMP__\n");
    } else if (std::string(where) == "computed include") {
      write(dir_, "t.cuh", "#define V 1\n");
      write(dir_, "asked.cuh", "#define ASKED_STAMP __TIME__\n");
    }
    const char* counted = std::string(where) == "source" ? "uncached_time_macros" : "uncached_compiles";
    int64_t before = counter(*storage_, counted);
    for (int i = 0; i < 2; ++i) {
      CompileResult want = fresh_->compile(o);
      CompileResult got = cached_->compile(o);
      EXPECT_EQ(got.hits(), 0) << where;
      EXPECT_EQ(got.bundle, want.bundle) << where;
    }
    EXPECT_EQ(counter(*storage_, counted) - before, 2) << where;
    EXPECT_EQ(storage_->local()->stats().entries, 0u) << where;
  }
  // ccache's sloppiness=time_macros: cached like any other compile.
  write(dir_, "k.cu", time_source);
  cache::StorageOptions sloppy_options;
  sloppy_options.local_dir = dir_ + "/sloppy";
  sloppy_options.sloppy_time_macros = true;
  cache::Storage sloppy(sloppy_options);
  Compiler sloppy_compiler(toolkit_, &sloppy);
  EXPECT_EQ(sloppy_compiler.compile(o).hits(), 0);
  EXPECT_EQ(sloppy_compiler.compile(o).hits(), 1);
  EXPECT_EQ(counter(sloppy, "uncached_time_macros"), 0);
  // ... and what it stored is never served to a compile that is not sloppy.
  cache::StorageOptions strict_options;
  strict_options.local_dir = dir_ + "/sloppy";
  cache::Storage strict(strict_options);
  EXPECT_EQ(Compiler(toolkit_, &strict).compile(o).hits(), 0);
  // Nor where only a header uses it (found by the seal, after the key).
  write(dir_, "k.cu", "#include \"t.cuh\"\n#include HEADER\n" + std::string(kKernel));
  write(dir_, "t.cuh", "#define V 1\n#define STAMP __TIMESTAMP__\n");
  EXPECT_EQ(sloppy_compiler.compile(o).hits(), 0);
  EXPECT_EQ(sloppy_compiler.compile(o).hits(), 1);
  EXPECT_EQ(Compiler(toolkit_, &strict).compile(o).hits(), 0) << "a sloppy entry reached a strict lookup";
}

// __DATE__ in the source is keyed by its value, local time as NVRTC formats
// it: two time zones 26 hours apart are always two dates, so two keys, each
// result equal to a compile without a store (the date is in the PTX).
TEST_F(SealedTest, DateMacroIsKeyedByTheDate) {
  write(dir_, "k.cu",
        "__device__ const char DATE[] = __DATE__;\n"
        "extern \"C\" __global__ void k(char* p, int i) { p[0] = DATE[i]; }\n");
  const char* old = std::getenv("TZ");
  std::string saved = old ? old : "";
  std::vector<std::string> ptxs;
  std::vector<Hash128> keys;
  for (const char* tz : {"Etc/GMT-14", "Etc/GMT+12"}) {
    ::setenv("TZ", tz, 1);
    ::tzset();
    CompileResult r = exact(options());
    EXPECT_EQ(r.hits(), 1) << tz;
    ptxs.push_back(ptx(r));
    keys.push_back(r.targets[0].key);
  }
  if (old) {
    ::setenv("TZ", saved.c_str(), 1);
  } else {
    ::unsetenv("TZ");
  }
  ::tzset();
  EXPECT_NE(keys[0], keys[1]);
  EXPECT_NE(ptxs[0], ptxs[1]) << "NVRTC's __DATE__ is not local time";
}

}  // namespace
}  // namespace kcache::compiler
