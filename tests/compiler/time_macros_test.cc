#include "compiler/time_macros.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <string>

namespace kcache::compiler {
namespace {

TEST(TimeMacrosTest, FindsTimeAndTimestampAsWholeIdentifiers) {
  EXPECT_TRUE(uses_time_macros("const char* t = __TIME__;"));
  EXPECT_TRUE(uses_time_macros("__TIMESTAMP__"));
  EXPECT_TRUE(uses_time_macros("x __TIME_ __TIME__\n"));  // a near miss first
  EXPECT_TRUE(uses_time_macros("// __TIME__ in a comment counts (lost hit, never wrong)"));
  EXPECT_FALSE(uses_time_macros(""));
  EXPECT_FALSE(uses_time_macros("__TIME"));
  EXPECT_FALSE(uses_time_macros("MY__TIME__ __TIME__X __TIMESTAMP__2 __DATE__"));
}

TEST(TimeMacrosTest, FindsDateAsAWholeIdentifier) {
  EXPECT_TRUE(uses_date_macro("d = __DATE__;"));
  EXPECT_TRUE(uses_date_macro("__DATE__"));
  EXPECT_FALSE(uses_date_macro("__DATE__S MY__DATE__ __TIME__"));
}

TEST(TimeMacrosTest, DateIsFormattedAsNvrtcDoesInLocalTime) {
  const char* old = std::getenv("TZ");
  std::string saved = old ? old : "";
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  EXPECT_EQ(date_macro_value(1795392000), "Nov 23 2026");  // 2026-11-23 00:00 UTC
  EXPECT_EQ(date_macro_value(1793750400), "Nov  4 2026");
  ::setenv("TZ", "Etc/GMT+12", 1);  // UTC-12: still the day before
  ::tzset();
  EXPECT_EQ(date_macro_value(1795392000), "Nov 22 2026");
  if (old) {
    ::setenv("TZ", saved.c_str(), 1);
  } else {
    ::unsetenv("TZ");
  }
  ::tzset();
}

}  // namespace
}  // namespace kcache::compiler
