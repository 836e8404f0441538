// An absent name beneath the toolkit's folders is checked by a lookup record
// through the settled stamp of the deepest folder on its path that exists
// (compiler/lookup_record.cc, absent_by_folder). A name can be absent while
// its folder already holds an entry for it: a dangling symbolic link (a
// toolkit assembled from links, one of them to a component not installed
// yet). Installing the link's target elsewhere makes the name present and
// leaves the toolkit folder's stamp as it was, so the folder cannot answer
// for that name. Each case compares the cached compile with a compile of the
// same files without a store.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "cache/storage.h"
#include "compiler/compiler.h"
#include "compiler/lookup_record.h"
#include "compiler/toolkit.h"
#include "tests/compiler/lookup_record_testing.h"
#include "tests/compiler/test_files.h"
#include "tests/compiler/toolkit_copy.h"

namespace kcache::compiler {
namespace {

using testing::age;
using testing::make_toolkit_copy;
using testing::record_hits;
using testing::test_dir;
using testing::write;
using StaleHitQuietFolderTest = testing::LookupRecordFixture;

const char kKernel[] = "extern \"C\" __global__ void k(int* p) { *p = V; }\n";

// The unit: a dangling link in a quiet folder, recorded, then its target made.
TEST_F(StaleHitQuietFolderTest, ADanglingLinkInAQuietFolderIsNotAnsweredByTheFolder) {
  const std::string dir = test_dir();
  write(dir, "toolkit/include/keep.h", "");
  const std::string quiet = dir + "/toolkit/include";
  ASSERT_EQ(::symlink((dir + "/elsewhere/site.h").c_str(), (quiet + "/site.h").c_str()), 0);
  age();
  std::optional<std::vector<cache::ManifestProbe>> probes;
  {
    DiskObservations seen;
    struct stat st;
    observed_stat(quiet + "/site.h", &st);
    probes = seen.probes("", {}, {quiet});
  }
  ASSERT_TRUE(probes);
  ASSERT_EQ(probes->size(), 1u);
  EXPECT_FALSE((*probes)[0].present);
  EXPECT_TRUE(disk_unchanged(*probes, ""));
  write(dir, "elsewhere/site.h", "#define V 51\n");  // the component installed
  EXPECT_FALSE(disk_unchanged(*probes, ""))
      << "the name is there now; the toolkit folder's stamp did not move";
}

// What holds: a folder's mtime set back (touch -d) after the record moves
// its ctime, which the record compares too.
TEST_F(StaleHitQuietFolderTest, AQuietFolderWhoseMtimeIsSetBackIsChanged) {
  const std::string dir = test_dir();
  write(dir, "toolkit/include/keep.h", "");
  const std::string quiet = dir + "/toolkit/include";
  age();
  struct stat was;
  ASSERT_EQ(::stat(quiet.c_str(), &was), 0);
  std::optional<std::vector<cache::ManifestProbe>> probes;
  {
    DiskObservations seen;
    struct stat st;
    observed_stat(quiet + "/site.h", &st);
    probes = seen.probes("", {}, {quiet});
  }
  ASSERT_TRUE(probes);
  ASSERT_TRUE((*probes)[0].has_folder);
  write(dir, "toolkit/include/site.h", "#define V 51\n");
  const struct timespec times[2] = {was.st_atim, was.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, quiet.c_str(), times, 0), 0);  // touch -d back
  EXPECT_FALSE(disk_unchanged(*probes, ""));
}

class QuietFolderCompiles : public StaleHitQuietFolderTest {
 protected:
  // A served compile of dir/k.cu with the toolkit copy at dir/cuda.
  CompileOptions options() const {
    CompileOptions o;
    o.source_path = dir_ + "/k.cu";
    o.source_name = "k.cu";
    o.ptx_arch = "compute_80";
    return o;
  }

  // Compiles through the store, then without one: the two bundles, and the hit.
  void expect_fresh_answer(const std::string& when) {
    CompileResult cached = Compiler(toolkit_, store_).compile(options());
    CompileResult fresh = Compiler(toolkit_, nullptr).compile(options());
    EXPECT_EQ(cached.bundle, fresh.bundle)
        << when << ": the cached compile (hit=" << cached.hits()
        << ", by record=" << (cached.targets[0].found_by == FoundBy::lookup_record)
        << ") differs from a compile without a store";
  }

  void make_copy() {
    dir_ = test_dir();
    make_toolkit_copy(find_toolkit("").root, dir_ + "/cuda");
    toolkit_ = find_toolkit(dir_ + "/cuda");  // --cuda-path COPY
  }

  std::string dir_;
  Toolkit toolkit_;
  cache::Storage* store_ = nullptr;
};

// `#if __has_include(<site.h>)` where the toolkit's site.h is a link to a
// component not installed yet: installed, the kernel must see it.
TEST_F(QuietFolderCompiles, AToolkitLinkWhoseTargetAppearsIsNotAnsweredFromTheRecord) {
  make_copy();
  ASSERT_EQ(::symlink((dir_ + "/opt/site.h").c_str(), (dir_ + "/cuda/include/site.h").c_str()), 0);
  write(dir_, "k.cu",
        "#if __has_include(<site.h>)\n#include <site.h>\n#else\n#define V 50\n#endif\n" +
            std::string(kKernel));
  store_ = &store_in(dir_);
  expect_fresh_answer("absent");
  expect_fresh_answer("absent, a manifest hit that writes the record");
  const int64_t before = record_hits(*store_);
  expect_fresh_answer("absent, a record hit");
  EXPECT_EQ(record_hits(*store_), before + 1) << "the record was not used at all";
  write(dir_, "opt/site.h", "#define V 51\n");  // the link's target installed
  expect_fresh_answer("the link's target installed");
}

// The same through a linked folder: `<site/v.h>` with the toolkit's site/ a
// link to a folder not made yet.
TEST_F(QuietFolderCompiles, AToolkitLinkedFolderThatAppearsIsNotAnsweredFromTheRecord) {
  make_copy();
  ASSERT_EQ(::symlink((dir_ + "/opt/site").c_str(), (dir_ + "/cuda/include/site").c_str()), 0);
  write(dir_, "k.cu",
        "#if __has_include(<site/v.h>)\n#include <site/v.h>\n#else\n#define V 60\n#endif\n" +
            std::string(kKernel));
  store_ = &store_in(dir_);
  expect_fresh_answer("absent");
  expect_fresh_answer("absent, a manifest hit that writes the record");
  expect_fresh_answer("absent, a record hit");
  write(dir_, "opt/site/v.h", "#define V 61\n");  // the linked folder made
  expect_fresh_answer("the linked folder made");
}

// What holds: a header added to the toolkit's include folder itself after a
// record is a miss equal to a fresh compile.
TEST_F(QuietFolderCompiles, AHeaderAddedToTheToolkitAfterARecordIsSeen) {
  make_copy();
  write(dir_, "k.cu",
        "#if __has_include(<site.h>)\n#include <site.h>\n#else\n#define V 70\n#endif\n" +
            std::string(kKernel));
  store_ = &store_in(dir_);
  expect_fresh_answer("absent");
  expect_fresh_answer("absent, a manifest hit that writes the record");
  expect_fresh_answer("absent, a record hit");
  write(dir_, "cuda/include/site.h", "#define V 71\n");
  expect_fresh_answer("added to the toolkit's include folder");
}

}  // namespace
}  // namespace kcache::compiler
