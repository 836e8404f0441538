// A long-lived process's served compiles (`kcache compile`'s, prewarm's)
// through NVRTC's precompiled headers (compiler/nvrtc/pch.h): a compile that
// used a PCH is keyed by every header the PCH froze, as a plain compile is,
// so an edit of one is a miss whose output holds the edit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cache/storage.h"
#include "compiler/compiler.h"
#include "compiler/nvrtc/pch.h"
#include "compiler/toolkit.h"
#include "tests/compiler/lookup_record_testing.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::age;
using testing::test_dir;
using testing::write;
using ServedPchTest = testing::LookupRecordFixture;

// NVRTC refuses a long TMPDIR, as Bazel's test folders are: the PCH folder
// (where use_pch points TMPDIR) is a short one under /tmp.
std::string pch_dir() {
  std::string dir = "/tmp/kcache-served-pch-XXXXXX";
  if (!::mkdtemp(&dir[0])) ADD_FAILURE() << "mkdtemp failed";
  return dir;
}

std::string kernel(const std::string& name) {
  return "#include \"frozen.cuh\"\n#include <cuda/std/limits>\n"
         "extern \"C\" __global__ void " + name + "(int* p) { *p = V; }\n";
}

CompileOptions served(const std::string& dir, const std::string& name) {
  CompileOptions o;
  o.source_path = dir + "/" + name + ".cu";
  o.ptx_arch = "compute_80";
  o.std = "c++17";
  return o;
}

// What a process without PCH compiles for `o` (no store).
std::string plain_bundle(const CompileOptions& o) {
  Compiler plain(find_toolkit(""), nullptr);
  return plain.compile(o).bundle;
}

TEST_F(ServedPchTest, AHeaderOnlyThePchReadIsKeyedAndItsEditIsAMiss) {
  std::string dir = test_dir();
  write(dir, "frozen.cuh", "#define V 1\n");
  write(dir, "maker.cu", kernel("maker"));
  write(dir, "user.cu", kernel("user"));
  cache::Storage& storage = store_in(dir);
  const char* tmp = std::getenv("TMPDIR");
  const std::string saved = tmp ? tmp : "";
  Toolkit toolkit = find_toolkit("");
  Compiler c(toolkit, &storage);
  c.use_pch(pch_dir());  // points TMPDIR there, as prewarm does
  EXPECT_EQ(c.compile(served(dir, "maker")).misses(), 1);
  int uses = pch_uses_for_testing();
  CompileResult user = c.compile(served(dir, "user"));
  ASSERT_EQ(pch_uses_for_testing(), uses + 1) << "the user compile did not use the maker's PCH";
  EXPECT_EQ(user.misses(), 1);
  EXPECT_EQ(user.bundle, plain_bundle(served(dir, "user")));
  {
    Compiler without_pch(toolkit, &storage);
    EXPECT_EQ(without_pch.compile(served(dir, "user")).hits(), 1)
        << "a process without PCH looks up the key the PCH's user stored";
  }
  age();
  write(dir, "frozen.cuh", "#define V 2\n");
  age();
  CompileResult edited = c.compile(served(dir, "user"));
  if (tmp) ::setenv("TMPDIR", saved.c_str(), 1); else ::unsetenv("TMPDIR");
  EXPECT_EQ(edited.misses(), 1) << "the edit of a header only the PCH read was a hit";
  EXPECT_EQ(edited.bundle, plain_bundle(served(dir, "user")));
  EXPECT_NE(edited.bundle, user.bundle);
}

}  // namespace
}  // namespace kcache::compiler
