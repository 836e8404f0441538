#include "common/paths.h"

#include <gtest/gtest.h>

namespace kcache {
namespace {

TEST(ParentFolderTest, AFileInTheRootIsInTheRoot) {
  EXPECT_EQ(parent_folder("/x"), "/");
  EXPECT_EQ(parent_folder("//x"), "/");
  EXPECT_EQ(parent_folder("/"), "/");
}

TEST(ParentFolderTest, ABareNameIsInTheCurrentFolder) {
  EXPECT_EQ(parent_folder("x"), ".");
  EXPECT_EQ(parent_folder(""), ".");
  EXPECT_EQ(parent_folder("a/"), ".");
}

TEST(ParentFolderTest, DropsTheLastName) {
  EXPECT_EQ(parent_folder("/a/b"), "/a");
  EXPECT_EQ(parent_folder("a/b"), "a");
  EXPECT_EQ(parent_folder("./x"), ".");
  EXPECT_EQ(parent_folder("../x"), "..");
  EXPECT_EQ(parent_folder("/a/b/c.h"), "/a/b");
}

TEST(ParentFolderTest, TrailingSlashesBelongToTheLastName) {
  EXPECT_EQ(parent_folder("a/b/"), "a");
  EXPECT_EQ(parent_folder("/a/b//"), "/a");
  EXPECT_EQ(parent_folder("/x/"), "/");
}

TEST(ParentFolderTest, ARunOfSlashesIsOneSeparator) {
  EXPECT_EQ(parent_folder("a//b"), "a");
  EXPECT_EQ(parent_folder("/a///b"), "/a");
}

TEST(ParentFolderTest, HasFolderTellsABareNameFromOneWithAFolder) {
  EXPECT_FALSE(has_folder("x.h"));
  EXPECT_FALSE(has_folder(""));
  EXPECT_TRUE(has_folder("./x.h"));
  EXPECT_TRUE(has_folder("/x.h"));
  EXPECT_TRUE(has_folder("a/"));
}

}  // namespace
}  // namespace kcache
