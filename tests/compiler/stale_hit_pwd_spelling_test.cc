// $PWD spelled with "//", "/./", "/../" or a trailing "/": NVRTC writes it
// byte for byte into -G and -lineinfo outputs wherever it names the working
// folder (as glibc's get_current_dir_name takes it), so each spelling is
// another output and may not hit the entry of another. Each answer of the
// drop-in's path is put against the real NVRTC's (program_vs_nvrtc.h).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/compiler/program_vs_nvrtc.h"

namespace kcache::compiler {
namespace {

using testing::InFolder;
using testing::kKernel;

class StaleHitPwdSpellingTest : public testing::ProgramVsNvrtcTest {
 protected:
  void SetUp() override {
    ProgramVsNvrtcTest::SetUp();
    const char* pwd = std::getenv("PWD");
    had_pwd_ = pwd != nullptr;
    if (pwd) old_pwd_ = pwd;
  }
  void TearDown() override {
    if (had_pwd_) {
      ::setenv("PWD", old_pwd_.c_str(), 1);
    } else {
      ::unsetenv("PWD");
    }
    ProgramVsNvrtcTest::TearDown();
  }

  bool had_pwd_ = false;
  std::string old_pwd_;
};

TEST_F(StaleHitPwdSpellingTest, EveryPwdSpellingOfTheWorkingFolderIsItsOwnLineInfoOutput) {
  write("real/w/keep", "");
  const std::string root = dir_ / "real";
  const std::string cwd = root + "/w";
  const std::string source = "#define VALUE 51\n" + std::string(kKernel);
  const std::vector<std::string> spellings = {cwd,         cwd + "/",        root + "//w",
                                              root + "/./w", root + "/w/../w", cwd + "//"};
  InFolder in(cwd);
  for (const char* option : {"-lineinfo", "-G"}) {
    for (const std::string& pwd : spellings) {
      ::setenv("PWD", pwd.c_str(), 1);
      SCOPED_TRACE(std::string(option) + " with PWD=" + pwd);
      // A miss or a hit of this spelling's own entry: NVRTC's answer either way.
      expect_nvrtcs_answer(source, "kern.cu", {"-arch=sm_90", option});
      EXPECT_TRUE(expect_nvrtcs_answer(source, "kern.cu", {"-arch=sm_90", option}))
          << "the same spelling again is a hit";
    }
  }
}

}  // namespace
}  // namespace kcache::compiler
