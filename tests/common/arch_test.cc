#include "common/arch.h"

#include <gtest/gtest.h>

namespace kcache {
namespace {

TEST(ArchTest, ParsesRealAndVirtualArchsWithTheirSuffix) {
  Arch a = parse_arch("sm_90a").value();
  EXPECT_FALSE(a.is_virtual);
  EXPECT_EQ(a.number(), 90);
  EXPECT_EQ(a.suffix, 'a');
  Arch b = parse_arch("compute_100f").value();
  EXPECT_TRUE(b.is_virtual);
  EXPECT_EQ(b.major, 10);
  EXPECT_EQ(b.minor, 0);
  EXPECT_EQ(b.suffix, 'f');
  Arch c = parse_arch("sm_121").value();
  EXPECT_EQ(c.major, 12);
  EXPECT_EQ(c.minor, 1);
  EXPECT_EQ(c.suffix, '\0');
}

TEST(ArchTest, RejectsEverythingOutsideTheGrammar) {
  for (const char* bad :
       {"",       "sm_",    "sm_9",     "sm_9000", "sm_90b",     "sm_9x",    "compute",
        "gfx90a", "SM_90",  "sm_90af",  "sm_05",   "compute_05", "lto_90",   " sm_90",
        "sm_90 ", "sm_90/", "../sm_90", "sm_+90",  "sm_-9",      "compute_", "compute_90aa"}) {
    EXPECT_FALSE(parse_arch(bad).has_value()) << bad;
  }
  EXPECT_FALSE(parse_arch(std::string_view("sm_90\0", 6)).has_value());
}

TEST(ArchTest, ANearMissSuggestsTheArchItMeant) {
  EXPECT_EQ(suggest_arch("sm90"), "sm_90");
  EXPECT_EQ(suggest_arch("SM_90"), "sm_90");
  EXPECT_EQ(suggest_arch("sm-90a"), "sm_90a");
  EXPECT_EQ(suggest_arch("sm_9.0"), "sm_90");
  EXPECT_EQ(suggest_arch("Sm100F"), "sm_100f");
  EXPECT_EQ(suggest_arch("compute90"), "compute_90");
  EXPECT_EQ(suggest_arch("compute_9_0"), "compute_90");
  EXPECT_EQ(did_you_mean_arch("sm90"), " (did you mean sm_90?)");
  // Valid already, or nothing near: no suggestion.
  for (const char* none : {"sm_90", "compute_90a", "sm9", "sm_9000", "gfx90a", "90", "sm_90b",
                           "../sm_90", "", "smart"}) {
    EXPECT_FALSE(suggest_arch(none).has_value()) << none;
    EXPECT_EQ(did_you_mean_arch(none), "") << none;
  }
}

// Whatever it accepts is safe as a file name part and in a log line.
TEST(ArchTest, EveryAcceptedNameIsLowerCaseAlphanumericAndUnderscore) {
  for (int n = 0; n < 1000; ++n) {
    for (const char* prefix : {"sm_", "compute_"}) {
      for (const char* suffix : {"", "a", "f"}) {
        std::string name = prefix + std::to_string(n) + suffix;
        std::optional<Arch> arch = parse_arch(name);
        if (!arch) continue;
        EXPECT_GE(n, 10) << name;
        EXPECT_EQ(arch->number(), n);
        for (char c : name) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '_');
      }
    }
  }
}

}  // namespace
}  // namespace kcache
