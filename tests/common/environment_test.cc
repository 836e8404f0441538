#include "common/environment.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <set>
#include <string>

#include "common/error.h"

namespace kcache::env {
namespace {

// Sets a variable for one test and restores it after.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    // ::getenv, not read(): the name may be one kcache does not list.
    if (const char* old = ::getenv(name)) old_ = old;
    had_ = ::getenv(name) != nullptr;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedVariable() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(EnvironmentTest, EveryVariableIsListedOnceWithAMeaningAndItsReaders) {
  std::set<std::string> names;
  for (const Variable& v : variables()) {
    EXPECT_TRUE(names.insert(v.name).second) << v.name << " is listed twice";
    EXPECT_STREQ(name(v.var), v.name);
    EXPECT_GT(std::strlen(v.meaning), 0u) << v.name;
    EXPECT_GT(std::strlen(v.read_by), 0u) << v.name;
  }
  EXPECT_EQ(names.size(), kVariableCount);
}

TEST(EnvironmentTest, ReadsAVariableAsSetAndNullWhereUnset) {
  {
    ScopedVariable set("KCACHE_SHIM_LEAN", "");
    ASSERT_NE(read(Var::kcache_shim_lean), nullptr);
    EXPECT_STREQ(read(Var::kcache_shim_lean), "");
    EXPECT_EQ(value(Var::kcache_shim_lean), nullptr);  // empty is unset to value()
  }
  ScopedVariable unset("KCACHE_SHIM_LEAN", nullptr);
  EXPECT_EQ(read(Var::kcache_shim_lean), nullptr);
  EXPECT_EQ(value(Var::kcache_shim_lean), nullptr);
}

TEST(EnvironmentTest, EnabledMeansSetToSomethingOtherThanZero) {
  for (const auto& [text, on] :
       {std::pair<const char*, bool>{"1", true}, {"yes", true}, {"0", false}, {"", false}}) {
    ScopedVariable set("KCACHE_QUIET", text);
    EXPECT_EQ(enabled(Var::kcache_quiet), on) << "KCACHE_QUIET=" << text;
  }
  ScopedVariable unset("KCACHE_QUIET", nullptr);
  EXPECT_FALSE(enabled(Var::kcache_quiet));
}

TEST(EnvironmentTest, ReadsAListedVariableByName) {
  ScopedVariable set("KCACHE_REMOTE_LAYOUT", "bazel");
  ASSERT_NE(read("KCACHE_REMOTE_LAYOUT"), nullptr);
  EXPECT_STREQ(read("KCACHE_REMOTE_LAYOUT"), "bazel");
}

TEST(EnvironmentTest, RefusesToReadAVariableThatIsNotListed) {
  ScopedVariable set("KCACHE_NOT_A_SETTING", "1");
  try {
    read("KCACHE_NOT_A_SETTING");
    FAIL() << "an unlisted variable was read";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("KCACHE_NOT_A_SETTING"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("docs/CLI.md"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kcache::env
