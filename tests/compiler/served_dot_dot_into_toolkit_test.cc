// The drop-in's served disk (seal.h, SealPolicy::serve) through its path
// (compile_program) for '..' names whose lexical fold lies in the toolkit's
// (or NVRTC's library) folder while a link makes them reach a user's file, or
// the reverse, and the link moves between compiles; quoted, computed,
// __has_include and through an -I root that climbs. Every answer must be the
// real NVRTC's from the disk as it is at that moment.
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/compiler/program_vs_nvrtc.h"

namespace kcache::compiler {
namespace {

using testing::InFolder;
using testing::kKernel;

size_t depth_of(const std::string& p);
std::string repeat(const std::string& s, size_t n);

// `path` with its links resolved (e.g. /usr/local/cuda-13.0/include).
std::string real_name(const std::string& path) {
  char real[PATH_MAX];
  return ::realpath(path.c_str(), real) ? std::string(real) : path;
}

class ServedDotDotIntoToolkitTest : public testing::ProgramVsNvrtcTest {
 protected:
  // The test's folder, real (base_); base/L/t, from which n_ '..' climb to
  // "/", for a link base/L/s the cases make; and deep_, a folder n_ below
  // base_'s depth, from which the same '..' climb to base_ (where a case
  // mirrors a toolkit path) once the link is moved there.
  void make_climbing_folders() {
    base_ = real_name(dir_.path());
    n_ = depth_of(base_) + 2;
    write("L/t/.keep", "");
    deep_ = base_;
    for (size_t i = 0; i < depth_of(base_); ++i) deep_ += "/p";
    deep_ += "/q/r";
    ASSERT_EQ(depth_of(deep_), n_ + depth_of(base_));
    write(deep_.substr(base_.size() + 1) + "/.keep", "");
  }

  // The program base/src/k.cu compiled twice while the link base/L/s leads
  // to base/L/t, then once more after it was moved to deep_ (from where the
  // same '..' climb to base_): whether that third compile was a hit. NVRTC's
  // own answer each time.
  bool made_then_link_moved_deep(const std::string& source,
                                 const std::vector<std::string>& options) {
    const std::string name = base_ + "/src/k.cu", link = base_ + "/L/s";
    expect_nvrtcs_answer(source, name, options);
    expect_nvrtcs_answer(source, name, options);
    if (::unlink(link.c_str()) != 0 || ::symlink(deep_.c_str(), link.c_str()) != 0) {
      ADD_FAILURE() << "cannot move the link " << link << ": " << std::strerror(errno);
      return true;
    }
    return expect_nvrtcs_answer(source, name, options);
  }

  std::string base_, deep_;
  size_t n_ = 0;
};

size_t depth_of(const std::string& p) {
  size_t d = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '/' && i + 1 < p.size() && p[i + 1] != '/') ++d;
  }
  return d;
}

// The include's name is made by token pasting: only NVRTC knows it.
const char kComputed[] = "#define STR(x) #x\n#define XSTR(x) STR(x)\n";

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// C1. A '..' name whose lexical fold lies in the toolkit's include folder is
// keyed as a toolkit header (toolkit_name) when, at compile time, the kernel
// resolves it to the same file. Retarget the link deeper: the same spelling
// now climbs to a user folder that mirrors the toolkit's path.
TEST_F(ServedDotDotIntoToolkitTest, DotDotFoldsIntoTheToolkitThenTheLinkMoves) {
  const std::string toolkit = real_name("/usr/local/cuda/include");  // e.g. /usr/local/cuda-13.0/include
  make_climbing_folders();
  const std::string& base = base_;
  const size_t n = n_;
  write(toolkit.substr(1) + "/fatbinary_section.h", "#define VALUE 9\n");
  ASSERT_EQ(::symlink((base + "/L/t").c_str(), (base + "/L/s").c_str()), 0);
  const std::string name = base + "/L/s/" + repeat("../", n) + toolkit.substr(1) +
                           "/fatbinary_section.h";
  const std::string source = "#include \"" + name +
                             "\"\n#ifndef VALUE\n#define VALUE 1\n#endif\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90"};
  EXPECT_FALSE(made_then_link_moved_deep(source, options))
      << "NVRTC now reads the user's mirror (VALUE 9)";
}

// C2. The same through an -I folder with '..' in it (an -I root that climbs).
TEST_F(ServedDotDotIntoToolkitTest, DotDotIncludeRootFoldsIntoTheToolkitThenTheLinkMoves) {
  const std::string toolkit = real_name("/usr/local/cuda/include");
  make_climbing_folders();
  const std::string& base = base_;
  const size_t n = n_;
  write(toolkit.substr(1) + "/fatbinary_section.h", "#define VALUE 9\n");
  ASSERT_EQ(::symlink((base + "/L/t").c_str(), (base + "/L/s").c_str()), 0);
  const std::string inc = base + "/L/s/" + repeat("../", n) + toolkit.substr(1);
  const std::string source = "#include <fatbinary_section.h>\n#ifndef VALUE\n#define VALUE 1\n#endif\n" +
                             std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + inc};
  EXPECT_FALSE(made_then_link_moved_deep(source, options))
      << "NVRTC now reads the user's mirror (VALUE 9)";
}

// C1b. C1 with the include's name computed (the scanner cannot follow it,
// so only the served file's probe keys it: "toolkit0:fatbinary_section.h").
TEST_F(ServedDotDotIntoToolkitTest, ComputedDotDotFoldsIntoTheToolkitThenTheLinkMoves) {
  const std::string toolkit = real_name("/usr/local/cuda/include");
  make_climbing_folders();
  const std::string& base = base_;
  const size_t n = n_;
  write(toolkit.substr(1) + "/fatbinary_section.h", "#define VALUE 9\n");
  ASSERT_EQ(::symlink((base + "/L/t").c_str(), (base + "/L/s").c_str()), 0);
  const std::string name = base + "/L/s/" + repeat("../", n) + toolkit.substr(1) +
                           "/fatbinary_section";
  const std::string source = std::string(kComputed) + "#define H(n) STR(n.h)\n#include H(" +
                             name + ")\n#ifndef VALUE\n#define VALUE 1\n#endif\n" +
                             std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90"};
  EXPECT_FALSE(made_then_link_moved_deep(source, options))
      << "NVRTC now reads the user's mirror (VALUE 9)";
}

// C1c. C1b into NVRTC's own library folder (files the seal lets NVRTC read
// unserved): a name with `..` that only folds into it is served as any, so
// a moved link is NVRTC's answer, not a refusal.
TEST_F(ServedDotDotIntoToolkitTest, ComputedDotDotFoldsIntoNvrtcsLibraryFolderThenTheLinkMoves) {
  char real[PATH_MAX];
  ASSERT_NE(::realpath(toolkit_.nvrtc.path.c_str(), real), nullptr);
  const std::string lib = std::string(real).substr(0, std::string(real).rfind('/'));
  make_climbing_folders();
  const std::string& base = base_;
  const size_t n = n_;
  write(lib.substr(1) + "/kcache_own_probe.h", "#define VALUE 9\n");  // the user's mirror
  ASSERT_EQ(::symlink((base + "/L/t").c_str(), (base + "/L/s").c_str()), 0);
  const std::string name = base + "/L/s/" + repeat("../", n) + lib.substr(1) + "/kcache_own_probe";
  const std::string source = std::string(kComputed) + "#define H(n) STR(n.h)\n#if __has_include(H(" +
                             name + "))\n#include H(" + name +
                             ")\n#endif\n#ifndef VALUE\n#define VALUE 1\n#endif\n" +
                             std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90"};
  EXPECT_FALSE(made_then_link_moved_deep(source, options))  // first: nothing there, VALUE 1
      << "NVRTC now reads the user's mirror (VALUE 9)";
  expect_nvrtcs_answer(source, base + "/src/k.cu", options);
}

// C2b. C2 with the include's name computed, through the climbing -I root.
TEST_F(ServedDotDotIntoToolkitTest, ComputedDotDotIncludeRootFoldsIntoTheToolkitThenTheLinkMoves) {
  const std::string toolkit = real_name("/usr/local/cuda/include");
  make_climbing_folders();
  const std::string& base = base_;
  const size_t n = n_;
  write(toolkit.substr(1) + "/fatbinary_section.h", "#define VALUE 9\n");
  ASSERT_EQ(::symlink((base + "/L/t").c_str(), (base + "/L/s").c_str()), 0);
  const std::string inc = base + "/L/s/" + repeat("../", n) + toolkit.substr(1);
  const std::string source = std::string(kComputed) +
                             "#define H(n) STR(n.h)\n#include H(fatbinary_section)\n"
                             "#ifndef VALUE\n#define VALUE 1\n#endif\n" +
                             std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-I" + inc};
  EXPECT_FALSE(made_then_link_moved_deep(source, options))
      << "NVRTC now reads the user's mirror (VALUE 9)";
}

// C1c. An absent name: __has_include of a computed '..' name whose lexical
// fold is a toolkit header that does not exist; after the link moves the same
// spelling reaches a user's file that does.
TEST_F(ServedDotDotIntoToolkitTest, ComputedHasIncludeDotDotFoldsIntoTheToolkitThenTheLinkMoves) {
  const std::string toolkit = real_name("/usr/local/cuda/include");
  make_climbing_folders();
  const std::string& base = base_;
  const size_t n = n_;
  write(toolkit.substr(1) + "/kcache_attack_nothere.h", "\n");
  ASSERT_EQ(::symlink((base + "/L/t").c_str(), (base + "/L/s").c_str()), 0);
  const std::string name = base + "/L/s/" + repeat("../", n) + toolkit.substr(1) +
                           "/kcache_attack_nothere";
  const std::string source = std::string(kComputed) + "#define H(n) STR(n.h)\n#if __has_include(H(" +
                             name + "))\n#define VALUE 2\n#else\n#define VALUE 1\n#endif\n" +
                             std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90"};
  EXPECT_FALSE(made_then_link_moved_deep(source, options))
      << "NVRTC now finds the user's file (VALUE 2)";
}

// C1d. C1b's program named in the working folder (04995a3's any-name path):
// shared with another folder, the stale toolkit label goes with it.
TEST_F(ServedDotDotIntoToolkitTest, ComputedDotDotIntoTheToolkitFromAProgramInTheWorkingFolder) {
  const std::string toolkit = real_name("/usr/local/cuda/include");
  make_climbing_folders();
  const std::string& base = base_;
  const std::string& deep = deep_;
  const size_t n = n_;
  write("a/.keep", "");
  write("b/.keep", "");
  write(toolkit.substr(1) + "/fatbinary_section.h", "#define VALUE 9\n");
  ASSERT_EQ(::symlink((base + "/L/t").c_str(), (base + "/L/s").c_str()), 0);
  const std::string name = base + "/L/s/" + repeat("../", n) + toolkit.substr(1) +
                           "/fatbinary_section";
  const std::string source = std::string(kComputed) + "#define H(n) STR(n.h)\n#include H(" +
                             name + ")\n#ifndef VALUE\n#define VALUE 1\n#endif\n" +
                             std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90"};
  {
    InFolder in(base + "/a");
    expect_nvrtcs_answer(source, base + "/a/k.cu", options);
  }
  ASSERT_EQ(::unlink((base + "/L/s").c_str()), 0);
  ASSERT_EQ(::symlink(deep.c_str(), (base + "/L/s").c_str()), 0);
  InFolder in(base + "/b");
  EXPECT_FALSE(expect_nvrtcs_answer(source, base + "/b/k.cu", options))
      << "NVRTC now reads the user's mirror (VALUE 9)";
}

// C1e. No cache involved: the link already climbs to the user's mirror when
// the first compile runs. The seal judges "own" (readable: the toolkit's) by
// the folded name; the kernel opens the user's file.
TEST_F(ServedDotDotIntoToolkitTest, ComputedDotDotFoldsIntoTheToolkitButReachesAUserFile) {
  const std::string toolkit = real_name("/usr/local/cuda/include");
  const std::string base = real_name(dir_.path());
  const size_t n = depth_of(base) + 2;
  std::string deep = base;
  for (size_t i = 0; i < depth_of(base); ++i) deep += "/p";
  deep += "/q/r";
  write(deep.substr(base.size() + 1) + "/.keep", "");
  write(toolkit.substr(1) + "/fatbinary_section.h", "#define VALUE 9\n");
  write("L/.keep", "");
  ASSERT_EQ(::symlink(deep.c_str(), (base + "/L/s").c_str()), 0);
  const std::string name = base + "/L/s/" + repeat("../", n) + toolkit.substr(1) +
                           "/fatbinary_section";
  const std::string source = std::string(kComputed) + "#define H(n) STR(n.h)\n#include H(" +
                             name + ")\n#ifndef VALUE\n#define VALUE 1\n#endif\n" +
                             std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90"};
  expect_nvrtcs_answer(source, base + "/src/k.cu", options);
  expect_nvrtcs_answer(source, base + "/src/k.cu", options);
  write(toolkit.substr(1) + "/fatbinary_section.h", "#define VALUE 10\n");
  expect_nvrtcs_answer(source, base + "/src/k.cu", options);
}

// C1f. The reverse: the folded name is the user's mirror (not the toolkit's),
// the kernel reaches the real toolkit header: then the link moves so the
// spelling climbs to the mirror.
TEST_F(ServedDotDotIntoToolkitTest, ComputedDotDotFoldsToAUserFileButReachesTheToolkit) {
  const std::string toolkit = real_name("/usr/local/cuda/include");
  const std::string base = real_name(dir_.path());
  const size_t d = depth_of(base);
  // L/a/.../s (depth 2d+2) -> base/t (depth d+1): d+1 '..' climb to "/" by
  // the kernel, lexically to base/L/a... (depth d+1).
  std::string link_dir = "L";
  for (size_t i = 0; i < d; ++i) link_dir += "/a";
  write(link_dir + "/.keep", "");
  write("t/.keep", "");
  const std::string lexical_at = base + "/L" + repeat("/a", d - 0);  // after d+1 '..' from s
  ASSERT_EQ(::symlink((base + "/t").c_str(), (base + "/" + link_dir + "/s").c_str()), 0);
  const std::string name = base + "/" + link_dir + "/s/" + repeat("../", d + 1) +
                           toolkit.substr(1) + "/fatbinary_section";
  (void)lexical_at;
  const std::string source = std::string(kComputed) + "#define H(n) STR(n.h)\n#include H(" +
                             name + ")\n#ifndef VALUE\n#define VALUE 1\n#endif\n" +
                             std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90"};
  expect_nvrtcs_answer(source, base + "/src/k.cu", options);
  expect_nvrtcs_answer(source, base + "/src/k.cu", options);
}

}  // namespace
}  // namespace kcache::compiler
