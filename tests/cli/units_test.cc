#include "cli/units.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace kcache::cli {
namespace {

TEST(UnitsTest, SizesArePowersOf1024WithOrWithoutIAndB) {
  EXPECT_EQ(parse_size("5G"), 5ull << 30);
  EXPECT_EQ(parse_size("5GiB"), 5ull << 30);
  EXPECT_EQ(parse_size("5GB"), 5ull << 30);
  EXPECT_EQ(parse_size("500M"), 500ull << 20);
  EXPECT_EQ(parse_size("1.5Gi"), 3ull << 29);
  EXPECT_EQ(parse_size("64k"), 64ull << 10);
  EXPECT_EQ(parse_size("1T"), 1ull << 40);
}

TEST(UnitsTest, BareNumberMeansGigabytesAsInCcache) { EXPECT_EQ(parse_size("2"), 2ull << 30); }

TEST(UnitsTest, ZeroMeansNoLimit) { EXPECT_EQ(parse_size("0"), 0u); }

TEST(UnitsTest, BadSizesSayWhatAValidOneLooksLike) {
  for (const char* bad : {"", "G", "5X", "-1G", "five"}) {
    try {
      parse_size(bad);
      FAIL() << bad;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("5G"), std::string::npos) << e.what();
    }
  }
}

TEST(UnitsTest, AgesTakeSecondsMinutesHoursDaysAndDefaultToDays) {
  EXPECT_EQ(parse_age("3600s").count(), 3600);
  EXPECT_EQ(parse_age("30m").count(), 1800);
  EXPECT_EQ(parse_age("12h").count(), 43200);
  EXPECT_EQ(parse_age("7d").count(), 7 * 86400);
  EXPECT_EQ(parse_age("2").count(), 2 * 86400);
  EXPECT_THROW(parse_age("7w"), InvalidArgument);
}

TEST(UnitsTest, FormatsSizesAndDurationsForPeople) {
  EXPECT_EQ(format_size(512), "512 bytes");
  EXPECT_EQ(format_size(5ull << 30), "5.0 GiB");
  EXPECT_EQ(format_size(1536), "1.5 KiB");
  EXPECT_EQ(format_duration_ms(1234), "1.2 s");
  EXPECT_EQ(format_duration_ms(185000), "3 min 5 s");
  EXPECT_EQ(format_duration_ms(7380000), "2 h 3 min");
}

}  // namespace
}  // namespace kcache::cli
