// The hdrs/deps hint (compiler/undeclared.h): a header found where the action
// would have seen it had it been declared, behind Bazel's sandbox (inputs are
// symlinks into the real execroot) and in the worker (the file is there but
// was refused).
#include "compiler/undeclared.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/testing/temp_dir.h"

namespace kcache::compiler {
namespace {

using testing::TempDir;
using testing::write_file;

// Enters `dir` for the test's length.
class Chdir {
 public:
  explicit Chdir(const std::string& dir) : old_(std::filesystem::current_path()) {
    std::filesystem::current_path(dir);
  }
  ~Chdir() { std::filesystem::current_path(old_); }

 private:
  std::filesystem::path old_;
};

// An execroot holding pkg/k.cu and pkg/x.cuh, and a sandbox holding only
// pkg/k.cu, linked to the execroot's as Bazel does.
struct Sandbox {
  TempDir dir;
  std::string execroot = dir / "execroot";
  std::string sandbox = dir / "sandbox";
  Sandbox() {
    std::filesystem::create_directories(execroot + "/pkg");
    std::filesystem::create_directories(sandbox + "/pkg");
    write_file(execroot + "/pkg/k.cu", "#include \"pkg/x.cuh\"\n");
    write_file(execroot + "/pkg/x.cuh", "#pragma once\n");
    std::filesystem::create_symlink(execroot + "/pkg/k.cu", sandbox + "/pkg/k.cu");
  }
};

TEST(UndeclaredTest, BehindTheSandboxARootRelativeIncludeIsFound) {
  Sandbox s;
  Chdir in(s.sandbox);
  EXPECT_EQ(find_undeclared("pkg/x.cuh", {"pkg", ".", "bazel-out/k8-fastbuild/bin"}, "pkg/k.cu"),
            "pkg/x.cuh");
}

TEST(UndeclaredTest, BehindTheSandboxAPackageRelativeIncludeIsFound) {
  Sandbox s;
  Chdir in(s.sandbox);
  EXPECT_EQ(find_undeclared("x.cuh", {"pkg", "."}, "pkg/k.cu"), "pkg/x.cuh");
  EXPECT_EQ(find_undeclared("x.cuh", {".", "pkg"}, "./pkg/k.cu"), "pkg/x.cuh");
}

TEST(UndeclaredTest, AFileNowhereInTheWorkspaceIsNotFound) {
  Sandbox s;
  Chdir in(s.sandbox);
  EXPECT_EQ(find_undeclared("pkg/y.cuh", {"pkg", "."}, "pkg/k.cu"), std::nullopt);
  EXPECT_EQ(find_undeclared("x.cuh", {"."}, "pkg/k.cu"), std::nullopt) << "searched only where asked";
  EXPECT_EQ(find_undeclared("/abs/x.cuh", {"."}, "pkg/k.cu"), std::nullopt);
  EXPECT_EQ(find_undeclared("x.cuh", {s.execroot + "/pkg"}, "pkg/k.cu"), std::nullopt)
      << "absolute folders are the toolkit's, never undeclared";
}

TEST(UndeclaredTest, InTheWorkersExecrootARefusedFileIsFound) {
  Sandbox s;
  Chdir in(s.execroot);  // the worker runs here; k.cu is a plain file
  EXPECT_EQ(find_undeclared("pkg/x.cuh", {"pkg", "."}, "pkg/k.cu"), "pkg/x.cuh");
}

TEST(UndeclaredTest, ALinkElsewhereIsNoExecroot) {
  TempDir dir;
  std::filesystem::create_directories(dir / "a");
  write_file(dir / "other.cu", "");
  write_file(dir / "x.cuh", "");
  std::filesystem::create_symlink(dir / "other.cu", dir / "a/k.cu");
  Chdir in(dir / "a");
  EXPECT_EQ(find_undeclared("x.cuh", {"."}, "k.cu"), std::nullopt);
}

// Bazel 4 links into the execroot only the packages the build loaded: with
// `bazel build //pkg:k`, devlib/ is in neither the sandbox nor the execroot,
// only in the workspace the execroot's pkg link points into.
TEST(UndeclaredTest, AHeaderOfAPackageTheBuildDidNotLoadIsFoundInTheWorkspace) {
  TempDir dir;
  const std::string ws = dir / "ws", execroot = dir / "execroot", sandbox = dir / "sandbox";
  std::filesystem::create_directories(ws + "/pkg");
  std::filesystem::create_directories(ws + "/devlib");
  std::filesystem::create_directories(execroot);
  std::filesystem::create_directories(sandbox + "/pkg");
  write_file(ws + "/pkg/k.cu", "#include \"devlib/d.cuh\"\n");
  write_file(ws + "/devlib/d.cuh", "#pragma once\n");
  std::filesystem::create_directory_symlink(ws + "/pkg", execroot + "/pkg");
  std::filesystem::create_symlink(execroot + "/pkg/k.cu", sandbox + "/pkg/k.cu");
  {
    Chdir in(sandbox);
    EXPECT_EQ(find_undeclared("devlib/d.cuh", {"pkg", "."}, "pkg/k.cu"), "devlib/d.cuh");
    EXPECT_EQ(find_undeclared("devlib/none.cuh", {"pkg", "."}, "pkg/k.cu"), std::nullopt);
  }
  {
    Chdir in(execroot);  // the worker
    EXPECT_EQ(find_undeclared("devlib/d.cuh", {"pkg", "."}, "pkg/k.cu"), "devlib/d.cuh");
  }
}

TEST(UndeclaredTest, TheHintComesFirstOnceAndOnlyForAStubNvrtcReported) {
  Sandbox s;
  Chdir in(s.sandbox);
  MissingInclude m{"x.cuh", "pkg/k.cu:1", {"pkg", "."}, "#error kcache: \"x.cuh\" ..."};
  CompileError reported("NVRTC failed", "pkg/x.cuh(1): error: #error directive: kcache: \"x.cuh\" (included from pkg/k.cu:1) was not found in: pkg, .", {});
  CompileError with = with_undeclared_hints(reported, {m}, /*served=*/false, "pkg/k.cu", "//pkg:k");
  const std::string hint =
      "\"pkg/x.cuh\" exists in the workspace but is not an input of //pkg:k: add it to hdrs, or "
      "add the cc_library that has it to deps";
  std::string what = with.what();
  EXPECT_EQ(what.find(hint), 0u) << what;
  EXPECT_EQ(what.find(hint), what.rfind(hint)) << "once";
  EXPECT_NE(what.find("\n  \"x.cuh\" (included from pkg/k.cu:1) was not found"), std::string::npos)
      << what;
  EXPECT_EQ(with.log(), "") << "NVRTC's log only echoes the stub's #error";

  CompileError other("NVRTC failed", "k.cu(3): error: identifier \"y\" is undefined", {});
  EXPECT_STREQ(with_undeclared_hints(other, {m}, /*served=*/false, "pkg/k.cu", "//pkg:k").what(), "NVRTC failed")
      << "a stub inside a group NVRTC skipped failed nothing";
}

}  // namespace
}  // namespace kcache::compiler
