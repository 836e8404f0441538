// Temporary source trees for precompiler tests: each test gets its own folder
// under $TEST_TMPDIR, named after the test.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "common/file_system.h"

namespace kcache::compiler::testing {

// A fresh folder for the running test (removed and recreated).
inline std::string test_dir() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir =
      std::string(tmp ? tmp : "/tmp") + "/" + info->test_suite_name() + "." + info->name();
  std::string rm = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(rm.c_str()), 0);
  FileSystem::real().create_directories(dir, 0755);
  return dir;
}

// Writes `text` to dir/relative, creating folders on the way.
inline std::string write(const std::string& dir, const std::string& relative,
                         const std::string& text) {
  std::string path = dir + "/" + relative;
  FileSystem::real().create_directories(path.substr(0, path.rfind('/')), 0755);
  FileSystem::real().write_file_atomically(path, text);
  return path;
}

// Runs the enclosing scope in `dir`, as a build runs its compiles in the
// workspace root (source names are paths relative to it).
class ScopedCwd {
 public:
  explicit ScopedCwd(const std::string& dir) {
    char buf[4096];
    old_ = ::getcwd(buf, sizeof buf) ? buf : ".";
    EXPECT_EQ(::chdir(dir.c_str()), 0) << dir;
  }
  ~ScopedCwd() { EXPECT_EQ(::chdir(old_.c_str()), 0) << old_; }
  ScopedCwd(const ScopedCwd&) = delete;
  ScopedCwd& operator=(const ScopedCwd&) = delete;

 private:
  std::string old_;
};

// Sets an environment variable for the enclosing scope, then puts back what
// was there (NVRTC reads some of its own settings from the environment).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace kcache::compiler::testing
