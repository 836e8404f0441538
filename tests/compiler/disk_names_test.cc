// `kcache compile` hands NVRTC the user's headers in memory, each named by a
// `#line` with the name NVRTC itself gives the file when it reads it from
// disk (includes.h, handed_text). So __FILE__ in a header and the names in
// NVRTC's diagnostics are NVRTC's own (issue 27): each case compiles through
// Compiler (a miss, then a hit from the store) and through the real NVRTC,
// reading the same files with the same -I folders from the same working
// folder, and the PTX and the log must be equal.
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cache/storage.h"
#include "common/error.h"
#include "common/file_system.h"
#include "compiler/compiler.h"
#include "compiler/toolkit.h"
#include "tests/compiler/real_nvrtc.h"
#include "tests/compiler/test_files.h"
#include "tests/testing/temp_dir.h"

namespace kcache::compiler {
namespace {

using testing::ScopedCwd;

class DiskNamesTest : public RealNvrtcTest {
 protected:

  // NVRTC's own answer: the source read from `source_path`, named so, -I as
  // given (then the toolkit's), in dir_.
  cache::ProgramRecord nvrtcs(const std::string& source_path, const std::vector<std::string>& dirs) {
    std::string source = *read_input_file(dir_ / source_path);
    std::vector<std::string> options = {"-arch=compute_90"};
    for (const std::string& d : dirs) options.push_back("-I" + d);
    for (const std::string& d : toolkit_.include_dirs) options.push_back("-I" + d);
    ScopedCwd cwd(dir_.path());
    return real_->answer(source, source_path, options);
  }

  // kcache compile's PTX (a miss, then a hit) equals NVRTC's own.
  void expect_nvrtcs_ptx(const std::string& source_path, const std::vector<std::string>& dirs) {
    cache::ProgramRecord want = nvrtcs(source_path, dirs);
    ASSERT_EQ(want.compile_result, 0) << want.log;
    std::string ptx = want.output(cache::ProgramOutput::ptx).bytes;
    if (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();  // NVRTC's NUL
    cache::StorageOptions so;
    so.local_dir = dir_ / ("store" + std::to_string(stores_++));  // a miss first
    cache::Storage storage(so);
    ScopedCwd cwd(dir_.path());
    for (int round = 0; round < 2; ++round) {
      Compiler compiler(toolkit_, &storage);
      CompileOptions o;
      o.source_path = source_path;
      o.ptx_arch = "compute_90";
      o.include_dirs = dirs;
      o.lean = false;
      CompileResult r;
      ASSERT_NO_THROW(r = compiler.compile(o));
      EXPECT_EQ(r.hits(), round);
      ASSERT_TRUE(r.targets[0].entry);
      EXPECT_EQ(std::string(r.targets[0].entry->payload()), ptx)
          << "-I " << (dirs.empty() ? "(none)" : dirs[0]);
    }
  }

  // A source NVRTC rejects: kcache compile's log (its CompileError's) is
  // NVRTC's own. Returns it.
  std::string expect_nvrtcs_log(const std::string& source_path,
                                const std::vector<std::string>& dirs) {
    cache::ProgramRecord want = nvrtcs(source_path, dirs);
    EXPECT_NE(want.compile_result, 0);
    ScopedCwd cwd(dir_.path());
    Compiler compiler(toolkit_, nullptr);
    CompileOptions o;
    o.source_path = source_path;
    o.ptx_arch = "compute_90";
    o.include_dirs = dirs;
    try {
      compiler.compile(o);
      ADD_FAILURE() << "compiled";
    } catch (const CompileError& e) {
      EXPECT_EQ(e.log(), want.log);
    }
    return want.log;
  }

  int stores_ = 0;
};

// A kernel returning __FILE__ of the headers it names.
std::string kernel(const std::string& includes, const std::vector<std::string>& functions) {
  std::string body;
  for (size_t i = 0; i < functions.size(); ++i) {
    body += "o[" + std::to_string(i) + "] = " + functions[i] + "();";
  }
  return includes + "\nextern \"C\" __global__ void k(const char** o) { " + body + " }\n";
}

std::string here(const std::string& function) {
  return "__device__ const char* " + function + "() { return __FILE__; }\n";
}

TEST_F(DiskNamesTest, EverySpellingOfAnIncludeFolder) {
  write("inc/sub/w.h", "#pragma once\n" + here("w") + "#include \"../up.h\"\n#include \"./same.h\"\n");
  write("inc/up.h", here("up"));
  write("inc/sub/same.h", here("same"));
  write("k.cu", kernel("#include \"sub/w.h\"", {"w", "up", "same"}));
  for (std::string d : {"inc", "inc/", "./inc", "inc//", "inc/.", "inc/sub/.."}) {
    expect_nvrtcs_ptx("k.cu", {d});
  }
}

TEST_F(DiskNamesTest, AnAbsoluteFolderKeepsTheSpellingSoKeysStayFreeOfTheCheckout) {
  // NVRTC would name the header "/<checkout>/inc/w.h"; kcache keeps "w.h",
  // so two checkouts share the key (docs/KEYS.md, "Residual limits").
  std::vector<std::vector<Hash128>> keys;
  for (const std::string checkout : {"one", "two/deeper"}) {
    write(checkout + "/inc/w.h", here("w"));
    write(checkout + "/k.cu", kernel("#include \"w.h\"", {"w"}));
    ScopedCwd cwd(dir_ / checkout);
    Compiler compiler(toolkit_, nullptr);
    CompileOptions o;
    o.source_path = "k.cu";
    o.ptx_arch = "compute_90";
    o.include_dirs = {dir_ / checkout + "/inc"};
    keys.push_back(compiler.keys(o));
  }
  EXPECT_EQ(keys[0], keys[1]);
}

TEST_F(DiskNamesTest, AngledIncludesAndTheWorkingFolderAsIncludeFolder) {
  write("top.h", here("top"));
  write("inc/sub/w.h", here("w"));
  write("k.cu", kernel("#include <top.h>\n#include <sub/w.h>", {"top", "w"}));
  expect_nvrtcs_ptx("k.cu", {".", "inc"});
  expect_nvrtcs_ptx("k.cu", {"./", "inc/"});
}

TEST_F(DiskNamesTest, ASourceInAFolderAndHeadersNextToIt) {
  write("pkg/p.h", here("p") + "#include \"deeper/q.h\"\n");
  write("pkg/deeper/q.h", here("q") + "#include \"../../top.h\"\n");
  write("top.h", here("top"));
  write("pkg/k.cu", kernel("#include \"p.h\"", {"p", "q", "top"}));
  expect_nvrtcs_ptx("pkg/k.cu", {});
  expect_nvrtcs_ptx("pkg/k.cu", {"pkg"});
}

TEST_F(DiskNamesTest, IncludeNextAndTwoFilesOfOneSpelling) {
  // inc1/x.h goes on to inc2/x.h; a.h and b.h each include their own config.h.
  write("inc1/x.h", here("x1") + "#include_next <x.h>\n");
  write("inc2/x.h", here("x2"));
  write("one/a.h", "#include \"config.h\"\n__device__ const char* a() { return config(); }\n");
  write("one/config.h", "__device__ const char* config() { return __FILE__; }\n");
  write("two/b.h", "#include \"config.h\"\n__device__ const char* b() { return config2(); }\n");
  write("two/config.h", "__device__ const char* config2() { return __FILE__; }\n");
  write("k.cu", kernel("#include <x.h>\n#include \"one/a.h\"\n#include \"two/b.h\"",
                       {"x1", "x2", "a", "b"}));
  expect_nvrtcs_ptx("k.cu", {"inc1", "inc2"});
}

TEST_F(DiskNamesTest, ComputedIncludesNextToTheirIncluderAndThroughAFolder) {
  // NVRTC asks for these (the scanner cannot see them): kcache hands each
  // under the name NVRTC would give it.
  write("inc/sub/w.h", "#define NEXT \"n.h\"\n#include NEXT\n#define VIA <v.h>\n#include VIA\n");
  write("inc/sub/n.h", here("n"));
  write("inc2/v.h", here("v"));
  write("k.cu", kernel("#include \"sub/w.h\"", {"n", "v"}));
  expect_nvrtcs_ptx("k.cu", {"./inc", "inc2"});
}

// Two cases a review found (s8-attack-compile.md), now NVRTC's answers.
TEST_F(DiskNamesTest, AQuotedAndAnAngledSpellingOfTwoFilesInTheSource) {
  write("b.h", "#define A 1\n");
  write("inc/b.h", "#define B 20\n");
  write("k.cu", "#include \"b.h\"\n#include <b.h>\n"
                "extern \"C\" __global__ void k(int* o) { *o = A + B; }\n");
  expect_nvrtcs_ptx("k.cu", {"inc"});
  write("k2.cu", "#include <b.h>\n#include \"b.h\"\n"
                 "extern \"C\" __global__ void k(int* o) { *o = A + B; }\n");
  expect_nvrtcs_ptx("k2.cu", {"inc"});
}

TEST_F(DiskNamesTest, APragmaOnceHeaderReachedByTwoSpellingsIsCompiledOnce) {
  write("lib/b.h", "#pragma once\nstruct S { int v; };\n" + here("b"));
  write("lib/a.h", "#include \"b.h\"\n");
  write("k.cu", kernel("#include \"lib/b.h\"\n#include \"lib/a.h\"", {"b"}));
  expect_nvrtcs_ptx("k.cu", {});
  write("k3.cu", kernel("#include <b.h>\n#include \"lib/b.h\"", {"b"}));
  expect_nvrtcs_ptx("k3.cu", {"lib"});
}

// The second review (s8-review.md): a file linked from two folders finds
// its quoted includes next to each link, and the #line name of one header
// may be the spelling of another.
TEST_F(DiskNamesTest, AFileLinkedFromTwoFoldersFindsItsIncludesNextToEachLink) {
  write("real/b.h", "#include \"c.h\"\n");
  write("p/c.h", "__device__ int from_p = 1;\n");
  write("q/c.h", "__device__ int from_q = 2;\n");
  ASSERT_EQ(::symlink("../real/b.h", (dir_ / "p/b.h").c_str()), 0);
  ASSERT_EQ(::symlink("../real/b.h", (dir_ / "q/b.h").c_str()), 0);
  write("k.cu", "#include \"p/b.h\"\n#include \"q/b.h\"\n"
                "extern \"C\" __global__ void k(int* o) { *o = from_p + from_q; }\n");
  expect_nvrtcs_ptx("k.cu", {});
}

TEST_F(DiskNamesTest, AComputedIncludeInAHeaderWhoseNameIsAnothersSpelling) {
  write("inc/x.h", "#define M \"y.h\"\n#include M\n__device__ int in_x = 1;\n");
  write("inc/y.h", "__device__ int in_y = 1;\n");
  write("d/inc/x.h", "__device__ int in_dx = 1;\n");
  write("d/w.h", "#include \"inc/x.h\"\n");
  write("k.cu", "#include <x.h>\n#include \"d/w.h\"\n"
                "extern \"C\" __global__ void k(int* o) { *o = in_x + in_y + in_dx; }\n");
  expect_nvrtcs_ptx("k.cu", {"inc"});
}

TEST_F(DiskNamesTest, ADiagnosticInAHeaderNamesItAsNvrtcDoes) {
  write("inc/sub/bad.h", "#pragma once\n__device__ int bad() { return undefined_thing; }\n");
  write("k.cu", "#include \"sub/bad.h\"\nextern \"C\" __global__ void k(int* o) { *o = bad(); }\n");
  std::string log = expect_nvrtcs_log("k.cu", {"inc"});
  EXPECT_NE(log.find("inc/sub/bad.h(2): error"), std::string::npos) << log;
}

TEST_F(DiskNamesTest, AByteOrderMarkIsRefusedAsNvrtcRefusesIt) {
  // NVRTC takes no byte order mark in a header (13.0); its complaint about
  // one must be the same, at the same place.
  write("inc/bom.h", "\xEF\xBB\xBF" + here("bom"));
  write("k.cu", kernel("#include \"bom.h\"", {"bom"}));
  expect_nvrtcs_log("k.cu", {"inc"});
}

TEST_F(DiskNamesTest, TheSameHeaderThroughAnotherFolderSpellingIsAnotherKey) {
  // __FILE__ differs, so the key must: "-I inc" and "-I ./inc" never share.
  write("inc/w.h", here("w"));
  write("k.cu", kernel("#include \"w.h\"", {"w"}));
  ScopedCwd cwd(dir_.path());
  Compiler compiler(toolkit_, nullptr);
  CompileOptions o;
  o.source_path = "k.cu";
  o.ptx_arch = "compute_90";
  o.include_dirs = {"inc"};
  std::vector<Hash128> a = compiler.keys(o);
  o.include_dirs = {"./inc"};
  EXPECT_NE(compiler.keys(o), a);
}

}  // namespace
}  // namespace kcache::compiler
