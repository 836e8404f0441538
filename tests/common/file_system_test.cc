#include "common/file_system.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>

#include "common/error.h"

namespace kcache {
namespace {

class FileSystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl =
        std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/fsXXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  FileSystem& fs_ = FileSystem::real();
  std::string dir_;
};

TEST_F(FileSystemTest, MissingFileIsNulloptNotAnError) {
  EXPECT_FALSE(fs_.read_file(dir_ + "/nope"));
  EXPECT_FALSE(fs_.stat(dir_ + "/nope"));
  EXPECT_FALSE(fs_.remove_file(dir_ + "/nope"));
}

TEST_F(FileSystemTest, AtomicWriteReplacesWholeFileAndLeavesNoTemp) {
  fs_.write_file_atomically(dir_ + "/f", "first");
  fs_.write_file_atomically(dir_ + "/f", "second, longer");
  EXPECT_EQ(fs_.read_file(dir_ + "/f"), "second, longer");
  EXPECT_EQ(fs_.list_directory(dir_), std::vector<std::string>{"f"});
}

TEST_F(FileSystemTest, WriteIntoMissingFolderThrowsIoErrorNamingThePath) {
  try {
    fs_.write_file_atomically(dir_ + "/no/such/f", "x");
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(dir_ + "/no/such/f"), std::string::npos) << e.what();
  }
}

TEST_F(FileSystemTest, CreateDirectoriesMakesEveryLevelWithTheMode) {
  fs_.create_directories(dir_ + "/a/b/c", 0700);
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/a/b/c").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  fs_.create_directories(dir_ + "/a/b/c", 0700);  // again: no error
}

TEST_F(FileSystemTest, ReadingADirectoryIsAnIoError) { EXPECT_THROW(fs_.read_file(dir_), IoError); }

}  // namespace
}  // namespace kcache
