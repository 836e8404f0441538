// The stamp rule (common/stamp_trust.h) trusts a stamp on overlayfs, for
// its upper layer's inode, and never on tmpfs, whose pages are never written
// back: a page written through a shared mapping stays dirty, and later
// writes to it move no stamp. An overlay whose upper layer is a tmpfs (a
// volatile container, a live system) is that tmpfs under overlayfs's name:
// statfs says overlayfs, stat gives the tmpfs inode's stamps. A header
// there, written through a mapping once, settled, and written through the
// mapping again, keeps its stamp: a lookup record answers with the old
// bytes' key.
//
// It mounts: tests/compiler/stale_hit_overlay_mapping_run.sh runs it in a
// mount namespace of its own (root) with KCACHE_TEST_OVERLAY_DIR naming a
// folder in such an overlay; elsewhere it is skipped.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "cache/storage.h"
#include "compiler/compiler.h"
#include "compiler/toolkit.h"
#include "tests/compiler/lookup_record_testing.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::age;
using testing::write;
using StaleHitOverlayMappingTest = testing::LookupRecordFixture;

constexpr long kOverlayMagic = 0x794C7630;

TEST_F(StaleHitOverlayMappingTest, AMappedHeaderOnATmpfsBackedOverlayIsNotAnsweredByItsStamp) {
  const char* overlay = std::getenv("KCACHE_TEST_OVERLAY_DIR");
  if (!overlay || !*overlay) GTEST_SKIP() << "KCACHE_TEST_OVERLAY_DIR names no folder";
  struct statfs fs;
  ASSERT_EQ(::statfs(overlay, &fs), 0);
  ASSERT_EQ(fs.f_type, kOverlayMagic) << overlay << " is no overlay";
  const std::string dir = std::string(overlay) + "/StaleHitOverlayMappingTest";
  ASSERT_EQ(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()), 0);
  write(dir, "k.cu", "#include \"h.h\"\nextern \"C\" __global__ void k(int* p) { *p = V; }\n");
  const std::string h = write(dir, "h.h", "#define V 1\n");
  // The program that writes it keeps it mapped: its first write dirties the page.
  const int fd = ::open(h.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char* page = static_cast<char*>(::mmap(nullptr, 12, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(page, MAP_FAILED);
  page[10] = '2';
  cache::Storage& storage = store_in(dir);  // every stamp settled (the test's window)
  Toolkit toolkit = find_toolkit("");
  CompileOptions o;
  o.source_path = dir + "/k.cu";
  o.ptx_arch = "compute_80";
  Compiler(toolkit, &storage).compile(o);
  Compiler(toolkit, &storage).compile(o);  // a manifest hit that writes the record
  // Where the overlay's stamps were trusted, this was a record hit; on a
  // tmpfs upper layer no stamp stands, so no record answers by one.
  Compiler(toolkit, &storage).compile(o);
  struct stat then, now;
  ASSERT_EQ(::stat(h.c_str(), &then), 0);
  page[10] = '3';  // the same page again
  ASSERT_EQ(::stat(h.c_str(), &now), 0);
  EXPECT_EQ(std::memcmp(&then.st_mtim, &now.st_mtim, sizeof now.st_mtim), 0)
      << "the stamp moved: this overlay's upper layer writes pages back";
  CompileResult cached = Compiler(toolkit, &storage).compile(o);
  CompileResult fresh = Compiler(toolkit, nullptr).compile(o);
  ::munmap(page, 12);
  ::close(fd);
  EXPECT_EQ(cached.bundle, fresh.bundle)
      << "h.h written through its mapping: the cached compile (hit=" << cached.hits()
      << ") differs from a compile without a store";
}

}  // namespace
}  // namespace kcache::compiler
