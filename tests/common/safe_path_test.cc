#include "common/safe_path.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace kcache {
namespace {

TEST(SafePathTest, JoinsAPlainName) {
  EXPECT_EQ(join_plain_name("out", "sm_90.cubin", "file"), "out/sm_90.cubin");
  EXPECT_EQ(join_plain_name("/a/b", "..x", "file"), "/a/b/..x");
}

TEST(SafePathTest, RefusesEveryNameThatIsNotOneComponent) {
  const std::string too_long(256, 'n');
  for (const std::string& bad :
       {std::string(), std::string("."), std::string(".."), std::string("/"), std::string("../x"),
        std::string("a/b"), std::string("/etc/passwd"), std::string("a\0b", 3), std::string("a\nb"),
        std::string("\x1b[2J"), std::string("a\x7f"), too_long}) {
    EXPECT_FALSE(is_plain_name(bad)) << escape_for_message(bad);
    try {
      join_plain_name("out", bad, "bundle image file name");
      ADD_FAILURE() << "accepted " << escape_for_message(bad);
    } catch (const InvalidArgument& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("bundle image file name \""), std::string::npos) << msg;
      EXPECT_NE(msg.find("refusing to write outside out"), std::string::npos) << msg;
      EXPECT_EQ(find_control_character(msg), std::string::npos) << msg;
    }
  }
  EXPECT_TRUE(is_plain_name(std::string(255, 'n')));
}

TEST(SafePathTest, FindsControlCharacters) {
  EXPECT_EQ(find_control_character("plain text, ünïcode"), std::string::npos);
  EXPECT_EQ(find_control_character("ab\tc"), 2u);
  EXPECT_EQ(find_control_character(std::string("\0", 1)), 0u);
  EXPECT_EQ(find_control_character("x\x7f"), 1u);
}

TEST(SafePathTest, EscapesForMessagesAndTruncates) {
  EXPECT_EQ(escape_for_message("a\n\"b\"\x1b"), "a\\x0a\\x22b\\x22\\x1b");
  EXPECT_EQ(escape_for_message(std::string(100, 'x'), 4), "xxxx...");
}

}  // namespace
}  // namespace kcache
