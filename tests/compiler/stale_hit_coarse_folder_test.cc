// A manifest's absent name is checked by its folder's stamp where the folder
// had not changed since the compile started (compiler/seal/probes.cc,
// record_folder): its ctime older than the compile's start. On a file system
// whose timestamps are whole seconds (ext4 with 128-byte inodes, ext3, FAT
// in two), a folder changed earlier in the second the compile started in
// passes that check, and a name added later in the same second leaves its
// stamp as it was: the name is there, the folder says it is not. The stamp
// rule (common/stamp_trust.h: older than the writeback window) would not
// have taken that stamp.
//
// It needs such a file system: KCACHE_TEST_COARSE_DIR names a folder on one
// (tests/compiler/stale_hit_coarse_folder_run.sh makes a private loop mount
// and runs this test in it); without it the test is skipped.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "cache/storage.h"
#include "compiler/compiler.h"
#include "compiler/toolkit.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::ScopedCwd;
using testing::write;

int64_t ns_of(const struct timespec& t) { return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec; }

struct Stamp {
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const Stamp& o) const { return mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns; }
};

Stamp stamp_of(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return {};
  return {ns_of(st.st_mtim), ns_of(st.st_ctim)};
}

// Sleeps until just after the next whole second.
void to_the_next_second() {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  auto into = now - std::chrono::duration_cast<std::chrono::seconds>(now);
  std::this_thread::sleep_for(std::chrono::seconds(1) - into + std::chrono::milliseconds(20));
}

TEST(StaleHitCoarseFolderTest, ANameAddedInTheSecondOfTheCompileIsNotAnsweredByItsFolder) {
  const char* coarse = std::getenv("KCACHE_TEST_COARSE_DIR");
  if (!coarse || !*coarse) GTEST_SKIP() << "KCACHE_TEST_COARSE_DIR names no folder";
  const std::string dir = std::string(coarse) + "/StaleHitCoarseFolderTest";
  ASSERT_EQ(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "/w'").c_str()), 0);
  write(dir, "w/k.cu",
        "#if __has_include(<b.h>)\n#include <b.h>\n#else\n#define V 50\n#endif\n"
        "extern \"C\" __global__ void k(int* p) { *p = V; }\n");
  write(dir, "inc/keep", "");
  if (stamp_of(dir + "/inc").mtime_ns % 1000000000 != 0) {
    GTEST_SKIP() << dir << " has timestamps finer than a second";
  }
  cache::StorageOptions so;
  so.local_dir = dir + "/w/store";
  cache::Storage storage(so);
  Toolkit toolkit = find_toolkit("");
  ScopedCwd in(dir + "/w");
  CompileOptions o;
  o.source_path = "k.cu";
  o.ptx_arch = "compute_80";
  o.include_dirs = {dir + "/inc"};                       // absolute, outside the working folder
  o.may_read = [](const std::string&) { return true; };  // the worker's: no lookup record
  int tries = 0;
  for (; tries < 10; ++tries) {
    const std::string b = dir + "/inc/b.h";
    ::unlink(b.c_str());
    o.macros = {"-DTRY=" + std::to_string(tries)};  // a new entry each try
    to_the_next_second();
    write(dir, "inc/a" + std::to_string(tries) + ".h", "");  // the folder changes
    const Stamp before = stamp_of(dir + "/inc");
    ASSERT_EQ(Compiler(toolkit, &storage).compile(o).misses(), 1);
    write(dir, "inc/b.h", "#define V 51\n");            // a generator adds it
    if (!(stamp_of(dir + "/inc") == before)) continue;  // the second ended: again
    CompileResult cached = Compiler(toolkit, &storage).compile(o);
    CompileResult fresh = Compiler(toolkit, nullptr).compile(o);
    EXPECT_EQ(cached.bundle, fresh.bundle)
        << "inc/b.h added in the second of the compile: the cached compile (hit=" << cached.hits()
        << ") differs from a compile without a store";
    break;
  }
  EXPECT_LT(tries, 10) << "no try kept the folder's stamp: every compile took too long";
}

}  // namespace
}  // namespace kcache::compiler
