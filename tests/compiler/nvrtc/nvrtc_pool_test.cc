// NvrtcPool: long-lived NVRTC children give what a one-shot child gives,
// stay alive across compiles (one per option set, for its PCH), and a child
// that dies fails only its compile: the next one starts a fresh child.
#include "compiler/nvrtc/nvrtc_pool.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "common/error.h"
#include "compiler/nvrtc/nvrtc_worker.h"
#include "compiler/nvrtc/pch.h"
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

// The children's PCH folders live beneath the scratch folder, and NVRTC
// refuses a long $TMPDIR (the children point it at their PCH folder), as
// Bazel's test folders are: so a short one under /tmp.
std::string short_scratch() {
  std::string dir = "/tmp/kcache-pool-test-XXXXXX";
  if (!::mkdtemp(&dir[0])) ADD_FAILURE() << "mkdtemp failed";
  return dir;
}

// The PCH files the pool's live children hold (NVRTC deletes them when its
// process ends).
int pch_files(const std::string& scratch) {
  int n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(scratch)) {
    n += e.path().extension() == ".pch";
  }
  return n;
}

// A kernel whose header prefix a PCH can hold: the same for every `name`.
NvrtcInput prefixed(const Toolkit& t, const std::string& name) {
  NvrtcInput in;
  in.source_name = name + ".cu";
  in.source = "#include \"scale.h\"\nextern \"C\" __global__ void " + name +
              "(float* p) { *p = Scale<3>::value; }\n";
  in.headers = {
      {"scale.h", "template <int N> struct Scale { static constexpr int value = N; };\n"}};
  in.options = {"-arch=sm_90"};
  for (const std::string& d : t.include_dirs) in.options.push_back("-I" + d);
  return in;
}

TEST(NvrtcPoolTest, CompilesOfOnePrefixAtOnceMakeOnePchAndWaitForItsChild) {
  Toolkit t = find_toolkit("");
  std::string dir = short_scratch();
  NvrtcPool pool(kcache_worker(), dir, 4);
  pool.set_cpus_for_testing(1);  // the first compile fills the CPUs: the others wait
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back(
        [&, i] { pool.compile(t.nvrtc.path, prefixed(t, "k" + std::to_string(i))); });
  }
  for (std::thread& th : threads) th.join();
  NvrtcPool::PchCounts counts = pool.pch_counts();
  EXPECT_EQ(pch_files(dir), 1) << "one child made the prefix's PCH, the others used it";
  EXPECT_EQ(counts.made, 1);
  EXPECT_EQ(counts.reused, 3);
  EXPECT_EQ(pool.started(), 1) << "the compiles waited for the child holding the PCH";
}

TEST(NvrtcPoolTest, AKernelWithNoOtherOfItsPrefixToComeMakesNoPch) {
  Toolkit t = find_toolkit("");
  std::string dir = short_scratch();
  NvrtcPool pool(kcache_worker(), dir, 4);
  NvrtcInput only = prefixed(t, "only");
  pool.expect(std::string(pch_prefix(only.source)), 1);
  NvrtcOutput pooled = pool.compile(t.nvrtc.path, only);
  EXPECT_EQ(pooled.image, compile_in_worker(kcache_worker(), t.nvrtc.path, only).image);
  EXPECT_EQ(pch_files(dir), 0) << "a PCH nothing would use costs more than a plain compile";
  EXPECT_EQ(pool.pch_counts().plain, 1);
}

TEST(NvrtcPoolTest, AChildKeepsItsPchWhileAnotherOfItsPrefixIsToCome) {
  Toolkit t = find_toolkit("");
  std::string dir = short_scratch();
  NvrtcPool pool(kcache_worker(), dir, 1);
  NvrtcInput first = prefixed(t, "first"), second = prefixed(t, "second");
  pool.expect(std::string(pch_prefix(first.source)), 2);
  pool.compile(t.nvrtc.path, first);
  // Another prefix with nothing more to come: compiled without PCH, so the
  // one child's PCH survives for `second`.
  NvrtcInput other = prefixed(t, "other");
  other.source = "#define OTHER 1\n" + other.source;
  pool.expect(std::string(pch_prefix(other.source)), 1);
  pool.compile(t.nvrtc.path, other);
  pool.compile(t.nvrtc.path, second);
  NvrtcPool::PchCounts counts = pool.pch_counts();
  EXPECT_EQ(counts.made, 1);
  EXPECT_EQ(counts.reused, 1);
  EXPECT_EQ(counts.plain, 1);
  EXPECT_EQ(pch_files(dir), 1);
}

// Sends `inputs` to `pool` all at once, one thread each.
void compile_at_once(NvrtcPool& pool, const Toolkit& t, const std::vector<NvrtcInput>& inputs) {
  std::vector<std::thread> threads;
  for (const NvrtcInput& in : inputs) {
    threads.emplace_back([&pool, &t, &in] { pool.compile(t.nvrtc.path, in); });
  }
  for (std::thread& th : threads) th.join();
}

TEST(NvrtcPoolTest, AFewLeftOfAPrefixWaitForItsHolderRatherThanCompileWithoutPchOnAFreeCpu) {
  Toolkit t = find_toolkit("");
  std::string dir = short_scratch();
  NvrtcPool pool(kcache_worker(), dir, 4);
  pool.set_cpus_for_testing(2);  // a CPU stays free while the first makes the PCH
  std::vector<NvrtcInput> inputs = {prefixed(t, "a"), prefixed(t, "b"), prefixed(t, "c")};
  pool.expect(std::string(pch_prefix(inputs[0].source)), 3);
  compile_at_once(pool, t, inputs);
  NvrtcPool::PchCounts counts = pool.pch_counts();
  EXPECT_EQ(counts.made, 1);
  EXPECT_EQ(counts.reused, 2) << "a use costs about a quarter of the plain compile elsewhere";
  EXPECT_EQ(counts.plain, 0);
  EXPECT_EQ(pool.started(), 1);
}

TEST(NvrtcPoolTest, WithItsCpusLimitedACompileWaitsForAChildToComeBack) {
  Toolkit t = find_toolkit("");
  std::string dir = short_scratch();
  NvrtcPool pool(kcache_worker(), dir, 4);
  pool.limit_cpus(1);
  NvrtcInput first = prefixed(t, "first"), other = prefixed(t, "other");
  other.source = "#define OTHER 1\n" + other.source;
  pool.expect(std::string(pch_prefix(first.source)), 1);
  pool.expect(std::string(pch_prefix(other.source)), 1);
  compile_at_once(pool, t, {first, other});
  EXPECT_EQ(pool.started(), 1) << "one CPU: the second compile took the first's child after it";
  EXPECT_EQ(pool.pch_counts().plain, 2);
}

TEST(NvrtcPoolTest, WhileAnotherOptionSetIsToComeAFreeCpuMakesNoSecondPchOfOne) {
  Toolkit t = find_toolkit("");
  std::string dir = short_scratch();
  NvrtcPool pool(kcache_worker(), dir, 4);
  pool.limit_cpus(2);
  std::vector<NvrtcInput> sm90;
  for (int i = 0; i < 6; ++i) sm90.push_back(prefixed(t, "k" + std::to_string(i)));
  pool.expect(std::string(pch_prefix(sm90[0].source)), 6);
  pool.expect_all(12);  // six for sm_90, sent here, and six for another arch, not yet sent
  compile_at_once(pool, t, sm90);
  NvrtcPool::PchCounts counts = pool.pch_counts();
  EXPECT_EQ(counts.made, 1) << "the free CPU is the other arch's: its holder serves sm_90";
  EXPECT_EQ(counts.reused, 5);
  EXPECT_EQ(pool.started(), 1);
}

}  // namespace
}  // namespace kcache::compiler
