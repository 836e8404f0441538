// compiler/nvrtc/stdio_unlocked.h: getc, fgetc and _IO_getc read the same
// bytes with and without the lock, and only the thread inside NVRTC's
// compile reads unlocked.
#include "compiler/nvrtc/stdio_unlocked.h"

#include <stdio.h>
#include <stdio_ext.h>

#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "compiler/nvrtc/reads_alone.h"
#include "tests/testing/temp_dir.h"

extern "C" int _IO_getc(FILE* f);

namespace kcache::compiler {
namespace {

std::string read_with(int (*get)(FILE*), const std::string& path) {
  FILE* f = ::fopen(path.c_str(), "rb");
  if (!f) return "fopen failed";
  std::string out;
  for (int c; (c = get(f)) != EOF;) out += static_cast<char>(c);
  ::fclose(f);
  return out;
}

TEST(StdioUnlockedTest, EveryEntryReadsTheSameBytesWithAndWithoutTheLock) {
  testing::TempDir dir;
  std::string bytes = "#include <x.h>\n";
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(i);  // EOF's value, 0xff, too
  testing::write_file(dir / "h.cuh", bytes);
  std::thread second([] {});  // glibc locks from now on
  second.join();
  for (int (*get)(FILE*) : {&::getc, &::fgetc, &::_IO_getc}) {
    EXPECT_EQ(read_with(get, dir / "h.cuh"), bytes);
    {
      NvrtcReadsAlone alone;
      EXPECT_EQ(read_with(get, dir / "h.cuh"), bytes);
    }
    // A FILE its caller locks itself is read without the lock, as glibc does.
    FILE* f = ::fopen((dir / "h.cuh").c_str(), "rb");
    ASSERT_NE(f, nullptr);
    __fsetlocking(f, FSETLOCKING_BYCALLER);
    EXPECT_EQ(get(f), '#');
    ::fclose(f);
  }
}

TEST(StdioUnlockedTest, OnlyTheCompilingThreadReadsUnlockedAndScopesNest) {
  EXPECT_FALSE(nvrtc_reads_alone());
  {
    NvrtcReadsAlone outer;
    EXPECT_TRUE(nvrtc_reads_alone());
    bool other = true;
    std::thread([&] { other = nvrtc_reads_alone(); }).join();
    EXPECT_FALSE(other);
    {
      NvrtcReadsAlone inner;
      EXPECT_TRUE(nvrtc_reads_alone());
    }
    EXPECT_TRUE(nvrtc_reads_alone());
  }
  EXPECT_FALSE(nvrtc_reads_alone());
}

}  // namespace
}  // namespace kcache::compiler
