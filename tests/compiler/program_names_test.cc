// One entry for every program name (compiler/program.h), held to its
// property: whatever kcache answers a program named N (a hit made under
// another name, or a fresh compile) is what NVRTC answers for N. Randomized
// over sources that do and do not reach their own name (diagnostics,
// __FILE__, assert, a #pragma message, the name in a string) and over names
// (CuPy's temporary folders, relative names, none).
#include <sys/stat.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cache/storage.h"
#include "compiler/program.h"
#include "compiler/toolkit.h"
#include "tests/compiler/real_nvrtc.h"
#include "tests/testing/temp_dir.h"

namespace kcache::compiler {
namespace {

// The real NVRTC's answers, through its C API as a program calls it.
// A random program: a kernel, and some of what may bring its name into
// the answer.
std::string random_source(std::mt19937& rng, bool* reaches_own_name) {
  std::uniform_int_distribution<int> coin(0, 3);
  std::string s;
  std::string body = "  p[0] = " + std::to_string(rng() % 1000) + ";\n";
  *reaches_own_name = false;
  if (coin(rng) == 0) body += "  int unused = 1;\n";                    // a warning: NAME(3):
  if (coin(rng) == 0) s += "#pragma message(\"note " + std::to_string(rng() % 9) + "\")\n";
  if (coin(rng) == 0) {  // __FILE__ kept in the PTX
    s += "__device__ const char where[] = __FILE__;\n";
    body += "  p[1] = where[0];\n";
    *reaches_own_name = true;
  }
  if (coin(rng) == 0) {  // assert: the builtin macro expands __FILE__ here
    body += "  assert(p[2] != 7);\n";
    *reaches_own_name = true;
  }
  if (coin(rng) == 0) body += "  undeclared_call();\n";  // an error: the log is the answer
  if (coin(rng) == 0) body += "  const char* s = \"kern.cu\";\n  p[3] = s[0];\n";
  return s + "extern \"C\" __global__ void k(int* p) {\n" + body + "}\n";
}

std::string random_name(std::mt19937& rng) {
  const char* shapes[] = {"/tmp/tmp%06u/kern.cu", "/var/tmp/k%u/kern.cu", "sub%u/kern.cu",
                          "kern.cu", "sub/dir%u.cu", ""};
  char buf[64];
  std::snprintf(buf, sizeof buf, shapes[rng() % 6], static_cast<unsigned>(rng() % 1000000));
  return buf;
}

class ProgramNamesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    toolkit_ = find_toolkit("");
    real_ = std::make_unique<RealNvrtc>(toolkit_.nvrtc.path);
  }

  // kcache's answer for `source` named `name`, through `store`'s cache.
  ProgramResult through(const std::string& store, const std::string& source,
                        const std::string& name) {
    cache::StorageOptions o;
    o.local_dir = store;
    cache::Storage storage(o);
    Compiler compiler(toolkit_, &storage);
    ProgramSource p;
    p.source = source;
    p.name = name;
    ProgramOptions mapped = program_options(p, {"-arch=sm_90"});
    EXPECT_EQ(mapped.unsupported, "");
    return compile_program(compiler, mapped.options);
  }

  Toolkit toolkit_;
  std::unique_ptr<RealNvrtc> real_;
  testing::TempDir dir_;
};

TEST_F(ProgramNamesTest, EveryAnswerIsNvrtcsForTheAskingName) {
  std::mt19937 rng(20261127);
  const std::string shared = dir_ / "shared";
  int shared_hits = 0, named = 0;
  for (int i = 0; i < 24; ++i) {
    bool reaches_name = false;
    const std::string source = random_source(rng, &reaches_name);
    for (int n = 0; n < 3; ++n) {
      const std::string name = random_name(rng);
      const std::string shown = name.empty() ? kDefaultProgramName : name;
      ProgramResult got = through(shared, source, name);
      cache::ProgramRecord want = real_->answer(source, name, {"-arch=sm_90"});
      SCOPED_TRACE("program " + std::to_string(i) + " named \"" + shown + "\":\n" + source);
      // NVRTC's own answer for every name, an absolute one included (its
      // __FILE__ is the name itself: NVRTC reads the real file system).
      EXPECT_EQ(got.record.compile_result, want.compile_result);
      EXPECT_EQ(got.record.log, want.log);
      EXPECT_EQ(got.record.output(cache::ProgramOutput::ptx), want.output(cache::ProgramOutput::ptx));
      shared_hits += got.hit && n > 0;
      named += reaches_name;
    }
  }
  // The property held where sharing happened, and where it must not.
  EXPECT_GT(shared_hits, 4);
  EXPECT_GT(named, 6);
}

// What an adversarial review found (each a wrong hit before the second
// compile under another name): the name reached in ways no text shows, and
// text that merely looks like the name in a diagnostic place. Relative names
// (an absolute one reaches __FILE__ as its sealed name: docs/KEYS.md), the
// same file name in two folders, as shared entries now require.
TEST_F(ProgramNamesTest, WaysToReachTheNameThatNoTextShows) {
  testing::write_file(dir_ / "base.h", "enum { LEN = sizeof(__BASE_FILE__) };\n");
  struct Case {
    const char* what;
    std::string source;
    std::vector<cache::Header> headers;
    std::vector<std::string> options;
    std::string first, second;
  };
  const std::string k = "extern \"C\" __global__ void k(int* p) { p[0] = ";
  const Case cases[] = {
      {"#line naming the program", "#line 10 \"d1/x.cu\"\n__global__ void k() { int u = 1; }\n",
       {}, {}, "d1/x.cu", "dd22/x.cu"},
      {"a comment that reads like a diagnostic",
       "__global__ void k() { int u = 1; } // copied at line 1 of a/k.cu\n", {}, {}, "a/k.cu",
       "zzzz/k.cu"},
      {"#error that reads like NVRTC's trailer", "#error in the compilation of \"d/x.cu\".\n", {},
       {}, "d/x.cu", "eee/x.cu"},
      {"__FILE__ pasted together",
       "#define CAT(a, b) a##b\n" + k + "sizeof(CAT(__FI, LE__)); }\n", {}, {}, "a/k.cu",
       "bbbbbbbbbbbb/k.cu"},
      {"__BASE_FILE__ in an -I header", "#include \"base.h\"\n" + k + "LEN; }\n", {},
       {"-I" + dir_.path()}, "a/k.cu", "bbbbbbbbbbbb/k.cu"},
      {"__builtin_FILE() as a default argument",
       "#include \"len.h\"\n" + k + "len(); }\n",
       {{"len.h",
         "__device__ constexpr int len(const char* s = __builtin_FILE()) {\n"
         "  int n = 0; while (s[n]) ++n; return n; }\n"}},
       {}, "a/k.cu", "bbbbbbbbbbbb/k.cu"},
      {"__FILE__ through an in-memory header's macro", "#include \"f.h\"\n" + k + "sizeof(F); }\n",
       {{"f.h", "#define F __FILE__\n"}}, {}, "a/k.cu", "bbbbbbbbb/kern.cu"},
  };
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string store = dir_ / ("case" + std::to_string(i++));
    std::vector<std::string> options = {"-arch=sm_90"};
    options.insert(options.end(), c.options.begin(), c.options.end());
    for (const std::string& name : {c.first, c.second}) {
      cache::StorageOptions o;
      o.local_dir = store;
      cache::Storage storage(o);
      Compiler compiler(toolkit_, &storage);
      ProgramSource p;
      p.source = c.source;
      p.name = name;
      p.headers = c.headers;
      ProgramOptions mapped = program_options(p, options);
      ASSERT_EQ(mapped.unsupported, "");
      ProgramResult got = compile_program(compiler, mapped.options);
      cache::ProgramRecord want = real_->answer(c.source, name, options, c.headers);
      EXPECT_EQ(got.record.compile_result, want.compile_result) << name;
      EXPECT_EQ(got.record.log, want.log) << name;
      EXPECT_EQ(got.record.output(cache::ProgramOutput::ptx), want.output(cache::ProgramOutput::ptx))
          << name;
    }
  }
}

// A program's lookup keys what NVRTC read (its manifest), not what kcache's
// include scanner would find: an include in a group NVRTC skips names a
// FIFO, which the scanner refuses to open (it would block), and NVRTC never
// opens. Cached as NVRTC answers it, a miss and then a hit.
TEST_F(ProgramNamesTest, AnIncludeInAGroupNvrtcSkipsIsNeverOpenedByTheLookup) {
  const std::string inc = dir_ / "inc";
  ASSERT_EQ(::mkdir(inc.c_str(), 0755), 0);
  ASSERT_EQ(::mkfifo((inc + "/pipe.h").c_str(), 0644), 0);
  const std::string source =
      "#ifdef NEVER_DEFINED\n#include \"pipe.h\"\n#endif\n"
      "extern \"C\" __global__ void k(int* p) { p[0] = 7; }\n";
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + inc};
  cache::ProgramRecord want = real_->answer(source, "kern.cu", options);
  ASSERT_EQ(want.compile_result, 0u) << want.log;
  for (bool hit : {false, true}) {
    cache::StorageOptions o;
    o.local_dir = dir_ / "fifo_store";
    cache::Storage storage(o);
    Compiler compiler(toolkit_, &storage);
    ProgramSource p;
    p.source = source;
    p.name = "kern.cu";
    ProgramOptions mapped = program_options(p, options);
    ASSERT_EQ(mapped.unsupported, "");
    ProgramResult got = compile_program(compiler, mapped.options);
    EXPECT_EQ(got.hit, hit);
    EXPECT_EQ(got.not_stored, "");
    EXPECT_EQ(got.record.log, want.log);
    EXPECT_EQ(got.record.output(cache::ProgramOutput::ptx), want.output(cache::ProgramOutput::ptx));
  }
}

TEST(SharedRecordTest, OnlyDiagnosticMentionsOfTheNameAreShared) {
  auto record = [](const std::string& log, const std::string& ptx) {
    cache::ProgramRecord r;
    r.log = log;
    r.output(cache::ProgramOutput::ptx).bytes = ptx;
    return r.encode();
  };
  const std::string name = "/tmp/tmpab12/kern.cu";
  std::optional<std::string> shared = shared_record(
      record(name + "(3): warning #177-D: unused\n\n1 error detected in the compilation of \"" +
                 name + "\".\n  detected during instantiation at line 5 of " + name + "\n",
             ".entry k"),
      name);
  ASSERT_TRUE(shared);
  cache::ProgramRecord r = cache::ProgramRecord::decode(*shared);
  EXPECT_EQ(r.log.find(name), std::string::npos) << r.log;
  restore_name(r, "other.cu");
  EXPECT_EQ(r.log,
            "other.cu(3): warning #177-D: unused\n\n1 error detected in the compilation of "
            "\"other.cu\".\n  detected during instantiation at line 5 of other.cu\n");
  // The name anywhere else: in the PTX, mid-line in the log, a line that
  // only starts with it: kept under the name.
  EXPECT_FALSE(shared_record(record("", ".global .b8 f[] = \"" + name + "\""), name));
  EXPECT_FALSE(shared_record(record("  x = \"" + name + "\";\n", ""), name));
  EXPECT_FALSE(shared_record(record(name + "x(3): warning\n", ""), name));
  EXPECT_FALSE(shared_record(record(name + "(3) warning\n", ""), name));
  EXPECT_FALSE(shared_record(record("<kcache: the program's name>\n", ""), name));
}

}  // namespace
}  // namespace kcache::compiler
