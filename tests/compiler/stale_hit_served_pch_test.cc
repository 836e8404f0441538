// A long-lived process's served compiles through NVRTC's PCH
// (compiler/nvrtc/pch.cc): a PCH serves a user only where the user's plain
// compile would read what the PCH's maker read. Each case makes a PCH with
// one compile, compiles a second source in the same process, and compares
// that answer, and what a process without PCH then finds in the store, with
// a compile of the same files without a store or PCH.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "cache/storage.h"
#include "compiler/compiler.h"
#include "compiler/nvrtc/pch.h"
#include "compiler/toolkit.h"
#include "tests/compiler/lookup_record_testing.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::ScopedCwd;
using testing::test_dir;
using testing::write;

// NVRTC refuses a long TMPDIR, as Bazel's test folders are: the PCH folder
// (where use_pch points TMPDIR) is a short one under /tmp.
std::string pch_dir() {
  std::string dir = "/tmp/kcache-adv2-pch-XXXXXX";
  if (!::mkdtemp(&dir[0])) ADD_FAILURE() << "mkdtemp failed";
  return dir;
}

std::string kernel(const std::string& prefix, const std::string& name) {
  return prefix + "#include <cuda/std/limits>\nextern \"C\" __global__ void " + name +
         "(int* p) { *p = V; }\n";
}

class StaleHitServedPchTest : public testing::LookupRecordFixture {
 protected:
  void SetUp() override {
    LookupRecordFixture::SetUp();
    const char* tmp = std::getenv("TMPDIR");
    had_tmp_ = tmp != nullptr;
    if (tmp) tmp_ = tmp;
    dir_ = test_dir();
  }
  void TearDown() override {
    if (!pch_dir_.empty()) std::filesystem::remove_all(pch_dir_);  // outside TEST_TMPDIR
    if (had_tmp_) {
      ::setenv("TMPDIR", tmp_.c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
    LookupRecordFixture::TearDown();
  }

  static CompileOptions served(const std::string& source, std::vector<std::string> include_dirs) {
    CompileOptions o;
    o.source_path = source;  // relative to the working folder, as Bazel names it
    o.ptx_arch = "compute_80";
    o.std = "c++17";
    o.include_dirs = std::move(include_dirs);
    return o;
  }

  // The maker's compile, then the user's in the same process (PCH on); the
  // user's answer against a plain compile, then a process without PCH that
  // looks the user up in the store.
  void expect_user_equals_plain(const CompileOptions& maker, const CompileOptions& user) {
    cache::Storage& storage = store_in(dir_);
    Toolkit toolkit = find_toolkit("");
    Compiler with_pch(toolkit, &storage);
    pch_dir_ = pch_dir();
    with_pch.use_pch(pch_dir_);  // points TMPDIR there, as prewarm does
    ASSERT_EQ(with_pch.compile(maker).misses(), 1);
    const int uses = pch_uses_for_testing();
    CompileResult got = with_pch.compile(user);
    const bool used = pch_uses_for_testing() == uses + 1;
    const std::string plain = Compiler(toolkit, nullptr).compile(user).bundle;
    EXPECT_EQ(got.bundle, plain) << "the user's compile (PCH used: " << used
                                 << ") differs from a plain compile";
    CompileResult later = Compiler(toolkit, &storage).compile(user);
    EXPECT_EQ(later.bundle, plain)
        << "a process without PCH (hit=" << later.hits() << ") differs from a plain compile";
  }

  std::string dir_;
  std::string pch_dir_;

 private:
  bool had_tmp_ = false;
  std::string tmp_;
};

// The user's source is named through a linked folder and `..`: NVRTC looks
// for its quoted includes in the link target's parent (the kernel resolves
// `..` on disk), but lexically the name's folder is the maker's.
TEST_F(StaleHitServedPchTest, ASourceNamedThroughALinkAndDotDotIsNotServedTheMakersHeaders) {
  const std::string prefix = "#include \"h.h\"\n";
  write(dir_, "maker.cu", kernel(prefix, "maker"));
  write(dir_, "h.h", "#define V 1\n");
  write(dir_, "other/sub/keep", "");
  write(dir_, "other/h.h", "#define V 2\n");
  write(dir_, "other/user.cu", kernel(prefix, "user"));
  ASSERT_EQ(::symlink((dir_ + "/other/sub").c_str(), (dir_ + "/link").c_str()), 0);
  ScopedCwd in(dir_);
  expect_user_equals_plain(served("maker.cu", {}), served("link/../user.cu", {}));
}

// The maker named "./maker.cu", the user "user.cu": one folder, but NVRTC
// names a quoted include by its includer's name ("./h.h", "h.h"), and a
// header's own __FILE__ is expanded into the PCH when the maker makes it.
TEST_F(StaleHitServedPchTest, AMakersDotSlashNameIsNotFrozenIntoAUsersHeaders) {
  const std::string prefix = "#include \"h.h\"\n";
  write(dir_, "maker.cu", kernel(prefix, "maker"));
  write(dir_, "user.cu", kernel(prefix, "user"));
  write(dir_, "h.h", "constexpr int V = sizeof(__FILE__);\n");
  ScopedCwd in(dir_);
  expect_user_equals_plain(served("./maker.cu", {}), served("user.cu", {}));
}

// The same without __FILE__: with -lineinfo every header's line-table name
// comes from the PCH ("<working folder>/./h.h" for the user of user.cu).
TEST_F(StaleHitServedPchTest, AMakersDotSlashNameIsNotFrozenIntoAUsersLineTable) {
  const std::string prefix = "#include \"h.h\"\n";
  write(dir_, "maker.cu", kernel(prefix, "maker"));
  write(dir_, "user.cu", kernel(prefix, "user"));
  write(dir_, "h.h",
        "#define V twice(*p)\n__device__ __noinline__ int twice(int x) { return 2 * x; }\n");
  ScopedCwd in(dir_);
  CompileOptions maker = served("./maker.cu", {}), user = served("user.cu", {});
  maker.nvrtc_options = user.nvrtc_options = {"-lineinfo"};
  expect_user_equals_plain(maker, user);
}

// Two compiles whose leading directives are one text but whose -I folders
// differ: the angled include is another file.
TEST_F(StaleHitServedPchTest, AnotherIncludeFolderIsNotServedTheMakersHeaders) {
  const std::string prefix = "#include <h.h>\n";
  write(dir_, "maker.cu", kernel(prefix, "maker"));
  write(dir_, "user.cu", kernel(prefix, "user"));
  write(dir_, "inc1/h.h", "#define V 1\n");
  write(dir_, "inc2/h.h", "#define V 2\n");
  ScopedCwd in(dir_);
  expect_user_equals_plain(served("maker.cu", {"inc1"}), served("user.cu", {"inc2"}));
}

}  // namespace
}  // namespace kcache::compiler
