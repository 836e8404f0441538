// Lookup records (compiler/lookup_record.h): what a lookup looked at, recorded and
// checked again; and through the Compiler, a second lookup that resolves no
// include, and never one that answers for a changed disk.
#include "compiler/lookup_record.h"

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
#include "tests/compiler/lookup_record_testing.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::test_dir;
using testing::write;

using testing::age;
using testing::record_hits;
using LookupRecordTest = testing::LookupRecordFixture;

// Looks at `paths` as a lookup would, and returns the record.
std::optional<std::vector<cache::ManifestProbe>> observe(const std::vector<std::string>& paths,
                                                         const std::string& relative_to = "") {
  DiskObservations seen;
  for (const std::string& p : paths) {
    struct stat st;
    observed_stat(p, &st);
  }
  return seen.probes(relative_to);
}

// The same, with `quiet_folders` (the toolkit's).
std::optional<std::vector<cache::ManifestProbe>> observe_quiet(
    const std::vector<std::string>& paths, const std::vector<std::string>& quiet_folders) {
  DiskObservations seen;
  for (const std::string& p : paths) {
    struct stat st;
    observed_stat(p, &st);
  }
  return seen.probes("", {}, quiet_folders);
}

TEST_F(LookupRecordTest, AnEditedFileIsNoLongerAsRecorded) {
  std::string dir = test_dir();
  std::string h = write(dir, "inc/h.cuh", "int a;\n");
  age();
  auto probes = observe({h});
  ASSERT_TRUE(probes);
  ASSERT_EQ(probes->size(), 1u);
  EXPECT_TRUE((*probes)[0].present);
  EXPECT_TRUE(disk_unchanged(*probes, ""));
  write(dir, "inc/h.cuh", "int b;\n");  // same size, a new file by rename
  EXPECT_FALSE(disk_unchanged(*probes, ""));
}

// A record holds a file it found present only where the lookup's
// environment does not put it in the driver's JIT cache: a compile there is
// answered "no such file" for it (seal.h), whatever it read of the file
// before (the same file reached through a link, say).
TEST_F(LookupRecordTest, AFileInTheDriversCacheOfTheLookupsEnvironmentIsNotAsRecorded) {
  std::string dir = test_dir();
  std::string config = write(dir, "proj/config", "#define C 1\n");
  std::string header = write(dir, "proj/config.cuh", "#define C 1\n");
  age();
  auto probes = observe({config, header});
  ASSERT_TRUE(probes);
  testing::ScopedEnv elsewhere("CUDA_CACHE_PATH", dir + "/elsewhere");
  EXPECT_TRUE(disk_unchanged(*probes, ""));
  testing::ScopedEnv here("CUDA_CACHE_PATH", dir + "/proj");
  EXPECT_FALSE(disk_unchanged(*probes, ""));
  auto header_only = observe({header});
  ASSERT_TRUE(header_only);
  EXPECT_TRUE(disk_unchanged(*header_only, "")) << "a header there is a user's file";
}

TEST_F(LookupRecordTest, AnAbsentNameIsCheckedByItsOwnStatNotByItsFolder) {
  std::string dir = test_dir();
  write(dir, "inc/other.cuh", "");
  age();
  auto probes = observe({dir + "/inc/a.cuh", dir + "/inc/b.cuh", dir + "/inc/sub/c.cuh"});
  ASSERT_TRUE(probes);
  ASSERT_EQ(probes->size(), 3u);
  for (const cache::ManifestProbe& p : *probes) {
    EXPECT_FALSE(p.present);
    EXPECT_FALSE(p.has_folder) << p.path;
  }
  EXPECT_TRUE(disk_unchanged(*probes, ""));
  write(dir, "inc/log.txt", "");  // another name in the folder: no concern of the record
  EXPECT_TRUE(disk_unchanged(*probes, ""));
  write(dir, "inc/sub/c.cuh", "");
  EXPECT_FALSE(disk_unchanged(*probes, ""));
}

// Beneath the toolkit's folders, which no program writes into, NVRTC's
// search finds hundreds of names absent: each is checked by the settled
// stamp of the deepest folder on its path that exists, and any entry made
// in that folder (the name itself, or a folder on its way) is a change.
TEST_F(LookupRecordTest, AnAbsentNameInAQuietFolderIsCheckedByItsFolder) {
  std::string dir = test_dir();
  write(dir, "toolkit/include/cub/x.cuh", "");
  write(dir, "mine/keep", "");
  age();
  const std::string quiet = dir + "/toolkit/include";
  auto probes = observe_quiet({quiet + "/cub/a.cuh", quiet + "/cub/deep/b.cuh", dir + "/mine/c.cuh"},
                              {quiet});
  ASSERT_TRUE(probes);
  ASSERT_EQ(probes->size(), 3u);
  for (const cache::ManifestProbe& p : *probes) {
    EXPECT_FALSE(p.present);
    EXPECT_EQ(p.has_folder, p.path.rfind(quiet, 0) == 0) << p.path;  // mine/ is a program's
  }
  EXPECT_TRUE(disk_unchanged(*probes, ""));
  write(dir, "toolkit/include/cub/deep/b.cuh", "");  // a new folder in cub/, then the name
  EXPECT_FALSE(disk_unchanged(*probes, ""));
  ::unlink((dir + "/toolkit/include/cub/deep/b.cuh").c_str());
  ::rmdir((dir + "/toolkit/include/cub/deep").c_str());
  age();
  probes = observe_quiet({quiet + "/cub/a.cuh"}, {quiet});
  ASSERT_TRUE(probes);
  ASSERT_TRUE((*probes)[0].has_folder);
  EXPECT_TRUE(disk_unchanged(*probes, ""));
  write(dir, "toolkit/include/cub/a.cuh", "");
  EXPECT_FALSE(disk_unchanged(*probes, ""));
}

// A folder changed within the writeback window has no settled stamp: its
// absent names are checked one stat each.
TEST_F(LookupRecordTest, AnAbsentNameInARecentlyChangedQuietFolderIsCheckedByItself) {
  std::string dir = test_dir();
  write(dir, "toolkit/include/cub/x.cuh", "");
  set_too_new_margin_for_testing(int64_t{3600} * 1000000000);  // nothing has settled
  const std::string quiet = dir + "/toolkit/include";
  auto probes = observe_quiet({quiet + "/cub/a.cuh"}, {quiet});
  set_too_new_margin_for_testing(int64_t{50} * 1000000);
  ASSERT_TRUE(probes);
  ASSERT_EQ(probes->size(), 1u);
  EXPECT_FALSE((*probes)[0].has_folder);
  write(dir, "toolkit/include/cub/a.cuh", "");
  EXPECT_FALSE(disk_unchanged(*probes, ""));
}

TEST_F(LookupRecordTest, ADanglingLinkIsCheckedByItsOwnPath) {
  // The folder does not change when a link's target appears elsewhere.
  std::string dir = test_dir();
  write(dir, "inc/keep", "");
  ASSERT_EQ(::symlink((dir + "/elsewhere/t.cuh").c_str(), (dir + "/inc/l.cuh").c_str()), 0);
  age();
  auto probes = observe({dir + "/inc/l.cuh"});
  ASSERT_TRUE(probes);
  ASSERT_EQ(probes->size(), 1u);
  EXPECT_FALSE((*probes)[0].has_folder);
  EXPECT_FALSE((*probes)[0].present);
  EXPECT_TRUE(disk_unchanged(*probes, ""));
  write(dir, "elsewhere/t.cuh", "int x;\n");
  EXPECT_FALSE(disk_unchanged(*probes, ""));
}

// A check stats a folder's names relative to the folder, opened once: the
// outcome must stay each name's own stat, whatever the folder became.
TEST_F(LookupRecordTest, NamesInAFolderSwappedForALinkAreSeenThroughTheLink) {
  std::string dir = test_dir();
  write(dir, "inc/a.cuh", "int a;\n");
  write(dir, "inc/b.cuh", "int b;\n");
  write(dir, "copy/a.cuh", "int a;\n");
  write(dir, "copy/b.cuh", "int b;\n");
  age();
  auto probes = observe({dir + "/inc/a.cuh", dir + "/inc/b.cuh", dir + "/inc/c.cuh"});
  ASSERT_TRUE(probes);
  EXPECT_TRUE(disk_unchanged(*probes, ""));
  ASSERT_EQ(::rename((dir + "/inc").c_str(), (dir + "/old").c_str()), 0);
  ASSERT_EQ(::symlink((dir + "/copy").c_str(), (dir + "/inc").c_str()), 0);
  EXPECT_FALSE(disk_unchanged(*probes, ""));  // the same names, other files
  ASSERT_EQ(::unlink((dir + "/inc").c_str()), 0);
  ASSERT_EQ(::symlink((dir + "/old").c_str(), (dir + "/inc").c_str()), 0);
  EXPECT_TRUE(disk_unchanged(*probes, ""));  // through a link, the very files
}

// A folder is opened relative to one above it already open: the walk from
// there must be the kernel's from the root, through links and "..".
TEST_F(LookupRecordTest, AFolderBeneathAnotherIsWalkedAsFromTheRoot) {
  std::string dir = test_dir();
  write(dir, "inc/a.cuh", "int a;\n");
  write(dir, "inc/x.cuh", "int inc_x;\n");
  write(dir, "other/deep/y.cuh", "int y;\n");
  write(dir, "other/x.cuh", "int other_x;\n");
  write(dir, "copy/y.cuh", "int y;\n");
  ASSERT_EQ(::symlink((dir + "/other/deep").c_str(), (dir + "/inc/sub").c_str()), 0);
  age();
  // inc/sub/.. is other/, the link's target's parent, not inc/.
  auto probes = observe({dir + "/inc/a.cuh", dir + "/inc/sub/y.cuh", dir + "/inc/sub/../x.cuh"});
  ASSERT_TRUE(probes);
  EXPECT_TRUE(disk_unchanged(*probes, ""));
  write(dir, "inc/x.cuh", "int changed;\n");  // not the file the lookup read
  EXPECT_TRUE(disk_unchanged(*probes, ""));
  write(dir, "other/x.cuh", "int changed;\n");
  EXPECT_FALSE(disk_unchanged(*probes, ""));
  write(dir, "other/x.cuh", "int other_x;\n");
  age();
  probes = observe({dir + "/inc/a.cuh", dir + "/inc/sub/y.cuh"});
  ASSERT_TRUE(probes);
  EXPECT_TRUE(disk_unchanged(*probes, ""));
  ASSERT_EQ(::unlink((dir + "/inc/sub").c_str()), 0);
  ASSERT_EQ(::symlink((dir + "/copy").c_str(), (dir + "/inc/sub").c_str()), 0);
  EXPECT_FALSE(disk_unchanged(*probes, ""));  // the same name in another folder
}

TEST_F(LookupRecordTest, AnAbsentNameWhoseFolderBecameAFileOrALoopIsJudgedAsItsStat) {
  std::string dir = test_dir();
  write(dir, "inc/keep", "");
  age();
  auto probes = observe({dir + "/inc/sub/c.cuh", dir + "/inc/sub/d.cuh"});
  ASSERT_TRUE(probes);
  EXPECT_TRUE(disk_unchanged(*probes, ""));
  write(dir, "inc/sub", "");  // ENOTDIR: still not there, as a lookup takes it
  EXPECT_TRUE(disk_unchanged(*probes, ""));
  ASSERT_EQ(::unlink((dir + "/inc/sub").c_str()), 0);
  ASSERT_EQ(::symlink((dir + "/inc/sub").c_str(), (dir + "/inc/sub").c_str()), 0);
  EXPECT_FALSE(disk_unchanged(*probes, ""));  // ELOOP: no state a record vouches for
  ASSERT_EQ(::unlink((dir + "/inc/sub").c_str()), 0);
  write(dir, "inc/sub/d.cuh", "");
  EXPECT_FALSE(disk_unchanged(*probes, ""));
}

TEST_F(LookupRecordTest, NothingIsRecordedForATooNewStampOrALoop) {
  std::string dir = test_dir();
  std::string h = write(dir, "h.cuh", "");
  EXPECT_FALSE(observe({h}));  // made just now
  age();
  EXPECT_TRUE(observe({h}));
  ASSERT_EQ(::symlink((dir + "/loop").c_str(), (dir + "/loop").c_str()), 0);
  EXPECT_FALSE(observe({h, dir + "/loop/x.cuh"}));  // ELOOP: not a state a stamp vouches for
}

TEST_F(LookupRecordTest, PathsBeneathTheProgramFolderAreRecordedRelativeToIt) {
  std::string dir = test_dir();
  std::string a = write(dir, "p1/a.cuh", "");
  write(dir, "p2/a.cuh", "");
  std::string outside = write(dir, "inc/o.cuh", "");
  age();
  auto probes = observe({a, outside}, dir + "/p1");
  ASSERT_TRUE(probes);
  ASSERT_EQ(probes->size(), 2u);
  EXPECT_EQ((*probes)[0].path, dir + "/inc/o.cuh");
  EXPECT_EQ((*probes)[1].path, std::string(kSourceFolderPrefix) + "/a.cuh");
  EXPECT_TRUE(disk_unchanged(*probes, dir + "/p1"));
  EXPECT_FALSE(disk_unchanged(*probes, dir + "/p2"));  // another file of that name
  EXPECT_FALSE(disk_unchanged(*probes, ""));
  auto outside_only = observe({outside}, dir + "/p1");
  ASSERT_TRUE(outside_only);
  EXPECT_TRUE(disk_unchanged(*outside_only, dir + "/p2"));
}

// A name its manifest keyed by its absolute name (a computed __has_include
// built by token pasting) is checked by that name in every folder: here the
// program's folder is reached through the link L1, and a program under L2
// (the same folder) looks the record up after L1 was retargeted.
TEST_F(LookupRecordTest, ANameItsManifestKeyedAbsolutelyStaysAbsoluteInTheRecord) {
  std::string dir = test_dir();
  write(dir, "A/y.h", "#define VALUE 1\n");
  write(dir, "B/keep", "");
  ASSERT_EQ(::symlink((dir + "/A").c_str(), (dir + "/L1").c_str()), 0);
  ASSERT_EQ(::symlink((dir + "/A").c_str(), (dir + "/L2").c_str()), 0);
  age();
  const std::string keyed = dir + "/L1/y.h";
  DiskObservations seen;
  struct stat st;
  observed_stat(keyed, &st);
  auto probes = seen.probes(dir + "/L1", {keyed});
  ASSERT_TRUE(probes);
  ASSERT_EQ(probes->size(), 2u);
  EXPECT_TRUE(disk_unchanged(*probes, dir + "/L2"));
  ASSERT_EQ(::unlink((dir + "/L1").c_str()), 0);
  ASSERT_EQ(::symlink((dir + "/B").c_str(), (dir + "/L1").c_str()), 0);
  EXPECT_FALSE(disk_unchanged(*probes, dir + "/L2"))
      << "the answer came from " << keyed << ", which is absent now";
}

TEST_F(LookupRecordTest, OnlyTheOutermostRecordingRecords) {
  std::string dir = test_dir();
  std::string h = write(dir, "h.cuh", "");
  age();
  DiskObservations outer;
  {
    DiskObservations inner;
    struct stat st;
    observed_stat(h, &st);
    EXPECT_FALSE(inner.probes(""));
  }
  auto probes = outer.probes("");
  ASSERT_TRUE(probes);
  EXPECT_EQ(probes->size(), 1u);
}

// Through the Compiler: the second process's lookup resolves nothing, and a
// header edited, shadowed or removed afterwards is never answered from the
// record.
TEST_F(LookupRecordTest, ACompilerUsesARecordOnlyWhileTheDiskIsAsRecorded) {
  std::string dir = test_dir();
  write(dir, "inc2/h.cuh", "#define V 1\n");
  write(dir, "inc1/keep", "");
  write(dir, "k.cu", "#include \"h.cuh\"\nextern \"C\" __global__ void k(int* p) { *p = V; }\n");
  cache::Storage& storage = store_in(dir);
  Toolkit toolkit = find_toolkit("");
  CompileOptions o;
  o.source_path = dir + "/k.cu";
  o.source_name = "k.cu";
  o.working_folder = dir;
  o.ptx_arch = "compute_80";
  o.include_dirs = {dir + "/inc1", dir + "/inc2"};
  auto compile = [&] { return Compiler(toolkit, &storage).compile(o); };
  auto fresh = [&] { return Compiler(toolkit, nullptr).compile(o).bundle; };
  auto record_hits = [&] { return storage.local()->stats().counter("lookup_record_hits"); };

  CompileResult first = compile();
  EXPECT_EQ(first.misses(), 1);
  CompileResult second = compile();
  EXPECT_EQ(second.hits(), 1);
  EXPECT_EQ(record_hits(), 1);
  EXPECT_EQ(second.bundle, first.bundle);

  // A header earlier on the search path shadows the old one.
  write(dir, "inc1/h.cuh", "#define V 2\n");
  CompileResult shadowed = compile();
  EXPECT_EQ(record_hits(), 1);
  EXPECT_EQ(shadowed.misses(), 1);
  EXPECT_EQ(shadowed.bundle, fresh());
  EXPECT_NE(shadowed.bundle, first.bundle);

  // Removed again: the first result, found the long way (its record was
  // replaced by the shadowed state's, whose folder has changed since).
  ASSERT_EQ(::unlink((dir + "/inc1/h.cuh").c_str()), 0);
  CompileResult back = compile();
  EXPECT_EQ(back.hits(), 1);
  EXPECT_EQ(back.bundle, first.bundle);

  // Edited in place (same size).
  age();
  write(dir, "inc2/h.cuh", "#define V 3\n");
  CompileResult edited = compile();
  EXPECT_EQ(edited.misses(), 1);
  EXPECT_EQ(edited.bundle, fresh());
  age();
  CompileResult again = compile();
  EXPECT_EQ(again.hits(), 1);
  EXPECT_EQ(again.bundle, edited.bundle);
}

TEST_F(LookupRecordTest, ARecordServesAProcessWithAnotherPchFolder) {
  // prewarm makes a new PCH folder in every process: the record key must not
  // hold it (only a compile's probe classification reads it).
  std::string dir = test_dir();
  write(dir, "h.cuh", "#define V 1\n");
  write(dir, "k.cu", "#include \"h.cuh\"\nextern \"C\" __global__ void k(int* p) { *p = V; }\n");
  cache::Storage& storage = store_in(dir);
  CompileOptions o;
  o.source_path = dir + "/k.cu";
  o.ptx_arch = "compute_80";
  const char* tmp = std::getenv("TMPDIR");
  const std::string saved = tmp ? tmp : "";
  Toolkit toolkit = find_toolkit("");
  for (int process = 0; process < 3; ++process) {
    std::string pch = dir + "/../pch-" + std::to_string(process);
    ASSERT_EQ(::mkdir(pch.c_str(), 0700), 0);
    Compiler c(toolkit, &storage);
    c.use_pch(pch);  // points TMPDIR there, as prewarm does
    c.compile(o);
  }
  if (tmp) ::setenv("TMPDIR", saved.c_str(), 1); else ::unsetenv("TMPDIR");
  EXPECT_EQ(record_hits(storage), 2);
}

TEST_F(LookupRecordTest, ACompileLimitedByMayReadHasNoRecord) {
  // may_read (Bazel's worker) has no lookup record: its files depend on the action.
  std::string dir = test_dir();
  write(dir, "k.cu", "extern \"C\" __global__ void k() {}\n#include \"h.cuh\"\n");
  write(dir, "h.cuh", "");
  cache::Storage& storage = store_in(dir);
  CompileOptions o;
  o.source_path = dir + "/k.cu";
  o.ptx_arch = "compute_80";
  o.may_read = [](const std::string&) { return true; };
  Compiler c(find_toolkit(""), &storage);
  c.compile(o);
  c.compile(o);
  EXPECT_EQ(storage.local()->stats().counter("hits"), 1);
  EXPECT_EQ(storage.local()->stats().counter("lookup_record_hits"), 0);
}

}  // namespace
}  // namespace kcache::compiler
