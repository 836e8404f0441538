// What a recorded probe promises on a later lookup: probes_hold is true
// exactly while every absent path is still absent and every present file has
// its recorded bytes. Absent paths are checked through the stat of their
// deepest existing folder where that is exact; these cases are the ones where
// a folder's state could hide a change.
#include "compiler/seal/probes.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

#include "common/hash.h"
#include "common/stamp_trust.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::ScopedEnv;
using testing::test_dir;
using testing::write;

int64_t now_ns() {
  struct timespec t;
  ::clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

class ProbesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_dir();
    toolkit_ = dir_ + "/toolkit/include";
    std::filesystem::create_directories(toolkit_ + "/cub");
    write(toolkit_, "cub/cub.cuh", "// cub\n");
    context_.toolkit_dirs = {toolkit_};
    // A folder's stamp answers for its absent names only once settled (the
    // stamp rule): a short window, on whatever file system the test runs.
    set_writeback_window_for_testing(int64_t{10} * 1000000);
    set_trust_tmpfs_for_testing(true);
    // Folder times are in ns but a file system may round them: the compile
    // "starts" after the set-up has settled.
    ::usleep(20000);
    started_ = now_ns();
  }
  void TearDown() override {
    set_writeback_window_for_testing(-1);
    set_trust_tmpfs_for_testing(false);
  }
  // The probes of a compile that named `paths`, as a later lookup sees them.
  std::vector<cache::ManifestProbe> record(const std::vector<std::string>& paths) {
    ClassifiedProbes c = classify_probes(paths, context_, started_);
    EXPECT_EQ(c.unkeyable, "");
    return c.keyed;
  }
  bool hold(const std::vector<cache::ManifestProbe>& probes) {
    return probes_hold(probes, context_);
  }
  std::string dir_, toolkit_;
  ProbeContext context_;
  int64_t started_ = 0;
};

TEST_F(ProbesTest, AnAbsentNameInAnUnchangedFolderIsCheckedByTheFolder) {
  auto probes = record({toolkit_ + "/cub/missing.cuh", toolkit_ + "/cub/cub.cuh"});
  ASSERT_EQ(probes.size(), 2u);
  const cache::ManifestProbe& absent = probes[1];
  EXPECT_EQ(absent.path, "toolkit0:cub/missing.cuh");
  EXPECT_TRUE(absent.has_folder);
  EXPECT_EQ(absent.folder_depth, 1u);
  EXPECT_TRUE(hold(probes));
  write(toolkit_, "cub/missing.cuh", "// appeared\n");
  EXPECT_FALSE(hold(probes));
}

// Served files (seal.h) join the classified probes in path order, each
// once; one read twice with other bytes, or changed while read, is unkeyable.
TEST_F(ProbesTest, ServedFilesMergeInPathOrderAndAChangedOneIsUnkeyable) {
  write(dir_, "user/b.h", "b");
  write(dir_, "user/d.h", "d");
  context_.served = true;
  context_.check_time_macros = false;
  ClassifiedProbes c = classify_probes({dir_ + "/user/a.h", dir_ + "/user/c.h"}, context_, started_);
  ASSERT_EQ(c.unkeyable, "");
  auto served = [&](const std::string& name, const std::string& bytes) {
    ServedFile f;
    f.path = dir_ + "/user/" + name;
    f.content = xxh3_128(bytes);
    f.size = bytes.size();
    f.ctime_ns = 1;
    return f;
  };
  add_served({served("d.h", "d"), served("b.h", "b"), served("d.h", "d")}, context_, started_, &c);
  EXPECT_EQ(c.unkeyable, "");
  std::vector<std::string> order;
  for (const cache::ManifestProbe& p : c.keyed) order.push_back(p.path.substr(dir_.size()));
  EXPECT_EQ(order, (std::vector<std::string>{"/user/a.h", "/user/b.h", "/user/c.h", "/user/d.h"}));
  ClassifiedProbes twice = c;
  add_served({served("b.h", "B")}, context_, started_, &twice);
  EXPECT_NE(twice.unkeyable.find("read twice"), std::string::npos) << twice.unkeyable;
  ServedFile changed = served("e.h", "e");
  changed.ctime_ns = UINT64_MAX;  // a known file written while read (seal.h)
  add_served({changed}, context_, started_, &c);
  EXPECT_EQ(c.unkeyable, dir_ + "/user/e.h changed while NVRTC compiled");
}

TEST_F(ProbesTest, AMissingFolderChainIsCheckedAtTheDeepestFolderThatExists) {
  auto probes = record({toolkit_ + "/a/b/c.cuh"});
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_TRUE(probes[0].has_folder);
  EXPECT_EQ(probes[0].folder_depth, 0u);
  EXPECT_TRUE(hold(probes));
  std::filesystem::create_directories(toolkit_ + "/a/b");
  EXPECT_TRUE(hold(probes)) << "folders alone are no file";
  write(toolkit_, "a/b/c.cuh", "// appeared\n");
  EXPECT_FALSE(hold(probes));
}

TEST_F(ProbesTest, ADanglingLinkIsCheckedByItsOwnNameNotByTheFolder) {
  ASSERT_EQ(::symlink((dir_ + "/elsewhere/x.cuh").c_str(), (toolkit_ + "/cub/x.cuh").c_str()), 0);
  ::usleep(20000);
  started_ = now_ns();
  auto probes = record({toolkit_ + "/cub/x.cuh"});
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_FALSE(probes[0].has_folder) << "the link's target can appear without the folder changing";
  EXPECT_TRUE(hold(probes));
  write(dir_, "elsewhere/x.cuh", "// the link's target appeared\n");
  EXPECT_FALSE(hold(probes));
}

TEST_F(ProbesTest, AFolderChangedDuringTheCompileIsNotTrusted) {
  write(toolkit_, "cub/new.cuh", "// written after the compile started\n");
  ::unlink((toolkit_ + "/cub/new.cuh").c_str());
  started_ = 0;  // the folder's ctime is later than the compile's start
  auto probes = record({toolkit_ + "/cub/other.cuh"});
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_FALSE(probes[0].has_folder);
  EXPECT_TRUE(hold(probes));
}

TEST_F(ProbesTest, AFolderReplacedByAnotherOfTheSameNameFallsBackToTheName) {
  auto probes = record({toolkit_ + "/cub/missing.cuh"});
  ASSERT_TRUE(probes[0].has_folder);
  std::filesystem::rename(toolkit_ + "/cub", toolkit_ + "/cub.old");
  std::filesystem::create_directories(toolkit_ + "/cub");
  EXPECT_TRUE(hold(probes));
  write(toolkit_, "cub/missing.cuh", "// here now\n");
  EXPECT_FALSE(hold(probes));
}

TEST_F(ProbesTest, AnEditedPresentFileDoesNotHold) {
  auto probes = record({toolkit_ + "/cub/cub.cuh"});
  ASSERT_TRUE(probes[0].present);
  EXPECT_TRUE(hold(probes));
  write(toolkit_, "cub/cub.cuh", "// edited\n");
  EXPECT_FALSE(hold(probes));
}

TEST_F(ProbesTest, AnAbsentUserPathIsCheckedByItsFolderToo) {
  std::filesystem::create_directories(dir_ + "/user");
  ::usleep(20000);
  started_ = now_ns();
  auto probes = record({dir_ + "/user/config.h"});
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_EQ(probes[0].path, dir_ + "/user/config.h");
  EXPECT_TRUE(probes[0].has_folder);
  EXPECT_TRUE(hold(probes));
  write(dir_, "user/config.h", "#define X 1\n");
  EXPECT_FALSE(hold(probes));
}

TEST_F(ProbesTest, ACraftedFolderDepthIsAMissNotACrash) {
  auto probes = record({toolkit_ + "/cub/missing.cuh"});
  probes[0].folder_depth = 7;
  EXPECT_FALSE(hold(probes));
}

// NVRTC may read its own library folder; a file there that is no library
// was read unkeyed, so the result is not stored.
TEST_F(ProbesTest, AHeaderInNvrtcsLibraryFolderMakesTheResultUnkeyable) {
  const std::string lib = dir_ + "/toolkit/lib64";
  write(lib, "libnvrtc-builtins.so.13.0", std::string("\x7f" "ELF") + "rest of a library");
  write(lib, "evil.h", "#define V 2\n");
  context_.own_dirs = {lib};
  context_.nvrtc_library_dir = lib;
  ClassifiedProbes ok = classify_probes({lib + "/libnvrtc-builtins.so.13.0"}, context_, now_ns());
  EXPECT_EQ(ok.unkeyable, "");
  EXPECT_TRUE(ok.keyed.empty()) << "NVRTC's own library is not keyed";
  ClassifiedProbes bad = classify_probes({lib + "/evil.h"}, context_, now_ns());
  EXPECT_NE(bad.unkeyable.find("evil.h"), std::string::npos) << bad.unkeyable;
}

TEST_F(ProbesTest, AFolderIsKeyedAsNoFile) {
  std::filesystem::create_directories(dir_ + "/user/kc.h");
  ::usleep(20000);
  started_ = now_ns();
  auto probes = record({dir_ + "/user/kc.h"});
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_FALSE(probes[0].present);
  EXPECT_TRUE(hold(probes));
  std::filesystem::remove(dir_ + "/user/kc.h");
  write(dir_, "user/kc.h", "#define V 2\n");
  EXPECT_FALSE(hold(probes));
}

TEST_F(ProbesTest, AnAskedNameIsKeyedAbsentInEveryToolkitFolder) {
  ClassifiedProbes c;
  add_asked_absences("h.h", context_, started_, &c);
  ASSERT_EQ(c.keyed.size(), 1u);
  EXPECT_EQ(c.keyed[0].path, "toolkit0:h.h");
  EXPECT_TRUE(probes_hold(c.keyed, context_));
  write(toolkit_, "h.h", "// appeared\n");
  EXPECT_FALSE(probes_hold(c.keyed, context_));
  ClassifiedProbes none;
  add_asked_absences("/abs/h.h", context_, started_, &none);
  add_asked_absences("../h.h", context_, started_, &none);
  EXPECT_TRUE(none.keyed.empty());
}

// A folder on $LD_LIBRARY_PATH is the user's: a header there that a computed
// __has_include looked for is keyed, so after the variable changes (or not)
// and the header appears, the entry no longer holds.
TEST_F(ProbesTest, AnAbsentHeaderOnLdLibraryPathIsKeyedWhateverTheEnvironment) {
  std::filesystem::create_directories(dir_ + "/ldlib");
  ::usleep(20000);
  started_ = now_ns();
  std::vector<cache::ManifestProbe> probes;
  {
    ScopedEnv env("LD_LIBRARY_PATH", dir_ + "/ldlib");
    probes = record({dir_ + "/ldlib/cfg.h", dir_ + "/ldlib/libcuda.so.1"});
  }
  ASSERT_EQ(probes.size(), 1u) << "the loader's library name is not keyed, the header is";
  EXPECT_EQ(probes[0].path, dir_ + "/ldlib/cfg.h");
  EXPECT_TRUE(hold(probes));
  write(dir_, "ldlib/cfg.h", "#define V 2\n");
  EXPECT_FALSE(hold(probes));
}

TEST_F(ProbesTest, AnExistingHeaderOnLdLibraryPathIsHandedOver) {
  write(dir_, "ldlib/cfg.h", "#define V 2\n");
  ScopedEnv env("LD_LIBRARY_PATH", "/nowhere:" + dir_ + "/ldlib");
  ClassifiedProbes c = classify_probes({dir_ + "/ldlib/cfg.h"}, context_, now_ns());
  EXPECT_EQ(c.user_files, std::vector<std::string>{dir_ + "/ldlib/cfg.h"});
}

// The driver's JIT cache is left unkeyed only where the environment of the
// lookup still says it is the driver's: elsewhere the entry is a miss.
TEST_F(ProbesTest, TheDriversCacheHoldsOnlyInTheEnvironmentThatMadeItNvrtcsOwn) {
  write(dir_, "jit/index", "driver's index");
  write(dir_, "home/.nv/ComputeCache/index", "driver's index");
  ScopedEnv home("HOME", dir_ + "/home");
  std::vector<cache::ManifestProbe> probes;
  {
    ScopedEnv cache("CUDA_CACHE_PATH", dir_ + "/jit");
    ClassifiedProbes c = classify_probes(
        {dir_ + "/jit/index", dir_ + "/home/.nv/ComputeCache/index"}, context_, now_ns());
    EXPECT_EQ(c.unkeyable, "");
    EXPECT_TRUE(c.user_files.empty()) << "the driver's files are not handed";
    probes = c.keyed;
    ASSERT_EQ(probes.size(), 2u);
    EXPECT_TRUE(hold(probes));
  }
  EXPECT_FALSE(hold(probes)) << "without CUDA_CACHE_PATH " << dir_
                             << "/jit/index is a user file: a fresh compile hands it";
  ScopedEnv cache("CUDA_CACHE_PATH", dir_ + "/jit");
  EXPECT_TRUE(hold(probes));
  ScopedEnv other_home("HOME", dir_ + "/other");
  EXPECT_FALSE(hold(probes));
}

TEST_F(ProbesTest, AHeaderInTheDriversCacheIsKeyedLikeAUserPath) {
  std::filesystem::create_directories(dir_ + "/jit");
  ::usleep(20000);
  started_ = now_ns();
  ScopedEnv cache("CUDA_CACHE_PATH", dir_ + "/jit");
  auto probes = record({dir_ + "/jit/cfg.h"});
  ASSERT_EQ(probes.size(), 1u);
  EXPECT_EQ(probes[0].path, dir_ + "/jit/cfg.h");
  EXPECT_TRUE(hold(probes));
  write(dir_, "jit/cfg.h", "#define V 2\n");
  EXPECT_FALSE(hold(probes));
}

// NVRTC can read its library folder: a header appearing there where an
// include search found nothing changes the answer.
TEST_F(ProbesTest, AnAbsentHeaderInNvrtcsLibraryFolderIsKeyed) {
  const std::string lib = dir_ + "/toolkit/lib64";
  write(lib, "libnvrtc.so.13", std::string("\x7f" "ELF") + "a library");
  context_.own_dirs = {lib};
  context_.nvrtc_library_dir = lib;
  ::usleep(20000);
  started_ = now_ns();
  auto probes = record({lib + "/foo.h", lib + "/libcuda.so.1"});
  ASSERT_EQ(probes.size(), 1u) << "the loader's absent library name is not keyed";
  EXPECT_EQ(probes[0].path, lib + "/foo.h");
  EXPECT_TRUE(hold(probes));
  write(lib, "foo.h", "#define V 2\n");
  EXPECT_FALSE(hold(probes));
}

// Served, a file NVRTC's own code looked at in a folder it may read itself
// (its library folder, the time zones, gconv) is keyed by its bytes, whatever
// its name or first bytes (reviews' stale hits: a library probed by a computed
// __has_include then removed, an edited gconv-modules-x.h or gconv-modules, a
// header that starts with TZif).
TEST_F(ProbesTest, ServedFilesNvrtcLookedAtInItsOwnFoldersAreKeyed) {
  const std::string lib = dir_ + "/toolkit/lib64";
  const std::string gconv = dir_ + "/usr/lib/gconv";
  write(lib, "libkc.so", std::string("\x7f" "ELF") + "a library");
  write(lib, "gconv-modules", "#define V 3\n");
  write(lib, "libnvrtc-builtins.so.13.0", std::string("\x7f" "ELF") + "NVRTC's");
  write(gconv, "gconv-modules-x.h", "#define V 5\n");
  write(gconv, "tz.h", "TZif\n#define V 7\n");
  write(gconv, "gconv-modules", "module  INTERNAL  X//  x  1\n");
  context_.nvrtc_library_dir = lib;
  context_.served = true;
  ::usleep(20000);
  started_ = now_ns();
  const std::vector<std::string> looked_at = {
      lib + "/libkc.so",         lib + "/gconv-modules",         lib + "/libnvrtc-builtins.so.13.0",
      gconv + "/gconv-modules-x.h", gconv + "/tz.h", gconv + "/gconv-modules"};
  std::vector<cache::ManifestProbe> probes = record(looked_at);
  // Not NVRTC's own library (the identity has it), nor iconv's
  // configuration in its gconv folder (glibc's, read or not with the
  // process's history).
  ASSERT_EQ(probes.size(), 4u);
  for (const cache::ManifestProbe& p : probes) EXPECT_TRUE(p.present) << p.path;
  EXPECT_TRUE(hold(probes));
  std::remove((lib + "/libkc.so").c_str());
  EXPECT_FALSE(hold(probes)) << "a library removed";
  auto compiled_again = [&] {  // after the edits settle, as in SetUp
    ::usleep(20000);
    started_ = now_ns();
    return record(looked_at);
  };
  write(lib, "libkc.so", std::string("\x7f" "ELF") + "a library");
  probes = compiled_again();
  write(gconv, "gconv-modules-x.h", "#define V 6\n");
  EXPECT_FALSE(hold(probes)) << "a header named like iconv's files, edited";
  probes = compiled_again();
  write(gconv, "tz.h", "TZif\n#define V 8\n");
  EXPECT_FALSE(hold(probes)) << "a TZif-headed header outside the zone folder, edited";
  probes = compiled_again();
  write(lib, "gconv-modules", "#define V 4\n");
  EXPECT_FALSE(hold(probes)) << "gconv-modules in NVRTC's library folder, edited";

  // Handed (the runtime JIT), NVRTC's loader names its libraries in these
  // folders: present ones are its own (docs/KEYS.md, residual limits).
  context_.served = false;
  context_.own_dirs = {lib};
  ClassifiedProbes handed = classify_probes({lib + "/libkc.so"}, context_, now_ns());
  EXPECT_EQ(handed.unkeyable, "");
  EXPECT_TRUE(handed.keyed.empty());
}

// NVRTC's library folder named through a link (/usr/local/lib64 ->
// /usr/local/cuda-13.0/lib64) is still a folder NVRTC reads.
TEST_F(ProbesTest, AHeaderInNvrtcsLibraryFolderByAnotherSpellingIsUnkeyable) {
  const std::string lib = dir_ + "/toolkit/lib64";
  write(lib, "evil.h", "#define V 2\n");
  ASSERT_EQ(::symlink(lib.c_str(), (dir_ + "/lib-link").c_str()), 0);
  context_.own_dirs = {lib};
  context_.nvrtc_library_dir = lib;
  ClassifiedProbes c = classify_probes({dir_ + "/lib-link/evil.h"}, context_, now_ns());
  EXPECT_NE(c.unkeyable.find("evil.h"), std::string::npos) << c.unkeyable;
}

// A toolkit file named like a library, reached by another spelling of the
// toolkit's folder: NVRTC can read it, so it is handed (keyed by its bytes)
// or, absent, keyed as absent, never left to the loader.
TEST_F(ProbesTest, ALibraryNamedToolkitFileByAnotherSpellingIsNotNvrtcs) {
  write(toolkit_, "libkc.so", "#define V 1\n");
  ASSERT_EQ(::symlink((dir_ + "/toolkit").c_str(), (dir_ + "/cuda").c_str()), 0);
  ::usleep(20000);
  started_ = now_ns();
  ClassifiedProbes c = classify_probes(
      {dir_ + "/cuda/include/libkc.so", dir_ + "/cuda/include/libnew.so.1"}, context_, started_);
  EXPECT_EQ(c.unkeyable, "");
  EXPECT_EQ(c.user_files, std::vector<std::string>{dir_ + "/cuda/include/libkc.so"});
  ASSERT_EQ(c.keyed.size(), 1u);
  EXPECT_EQ(c.keyed[0].path, dir_ + "/cuda/include/libnew.so.1");
  EXPECT_TRUE(hold(c.keyed));
  write(toolkit_, "libnew.so.1", "#define V 2\n");
  EXPECT_FALSE(hold(c.keyed));
}

}  // namespace
}  // namespace kcache::compiler
