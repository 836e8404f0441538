// Sources and headers are read only from regular files, bounded (issue 27):
// a computed include of a FIFO used to hang the compile for good, one of
// /dev/zero to read until std::bad_alloc. Every way kcache reads a file the
// user named is tried (the scanner, an asked include, a manifest replay, the
// source itself), each under a time limit, each a clear error naming it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>

#include "cache/storage.h"
#include "common/error.h"
#include "common/file_system.h"
#include "compiler/compiler.h"
#include "compiler/toolkit.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::test_dir;
using testing::write;

constexpr auto kLimit = std::chrono::seconds(120);

class InputFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_dir();
    cache::StorageOptions options;
    options.local_dir = dir_ + "/store";
    storage_ = std::make_unique<cache::Storage>(options);
    compiler_ = std::make_unique<Compiler>(find_toolkit(""), storage_.get());
  }

  CompileOptions options_for(const std::string& source) {
    CompileOptions o;
    o.source_path = write(dir_, "k.cu", source);
    o.source_name = "k.cu";
    o.working_folder = dir_;
    o.ptx_arch = "compute_80";
    return o;
  }

  // Compiles on another thread: a compile still running after kLimit is a
  // hang, and the test process ends at once saying so (the thread cannot be
  // taken back).
  void expect_refused(const CompileOptions& o, const std::string& path, const std::string& says) {
    auto running = std::async(std::launch::async, [&]() -> std::string {
      try {
        compiler_->compile(o);
        return "compiled";
      } catch (const CompileError& e) {
        return std::string(e.what()) + "\n" + e.log();  // NVRTC's own answer names it
      } catch (const Error& e) {
        return e.what();
      } catch (const std::exception& e) {
        return std::string("not a kcache error: ") + e.what();
      }
    });
    if (running.wait_for(kLimit) != std::future_status::ready) {
      std::fprintf(stderr, "FATAL: compiling with %s still runs after %lld s: a hang\n",
                   path.c_str(), static_cast<long long>(kLimit.count()));
      std::_Exit(1);
    }
    std::string what = running.get();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(says), std::string::npos) << what;
  }

  std::string fifo(const std::string& name) {
    std::string path = dir_ + "/" + name;
    EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
    return path;
  }

  std::string dir_;
  std::unique_ptr<cache::Storage> storage_;
  std::unique_ptr<Compiler> compiler_;
};

const char kFifo[] = "is a FIFO; kcache serves NVRTC only regular files";
const char kDevice[] = "is a device; kcache serves NVRTC only regular files";

TEST_F(InputFilesTest, AComputedIncludeOfDevZeroIsAnErrorNamingIt) {
  expect_refused(options_for("#define H \"/dev/zero\"\n#include H\n__global__ void k() {}\n"),
                 "/dev/zero", kDevice);
}

TEST_F(InputFilesTest, AComputedIncludeOfAFifoByItsAbsoluteNameIsAnErrorNamingIt) {
  std::string path = fifo("pipe.h");
  expect_refused(
      options_for("#define H \"" + path + "\"\n#include H\n__global__ void k() {}\n"), path, kFifo);
}

TEST_F(InputFilesTest, AComputedIncludeOfAFifoNextToTheSourceIsAnErrorNamingIt) {
  std::string path = fifo("pipe.h");
  expect_refused(options_for("#define H \"pipe.h\"\n#include H\n__global__ void k() {}\n"), path,
                 kFifo);
}

TEST_F(InputFilesTest, ALiteralIncludeOfAFifoIsAnErrorNamingIt) {
  std::string path = fifo("pipe.h");
  expect_refused(options_for("#include \"pipe.h\"\n__global__ void k() {}\n"), path, kFifo);
}

TEST_F(InputFilesTest, AComputedIncludeOfAFolderIsAnErrorNamingIt) {
  ASSERT_EQ(::mkdir((dir_ + "/sub.h").c_str(), 0700), 0);
  expect_refused(
      options_for("#define H \"" + dir_ + "/sub.h\"\n#include H\n__global__ void k() {}\n"),
      dir_ + "/sub.h", "is a directory");  // NVRTC's own answer, as without kcache
}

TEST_F(InputFilesTest, AKernelSourceThatIsAFifoIsAnErrorNamingIt) {
  CompileOptions o;
  o.source_path = fifo("k.cu");
  o.ptx_arch = "compute_80";
  expect_refused(o, o.source_path, "it is a FIFO (named pipe), not a regular file");
}

// The header a manifest replays is replaced by a FIFO, then by /dev/zero
// (a link to it): the lookup must not block or read forever, the compile
// says what it found.
TEST_F(InputFilesTest, AManifestReplayOfAHeaderNowAFifoIsAnErrorNamingIt) {
  CompileOptions o = options_for("#define H \"asked.h\"\n#include H\n__global__ void k() {}\n");
  write(dir_, "asked.h", "// a header\n");
  CompileResult first = compiler_->compile(o);
  CompileResult second = compiler_->compile(o);
  ASSERT_EQ(second.hits(), 1) << "the replay is what this test is about";
  ASSERT_EQ(::unlink((dir_ + "/asked.h").c_str()), 0);
  fifo("asked.h");
  expect_refused(o, dir_ + "/asked.h", kFifo);
  ASSERT_EQ(::unlink((dir_ + "/asked.h").c_str()), 0);
  ASSERT_EQ(::symlink("/dev/zero", (dir_ + "/asked.h").c_str()), 0);
  expect_refused(o, dir_ + "/asked.h", kDevice);
}

}  // namespace
}  // namespace kcache::compiler
