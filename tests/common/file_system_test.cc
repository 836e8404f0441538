#include "common/file_system.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

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

// Compiler inputs (issue 27): only regular files, never blocking, bounded.
TEST_F(FileSystemTest, AnInputFileIsARegularFileOfBoundedSize) {
  fs_.write_file_atomically(dir_ + "/h.h", "int x;\n");
  EXPECT_EQ(read_input_file(dir_ + "/h.h"), "int x;\n");
  ASSERT_EQ(::symlink((dir_ + "/h.h").c_str(), (dir_ + "/link.h").c_str()), 0);
  EXPECT_EQ(read_input_file(dir_ + "/link.h"), "int x;\n");  // a link to one is fine
  EXPECT_FALSE(read_input_file(dir_ + "/nope.h"));
  ASSERT_EQ(::mkfifo((dir_ + "/fifo.h").c_str(), 0600), 0);
  ASSERT_EQ(::mkdir((dir_ + "/folder.h").c_str(), 0700), 0);
  const std::pair<std::string, std::string> refused[] = {
      {dir_ + "/fifo.h", "it is a FIFO (named pipe), not a regular file"},
      {"/dev/zero", "it is a character device, not a regular file"},
      {"/dev/null", "it is a character device, not a regular file"},
      {dir_ + "/folder.h", "it is a folder, not a regular file"},
  };
  for (const auto& [path, says] : refused) {
    try {
      read_input_file(path);  // returns at once: a FIFO without a writer never blocks it
      ADD_FAILURE() << "read " << path;
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find("cannot read " + path + ": " + says), std::string::npos)
          << e.what();
    }
  }
  // One byte over the bound (a sparse file: nothing is written).
  ASSERT_EQ(::truncate((dir_ + "/h.h").c_str(), static_cast<off_t>(kMaxInputFileBytes + 1)), 0);
  try {
    read_input_file(dir_ + "/h.h");
    ADD_FAILURE() << "read past the bound";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("larger than 64 MiB"), std::string::npos) << e.what();
  }
  ASSERT_EQ(::truncate((dir_ + "/h.h").c_str(), static_cast<off_t>(kMaxInputFileBytes)), 0);
  EXPECT_EQ(read_input_file(dir_ + "/h.h")->size(), kMaxInputFileBytes);  // the bound itself reads
}

}  // namespace
}  // namespace kcache
