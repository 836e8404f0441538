// `kcache compile`'s NVRTC reads the user's headers from disk itself (served,
// compiler.h). So __FILE__ in a header and the names in NVRTC's diagnostics
// are NVRTC's own (issue 27): each case compiles through
// Compiler (a miss, then a hit from the store) and through the real NVRTC,
// reading the same files with the same -I folders from the same working
// folder, and the PTX and the log must be equal.
#include <sys/stat.h>
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
#include "tests/compiler/toolkit_copy.h"
#include "tests/testing/temp_dir.h"

namespace kcache::compiler {
namespace {

using testing::ScopedCwd;

// NVRTC reads the disk itself through the seal.
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
      EXPECT_EQ(r.targets[0].not_stored, "");
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
  // NVRTC names it so (the -I as written is keyed): one key per checkout,
  // and __FILE__ is NVRTC's (AnAbsoluteFolderIsNvrtcsServed).
  EXPECT_NE(keys[0], keys[1]);
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

// Cases a scanner that hands headers in memory cannot answer as NVRTC does.
TEST_F(DiskNamesTest, AComputedAngledIncludeIsNotSearchedNextToItsIncluder) {
  write("b.h", "#define FROM 1\n");
  write("inc/b.h", "#define FROM 2\n");
  write("k.cu", "#include \"b.h\"\n#undef FROM\n#define ANGLED <b.h>\n#include ANGLED\n"
                "extern \"C\" __global__ void k(int* o) { *o = FROM; }\n");
  expect_nvrtcs_ptx("k.cu", {"inc"});
}

TEST_F(DiskNamesTest, HasIncludeOfAnAngledNameAfterAQuotedOne) {
  write("b.h", "#define FROM 1\n");
  write("inc/other.h", "\n");
  write("k.cu", "#include \"b.h\"\n#define N <b.h>\n"
                "extern \"C\" __global__ void k(int* o) { *o = __has_include(N); }\n");
  expect_nvrtcs_ptx("k.cu", {"inc"});
}

TEST_F(DiskNamesTest, AFileReachedByTwoSpellingsIsNamedAsNvrtcNamesIt) {
  write("lib/b.h", "#pragma once\n" + here("b"));
  write("lib/a.h", "#include \"./b.h\"\n");
  write("k.cu", kernel("#include \"lib/a.h\"\n#include \"lib/b.h\"", {"b"}));
  expect_nvrtcs_ptx("k.cu", {});
}

TEST_F(DiskNamesTest, AnAbsoluteFolderIsNvrtcsServed) {
  write("inc/w.h", here("w"));
  write("k.cu", kernel("#include \"w.h\"", {"w"}));
  expect_nvrtcs_ptx("k.cu", {dir_ / "inc"});
}

// NVRTC opens a folder named like the header in an -I folder, sees it is a
// folder and goes on to the next -I folder (measured); served, the seal
// answers that open with the folder, as the kernel does (a review found the
// compile refused: cuda_kernel always passes -I .).
TEST_F(DiskNamesTest, AFolderNamedLikeAHeaderIsPassedOver) {
  write("foo/keep.txt", "");
  write("inc/foo", "#define FOO 7\n" + here("foo"));
  write("k.cu", kernel("#include <foo>", {"foo"}));
  expect_nvrtcs_ptx("k.cu", {".", "inc"});
}


// Served, paths NVRTC named relative to the working folder are keyed
// relative to it: two checkouts share entries, and each is answered from its
// own files (CompileOptions::serve). Every answer is checked against the real
// NVRTC's in the same folder.
class ServedCheckoutsTest : public RealNvrtcTest {
 protected:
  void SetUp() override {
    RealNvrtcTest::SetUp();
    cache::StorageOptions so;
    so.local_dir = dir_ / "store";
    storage_ = std::make_unique<cache::Storage>(so);
  }

  // Compiles dir_/folder/k.cu there; its PTX must be NVRTC's own. Whether it
  // hit. `given`: this process stays in dir_ and the compile is given the
  // folder (CompileOptions::working_folder).
  bool compile_in(const std::string& folder, const std::vector<std::string>& dirs,
                  const std::vector<std::string>& nvrtc_options = {}, bool given = false) {
    std::string source = *read_input_file(dir_ / folder + "/k.cu");
    std::vector<std::string> options = {"-arch=compute_90"};
    options.insert(options.end(), nvrtc_options.begin(), nvrtc_options.end());
    for (const std::string& d : dirs) options.push_back("-I" + d);
    for (const std::string& d : toolkit_.include_dirs) options.push_back("-I" + d);
    std::string ptx;
    {
      ScopedCwd cwd(dir_ / folder);
      cache::ProgramRecord want = real_->answer(source, "k.cu", options);
      EXPECT_EQ(want.compile_result, 0) << want.log;
      ptx = want.output(cache::ProgramOutput::ptx).bytes;
      if (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
    }
    ScopedCwd cwd(given ? dir_.path() : dir_ / folder);
    Compiler compiler(toolkit_, storage_.get());
    CompileOptions o;
    o.source_path = given ? dir_ / folder + "/k.cu" : "k.cu";
    o.source_name = "k.cu";
    if (given) o.working_folder = dir_ / folder;
    o.ptx_arch = "compute_90";
    o.include_dirs = dirs;
    o.nvrtc_options = nvrtc_options;
    o.lean = false;
    CompileResult r = compiler.compile(o);
    EXPECT_EQ(std::string(r.targets[0].entry->payload()), ptx) << folder;
    EXPECT_EQ(r.targets[0].not_stored, "") << folder;
    return r.hits() == 1;
  }

  void checkout(const std::string& folder, const std::string& w) {
    write(folder + "/inc/w.h", "#define W " + w + "\n" + here("w"));
    write(folder + "/k.cu", "#include \"w.h\"\n#if __has_include(\"opt.h\")\n#include \"opt.h\"\n"
                            "#else\n#define OPT 0\n#endif\n"
                            "extern \"C\" __global__ void k(int* o, const char** f) "
                            "{ *o = W + OPT; *f = w(); }\n");
  }

  std::unique_ptr<cache::Storage> storage_;
};

TEST_F(ServedCheckoutsTest, TwoCheckoutsShareEntriesAndEachSeesItsOwnFiles) {
  checkout("one", "1");
  checkout("two/deeper", "1");
  EXPECT_FALSE(compile_in("one", {"inc"}));
  EXPECT_TRUE(compile_in("two/deeper", {"inc"}));
  checkout("two/deeper", "2");  // an edited header
  EXPECT_FALSE(compile_in("two/deeper", {"inc"}));
  EXPECT_TRUE(compile_in("one", {"inc"}));
  write("one/opt.h", "#define OPT 5\n");  // a file __has_include found absent
  EXPECT_FALSE(compile_in("one", {"inc"}));
  EXPECT_TRUE(compile_in("two/deeper", {"inc"}));
}

TEST_F(ServedCheckoutsTest, AGivenWorkingFolderIsKeyedAsTheProcesssOwnIs) {
  checkout("one", "1");
  checkout("two/deeper", "1");
  EXPECT_FALSE(compile_in("one", {"inc"}));
  EXPECT_TRUE(compile_in("two/deeper", {"inc"}, {}, /*given=*/true));
  checkout("two/deeper", "2");  // an edited header, found beneath the given folder
  EXPECT_FALSE(compile_in("two/deeper", {"inc"}, {}, true));
  EXPECT_TRUE(compile_in("one", {"inc"}, {}, true));
  write("one/opt.h", "#define OPT 5\n");  // absent before, beneath the given folder
  EXPECT_FALSE(compile_in("one", {"inc"}, {}, true));
  EXPECT_TRUE(compile_in("one", {"inc"}));
  // -lineinfo writes the folder NVRTC worked in: the given one, keyed.
  EXPECT_FALSE(compile_in("one", {"inc"}, {"-lineinfo"}, true));
  EXPECT_TRUE(compile_in("one", {"inc"}, {"-lineinfo"}));
  EXPECT_FALSE(compile_in("two/deeper", {"inc"}, {"-lineinfo"}, true));
}

TEST_F(ServedCheckoutsTest, AFolderAboveTheCheckoutIsEachCheckoutsOwn) {
  for (const std::string c : {"one", "two"}) {
    write(c + "/repo/k.cu", "#include \"w.h\"\nextern \"C\" __global__ void k(int* o) { *o = W; }\n");
  }
  write("one/deps/w.h", "#define W 1\n");
  write("two/deps/w.h", "#define W 2\n");
  EXPECT_FALSE(compile_in("one/repo", {"../deps"}));
  EXPECT_FALSE(compile_in("two/repo", {"../deps"}));
  write("two/deps/w.h", "#define W 1\n");
  EXPECT_TRUE(compile_in("two/repo", {"../deps"}));
}

TEST_F(ServedCheckoutsTest, AnAbsoluteFolderIsThatFolderFromEveryCheckout) {
  checkout("one", "1");
  checkout("two", "2");
  // A folder outside both (an installed header library): shared.
  write("shared/w.h", "#define W 7\n__device__ const char* w() { return __FILE__; }\n");
  const std::string shared = dir_ / "shared";
  EXPECT_FALSE(compile_in("one", {shared}));
  EXPECT_TRUE(compile_in("two", {shared}));
  write("shared/w.h", "#define W 8\n__device__ const char* w() { return __FILE__; }\n");
  EXPECT_FALSE(compile_in("two", {shared}));
  // A folder beneath the checkout, by its absolute name: checked by that name
  // and beneath the working folder (two's own inc/w.h differs: a miss).
  const std::string in_one = dir_ / "one/inc";
  EXPECT_FALSE(compile_in("one", {in_one}));
  EXPECT_TRUE(compile_in("one", {in_one}));
  EXPECT_FALSE(compile_in("two", {in_one}));
}

TEST_F(ServedCheckoutsTest, DebugInformationKeysTheWorkingFolder) {
  // NVRTC writes the working folder into -G's and -lineinfo's output.
  for (const std::string option : {"-lineinfo", "--device-debug"}) {
    checkout("one", "1");
    checkout("two", "1");
    EXPECT_FALSE(compile_in("one", {"inc"}, {option}));
    EXPECT_FALSE(compile_in("two", {"inc"}, {option}));
    EXPECT_TRUE(compile_in("two", {"inc"}, {option}));
  }
}

// #pragma once includes one file once and two copies twice: which names are
// one file is keyed with the bytes (a review of issue 27's serving found the
// copy answered from the entry of the link: seed 61, step 808).
TEST_F(ServedCheckoutsTest, OneFileUnderTwoNamesIsNotTwoCopies) {
  const std::string header = "#pragma once\n#ifdef W_SEEN\n#define TWICE 1\n#endif\n#define W_SEEN\n";
  const std::string source = "#include \"inc/w.h\"\n#include \"link.h\"\n#ifndef TWICE\n"
                             "#define TWICE 0\n#endif\n"
                             "extern \"C\" __global__ void k(int* o) { *o = TWICE; }\n";
  for (const std::string c : {"one", "two"}) {
    write(c + "/inc/w.h", header);
    write(c + "/k.cu", source);
  }
  ASSERT_EQ(::symlink("inc/w.h", (dir_ / "one/link.h").c_str()), 0);
  write("two/link.h", header);
  EXPECT_FALSE(compile_in("one", {}));  // one file: TWICE 0
  EXPECT_TRUE(compile_in("one", {}));
  EXPECT_FALSE(compile_in("two", {}));  // two copies: TWICE 1
  ASSERT_EQ(::unlink((dir_ / "one/link.h").c_str()), 0);
  write("one/link.h", header);
  EXPECT_TRUE(compile_in("one", {}));  // now two copies too: two's entry
}

// An absolute name beneath the working folder in a header the scanner never
// read (found by computed include): it is that file from every checkout, and
// a review's wrong hit (s9-attack-served-keys.md) checked it beneath the
// other checkout instead.
TEST_F(ServedCheckoutsTest, AnAbsoluteIncludeInAHeaderTheScannerNeverRead) {
  for (const std::string c : {"one", "two"}) {
    write(c + "/k.cu", "#define H \"a.h\"\n#include H\n"
                       "extern \"C\" __global__ void k(int* o) { *o = V; }\n");
    write(c + "/inc/a.h", "#include \"" + dir_ / "one/b.h" + "\"\n");
    write(c + "/b.h", "#define V 1\n");
  }
  EXPECT_FALSE(compile_in("one", {"inc"}));
  write("one/b.h", "#define V 5\n");
  EXPECT_FALSE(compile_in("two", {"inc"}));  // two's own b.h is unchanged: a miss
  EXPECT_TRUE(compile_in("two", {"inc"}));
}

// A toolkit folder is keyed by what NVRTC read beneath it, not by where it
// is, so an image that names it (a toolkit header's __FILE__) is not stored,
// unless an option that writes file names into the output keyed it.
TEST_F(ServedCheckoutsTest, AnImageNamingTheToolkitFolderIsStoredOnlyWhereItIsKeyed) {
  testing::make_toolkit_copy(find_toolkit("").root, dir_ / "cuda");
  write("cuda/include/tk_name.h", "__device__ const char* tk = __FILE__;\n");
  write("one/k.cu", "#include <tk_name.h>\nextern \"C\" __global__ void k(const char** o) { *o = tk; }\n");
  Compiler compiler(find_toolkit(dir_ / "cuda"), storage_.get());
  ScopedCwd cwd(dir_ / "one");
  CompileOptions o;
  o.source_path = "k.cu";
  o.ptx_arch = "compute_90";
  CompileResult r = compiler.compile(o);
  EXPECT_NE(r.targets[0].not_stored.find("names the toolkit folder"), std::string::npos)
      << r.targets[0].not_stored;
  o.nvrtc_options = {"-lineinfo"};
  r = compiler.compile(o);
  EXPECT_EQ(r.targets[0].not_stored, "");
  EXPECT_EQ(compiler.compile(o).hits(), 1);
}

// A final review of issue 27's serving (s9-attack-final.md): a FIFO or a
// device where a probe found nothing is no absence (the seal refuses it, so
// a lookup must not answer from the entry), and a name through /proc's links
// to open files (/dev/fd/3, a link to /proc/self/fd/3) names the looking
// process's own files: refused, never served or keyed.
TEST_F(ServedCheckoutsTest, AFifoWhereNothingWasIsNoAbsenceAndProcessFilesAreRefused) {
  write("one/inc/a.h", "#define A 1\n");
  write("one/k.cu", "#include \"a.h\"\nextern \"C\" __global__ void k(int* o) { *o = A; }\n");
  ::mkdir((dir_ / "one/inc0").c_str(), 0755);
  Compiler compiler(toolkit_, storage_.get());
  ScopedCwd cwd(dir_ / "one");
  CompileOptions o;
  o.source_path = "k.cu";
  o.ptx_arch = "compute_90";
  o.include_dirs = {"inc0", "inc"};
  EXPECT_EQ(compiler.compile(o).hits(), 0);
  EXPECT_EQ(compiler.compile(o).hits(), 1);
  ASSERT_EQ(::mkfifo((dir_ / "one/inc0/a.h").c_str(), 0600), 0);
  EXPECT_THROW(compiler.compile(o), IoError);  // as a compile without a store: no hit
  for (const std::string name : {"/dev/fd/3", "linked.h"}) {
    ::unlink((dir_ / "one/linked.h").c_str());
    ASSERT_EQ(::symlink("/proc/self/fd/3", (dir_ / "one/linked.h").c_str()), 0);
    write("one/p.cu", "#include \"" + name + "\"\nextern \"C\" __global__ void k() {}\n");
    CompileOptions p = o;
    p.source_path = "p.cu";
    p.include_dirs = {};
    try {
      compiler.compile(p);
      ADD_FAILURE() << name << " compiled";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find("not servable"), std::string::npos) << e.what();
    }
  }
}

// One file named relatively and by its absolute name is one file here and
// two in a copy of the checkout (differential seed 64, step 527): the
// relative name keeps its file identity in the key.
TEST_F(ServedCheckoutsTest, ARelativeAndAnAbsoluteNameOfOneFileAreTwoFilesInACopy) {
  const std::string header =
      "#pragma once\n#ifdef W_SEEN\n#define TWICE 1\n#endif\n#define W_SEEN\n";
  for (const std::string c : {"one", "two"}) {
    write(c + "/inc/w.h", header);
    write(c + "/k.cu", "#include \"inc/w.h\"\n#include \"" + dir_ / "one/inc/w.h" +
                           "\"\n#ifndef TWICE\n#define TWICE 0\n#endif\n"
                           "extern \"C\" __global__ void k(int* o) { *o = TWICE; }\n");
  }
  EXPECT_FALSE(compile_in("one", {}));  // one file: TWICE 0
  EXPECT_FALSE(compile_in("two", {}));  // two files: TWICE 1
  EXPECT_TRUE(compile_in("two", {}));
  EXPECT_TRUE(compile_in("one", {}));
}

}  // namespace
}  // namespace kcache::compiler
