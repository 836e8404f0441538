// When a stat may stand for a file's bytes (common/stamp_trust.h), and the
// stale hits in the seams between manifests, lookup records and the served
// disk: each case puts the drop-in's path (compile_program) against the real
// NVRTC from the same files at that moment (program_vs_nvrtc.h).
#include "common/stamp_trust.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/compiler/program_vs_nvrtc.h"

namespace kcache::compiler {
namespace {

using testing::InFolder;
using testing::kKernel;
using testing::record_hits;

// A file mapped shared and writable, with one page made dirty.
class SharedMapping {
 public:
  explicit SharedMapping(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd_ < 0 || ::fstat(fd_, &st) != 0) return;
    size_ = static_cast<size_t>(st.st_size);
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p != MAP_FAILED) bytes_ = static_cast<char*>(p);
  }
  ~SharedMapping() {
    if (bytes_) ::munmap(bytes_, size_);
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return bytes_ != nullptr; }
  // Replaces the first `from` in the file by `to` (same length).
  void replace(const std::string& from, const std::string& to) {
    char* at = static_cast<char*>(::memmem(bytes_, size_, from.data(), from.size()));
    ASSERT_NE(at, nullptr) << from;
    std::memcpy(at, to.data(), to.size());
  }

 private:
  int fd_ = -1;
  char* bytes_ = nullptr;
  size_t size_ = 0;
};

FileStamp stamp_of(const std::string& path) {
  struct stat st{};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return FileStamp::of(st);
}

TEST(StampTrustTest, AWriteToAPageAlreadyDirtyMovesNoStamp) {
  kcache::testing::TempDir dir;
  const std::string path = dir / "h.cuh";
  std::ofstream(path) << "#define VALUE 1\n";
  SharedMapping map(path);
  ASSERT_TRUE(map.ok());
  map.replace("VALUE 1", "VALUE 2");  // the first write: the page becomes dirty
  const FileStamp before = stamp_of(path);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  map.replace("VALUE 2", "VALUE 3");
  EXPECT_EQ(stamp_of(path), before)
      << "this kernel moved a stamp for a write to a dirty page (written back meanwhile?)";
}

TEST(StampTrustTest, AStampYoungerThanTheWritebackWindowStandsForNothing) {
  const int64_t now = realtime_now_ns();
  const int64_t window = writeback_window_ns();
  EXPECT_GE(window, int64_t{2} * 1000000000);
  EXPECT_FALSE(stamp_settled(static_cast<uint64_t>(now - window / 2),
                             static_cast<uint64_t>(now - window / 2), now));
  EXPECT_FALSE(stamp_settled(static_cast<uint64_t>(now - window * 2),
                             static_cast<uint64_t>(now - window / 2), now))
      << "ctime counts as well as mtime";
  EXPECT_TRUE(stamp_settled(static_cast<uint64_t>(now - window * 2),
                            static_cast<uint64_t>(now - window * 2), now));
}

TEST(StampTrustTest, TmpfsNfsAndFuseStampsAreNotTrusted) {
  EXPECT_TRUE(stamps_trusted_on_type(0xEF53));       // ext4
  EXPECT_FALSE(stamps_trusted_on_type(0x01021994));  // tmpfs: pages never written back
  EXPECT_FALSE(stamps_trusted_on_type(0x6969));      // NFS
  EXPECT_FALSE(stamps_trusted_on_type(0x65735546));  // FUSE
}

class StaleHitTest : public testing::ProgramVsNvrtcTest {
 protected:
  void SetUp() override {
    ProgramVsNvrtcTest::SetUp();
    set_trust_tmpfs_for_testing(true);  // a test folder may be on tmpfs
  }
  void TearDown() override {
    set_trust_tmpfs_for_testing(false);
    ProgramVsNvrtcTest::TearDown();
  }
};

// A header edited through a shared mapping whose page was dirty already:
// size, mtime and ctime stay as they were, so neither a manifest's stamp
// nor a lookup record's may stand for the bytes the first compile read.
TEST_F(StaleHitTest, AHeaderWrittenThroughASharedMappingIsReadAgain) {
  set_writeback_window_for_testing(-1);  // the measured window: what a user has
  write("w/inc/v.h", "#define VALUE 11\n");
  InFolder in(dir_ / "w");
  const std::string source = "#include \"inc/v.h\"\n" + std::string(kKernel);
  SharedMapping map(dir_ / "w/inc/v.h");
  ASSERT_TRUE(map.ok());
  map.replace("VALUE 11", "VALUE 12");
  testing::age();
  expect_nvrtcs_answer(source, "kern.cu", {"-arch=sm_90"});
  const FileStamp before = stamp_of(dir_ / "w/inc/v.h");
  map.replace("VALUE 12", "VALUE 13");
  if (stamp_of(dir_ / "w/inc/v.h") != before) {
    GTEST_SKIP() << "the page was written back meanwhile: the stamp moved";
  }
  EXPECT_FALSE(expect_nvrtcs_answer(source, "kern.cu", {"-arch=sm_90"}))
      << "the header's bytes changed under an unchanged stamp: a stale hit";
}

// NVRTC writes the working folder into -lineinfo's line table as $PWD
// spells it: a folder reached through two links is two outputs.
TEST_F(StaleHitTest, ALineInfoCompileKeysTheWorkingFolderAsPwdSpellsIt) {
  write("real/keep", "");
  ASSERT_EQ(::symlink((dir_ / "real").c_str(), (dir_ / "link").c_str()), 0);
  ASSERT_EQ(::symlink((dir_ / "real").c_str(), (dir_ / "link2").c_str()), 0);
  const char* pwd = std::getenv("PWD");
  const std::string old_pwd = pwd ? pwd : "";
  const std::string source = "#define VALUE 21\n" + std::string(kKernel);
  const std::vector<std::string> options = {"-arch=sm_90", "-lineinfo"};
  for (const char* link : {"link", "link2"}) {
    InFolder in(dir_ / link);
    ::setenv("PWD", (dir_ / link).c_str(), 1);
    EXPECT_FALSE(expect_nvrtcs_answer(source, "kern.cu", options))
        << "the first compile in " << link << " is a miss";
  }
  ::setenv("PWD", old_pwd.c_str(), 1);
}

// The drop-in caches -lineinfo and -G compiles with the working folder keyed.
TEST_F(StaleHitTest, ALineInfoProgramHitsInItsFolderAndMissesInAnother) {
  write("a/keep", "");
  write("b/keep", "");
  const std::string source = "#define VALUE 31\n" + std::string(kKernel);
  for (const char* option : {"-lineinfo", "-G"}) {
    const std::vector<std::string> options = {"-arch=sm_90", option};
    {
      InFolder in(dir_ / "a");
      ::setenv("PWD", (dir_ / "a").c_str(), 1);
      expect_cached_nvrtcs_answer(source, "kern.cu", options);
    }
    InFolder in(dir_ / "b");
    ::setenv("PWD", (dir_ / "b").c_str(), 1);
    EXPECT_FALSE(expect_nvrtcs_answer(source, "kern.cu", options))
        << option << " names the working folder: another folder is another output";
  }
}

// A lookup record checks an absent name by its own stat, not by its
// folder's stamp: a program that writes a file into its working folder at
// every run still hits through its record.
TEST_F(StaleHitTest, AProgramWritingIntoItsWorkingFolderStillHitsThroughItsRecord) {
  write("w/keep", "");
  InFolder in(dir_ / "w");
  const std::string source = "#define VALUE 41\n" + std::string(kKernel);
  expect_nvrtcs_answer(source, "kern.cu", {"-arch=sm_90"});
  for (int run = 0; run < 3; ++run) {
    write("w/log" + std::to_string(run) + ".txt", "a log\n");
    testing::age();
    const int64_t before = record_hits(*storage_);
    EXPECT_TRUE(expect_nvrtcs_answer(source, "kern.cu", {"-arch=sm_90"}));
    EXPECT_EQ(record_hits(*storage_), before + 1) << "run " << run << " missed its record";
  }
}

// A compile NVRTC needs seconds for: time enough to rename a folder in
// while it compiles.
std::string slow_kernel(const std::string& test) {
  std::string body;
  for (int i = 0; i < 5; ++i) {
    body += "  constexpr unsigned long long b" + std::to_string(i) + " = burn(400000, " +
            std::to_string(i) + "); p[" + std::to_string(i + 1) + "] = b" + std::to_string(i) +
            ";\n";
  }
  return "__device__ constexpr unsigned long long burn(unsigned n, unsigned salt) {\n"
         "  unsigned long long s = salt;\n"
         "  for (unsigned i = 0; i < n; ++i) s = s * 6364136223846793005ull + i;\n"
         "  return s;\n}\n" +
         test + "extern \"C\" __global__ void k(unsigned long long* p) {\n  p[0] = VALUE * 1000003ull;\n" +
         body + "}\n";
}

// `mv staged inc` while NVRTC compiles (how generators publish): NVRTC found
// inc/y.h absent; the name is there after the compile with its old ctime.
// The entry may not say "present".
TEST_F(StaleHitTest, AFolderRenamedInWhileNvrtcCompilesIsNotKeyedPresent) {
  write("w/staged/y.h", "// present\n");
  InFolder in(dir_ / "w");
  testing::age();
  // Computed: the scanner's key does not hold the answer (the probes do).
  const std::string source = slow_kernel(
      "#define STR(x) #x\n#define NAME(n) STR(inc/n.h)\n"
      "#if __has_include(NAME(y))\n#define VALUE 1\n#else\n#define VALUE 2\n#endif\n");
  std::thread mover([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    EXPECT_EQ(::rename((dir_ / "w/staged").c_str(), (dir_ / "w/inc").c_str()), 0);
  });
  ProgramResult first;
  EXPECT_NO_THROW(first = through_kcache(source, "kern.cu", {"-arch=sm_90"}));
  mover.join();
  if (first.record.output(cache::ProgramOutput::ptx).bytes.find("2000006") == std::string::npos) {
    GTEST_SKIP() << "NVRTC looked for inc/y.h after the rename";
  }
  EXPECT_FALSE(expect_nvrtcs_answer(source, "kern.cu", {"-arch=sm_90"}))
      << "the entry of a compile that found inc/y.h absent answered for it present";
}

}  // namespace
}  // namespace kcache::compiler
