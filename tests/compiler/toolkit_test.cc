#include "compiler/toolkit.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "common/error.h"
#include "common/stamp_trust.h"
#include "compiler/toolkit_memo.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::test_dir;
using testing::write;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A toolkit folder with the files kcache reads, none of them real.
std::string fake_toolkit(const std::string& dir, int version = 13000) {
  write(dir, "include/cuda.h",
        "/* header */\n#define CUDA_VERSION " + std::to_string(version) + "\n");
  std::string major = std::to_string(version / 1000), minor = std::to_string(version % 1000 / 10);
  write(dir, "lib64/libnvrtc.so." + major, "nvrtc bytes");
  write(dir, "lib64/libnvrtc-builtins.so." + major + "." + minor, "builtins bytes");
  return dir;
}

class ToolkitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_dir();
    ::unsetenv("CUDA_PATH");
  }
  void TearDown() override { ::unsetenv("CUDA_PATH"); }
  std::string dir_;
};

TEST_F(ToolkitTest, FindsTheInstalledToolkitWithoutLoadingNvrtc) {
  Toolkit t = find_toolkit("");
  EXPECT_EQ(t.root, "/usr/local/cuda");
  EXPECT_GE(t.cuda_version, 12000);
  ASSERT_EQ(t.include_dirs.size(), 2u);
  EXPECT_EQ(t.include_dirs[0], "/usr/local/cuda/include");
  EXPECT_EQ(t.include_dirs[1], "/usr/local/cuda/include/cccl");
  EXPECT_GT(t.cccl_version, 0);
  EXPECT_TRUE(contains(t.nvrtc.path, "libnvrtc.so")) << t.nvrtc.path;
  EXPECT_TRUE(contains(t.nvrtc_builtins.path, "libnvrtc-builtins.so")) << t.nvrtc_builtins.path;
  EXPECT_EQ(t.nvrtc.build_id.size(), 40u) << "NVIDIA's libnvrtc carries a GNU build-id";
  EXPECT_TRUE(contains(t.identity(), "cuda " + t.version_string() + " cccl ")) << t.identity();
  EXPECT_TRUE(contains(t.identity(), "build-id=" + t.nvrtc.build_id)) << t.identity();
  EXPECT_EQ(find_toolkit("").identity(), t.identity());
}

TEST_F(ToolkitTest, CudaPathFlagIsUsedAloneAndAMissingOneSaysWhereItLooked) {
  try {
    find_toolkit(dir_ + "/nowhere");
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    EXPECT_TRUE(contains(e.what(), "--cuda-path = " + dir_ + "/nowhere (does not exist)"))
        << e.what();
    EXPECT_FALSE(contains(e.what(), "/usr/local/cuda (")) << e.what();
  }
  EXPECT_EQ(find_toolkit(fake_toolkit(dir_ + "/cuda") + "/").root, dir_ + "/cuda");
}

TEST_F(ToolkitTest, EnvironmentComesBeforeTheDefaultAndABadOneIsReported) {
  ::setenv("CUDA_PATH", fake_toolkit(dir_ + "/env-cuda").c_str(), 1);
  EXPECT_EQ(find_toolkit("").root, dir_ + "/env-cuda");
  ::setenv("CUDA_PATH", (dir_ + "/bad").c_str(), 1);
  write(dir_, "bad/include/cuda.h", "no version here\n");
  Toolkit t = find_toolkit("");  // falls through to /usr/local/cuda
  EXPECT_EQ(t.root, "/usr/local/cuda");
}

TEST_F(ToolkitTest, AFolderWithoutNvrtcIsRejectedWithTheReason) {
  write(dir_, "cuda/include/cuda.h", "#define CUDA_VERSION 12040\n");
  try {
    find_toolkit(dir_ + "/cuda");
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    EXPECT_TRUE(contains(e.what(), "no libnvrtc.so.12 in lib64/ or lib/")) << e.what();
  }
}

TEST_F(ToolkitTest, IdentityChangesWithTheToolkitVersionAndTheLibraries) {
  std::string base = find_toolkit(fake_toolkit(dir_ + "/a")).identity();
  EXPECT_NE(find_toolkit(fake_toolkit(dir_ + "/b", 13010)).identity(), base);
  fake_toolkit(dir_ + "/c");
  write(dir_, "c/lib64/libnvrtc-builtins.so.13.0", "builtins bytes, patched");
  EXPECT_NE(find_toolkit(dir_ + "/c").identity(), base);
  // The same bytes elsewhere: the same identity (machines share keys).
  EXPECT_EQ(find_toolkit(fake_toolkit(dir_ + "/elsewhere/a")).identity(), base);
}

// The trade-off toolkit.h documents: only size, head and tail are read.
TEST_F(ToolkitTest, FingerprintReadsSizeHeadAndTailButNotTheMiddle) {
  std::string bytes(1 << 20, 'x');
  std::string path = write(dir_, "lib.so", bytes);
  LibraryFingerprint f = fingerprint_library(path);
  EXPECT_EQ(f.size, bytes.size());
  EXPECT_EQ(f.name, "lib.so");
  auto with = [&](size_t at) {
    std::string changed = bytes;
    changed[at] = 'y';
    write(dir_, "lib.so", changed);
    return fingerprint_library(path).head_tail_xxh3;
  };
  EXPECT_NE(with(10), f.head_tail_xxh3);
  EXPECT_NE(with(bytes.size() - 10), f.head_tail_xxh3);
  EXPECT_EQ(with(bytes.size() / 2), f.head_tail_xxh3);
  write(dir_, "lib.so", bytes + "z");
  EXPECT_NE(fingerprint_library(path).head_tail_xxh3, f.head_tail_xxh3);
}

TEST_F(ToolkitTest, ReadsTheGnuBuildIdOfAnElfFile) {
  // This test binary is linked with a build-id by Debian's gcc; libnvrtc is
  // checked in FindsTheInstalledToolkitWithoutLoadingNvrtc.
  LibraryFingerprint self = fingerprint_library("/proc/self/exe");
  if (self.build_id.empty()) GTEST_SKIP() << "this toolchain links without --build-id";
  EXPECT_EQ(self.build_id.size() % 2, 0u);
  EXPECT_TRUE(contains(self.describe(), "build-id=" + self.build_id));
  EXPECT_TRUE(fingerprint_library(write(dir_, "not-elf", "hello")).build_id.empty());
}

// Toolkits whose files have settled: a window of 10 ms (the least), on
// whatever file system the test folder is.
class RememberedToolkitTest : public ToolkitTest {
 protected:
  void SetUp() override {
    ToolkitTest::SetUp();
    set_writeback_window_for_testing(10'000'000);
    set_trust_tmpfs_for_testing(true);
    store_ = dir_ + "/store";
    ::mkdir(store_.c_str(), 0700);
  }
  void TearDown() override {
    set_writeback_window_for_testing(-1);
    set_trust_tmpfs_for_testing(false);
    ToolkitTest::TearDown();
  }
  static void settle() { ::usleep(50'000); }  // past the 10 ms window
  std::string store_;
};

TEST_F(RememberedToolkitTest, ALaterProcessTakesTheLibrariesFingerprintsFromTheStore) {
  const std::string root = fake_toolkit(dir_ + "/cuda");
  settle();
  const Toolkit first = find_toolkit(root, store_);
  EXPECT_EQ(first.identity(), find_toolkit(root).identity());
  // What the next process finds there: the fingerprint, without reading the
  // library (the compute that would read it is never called).
  ToolkitMemo later(toolkit_memo_path(store_));
  int reads = 0;
  std::optional<std::string> v = later.value("fingerprint", first.nvrtc.path, [&](int) {
    ++reads;
    return std::string("read again");
  });
  ASSERT_TRUE(v);
  EXPECT_EQ(reads, 0);
  EXPECT_NE(v->find(first.nvrtc.head_tail_xxh3), std::string::npos) << *v;
  EXPECT_EQ(find_toolkit(root, store_).identity(), first.identity());
}

TEST_F(RememberedToolkitTest, ALibraryWrittenSinceIsReadAgain) {
  const std::string root = fake_toolkit(dir_ + "/cuda");
  settle();
  const Toolkit first = find_toolkit(root, store_);
  write(dir_, "cuda/lib64/libnvrtc.so.13", "NVRTC BYTES");  // same size, other bytes
  const Toolkit now = find_toolkit(root, store_);
  EXPECT_NE(now.nvrtc.head_tail_xxh3, first.nvrtc.head_tail_xxh3);
  EXPECT_EQ(now.identity(), find_toolkit(root).identity());
  write(dir_, "cuda/include/cuda.h", "#define CUDA_VERSION 13010\n");
  write(dir_, "cuda/lib64/libnvrtc-builtins.so.13.1", "builtins bytes");
  EXPECT_EQ(find_toolkit(root, store_).cuda_version, 13010);
}

// The stamp rule: a file written within the writeback window may still
// change under an unmoved stamp, so nothing it said is remembered.
TEST_F(RememberedToolkitTest, AToolkitWrittenWithinTheWindowIsNotRemembered) {
  set_writeback_window_for_testing(3600'000'000'000);  // an hour
  const std::string root = fake_toolkit(dir_ + "/cuda");
  const Toolkit t = find_toolkit(root, store_);
  EXPECT_EQ(t.identity(), find_toolkit(root).identity());
  EXPECT_NE(::access(toolkit_memo_path(store_).c_str(), F_OK), 0) << "a memo was written";
}

TEST_F(RememberedToolkitTest, ADamagedMemoIsIgnoredAndReplaced) {
  const std::string root = fake_toolkit(dir_ + "/cuda");
  settle();
  const std::string identity = find_toolkit(root, store_).identity();
  std::string bytes;
  {
    std::ifstream in(toolkit_memo_path(store_), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 40u);
  for (size_t at : {size_t{0}, bytes.size() / 2, bytes.size() - 1}) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x20);
    write(store_, "toolkit-stamps", damaged);
    EXPECT_EQ(find_toolkit(root, store_).identity(), identity) << "byte " << at;
  }
  write(store_, "toolkit-stamps", bytes.substr(0, 20));
  EXPECT_EQ(find_toolkit(root, store_).identity(), identity);
}

// A writer killed between its temporary file and the rename leaves the
// temporary behind: the next save removes one an hour old, not a live
// writer's.
TEST_F(RememberedToolkitTest, AKilledWritersTemporaryFileIsRemovedByTheNextSave) {
  const std::string abandoned = write(store_, "toolkit-stamps.tmp.99999", "half");
  const std::string live = write(store_, "toolkit-stamps.tmp.99998", "half");
  const struct timespec old[2] = {{::time(nullptr) - 7200, 0}, {::time(nullptr) - 7200, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, abandoned.c_str(), old, 0), 0);
  const std::string root = fake_toolkit(dir_ + "/cuda");
  settle();
  find_toolkit(root, store_);
  EXPECT_NE(::access(abandoned.c_str(), F_OK), 0) << "an abandoned temporary file is left";
  EXPECT_EQ(::access(live.c_str(), F_OK), 0) << "a live writer's file is removed";
  EXPECT_EQ(::access(toolkit_memo_path(store_).c_str(), F_OK), 0);
}

}  // namespace
}  // namespace kcache::compiler
