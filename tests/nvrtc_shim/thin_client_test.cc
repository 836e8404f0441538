// The drop-in libnvrtc's host holds nothing of kcache's but its ends to the
// compile processes: no store file, no exit handler writing anything, no
// wait on a compile process that stopped answering, and each trouble said
// once per process. Each case runs host_attacker (thin_client_case) with the
// real NVRTC, then with the drop-in twice (a miss, then a hit).
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/file_system.h"
#include "compiler/toolkit.h"
#include "tests/testing/answer_files.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kcache {
namespace {

using testing::answer_files;
using testing::differences;
using testing::run_command;
using testing::runfile;
using testing::TempDir;

std::string folder_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

struct HostRun {
  int exit_code = -1;
  std::string err, state, stats, work;
  std::map<std::string, std::string> files;
};

// The lines of `err` that are the drop-in's messages.
std::vector<std::string> kcache_lines(const std::string& err) {
  std::vector<std::string> out;
  size_t from = 0;
  while (from < err.size()) {
    size_t end = err.find('\n', from);
    if (end == std::string::npos) end = err.size();
    std::string line = err.substr(from, end - from);
    if (line.rfind("kcache nvrtc:", 0) == 0) out.push_back(line);
    from = end + 1;
  }
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

class ThinClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    real_dir_ = folder_of(compiler::find_toolkit("").nvrtc.path);
    shim_dir_ = folder_of(runfile("nvrtc_shim/libnvrtc.so.13"));
  }

  // Runs host_attacker's `which_case` as run `which` (real, miss, hit).
  HostRun run(const std::string& which_case, const std::string& which) {
    const bool shim = which != "real";
    HostRun r;
    std::string out = tmp_ / ("out_" + which), tmpdir = tmp_ / ("tmp_" + which);
    r.work = tmp_ / ("work_" + which);
    for (const std::string& d : {out, r.work, tmpdir}) ::mkdir(d.c_str(), 0755);
    std::map<std::string, std::string> env = {
        {"LD_LIBRARY_PATH", shim ? shim_dir_ + ":" + real_dir_ : real_dir_},
        {"KCACHE_DIR", tmp_ / "store"},
        {"KCACHE_SHIM_STATS", tmp_ / ("stats_" + which)},
        {"KCACHE_REMOTE", ""},
        {"TMPDIR", tmpdir},
        {"HOST_ATTACK_MARK", tmp_.path()},
    };
    if (shim) env.insert(shim_env_.begin(), shim_env_.end());
    testing::CommandResult c = run_command(
        {"/usr/bin/timeout", "-s", "KILL", "150", runfile("tests/nvrtc_shim/host_attacker"),
         which_case, out, r.work},
        env);
    r.exit_code = c.exit_code;
    r.err = c.err;
    r.state = read_file(out + "/state").value_or("(no state file)");
    r.files = answer_files(out, [](const std::string& name) { return name != "state"; });
    r.stats = read_file(tmp_ / ("stats_" + which)).value_or("");
    std::fprintf(stderr, "[%s %s] exit %d; stats:\n%sstderr:\n%s\n", which_case.c_str(),
                 which.c_str(), r.exit_code, r.stats.c_str(), r.err.c_str());
    return r;
  }

  // The real NVRTC's run, then the drop-in's miss and hit: the same exit,
  // answers and host state; `check` looks at each drop-in run.
  template <typename Check>
  void run_all(const std::string& which_case, Check check) {
    HostRun real = run(which_case, "real");
    ASSERT_EQ(real.exit_code, 0) << real.err;
    for (const char* which : {"miss", "hit"}) {
      HostRun got = run(which_case, which);
      EXPECT_EQ(got.exit_code, 0) << which << ": " << got.err;
      EXPECT_EQ(got.state, "") << which << ": host state damaged";
      EXPECT_EQ(differences(got.files, real.files), "") << which << ": answers differ";
      check(which, got);
    }
  }

  // Runs kcache's compile processes with wedge_hook.cc preloaded, wedged
  // `where` (nvrtc, lookup) `how` (block, spin).
  void wedge_compile_processes(const std::string& where, const std::string& how) {
    const std::string wrapper = tmp_ / "kcache_wedged";
    write_file_atomically(wrapper, "#!/bin/sh\nLD_PRELOAD=" +
                            runfile("tests/nvrtc_shim/libwedge_hook.so") + " exec " +
                            runfile("cli/kcache") + " \"$@\"\n",
                          0755);
    shim_env_ = {{"KCACHE_EXE", wrapper},
                 {"KCACHE_TEST_WEDGE", where},
                 {"KCACHE_TEST_WEDGE_HOW", how}};
  }

  TempDir tmp_;
  std::string real_dir_, shim_dir_;
  std::map<std::string, std::string> shim_env_;  // for the drop-in's runs
};

TEST_F(ThinClientTest, AHostThatClosesEveryDescriptorAfterAMissKeepsItsFilesToItself) {
  run_all("host_files_after_miss", [](const std::string& which, const HostRun& got) {
    for (int i = 0; i < 8; ++i) {
      std::string expected;
      for (int k = 0; k < 64 * 1024; ++k) expected += static_cast<char>('a' + (k + i) % 26);
      std::optional<std::string> bytes = read_file(got.work + "/own" + std::to_string(i));
      ASSERT_TRUE(bytes) << which << ": own file " << i << " missing";
      EXPECT_EQ(bytes->size(), expected.size()) << which << ": own file " << i
                                                << " has bytes the host did not write";
      EXPECT_TRUE(*bytes == expected) << which << ": own file " << i << " was written by another";
    }
  });
}

TEST_F(ThinClientTest, TheHostHoldsNoStoreFile) {
  // host_attacker lists any descriptor beneath the store (or SQLite's) as
  // a problem of its state.
  run_all("no_store_files_open", [](const std::string& which, const HostRun& got) {
    EXPECT_NE(got.stats.find(std::string(which) == "miss" ? "miss | a.cu" : "hit | a.cu"),
              std::string::npos)
        << which << ":\n" << got.stats;
  });
}

TEST_F(ThinClientTest, AStoppedCompileProcessGetsTheRealNvrtcsAnswerSaidOnce) {
  run_all("stopped_compile_process", [](const std::string& which, const HostRun& got) {
    std::vector<std::string> lines = kcache_lines(got.err);
    if (std::string(which) == "miss") {
      // Stopped in the middle of its compile: the real NVRTC answered it.
      EXPECT_NE(got.stats.find("real | slow.cu"), std::string::npos) << got.stats;
    }
    // Stopped while idle (the hit run) or busy: one line, naming the stop.
    ASSERT_EQ(lines.size(), 1u) << which << ":\n" << joined(lines);
    EXPECT_NE(lines[0].find("was stopped"), std::string::npos) << lines[0];
  });
}

// Wedged, not stopped: a futex wait nobody wakes, or a busy loop. The host
// gives it up within the bound of what it was doing (program_protocol.h:
// a lookup's, or NVRTC alone's time here past a floor) and answers with the
// real NVRTC; before, it waited for good.
TEST_F(ThinClientTest, ACompileProcessWedgedInNvrtcGetsTheRealNvrtcsAnswerSaidOnce) {
  wedge_compile_processes("nvrtc", "block");
  run_all("one_compile", [](const std::string& which, const HostRun& got) {
    EXPECT_NE(got.stats.find("real | one.cu"), std::string::npos) << which << ": " << got.stats;
    std::vector<std::string> lines = kcache_lines(got.err);
    ASSERT_EQ(lines.size(), 1u) << which << ":\n" << joined(lines);
    EXPECT_NE(lines[0].find("after NVRTC alone compiled the program here"), std::string::npos)
        << lines[0];
  });
}

TEST_F(ThinClientTest, ACompileProcessSpinningInItsLookupGetsTheRealNvrtcsAnswerSaidOnce) {
  wedge_compile_processes("lookup", "spin");
  run_all("one_compile", [](const std::string& which, const HostRun& got) {
    EXPECT_NE(got.stats.find("real | one.cu"), std::string::npos) << which << ": " << got.stats;
    std::vector<std::string> lines = kcache_lines(got.err);
    ASSERT_EQ(lines.size(), 1u) << which << ":\n" << joined(lines);
    EXPECT_NE(lines[0].find("looked nothing up within"), std::string::npos) << lines[0];
  });
}

TEST_F(ThinClientTest, AHostSeccompFilterThatRefusesTheSealIsSaidInOneLine) {
  run_all("seccomp_refuses_seal", [](const std::string& which, const HostRun& got) {
    std::vector<std::string> lines = kcache_lines(got.err);
    ASSERT_EQ(lines.size(), 1u) << which << ":\n" << joined(lines);
    EXPECT_NE(lines[0].find("seccomp filter"), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("EPERM"), std::string::npos) << lines[0];
    EXPECT_EQ(lines[0].find("the kernel has no Landlock"), std::string::npos) << lines[0];
  });
}

TEST_F(ThinClientTest, EightThreadsWithoutCompileProcessesSayOneLine) {
  run_all("threads8_no_compile_process", [](const std::string& which, const HostRun& got) {
    std::vector<std::string> lines = kcache_lines(got.err);
    EXPECT_EQ(lines.size(), 1u) << which << ":\n" << joined(lines);
    EXPECT_EQ(got.stats.find("hit "), std::string::npos) << got.stats;
  });
}

TEST_F(ThinClientTest, AStoreTroubleOfEveryCompileProcessIsSaidOncePerHost) {
  run_all("threads8_unusable_store", [](const std::string& which, const HostRun& got) {
    std::vector<std::string> about_store;
    size_t from = 0;
    while (from < got.err.size()) {
      size_t end = got.err.find('\n', from);
      if (end == std::string::npos) end = got.err.size();
      std::string line = got.err.substr(from, end - from);
      if (line.find("not_a_store") != std::string::npos) about_store.push_back(line);
      from = end + 1;
    }
    ASSERT_EQ(about_store.size(), 1u) << which << ":\n" << joined(about_store);
    EXPECT_EQ(about_store[0].rfind("kcache nvrtc: ", 0), 0u) << about_store[0];
  });
}

}  // namespace
}  // namespace kcache
