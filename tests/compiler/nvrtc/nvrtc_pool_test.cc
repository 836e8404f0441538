// NvrtcPool: long-lived NVRTC children give what a one-shot child gives,
// stay alive across compiles (one per option set, for its PCH), and a child
// that dies fails only its compile: the next one starts a fresh child.
#include "compiler/nvrtc/nvrtc_pool.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>

#include "common/error.h"
#include "compiler/nvrtc/nvrtc_worker.h"
#include "compiler/toolkit.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::test_dir;

std::vector<std::string> kcache_worker() {
  std::string root = std::string(std::getenv("TEST_SRCDIR")) + "/" + std::getenv("TEST_WORKSPACE");
  return {root + "/cli/kcache", "__nvrtc-worker"};
}

NvrtcInput input(const Toolkit& t, const std::string& arch, const std::string& body) {
  NvrtcInput in;
  in.source_name = "k.cu";
  in.source = "#include \"scale.h\"\nextern \"C\" __global__ void k(float* p) { " + body + " }\n";
  in.headers = {{"scale.h", "#define SCALE 3\n"}};
  in.options = {"-arch=" + arch};
  for (const std::string& d : t.include_dirs) in.options.push_back("-I" + d);
  return in;
}

TEST(NvrtcPoolTest, ChildrenCompileWhatAOneShotWorkerCompilesAndStayAlive) {
  Toolkit t = find_toolkit("");
  std::string dir = test_dir();
  NvrtcPool pool(kcache_worker(), dir, 4);
  for (const char* arch : {"sm_80", "sm_90", "sm_80", "sm_90", "sm_80"}) {
    NvrtcInput in = input(t, arch, "*p = SCALE;");
    NvrtcOutput pooled = pool.compile(t.nvrtc.path, in);
    NvrtcOutput one_shot = compile_in_worker(kcache_worker(), t.nvrtc.path, in);
    EXPECT_EQ(pooled.image, one_shot.image) << arch;
    EXPECT_EQ(pooled.log, one_shot.log) << arch;
  }
  EXPECT_EQ(pool.started(), 2) << "one child per arch, kept across compiles";
}

TEST(NvrtcPoolTest, AWrongSourceFailsItsCompileAndKeepsTheChild) {
  Toolkit t = find_toolkit("");
  NvrtcPool pool(kcache_worker(), test_dir(), 4);
  EXPECT_THROW(pool.compile(t.nvrtc.path, input(t, "sm_80", "*p = undeclared;")), CompileError);
  NvrtcOutput ok = pool.compile(t.nvrtc.path, input(t, "sm_80", "*p = SCALE;"));
  EXPECT_FALSE(ok.image.empty());
  EXPECT_EQ(pool.started(), 1);
}

TEST(NvrtcPoolTest, AChildThatDiesFailsOnlyItsCompileAndIsReplaced) {
  Toolkit t = find_toolkit("");
  std::string dir = test_dir();
  // A "child" that reads one request and dies as NVRTC would on a crash.
  std::string crasher =
      testing::write(dir, "crash.sh",
                     "#!/bin/sh\nprintf '\\023\\000\\000\\000kcache nvrtc worker'\n"
                     "head -c 4 >/dev/null\nkill -SEGV $$\n");
  ASSERT_EQ(::chmod(crasher.c_str(), 0755), 0);
  NvrtcPool pool({crasher}, dir, 1);
  try {
    pool.compile(t.nvrtc.path, input(t, "sm_80", "*p = SCALE;"));
    FAIL() << "a dead child answered";
  } catch (const Error& e) {
    // Not the signal: the worker is not the pool's child (spawn_worker).
    EXPECT_NE(std::string(e.what()).find("died without an answer"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(pool.compile(t.nvrtc.path, input(t, "sm_80", "*p = SCALE;")), Error);
  EXPECT_EQ(pool.started(), 2) << "the dead child was replaced, not reused";
}

}  // namespace
}  // namespace kcache::compiler
