// A name NVRTC found absent that is there after the compile is keyed present
// only where no folder on its way changed while NVRTC compiled
// (compiler/seal/probes.cc, folder_changed_since: a folder renamed into
// place changes its own ctime). A folder bind-mounted onto an -I folder
// while NVRTC compiles (a sandbox or container tool setting up its view)
// brings its files with it, and the mount point then reports the mounted
// folder's old stamps: the name is keyed present by bytes NVRTC never read,
// and a later lookup with the mount in place hits an output built without
// it.
//
// It mounts, so it needs CAP_SYS_ADMIN in a mount namespace of its own:
// tests/compiler/stale_hit_bind_mount_run.sh runs it so (root, `unshare -m`);
// elsewhere (KCACHE_TEST_PRIVATE_MOUNTS unset) it is skipped.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "cache/storage.h"
#include "compiler/compiler.h"
#include "compiler/toolkit.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::ScopedCwd;
using testing::test_dir;
using testing::write;

TEST(StaleHitBindMountTest, AFolderMountedOntoAnIncludeFolderWhileNvrtcCompilesIsNotKeyedPresent) {
  if (!std::getenv("KCACHE_TEST_PRIVATE_MOUNTS")) {
    GTEST_SKIP() << "needs a mount namespace of its own (stale_hit_bind_mount_run.sh)";
  }
  const std::string dir = test_dir();
  // libcu++'s headers make the compile take long enough for the mount to
  // land after NVRTC looked for <y.h>, which it does first.
  write(dir, "w/k.cu",
        "#if __has_include(<y.h>)\n#include <y.h>\n#else\n#define V 50\n#endif\n"
        "#include <cuda/std/tuple>\n#include <cuda/std/complex>\n#include <cuda/std/chrono>\n"
        "#include <cuda/std/functional>\n#include <cuda/std/variant>\n#include <cuda/std/mdspan>\n"
        "extern \"C\" __global__ void k(int* p) { *p = V; }\n");
  write(dir, "w/inc/keep", "");
  write(dir, "staged/y.h", "#define V 51\n");
  write(dir, "staged/keep", "");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // every ctime before the start
  cache::StorageOptions so;
  so.local_dir = dir + "/store";
  cache::Storage storage(so);
  Toolkit toolkit = find_toolkit("");
  ScopedCwd in(dir + "/w");
  CompileOptions o;
  o.source_path = "k.cu";
  o.ptx_arch = "compute_80";
  o.std = "c++17";
  o.include_dirs = {"inc"};
  const std::string inc = dir + "/w/inc";
  std::thread mounter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    EXPECT_EQ(::mount((dir + "/staged").c_str(), inc.c_str(), nullptr, MS_BIND, nullptr), 0);
  });
  CompileResult raced;
  try {
    raced = Compiler(toolkit, &storage).compile(o);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "the raced compile: " << e.what();
  }
  mounter.join();
  CompileResult cached = Compiler(toolkit, &storage).compile(o);
  CompileResult fresh = Compiler(toolkit, nullptr).compile(o);
  ::umount2(inc.c_str(), MNT_DETACH);
  EXPECT_EQ(cached.bundle, fresh.bundle)
      << "with staged/ mounted on inc/: the cached compile (hit=" << cached.hits()
      << "; the raced compile "
      << (raced.misses() == 1 && raced.targets[0].not_stored.empty() ? "stored" : "not stored")
      << ") differs from a compile without a store";
}

}  // namespace
}  // namespace kcache::compiler
