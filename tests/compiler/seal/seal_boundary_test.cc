// The seal's boundary (issue 18): NVRTC reads no user file that kcache did
// not hand it, whatever name the kernel forms (absolute, `..`, computed,
// probed by __has_include), and every header it reads from the toolkit's
// include folders is keyed. One test per case: after an edit, a compile
// through the store gives exactly what a compile without a store (--no-store)
// gives of the files as they are now, and where the answer is a value, the
// value `nvcc -ptx` gives. A stale hit (the old result served after the edit)
// fails these tests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <regex>
#include <string>

#include "cache/storage.h"
#include "common/error.h"
#include "common/file_system.h"
#include "compiler/compiler.h"
#include "compiler/nvrtc/nvrtc.h"
#include "compiler/toolkit.h"
#include "tests/compiler/test_files.h"
#include "tests/compiler/toolkit_copy.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kcache::compiler {
namespace {

using testing::edit_toolkit_header;
using testing::make_toolkit_copy;
using testing::ScopedEnv;
using testing::test_dir;
using testing::write;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const char kStringize[] = "#define STR2(x) #x\n#define STR(x) STR2(x)\n";
const char kKernel[] = "extern \"C\" __global__ void k(int* p) { *p = V; }\n";

// The constant kKernel stores, read from its PTX ("mov.u32 %r1, 7;").
std::optional<long> stored_constant(const std::string& ptx) {
  static const std::regex mov(R"(mov\.[bsu]32\s+%r\d+,\s*(-?\d+);)");
  std::smatch m;
  if (!std::regex_search(ptx, m, mov)) return std::nullopt;
  return std::stol(m[1].str());
}

class SealBoundaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_dir();
    real_toolkit_ = find_toolkit("");
    use_toolkit(real_toolkit_);
  }

  // Compiles with `toolkit` from now on (a fresh store for it).
  void use_toolkit(const Toolkit& toolkit) {
    toolkit_ = toolkit;
    cached_.reset();
    storage_.reset();
    cache::StorageOptions options;
    options.local_dir = dir_ + "/store";
    storage_ = std::make_unique<cache::Storage>(options);
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

  // Compiles through the store twice (a miss or a hit, then a hit where the
  // result was stored) and once without a store (--no-store): the three
  // bundles are equal. Returns the second compile through the store.
  CompileResult exact(const CompileOptions& o, const std::string& what = "") {
    CompileResult want = fresh_->compile(o);
    CompileResult first = cached_->compile(o);
    CompileResult second = cached_->compile(o);
    EXPECT_TRUE(first.bundle == want.bundle)
        << what << ": a compile through the store differs from a --no-store compile (a stale "
        << "hit): it stores " << describe(first) << ", --no-store " << describe(want);
    EXPECT_TRUE(second.bundle == want.bundle)
        << what << ": a hit differs from a --no-store compile: it stores " << describe(second)
        << ", --no-store " << describe(want);
    return second;
  }

  // The value a bundle's kernel stores and whether it was a hit, for messages
  // (a bundle is too long to print).
  static std::string describe(const CompileResult& r) {
    std::optional<long> v = stored_constant(r.bundle);
    return (v ? std::to_string(*v) : std::string("?")) + (r.hits() ? " (a hit)" : " (compiled)");
  }

  long value(const CompileResult& r) {
    std::optional<long> v = stored_constant(std::string(r.targets.back().entry->payload()));
    EXPECT_TRUE(v) << r.targets.back().entry->payload();
    return v.value_or(-1);
  }

  // The constant `nvcc -ptx` stores for `o` (its -I and -D as nvcc flags),
  // with `extra` flags, compiled in `cwd` (the source's folder by default).
  long nvcc_value(const CompileOptions& o, const std::vector<std::string>& extra = {}) {
    const std::string nvcc = real_toolkit_.root + "/bin/nvcc";
    if (::access(nvcc.c_str(), X_OK) != 0) {
      ADD_FAILURE() << "no nvcc at " << nvcc << ": the semantic check needs the toolkit's nvcc";
      return -2;
    }
    const std::string out = dir_ + "/nvcc.ptx";
    std::vector<std::string> argv = {nvcc, "-ptx", "-arch=" + o.ptx_arch};
    for (const std::string& i : o.include_dirs) argv.push_back("-I" + i);
    for (const std::string& d : o.defines) argv.push_back("-D" + d);
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(o.source_path);
    argv.push_back("-o");
    argv.push_back(out);
    std::filesystem::create_directories(dir_ + "/nvcc-tmp");
    kcache::testing::CommandResult r =
        kcache::testing::run_command(argv, {{"TMPDIR", dir_ + "/nvcc-tmp"}});
    EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
    std::optional<std::string> ptx = read_file(out);
    if (!ptx) return -3;
    std::remove(out.c_str());
    std::optional<long> v = stored_constant(*ptx);
    EXPECT_TRUE(v) << *ptx;
    return v.value_or(-1);
  }

  // exact(), then the value must be `want` and what nvcc gives.
  CompileResult expect_value(const CompileOptions& o, long want, const std::string& what,
                             const std::vector<std::string>& nvcc_extra = {}) {
    CompileResult r = exact(o, what);
    EXPECT_EQ(value(r), want) << what;
    EXPECT_EQ(nvcc_value(o, nvcc_extra), want) << what << ": nvcc -ptx gives another value";
    return r;
  }

  std::string dir_;
  Toolkit real_toolkit_, toolkit_;
  std::unique_ptr<cache::Storage> storage_;
  std::unique_ptr<Compiler> cached_, fresh_;
};

// `#define H "/abs/x.h"` + `#include H`: a name the scanner cannot read and
// NVRTC would open by itself.
TEST_F(SealBoundaryTest, AbsoluteComputedIncludeIsKeyed) {
  const std::string x = write(dir_, "abs/x.h", "#define V 1\n");
  write(dir_, "k.cu", "#define H \"" + x + "\"\n#include H\n" + kKernel);
  CompileResult before = expect_value(options(), 1, "first");
  write(dir_, "abs/x.h", "#define V 2\n");
  CompileResult after = expect_value(options(), 2, "x.h edited");
  EXPECT_NE(after.targets[0].key, before.targets[0].key);
}

// The build system's pattern: the config header passed by absolute path.
TEST_F(SealBoundaryTest, DefineOfAnAbsoluteConfigHeaderIsKeyed) {
  const std::string config = write(dir_, "build/config.h", "#define V 10\n");
  write(dir_, "k.cu", std::string("#include CONFIG\n") + kKernel);
  CompileOptions o = options();
  o.defines = {"CONFIG=\"" + config + "\""};
  CompileResult before = expect_value(o, 10, "first");
  write(dir_, "build/config.h", "#define V 11\n");
  CompileResult after = expect_value(o, 11, "config.h edited");
  EXPECT_NE(after.targets[0].key, before.targets[0].key);
  // Back to the first content: equal to a fresh compile again (a hit is fine).
  write(dir_, "build/config.h", "#define V 10\n");
  expect_value(o, 10, "config.h restored");
}

// A header included by a literal absolute spelling, whose own computed include
// NVRTC would resolve next to that absolute name on disk.
TEST_F(SealBoundaryTest, LiteralAbsoluteIncluderWithAComputedIncludeInside) {
  const std::string outer =
      write(dir_, "lib/outer.h", "#define INNER \"inner.h\"\n#include INNER\n");
  write(dir_, "lib/inner.h", "#define V 20\n");
  write(dir_, "inner.h", "#error the source's folder is not the includer's\n");
  write(dir_, "k.cu", "#include \"" + outer + "\"\n" + kKernel);
  CompileResult before = expect_value(options(), 20, "first");
  write(dir_, "lib/inner.h", "#define V 21\n");
  CompileResult after = expect_value(options(), 21, "inner.h edited");
  EXPECT_NE(after.targets[0].key, before.targets[0].key);
}

// 40 `../` climb out of any folder to the root; the rest of the name is the
// absolute path of a real file under the test's folder.
TEST_F(SealBoundaryTest, DotDotEscapeCannotReachAnUnkeyedFile) {
  write(dir_, "esc/x.h", "#define V 30\n");
  std::string up;
  for (int i = 0; i < 40; ++i) up += "../";
  const std::string name = up + dir_.substr(1) + "/esc/x.h";
  write(dir_, "k.cu", "#define H \"" + name + "\"\n#include H\n" + kKernel);
  CompileResult before = expect_value(options(), 30, "first");
  write(dir_, "esc/x.h", "#define V 31\n");
  CompileResult after = expect_value(options(), 31, "x.h edited");
  EXPECT_NE(after.targets[0].key, before.targets[0].key);
  // The same climb from a handed header in a deeper folder.
  write(dir_, "deep/er/h.cuh", "#define H2 \"" + name + "\"\n#include H2\n");
  write(dir_, "k.cu", std::string("#include \"deep/er/h.cuh\"\n") + kKernel);
  expect_value(options(), 31, "through a header");
  write(dir_, "esc/x.h", "#define V 32\n");
  expect_value(options(), 32, "x.h edited again");
}

// A computed `..` name is searched as a compiler searches it: next to the
// includer first, then in the -I folders; a file appearing next to the
// includer takes over, and an edit of either is seen.
TEST_F(SealBoundaryTest, DotDotNameResolvesFromTheIncluderThenTheIncludeFolders) {
  write(dir_, "src/k.cu", std::string("#define H \"../common/x.h\"\n#include H\n") + kKernel);
  write(dir_, "inc/common/x.h", "#define V 33\n");
  CompileOptions o = options("src/k.cu");
  o.include_dirs = {dir_ + "/inc/sub"};
  std::filesystem::create_directories(dir_ + "/inc/sub");
  expect_value(o, 33, "through -I");
  write(dir_, "inc/common/x.h", "#define V 34\n");
  expect_value(o, 34, "the -I one edited");
  write(dir_, "common/x.h", "#define V 35\n");  // src/../common/x.h
  expect_value(o, 35, "next to the includer");
  write(dir_, "common/x.h", "#define V 36\n");
  expect_value(o, 36, "next to the includer, edited");
}

// `#if __has_include(P)` with P an absolute path macro: absent, then created,
// then edited, then gone.
TEST_F(SealBoundaryTest, ComputedHasIncludeOfAnAbsoluteNameAppearing) {
  const std::string opt = dir_ + "/opt/x.h";
  write(dir_, "k.cu",
        "#define P \"" + opt +
            "\"\n#if __has_include(P)\n#include P\n#else\n#define V 40\n#endif\n" + kKernel);
  CompileResult absent = expect_value(options(), 40, "absent");
  write(dir_, "opt/x.h", "#define V 41\n");
  CompileResult present = expect_value(options(), 41, "created");
  EXPECT_TRUE(present.bundle != absent.bundle);
  write(dir_, "opt/x.h", "#define V 42\n");
  expect_value(options(), 42, "edited");
  ASSERT_EQ(std::remove(opt.c_str()), 0);
  expect_value(options(), 40, "removed");
}

// A header a site install put into the toolkit's include folder (as cuDNN and
// NCCL do): adding it, then editing it, changes the key of the kernel that
// includes it, and of no other kernel.
TEST_F(SealBoundaryTest, HeaderAddedToAToolkitIncludeFolderIsKeyed) {
  const std::string copy = dir_ + "/cuda";
  make_toolkit_copy(real_toolkit_.root, copy);
  use_toolkit(find_toolkit(copy));  // --cuda-path COPY
  const std::vector<std::string> nvcc_sees_the_copy = {"-I" + copy + "/include"};
  write(dir_, "k.cu",
        "#if __has_include(<kcache_site.h>)\n#include <kcache_site.h>\n#else\n#define V 50\n"
        "#endif\n" +
            std::string(kKernel));
  write(dir_, "other.cu", std::string("#include <cuComplex.h>\n#define V 59\n") + kKernel);
  CompileResult absent = expect_value(options(), 50, "absent", nvcc_sees_the_copy);
  CompileResult other = expect_value(options("other.cu"), 59, "other", nvcc_sees_the_copy);

  write(copy, "include/kcache_site.h", "#define V 51\n");
  CompileResult added = expect_value(options(), 51, "added", nvcc_sees_the_copy);
  EXPECT_NE(added.targets[0].key, absent.targets[0].key);

  write(copy, "include/kcache_site.h", "#define V 52\n");
  CompileResult edited = expect_value(options(), 52, "edited", nvcc_sees_the_copy);
  EXPECT_NE(edited.targets[0].key, added.targets[0].key);

  // A kernel that does not include it keeps its key: a hit.
  CompileResult other_again = cached_->compile(options("other.cu"));
  EXPECT_EQ(other_again.hits(), 1) << "a header no one includes changed an unrelated key";
  EXPECT_EQ(other_again.targets[0].key, other.targets[0].key);
  EXPECT_TRUE(other_again.bundle == fresh_->compile(options("other.cu")).bundle);
}

// A toolkit header edited in place (the copy's symlink replaced by a modified
// copy of the real header): the kernels that include it get a new key.
TEST_F(SealBoundaryTest, ToolkitHeaderEditedInPlaceIsKeyed) {
  const std::string copy = dir_ + "/cuda";
  make_toolkit_copy(real_toolkit_.root, copy);
  use_toolkit(find_toolkit(copy));  // --cuda-path COPY
  const std::vector<std::string> nvcc_sees_the_copy = {"-I" + copy + "/include"};
  write(dir_, "k.cu",
        "#include <math_constants.h>\n#ifdef KCACHE_EDIT\n#define V KCACHE_EDIT\n#else\n"
        "#define V 60\n#endif\n" +
            std::string(kKernel));
  write(dir_, "other.cu", std::string("#include <cuComplex.h>\n#define V 69\n") + kKernel);
  CompileResult shipped = expect_value(options(), 60, "as shipped", nvcc_sees_the_copy);
  CompileResult other = expect_value(options("other.cu"), 69, "other", nvcc_sees_the_copy);

  edit_toolkit_header(real_toolkit_.root, copy, "math_constants.h", "#define KCACHE_EDIT 61\n");
  CompileResult edited = expect_value(options(), 61, "edited", nvcc_sees_the_copy);
  EXPECT_NE(edited.targets[0].key, shipped.targets[0].key);

  // Edited again, same size, at once: still seen.
  edit_toolkit_header(real_toolkit_.root, copy, "math_constants.h", "#define KCACHE_EDIT 62\n");
  CompileResult again = expect_value(options(), 62, "edited again", nvcc_sees_the_copy);
  EXPECT_NE(again.targets[0].key, edited.targets[0].key);

  CompileResult other_again = cached_->compile(options("other.cu"));
  EXPECT_EQ(other_again.hits(), 1) << "an edit of a header it does not include changed its key";
  EXPECT_EQ(other_again.targets[0].key, other.targets[0].key);
  EXPECT_TRUE(other_again.bundle == fresh_->compile(options("other.cu")).bundle);
}

// The same through the command line, as a user passes the toolkit: `kcache
// compile --cuda-path COPY` through a store equals `--no-store` after a header
// in the copy's include folder is edited.
TEST_F(SealBoundaryTest, CudaPathCopyHeaderEditedThroughTheCommandLine) {
  const std::string copy = dir_ + "/cuda";
  make_toolkit_copy(real_toolkit_.root, copy);
  write(copy, "include/kcache_site.h", "#define V 81\n");
  write(dir_, "k.cu", std::string("#include <kcache_site.h>\n") + kKernel);
  auto compile = [&](const std::string& out, bool store) {
    std::vector<std::string> argv = {kcache::testing::kcache_binary(),
                                     "--dir",
                                     dir_ + "/cli-store",
                                     "compile",
                                     dir_ + "/k.cu",
                                     "--cuda-path",
                                     copy,
                                     "--ptx",
                                     "compute_80",
                                     "-o",
                                     dir_ + "/" + out};
    if (!store) argv.push_back("--no-store");
    kcache::testing::CommandResult r = kcache::testing::run_command(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return read_file(dir_ + "/" + out).value_or("");
  };
  for (long v : {81L, 82L, 83L}) {
    write(copy, "include/kcache_site.h", "#define V " + std::to_string(v) + "\n");
    const std::string want = compile("fresh.kcb", false);
    const std::string first = compile("first.kcb", true);
    const std::string second = compile("second.kcb", true);
    EXPECT_EQ(stored_constant(want), v);
    EXPECT_EQ(stored_constant(first), v) << "a stale hit after the toolkit header was edited";
    EXPECT_TRUE(first == want) << v;
    EXPECT_TRUE(second == want) << v;
  }
}

// Where the boundary cannot be had (here: turned off, as a seccomp policy
// that refuses Landlock would), the compile runs, nothing is stored, the
// counter says so and one line on stderr says why.
TEST_F(SealBoundaryTest, WithoutTheSealTheResultIsCompiledButNotStored) {
  write(dir_, "k.cu", std::string("#define V 5\n") + kKernel);
  std::vector<std::string> argv = {kcache::testing::kcache_binary(), "--dir", dir_ + "/off-store",
                                   "compile", dir_ + "/k.cu", "--ptx", "compute_80", "-o",
                                   dir_ + "/off.kcb"};
  for (int i = 0; i < 2; ++i) {
    kcache::testing::CommandResult r = kcache::testing::run_command(argv, {{"KCACHE_SEAL", "off"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("NVRTC cannot be sealed here (turned off with KCACHE_SEAL=off)"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(stored_constant(read_file(dir_ + "/off.kcb").value_or("")), 5);
  }
  kcache::testing::CommandResult stats = kcache::testing::run_command(
      {kcache::testing::kcache_binary(), "--dir", dir_ + "/off-store", "-s", "--format", "json"});
  EXPECT_NE(stats.out.find("\"uncached_compiles\": 2"), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find("\"entries\": 0"), std::string::npos) << stats.out;
}

// The boundary, through the compiler: a path the kernel never spells, built
// by macros, probed by __has_include and included. The file is outside every
// folder kcache was given; editing it must change the next cached result,
// which it cannot unless kcache handed (and keyed) its bytes.
TEST_F(SealBoundaryTest, AnAbsolutePathBuiltByMacrosIsAskedAndKeyed) {
  kcache::testing::TempDir outside(kcache::testing::TempDir::Where::world_traversable_tmp);
  const std::string tmp = outside.path().substr(0, outside.path().rfind('/'));  // "/tmp"
  const std::string folder = outside.path().substr(tmp.size() + 1);  // "kcache-test-XXXXXX"
  ASSERT_EQ(tmp.find_first_not_of("/abcdefghijklmnopqrstuvwxyz"), std::string::npos) << tmp;
  write(outside.path(), "secret.h", "#define V 70\n");
  write(dir_, "k.cu",
        std::string(kStringize) + "#define SECRET STR(" + tmp + "/DIR/secret.h)\n" +
            "#if __has_include(SECRET)\n#include SECRET\n#else\n#define V 79\n#endif\n" + kKernel);
  CompileOptions o = options();
  o.defines = {"DIR=" + folder};
  CompileResult first = expect_value(o, 70, "first");
  write(outside.path(), "secret.h", "#define V 71\n");
  CompileResult edited = expect_value(o, 71, "edited");
  EXPECT_NE(edited.targets[0].key, first.targets[0].key);
  ASSERT_EQ(std::remove((outside / "secret.h").c_str()), 0);
  expect_value(o, 79, "removed");
}

// The boundary, at NVRTC itself: handed nothing, it never reads a user file,
// whatever the name (absolute, `..` climbing to the root, a name next to a
// handed header's absolute spelling), whether the source's name is absolute
// or relative. Each file would stop the compile with its marker if NVRTC read
// it; NVRTC may instead report (ask for) the name.
TEST_F(SealBoundaryTest, NvrtcNeverReadsAUserFileItWasNotHanded) {
  const std::string secret = write(dir_, "outside/secret.h", "#error kcache-secret-was-read\n");
  write(dir_, "outside/next.h", "#error kcache-next-was-read\n");
  std::string up;
  for (int i = 0; i < 40; ++i) up += "../";
  const std::string climbing = up + secret.substr(1);
  const std::string handed = dir_ + "/outside/handed.h";
  const std::vector<std::string> sources = {
      "#include \"" + secret + "\"\n",
      "#define S \"" + secret + "\"\n#include S\n",
      "#define S \"" + climbing + "\"\n#include S\n",
      "#define S \"" + secret + "\"\n#if __has_include(S)\n#include S\n#endif\n",
      "#include \"" + handed + "\"\n",
  };
  const Nvrtc& nvrtc = Nvrtc::open(toolkit_.nvrtc.path);
  // A relative source name resolves from the compiling thread's working
  // directory, an absolute one from its own folder: both are tried.
  for (const std::string& source_name : {dir_ + "/k.cu", std::string("k.cu")}) {
    for (const std::string& source : sources) {
      NvrtcInput input;
      input.source_name = source_name;
      input.source = source + "extern \"C\" __global__ void k(int* p) { *p = 1; }\n";
      input.headers = {{handed, "#include \"next.h\"\n"}};
      input.options = {"-arch=compute_80"};
      input.want_cubin = false;
      try {
        nvrtc.compile(input);
      } catch (const CompileError& e) {
        EXPECT_FALSE(contains(e.log(), "was-read"))
            << "NVRTC read a file it was not handed (source named " << source_name << "):\n"
            << source << e.log();
      }
    }
  }
}

// Preprocessor semantics as a compiler gives them (issue 18's last cases):
// here a compile through the store and one without agree on main, and both
// must also agree with nvcc.

// `\` + CR LF is a line splice: it joins `#if 0` into the comment above it, so
// the include under it is live.
TEST_F(SealBoundaryTest, CrLfSpliceBeforeIfZeroJoinsTheLines) {
  write(dir_, "k.cu",
        "#if 1 // spliced \\\r\n#if 0\r\n#include \"a.cuh\"\r\n#endif\r\n#ifndef V\r\n"
        "#define V 90\r\n#endif\r\n" +
            std::string(kKernel));
  write(dir_, "a.cuh", "#define V 91\r\n");
  expect_value(options(), 91, "first");
  write(dir_, "a.cuh", "#define V 92\r\n");
  expect_value(options(), 92, "a.cuh edited");
}

// `#include_next` continues after the -I folder the current header was found in.
TEST_F(SealBoundaryTest, IncludeNextContinuesAfterTheFolderOfTheCurrentHeader) {
  write(dir_, "inc1/x.cuh", "#pragma once\n#include_next <x.cuh>\n");
  write(dir_, "inc2/x.cuh", "#pragma once\n#define V 93\n");
  write(dir_, "k.cu", std::string("#include <x.cuh>\n") + kKernel);
  CompileOptions o = options();
  o.include_dirs = {dir_ + "/inc1", dir_ + "/inc2"};
  expect_value(o, 93, "first");
  write(dir_, "inc2/x.cuh", "#pragma once\n#define V 94\n");
  expect_value(o, 94, "the next one edited");
}

// `#line` renames the file for messages; includes are still searched next to
// the file itself.
TEST_F(SealBoundaryTest, LineDirectiveDoesNotMoveTheIncludeSearch) {
  write(dir_, "h.cuh", "#define V 95\n");
  write(dir_, "other/h.cuh", "#define V 99\n");
  write(dir_, "k.cu",
        std::string("#line 10 \"other/name.cu\"\n#define H \"h.cuh\"\n#include H\n") + kKernel);
  expect_value(options(), 95, "first");
  write(dir_, "h.cuh", "#define V 96\n");
  expect_value(options(), 96, "h.cuh edited");
}

// Found by a review that attacked the seal (each was a stale hit before).

// NVRTC expands -D values and name expressions too: __TIME__ there makes a
// result that must not be stored, as in the source.
TEST_F(SealBoundaryTest, TimeMacroInADefineIsCompiledButNotStored) {
  write(dir_, "k.cu", kKernel);
  CompileOptions o = options();
  o.defines = {"V=(__TIME__[7] - '0')"};
  CompileResult first = cached_->compile(o);
  CompileResult second = cached_->compile(o);
  EXPECT_EQ(first.hits() + second.hits(), 0) << "a __TIME__ result was stored";
  EXPECT_EQ(storage_->local()->stats().counter("uncached_time_macros"), 2);
}

TEST_F(SealBoundaryTest, TimeMacroInANameExpressionIsCompiledButNotStored) {
  write(dir_, "k.cu", "template <char C> __global__ void k(char* p) { *p = C; }\n");
  CompileOptions o = options();
  o.name_expressions = {"k<__TIME__[7]>"};
  CompileResult first = cached_->compile(o);
  CompileResult second = cached_->compile(o);
  EXPECT_EQ(first.hits() + second.hits(), 0) << "a __TIME__ result was stored";
}

// NVRTC writes the toolkit's folders into its output (__FILE__): a toolkit
// moved elsewhere gives other bytes, so its folders are keyed.
TEST_F(SealBoundaryTest, AToolkitMovedElsewhereKeysItsNewFolders) {
  const std::string first = dir_ + "/cuda1", second = dir_ + "/cuda2";
  make_toolkit_copy(real_toolkit_.root, first);
  write(first, "include/kcache_where.h", "#define WHERE __FILE__\n");
  use_toolkit(find_toolkit(first));
  write(dir_, "k.cu",
        "#include <kcache_where.h>\n"
        "extern \"C\" __global__ void k(char* p) { const char* w = WHERE; "
        "for (int i = 0; w[i]; ++i) p[i] = w[i]; }\n");
  CompileResult before = exact(options(), "first");
  std::filesystem::rename(first, second);
  use_toolkit(find_toolkit(second));  // the same store
  CompileResult after = exact(options(), "the toolkit moved");
  EXPECT_NE(after.targets[0].key, before.targets[0].key);
}

// A user's link into the toolkit, named by its absolute path: the link is
// the user's file (it can change while the toolkit does not).
TEST_F(SealBoundaryTest, AUserLinkIntoTheToolkitIsTheUsersFile) {
  const std::string link = dir_ + "/link.h";
  std::filesystem::create_symlink(real_toolkit_.root + "/include/cuda_fp16.h", link);
  write(dir_, "k.cu",
        std::string("#include HDR\n#if defined(__CUDA_BF16_H__)\n#define V 2\n"
                    "#elif defined(__CUDA_FP16_H__)\n#define V 1\n#endif\n") + kKernel);
  CompileOptions o = options();
  o.defines = {"HDR=\"" + link + "\""};
  expect_value(o, 1, "the link to cuda_fp16.h");
  std::filesystem::remove(link);
  std::filesystem::create_symlink(real_toolkit_.root + "/include/cuda_bf16.h", link);
  expect_value(o, 2, "the link retargeted to cuda_bf16.h");
}

// A folder where a computed __has_include looks, later replaced by a header.
TEST_F(SealBoundaryTest, AFolderReplacedByAHeaderIsNoticed) {
  const std::string h = dir_ + "/kc.h";
  std::filesystem::create_directories(h);
  write(dir_, "k.cu", "#define N \"" + h + "\"\n#if __has_include(N)\n#include N\n#else\n"
                      "#define V 1\n#endif\n" + kKernel);
  expect_value(options(), 1, "a folder");
  std::filesystem::remove(h);
  write(dir_, "kc.h", "#define V 2\n");
  expect_value(options(), 2, "a header now");
}

// A toolkit header whose name looks like a library is the toolkit's header.
TEST_F(SealBoundaryTest, AToolkitHeaderNamedLikeALibraryIsKeyed) {
  const std::string copy = dir_ + "/cuda";
  make_toolkit_copy(real_toolkit_.root, copy);
  use_toolkit(find_toolkit(copy));
  write(copy, "include/libkc.so.h", "#define V 1\n");
  write(dir_, "k.cu", std::string("#include <libkc.so.h>\n") + kKernel);
  const std::vector<std::string> nvcc_sees_the_copy = {"-I" + copy + "/include"};
  expect_value(options(), 1, "first", nvcc_sees_the_copy);
  write(copy, "include/libkc.so.h", "#define V 2\n");
  expect_value(options(), 2, "edited", nvcc_sees_the_copy);
}

// Found by the review's second round: the rounds of NVRTC before the last
// searched places that the last round never looked at again.

// A toolkit header in a subfolder includes "x.h", which only the user's -I
// folder has (an ask); then x.h appears next to that toolkit header, which
// NVRTC (and nvcc) search first.
TEST_F(SealBoundaryTest, AHeaderAppearingNextToAToolkitHeaderThatAskedIsKeyed) {
  const std::string copy = dir_ + "/cuda";
  make_toolkit_copy(real_toolkit_.root, copy);
  use_toolkit(find_toolkit(copy));
  write(copy, "include/sub/th.h", "#include \"x.h\"\n");
  write(dir_, "inc/x.h", "#define V 1\n");
  write(dir_, "k.cu", std::string("#include <sub/th.h>\n") + kKernel);
  CompileOptions o = options();
  o.include_dirs = {dir_ + "/inc"};
  const std::vector<std::string> nvcc_sees_the_copy = {"-I" + copy + "/include"};
  expect_value(o, 1, "x.h in the user's folder", nvcc_sees_the_copy);
  write(copy, "include/sub/x.h", "#define V 2\n");
  expect_value(o, 2, "x.h next to the toolkit header", nvcc_sees_the_copy);
}

// A computed `..` include NVRTC also searched beneath the toolkit's folders
// (include/cccl/../inc/h.h) before it asked.
TEST_F(SealBoundaryTest, AComputedDotDotIncludeAppearingInTheToolkitIsKeyed) {
  const std::string copy = dir_ + "/cuda";
  make_toolkit_copy(real_toolkit_.root, copy);
  use_toolkit(find_toolkit(copy));
  write(dir_, "inc/h.h", "#define V 1\n");
  write(dir_, "src/k.cu", std::string("#define H \"../inc/h.h\"\n#include H\n") + kKernel);
  CompileResult before = exact(options("src/k.cu"), "first");
  EXPECT_EQ(value(before), 1);
  write(copy, "include/inc/h.h", "#define V 2\n");
  exact(options("src/k.cu"), "inc/h.h appeared beneath the toolkit");
}

// Issue 27: what is NVRTC's own must not depend on the environment of the
// process that looks the entry up. Each case makes the entry in one
// environment, then changes the environment and the disk: a fresh compile
// differs, and kcache must miss instead of serving the entry.

// The stale-hit shapes below: what NVRTC's environment (its library folder,
// the driver's folders) adds to what it reads.
class SealBoundaryEnvTest : public SealBoundaryTest {};

// A computed __has_include of `path`: V 2 if it is there (its own V), else 1.
std::string has_include_kernel(const std::string& path) {
  return "#define P \"" + path + "\"\n#if __has_include(P)\n#include P\n#else\n#define V 1\n" +
         "#endif\n" + kKernel;
}

TEST_F(SealBoundaryEnvTest, AHeaderOnLdLibraryPathAppearingIsAMissInAnotherEnvironment) {
  std::filesystem::create_directories(dir_ + "/ldlib");
  write(dir_, "k.cu", has_include_kernel(dir_ + "/ldlib/cfg.h"));
  {
    ScopedEnv env("LD_LIBRARY_PATH", dir_ + "/ldlib");
    EXPECT_EQ(value(exact(options(), "made with the folder on LD_LIBRARY_PATH")), 1);
  }
  write(dir_, "ldlib/cfg.h", "#define V 2\n");
  CompileResult r = exact(options(), "the header appeared, LD_LIBRARY_PATH unset");
  EXPECT_EQ(value(r), 2);
}

TEST_F(SealBoundaryEnvTest, AFileInTheDriversCacheFolderIsAMissInAnotherEnvironment) {
  std::filesystem::create_directories(dir_ + "/jit");
  write(dir_, "k.cu", has_include_kernel(dir_ + "/jit/config"));
  {
    ScopedEnv env("CUDA_CACHE_PATH", dir_ + "/jit");
    EXPECT_EQ(value(exact(options(), "made with CUDA_CACHE_PATH there")), 1);
    write(dir_, "jit/config", "#define V 2\n");
    // Served, a name there that is no header's is answered "no such file"
    // (seal.h, SealPolicy::hidden_folders): NVRTC compiles as without it,
    // fresh or through the store alike.
    EXPECT_EQ(value(exact(options(), "config appeared in the driver's folder")), 1);
  }
  CompileResult r = exact(options(), "CUDA_CACHE_PATH unset: config is the user's");
  EXPECT_EQ(value(r), 2);
}

TEST_F(SealBoundaryEnvTest, AHeaderInTheDriversCacheFolderIsKeyed) {
  std::filesystem::create_directories(dir_ + "/home/.nv");
  ScopedEnv home("HOME", dir_ + "/home");
  write(dir_, "k.cu", has_include_kernel(dir_ + "/home/.nv/cfg.h"));
  EXPECT_EQ(value(exact(options(), "absent")), 1);
  write(dir_, "home/.nv/cfg.h", "#define V 2\n");
  EXPECT_EQ(value(exact(options(), "a header in $HOME/.nv")), 2);
}

// A library-named header reached through a link to the toolkit's folder
// (/usr/local/cuda for /usr/local/cuda-13.0): NVRTC can read it, so its bytes
// are keyed.
TEST_F(SealBoundaryEnvTest, ALibraryNamedToolkitFileByAnotherSpellingIsKeyed) {
  const std::string copy = dir_ + "/cuda-13.0";
  make_toolkit_copy(real_toolkit_.root, copy);
  std::filesystem::create_symlink(copy, dir_ + "/cuda");
  use_toolkit(find_toolkit(dir_ + "/cuda"));
  write(copy, "include/libkc.so", "#define V 1\n");
  write(dir_, "k.cu", "#define P \"" + dir_ + "/cuda/include/libkc.so\"\n#include P\n" + kKernel);
  EXPECT_EQ(value(exact(options(), "first")), 1);
  write(copy, "include/libkc.so", "#define V 2\n");
  EXPECT_EQ(value(exact(options(), "edited through the toolkit's real name")), 2);
}

// NVRTC may read its library folder. A header looked for there (a computed
// __has_include by absolute name) and then put there is what a fresh compile
// reads (and does not store): the entry made while it was absent must miss.
// The copy holds its own NVRTC, so its library folder is one a test can
// write.
// A toolkit whose NVRTC lies in a library folder of the test's own (a copy
// of NVRTC, links to the rest): returns the copy's root.
std::string use_toolkit_with_own_library(const std::string& dir, const Toolkit& real) {
  namespace fs = std::filesystem;
  const std::string copy = dir + "/cuda";
  fs::create_directories(copy + "/lib64");
  for (const fs::directory_entry& e : fs::directory_iterator(real.root)) {
    const std::string name = e.path().filename().string();
    if (name != "lib64" && name != "lib") fs::create_symlink(e.path(), copy + "/" + name);
  }
  const std::string lib = real.nvrtc.path.substr(0, real.nvrtc.path.rfind('/'));
  for (const fs::directory_entry& e : fs::directory_iterator(lib)) {
    const std::string name = e.path().filename().string();
    if (name.compare(0, 8, "libnvrtc") == 0) {
      fs::copy(e.path(), copy + "/lib64/" + name, fs::copy_options::copy_symlinks);
    } else {
      fs::create_symlink(e.path(), copy + "/lib64/" + name);
    }
  }
  return copy;
}

TEST_F(SealBoundaryEnvTest, AHeaderAppearingInNvrtcsLibraryFolderIsAMiss) {
  const std::string copy = use_toolkit_with_own_library(dir_, real_toolkit_);
  use_toolkit(find_toolkit(copy));
  ASSERT_EQ(toolkit_.nvrtc.path.rfind(copy + "/lib64/", 0), 0u) << toolkit_.nvrtc.path;
  // A header's name, and a library's (which the loader's own search for the
  // driver must not hide).
  for (const std::string name : {"kc.h", "libkc.so"}) {
    write(dir_, "k.cu", has_include_kernel(copy + "/lib64/" + name));
    EXPECT_EQ(value(exact(options(), name + " absent")), 1);
    write(copy, "lib64/" + name, "#define V 2\n");
    EXPECT_EQ(value(exact(options(), name + " in NVRTC's library folder")), 2);
  }
}

// A library NVRTC's __has_include found in its library folder, then removed:
// the entry made while it was there must miss (a review's stale hit).
TEST_F(SealBoundaryEnvTest, ALibraryRemovedFromNvrtcsLibraryFolderIsAMiss) {
  const std::string copy = use_toolkit_with_own_library(dir_, real_toolkit_);
  use_toolkit(find_toolkit(copy));
  write(copy, "lib64/libkc.so", std::string("\x7f" "ELF") + " a library");
  write(dir_, "k.cu", "#define P \"" + copy + "/lib64/libkc.so\"\n#if __has_include(P)\n" +
                          "#define V 2\n#else\n#define V 1\n#endif\n" + kKernel);
  EXPECT_EQ(value(exact(options(), "the library there")), 2);
  std::remove((copy + "/lib64/libkc.so").c_str());
  EXPECT_EQ(value(exact(options(), "the library removed")), 1);
}

// A link in NVRTC's library folder to a user's header: NVRTC alone reads
// the header (Landlock judges the file, which is not NVRTC's), so served it
// is served and keyed (a review: `__has_include` of it was false, stored).
TEST_F(SealBoundaryEnvTest, ALinkInNvrtcsLibraryFolderToAUserHeaderIsReadAndKeyed) {
  const std::string copy = use_toolkit_with_own_library(dir_, real_toolkit_);
  use_toolkit(find_toolkit(copy));
  write(dir_, "user/h.h", "#define V 5\n");
  ASSERT_EQ(::symlink((dir_ + "/user/h.h").c_str(), (copy + "/lib64/kcl.h").c_str()), 0);
  write(dir_, "k.cu", has_include_kernel(copy + "/lib64/kcl.h"));
  EXPECT_EQ(value(exact(options(), "a link to a user's header")), 5);
  write(dir_, "user/h.h", "#define V 6\n");
  EXPECT_EQ(value(exact(options(), "the header edited")), 6);
}

// NVRTC looks at $PWD; what nvrtc.cc leaves out for that must be a folder,
// never a path a kernel's __has_include also names.
TEST_F(SealBoundaryEnvTest, APwdNamingAHeaderDoesNotHideIt) {
  const std::string cfg = dir_ + "/pwd/cfg.h";
  std::filesystem::create_directories(dir_ + "/pwd");
  write(dir_, "k.cu", has_include_kernel(cfg));
  {
    ScopedEnv env("PWD", cfg);
    EXPECT_EQ(value(exact(options(), "made with PWD naming the absent header")), 1);
  }
  write(dir_, "pwd/cfg.h", "#define V 2\n");
  EXPECT_EQ(value(exact(options(), "the header appeared, PWD back")), 2);
}

}  // namespace
}  // namespace kcache::compiler
