// The drop-in libnvrtc under a program written without kcache in mind
// (nvrtc_user.cc): everything it gets is byte-identical with and without the
// shim, a second process compiles nothing with NVRTC, an edited header on
// disk is a miss, and a program that opens NVRTC by soname gets the shim too.
// NVRTC compiles are counted by $KCACHE_SHIM_STATS (one line per compile:
// hit, miss or real).
#include <gtest/gtest.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
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

// How many stats lines start with `what`.
int count(const std::string& stats, const std::string& what) {
  int n = 0;
  size_t at = 0;
  while (at < stats.size()) {
    size_t end = stats.find('\n', at);
    if (stats.compare(at, what.size() + 1, what + " ") == 0) ++n;
    at = end == std::string::npos ? stats.size() : end + 1;
  }
  return n;
}

constexpr int kPrograms = 8;  // scale_cubin, scale_ptx, broken, warns, thread0..3

class DropInTest : public ::testing::Test {
 protected:
  void SetUp() override {
    real_dir_ = folder_of(compiler::find_toolkit("").nvrtc.path);
    shim_dir_ = folder_of(runfile("nvrtc_shim/libnvrtc.so.13"));
    ::mkdir((tmp_ / "include").c_str(), 0755);
    write_header(
        "__device__ inline float twice(float x) { return 2 * x; }\n"
        "__device__ inline double twice(double x) { return 2 * x; }\n"
        "__device__ inline int twice(int x) { return 2 * x; }\n");
  }

  void write_header(const std::string& text) {
    write_file_atomically(tmp_ / "include/disk_util.h", text);
  }

  // Runs `program` into a fresh folder; with the shim first on the library
  // path when `shim`. Returns the folder.
  std::string run(const std::string& program, bool shim, const std::string& stats = "",
                  const std::map<std::string, std::string>& more_env = {}) {
    std::string out = tmp_ / ("out" + std::to_string(runs_++));
    ::mkdir(out.c_str(), 0755);
    std::map<std::string, std::string> env = {
        {"LD_LIBRARY_PATH", shim ? shim_dir_ + ":" + real_dir_ : real_dir_},
        {"KCACHE_DIR", tmp_ / "store"},
        {"KCACHE_SHIM_STATS", stats},
        {"KCACHE_REMOTE", ""},
    };
    for (const auto& [name, value] : more_env) env[name] = value;
    testing::CommandResult r =
        run_command({runfile("tests/nvrtc_shim/" + program), out, tmp_ / "include"}, env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    last_err_ = r.err;
    return out;
  }

  std::string stats_file(const std::string& name) { return tmp_ / name; }
  std::string stats(const std::string& name) { return read_file(tmp_ / name).value_or(""); }

  TempDir tmp_;
  std::string real_dir_, shim_dir_, last_err_;
  int runs_ = 0;
};

TEST_F(DropInTest, OutputsAreNvrtcsAndTheSecondProcessCompilesNothing) {
  std::map<std::string, std::string> expected = answer_files(run("nvrtc_user", false));
  ASSERT_EQ(expected.count("scale_cubin.cubin"), 1u);
  ASSERT_EQ(expected.count("scale_ptx.ptx"), 1u);
  ASSERT_NE(expected["broken.log"].find("undeclared_call"), std::string::npos);
  ASSERT_NE(expected["warns.log"].find("warning"), std::string::npos);
  ASSERT_NE(expected["scale_cubin.codes"].find("lowered scale<float> 0 _Z5scaleIfEvPT_i"),
            std::string::npos)
      << expected["scale_cubin.codes"];

  std::map<std::string, std::string> first = answer_files(run("nvrtc_user", true, stats_file("first")));
  EXPECT_EQ(differences(first, expected), "") << "the shim's first run differs from NVRTC";
  EXPECT_EQ(count(stats("first"), "miss"), kPrograms) << stats("first") << last_err_;
  EXPECT_EQ(last_err_, "");  // nothing to say: every compile went through the cache

  std::map<std::string, std::string> second =
      answer_files(run("nvrtc_user", true, stats_file("second")));
  EXPECT_EQ(differences(second, expected), "") << "a hit differs from NVRTC";
  EXPECT_EQ(count(stats("second"), "hit"), kPrograms) << stats("second");
  EXPECT_EQ(count(stats("second"), "miss") + count(stats("second"), "real"), 0);

  // A process whose compiles all hit never loads the real NVRTC.
  std::string out = tmp_ / "maps_out";
  ::mkdir(out.c_str(), 0755);
  testing::CommandResult r =
      run_command({runfile("tests/nvrtc_shim/nvrtc_user"), out, tmp_ / "include"},
                  {{"LD_LIBRARY_PATH", shim_dir_ + ":" + real_dir_},
                   {"KCACHE_DIR", tmp_ / "store"},
                   {"NVRTC_USER_MAPS", tmp_ / "maps"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string maps = read_file(tmp_ / "maps").value_or("");
  EXPECT_NE(maps.find("nvrtc_shim/libnvrtc.so.13"), std::string::npos) << maps;
  size_t lines = 0, shim_lines = 0;
  for (size_t at = 0; at < maps.size(); at = maps.find('\n', at) + 1) {
    std::string line = maps.substr(at, maps.find('\n', at) - at);
    ++lines;
    shim_lines +=
        line.size() > 25 && line.compare(line.size() - 25, 25, "nvrtc_shim/libnvrtc.so.13") == 0;
  }
  EXPECT_EQ(shim_lines, lines) << "the real NVRTC was loaded:\n" << maps;
}

// CUTLASS 2.x, the GEMM library most CUDA C++ still uses (issue 27: once
// refused, then left to the real NVRTC uncached), through the drop-in as a
// program loads it: every answer NVRTC's, byte for byte, a miss and then, in
// a later process, a hit. Skipped without the nvidia-cutlass headers
// (tools/install_deps.sh).
TEST_F(DropInTest, ACutlass2GemmIsCachedWithNvrtcsAnswers) {
  const char* env = std::getenv("KCACHE_CUTLASS_DIR");
  const std::string include =
      std::string(env && *env ? env : "/opt/kcache-cutlass") + "/cutlass_library/source/include";
  const std::string kernel = "tests/compiler/kernels/cutlass/cutlass2_gemm.cu";
  if (!read_file(include + "/cutlass/gemm/kernel/default_gemm.h") || !read_file(kernel)) {
    GTEST_SKIP() << "no CUTLASS headers at " << include << " (tools/install_deps.sh)";
  }
  std::string options = "-arch=sm_90\n-std=c++17\n-default-device\n-I" + include + "\n";
  for (const std::string& d : compiler::find_toolkit("").include_dirs) options += "-I" + d + "\n";
  const std::map<std::string, std::string> one = {{"NVRTC_USER_FILE", kernel},
                                                  {"NVRTC_USER_OPTIONS", options}};
  std::map<std::string, std::string> expected = answer_files(run("nvrtc_user", false, "", one));
  ASSERT_NE(expected["file.codes"].find("compile 0\n"), std::string::npos)
      << expected["file.codes"] << expected["file.log"];
  ASSERT_GT(expected["file.cubin"].size(), 100000u);
  std::map<std::string, std::string> miss =
      answer_files(run("nvrtc_user", true, stats_file("cutlass_miss"), one));
  EXPECT_EQ(differences(miss, expected), "") << "the drop-in's miss differs from NVRTC";
  EXPECT_EQ(count(stats("cutlass_miss"), "miss"), 1) << stats("cutlass_miss") << last_err_;
  std::map<std::string, std::string> hit =
      answer_files(run("nvrtc_user", true, stats_file("cutlass_hit"), one));
  EXPECT_EQ(differences(hit, expected), "") << "the drop-in's hit differs from NVRTC";
  EXPECT_EQ(count(stats("cutlass_hit"), "hit"), 1) << stats("cutlass_hit");
}

// A library loaded into someone else's program changes nothing of its
// state: after a miss (compiled in kcache's compile process) and after a hit,
// no thread has no_new_privs or a seccomp filter, and the working folder and
// TMPDIR are the program's.
TEST_F(DropInTest, CompilesLeaveTheProgramsStateAsItWas) {
  for (const char* phase : {"miss", "hit"}) {
    std::string out = tmp_ / (std::string("state_") + phase);
    ::mkdir(out.c_str(), 0755);
    std::string state_file = tmp_ / (std::string(phase) + ".state");
    testing::CommandResult r =
        run_command({runfile("tests/nvrtc_shim/nvrtc_user"), out, tmp_ / "include"},
                    {{"LD_LIBRARY_PATH", shim_dir_ + ":" + real_dir_},
                     {"KCACHE_DIR", tmp_ / "store"},
                     {"KCACHE_SHIM_STATS", stats_file(phase)},
                     {"TMPDIR", tmp_.path()},
                     {"NVRTC_USER_HOST_STATE", state_file}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(count(stats(phase), phase), kPrograms) << stats(phase) << r.err;
    std::string state = read_file(state_file).value_or("");
    EXPECT_NE(state.find("thread NoNewPrivs:\t0"), std::string::npos) << state;
    EXPECT_EQ(state.find("NoNewPrivs:\t1"), std::string::npos) << phase << ":\n" << state;
    EXPECT_EQ(state.find("Seccomp:\t1"), std::string::npos) << phase << ":\n" << state;
    EXPECT_EQ(state.find("Seccomp:\t2"), std::string::npos) << phase << ":\n" << state;
    char cwd[PATH_MAX];
    ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
    EXPECT_NE(state.find(std::string("cwd ") + cwd + "\n"), std::string::npos) << state;
    EXPECT_NE(state.find("TMPDIR " + tmp_.path() + "\n"), std::string::npos) << state;
  }
}

// A program that forks after compiling: parent and child each compile
// again, the child through compile processes of its own; NVRTC's answers.
TEST_F(DropInTest, AForkedProgramCompilesThroughItsOwnCompileProcesses) {
  auto run_forking = [&](bool shim, const std::string& stats) {
    std::string out = tmp_ / ("fork_out" + std::to_string(runs_++));
    ::mkdir(out.c_str(), 0755);
    testing::CommandResult r =
        run_command({runfile("tests/nvrtc_shim/nvrtc_user"), out, tmp_ / "include"},
                    {{"LD_LIBRARY_PATH", shim ? shim_dir_ + ":" + real_dir_ : real_dir_},
                     {"KCACHE_DIR", tmp_ / "store"},
                     {"KCACHE_SHIM_STATS", stats},
                     {"NVRTC_USER_FORK", "1"}});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return answer_files(out);
  };
  std::map<std::string, std::string> expected = run_forking(false, "");
  ASSERT_EQ(expected.count("forked_child.cubin"), 1u);
  EXPECT_EQ(differences(run_forking(true, stats_file("fork")), expected), "");
  EXPECT_EQ(count(stats("fork"), "miss"), kPrograms + 2) << stats("fork");
  EXPECT_EQ(count(stats("fork"), "real"), 0) << stats("fork");
}

// Where no compile process can run (no kcache binary, or one that dies at
// once), every compile is the real NVRTC's, uncached, and the program is
// told once; with a working one a dead compile process is started again.
TEST_F(DropInTest, WithoutACompileProcessTheRealNvrtcAnswersAndSaysSoOnce) {
  std::map<std::string, std::string> expected = answer_files(run("nvrtc_user", false));
  for (const std::string& exe : {std::string("/no/such/kcache"), std::string("/bin/false")}) {
    std::string name = exe == "/bin/false" ? "dies" : "none";
    std::string out = tmp_ / ("noproc_" + name);
    ::mkdir(out.c_str(), 0755);
    testing::CommandResult r =
        run_command({runfile("tests/nvrtc_shim/nvrtc_user"), out, tmp_ / "include"},
                    {{"LD_LIBRARY_PATH", shim_dir_ + ":" + real_dir_},
                     {"KCACHE_DIR", tmp_ / "store"},
                     {"KCACHE_EXE", exe},
                     {"KCACHE_SHIM_STATS", stats_file(name)}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(differences(answer_files(out), expected), "") << exe;
    EXPECT_EQ(count(stats(name), "real"), kPrograms) << stats(name);
    EXPECT_NE(r.err.find("kcache nvrtc: "), std::string::npos) << r.err;
    // Once per kind of trouble, not once per compile.
    EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 2) << exe << ":\n" << r.err;
  }
}

// NVRTC 13 takes an -I folder as the next argument too (`-I DIR`,
// `--include-path DIR`; issue 29): cached, a hit the second time, and the
// same key as `-IDIR`, with NVRTC's answers.
TEST_F(DropInTest, AnIncludeFolderAsTheNextArgumentIsCachedUnderTheSameKey) {
  for (const char* split : {"-I", "--include-path"}) {
    const std::map<std::string, std::string> env = {{"NVRTC_USER_SPLIT_INCLUDE", split}};
    std::map<std::string, std::string> expected = answer_files(run("nvrtc_user", false, "", env));
    const std::string tag = std::string(split) == "-I" ? "short" : "long";
    std::map<std::string, std::string> first =
        answer_files(run("nvrtc_user", true, stats_file(tag + "_first"), env));
    EXPECT_EQ(differences(first, expected), "") << split;
    // The second spelling finds the first one's entries.
    EXPECT_EQ(count(stats(tag + "_first"), tag == "short" ? "miss" : "hit"), kPrograms)
        << stats(tag + "_first") << last_err_;
    std::map<std::string, std::string> second =
        answer_files(run("nvrtc_user", true, stats_file(tag + "_second"), env));
    EXPECT_EQ(differences(second, expected), "") << split;
    EXPECT_EQ(count(stats(tag + "_second"), "hit"), kPrograms) << stats(tag + "_second");
  }
  // `-IDIR` finds the entries the split spellings made.
  std::map<std::string, std::string> expected = answer_files(run("nvrtc_user", false));
  EXPECT_EQ(differences(answer_files(run("nvrtc_user", true, stats_file("glued"))), expected), "");
  EXPECT_EQ(count(stats("glued"), "hit"), kPrograms) << stats("glued");
}

TEST_F(DropInTest, AProgramThatOpensNvrtcBySonameGetsTheShim) {
  std::map<std::string, std::string> expected = answer_files(run("nvrtc_user_dlopen", false));
  EXPECT_EQ(differences(answer_files(run("nvrtc_user_dlopen", true, stats_file("first"))), expected),
            "");
  EXPECT_EQ(count(stats("first"), "miss"), kPrograms) << stats("first");
  EXPECT_EQ(differences(answer_files(run("nvrtc_user_dlopen", true, stats_file("second"))), expected),
            "");
  EXPECT_EQ(count(stats("second"), "hit"), kPrograms) << stats("second");
  // The linked program shares those entries.
  EXPECT_EQ(differences(answer_files(run("nvrtc_user", true, stats_file("linked"))), expected), "");
  EXPECT_EQ(count(stats("linked"), "hit"), kPrograms) << stats("linked");
}

TEST_F(DropInTest, AnEditedHeaderOnDiskIsAMiss) {
  run("nvrtc_user", true, stats_file("first"));
  write_header(
      "__device__ inline float twice(float x) { return x + x; }\n"
      "__device__ inline double twice(double x) { return x + x; }\n"
      "__device__ inline int twice(int x) { return x + x; }\n");
  std::map<std::string, std::string> expected = answer_files(run("nvrtc_user", false));
  EXPECT_EQ(differences(answer_files(run("nvrtc_user", true, stats_file("edited"))), expected), "");
  // The programs that include it (scale twice, four threads) compile again;
  // the two that do not still hit.
  EXPECT_EQ(count(stats("edited"), "miss"), 6) << stats("edited");
  EXPECT_EQ(count(stats("edited"), "hit"), 2) << stats("edited");
}

TEST_F(DropInTest, AnOptionKcacheCannotKeyGoesToTheRealNvrtcAndSaysSoOnce) {
  // -dlto's LTO-IR embeds the working directory: never cached.
  std::string out = tmp_ / "dlto_out";
  ::mkdir(out.c_str(), 0755);
  std::string prog = runfile("tests/nvrtc_shim/nvrtc_user");
  testing::CommandResult r =
      run_command({prog, out, tmp_ / "include"}, {{"LD_LIBRARY_PATH", shim_dir_ + ":" + real_dir_},
                                                  {"KCACHE_DIR", tmp_ / "store"},
                                                  {"KCACHE_SHIM_STATS", stats_file("dlto")},
                                                  {"NVRTC_USER_EXTRA_OPTION", "-dlto"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(stats("dlto"), "real"), kPrograms) << stats("dlto");
  EXPECT_NE(r.err.find("kcache nvrtc: compiled without the cache: option -dlto"), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST_F(DropInTest, LeanCubinsWhenAskedPtxAndLogsStayNvrtcs) {
  // One more program, including libcu++: NVRTC's cubin carries CCCL variables
  // nothing reads, which the lean pass cuts.
  const std::string toolkit_include = compiler::find_toolkit("").include_dirs.at(0);
  auto run_lean = [&](const std::string& name, bool shim) {
    std::string out = tmp_ / name;
    ::mkdir(out.c_str(), 0755);
    std::map<std::string, std::string> env = {
        {"LD_LIBRARY_PATH", shim ? shim_dir_ + ":" + real_dir_ : real_dir_},
        {"KCACHE_DIR", tmp_ / "store"},
        {"KCACHE_SHIM_LEAN", "1"},
        {"KCACHE_SHIM_STATS", stats_file(name + ".stats")},
        {"NVRTC_USER_TOOLKIT_INCLUDE", toolkit_include}};
    testing::CommandResult r =
        run_command({runfile("tests/nvrtc_shim/nvrtc_user"), out, tmp_ / "include"}, env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return answer_files(out);
  };
  std::map<std::string, std::string> expected = run_lean("nvrtc", false);
  std::map<std::string, std::string> first = run_lean("lean0", true);
  std::map<std::string, std::string> second = run_lean("lean1", true);
  EXPECT_EQ(count(stats("lean0.stats"), "miss"), kPrograms + 1) << stats("lean0.stats");
  EXPECT_EQ(count(stats("lean1.stats"), "hit"), kPrograms + 1) << stats("lean1.stats");
  EXPECT_EQ(differences(second, first), "");
  ASSERT_EQ(expected.count("limits.cubin"), 1u);
  EXPECT_LT(first["limits.cubin"].size(), expected["limits.cubin"].size() / 2);
  // Everything else is NVRTC's: the PTX a program reads, the logs, and the
  // cubins that hold no CCCL variable.
  for (const auto& [name, bytes] : expected) {
    if (name != "limits.cubin" && name != "limits.codes") {
      EXPECT_EQ(first[name], bytes) << name;
    }
  }
}

TEST_F(DropInTest, KcacheRunPutsTheShimFirst) {
  // The program opens NVRTC by soname; kcache run also preloads the shim for
  // programs that open it by path (CuPy 14 from its pip wheel).
  std::map<std::string, std::string> expected = answer_files(run("nvrtc_user", false));
  std::string out = tmp_ / "run_out";
  ::mkdir(out.c_str(), 0755);
  std::map<std::string, std::string> env = {{"LD_LIBRARY_PATH", real_dir_},
                                            {"KCACHE_DIR", tmp_ / "store"},
                                            {"KCACHE_SHIM_STATS", stats_file("run")}};
  testing::CommandResult r =
      run_command({testing::kcache_binary(), "run", "--", runfile("tests/nvrtc_shim/nvrtc_user"),
                   out, tmp_ / "include"},
                  env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(differences(answer_files(out), expected), "");
  EXPECT_EQ(count(stats("run"), "miss"), kPrograms) << stats("run") << r.err;

  // The user's stats file is honoured, and summed up when the program exits.
  EXPECT_NE(r.err.find("kcache run: " + std::to_string(kPrograms) + " NVRTC compiles: 0 hits, " +
                       std::to_string(kPrograms) + " misses ("),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(", 0 not cached; the misses' NVRTC took "), std::string::npos) << r.err;

  r = run_command({testing::kcache_binary(), "run", "--", "/no/such/program"}, env);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot run /no/such/program: No such file or directory"), std::string::npos)
      << r.err;
}

TEST_F(DropInTest, KcacheRunSaysWhatTheCompilesDidWhenTheProgramExits) {
  std::string out = tmp_ / "summary_out";
  ::mkdir(out.c_str(), 0755);
  // No KCACHE_SHIM_STATS of the user's: kcache run reads a private file.
  std::map<std::string, std::string> env = {
      {"LD_LIBRARY_PATH", real_dir_}, {"KCACHE_DIR", tmp_ / "store"}, {"KCACHE_SHIM_STATS", ""}};
  std::vector<std::string> program = {testing::kcache_binary(), "run", "--",
                                      runfile("tests/nvrtc_shim/nvrtc_user"), out,
                                      tmp_ / "include"};
  testing::CommandResult first = run_command(program, env);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  testing::CommandResult second = run_command(program, env);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const std::string n = std::to_string(kPrograms);
  const std::string all_hit = "kcache run: " + n + " NVRTC compiles: " + n + " hits, 0 misses, 0 not cached; ";
  // Wall time where no two compile calls overlapped, else NVRTC's summed.
  EXPECT_TRUE(second.err.find(all_hit + "wall time saved ") != std::string::npos ||
              second.err.find(all_hit + "NVRTC time saved ") != std::string::npos)
      << second.err;
  EXPECT_EQ(std::count(second.err.begin(), second.err.end(), '\n'), 1) << second.err;

  // What is not cached, and why.
  env["NVRTC_USER_EXTRA_OPTION"] = "-dlto";
  testing::CommandResult dlto = run_command(program, env);
  EXPECT_NE(dlto.err.find(" 0 hits, 0 misses, " + n + " not cached (option -dlto"), std::string::npos)
      << dlto.err;

  // Quiet: no line, and the program replaces kcache.
  env.erase("NVRTC_USER_EXTRA_OPTION");
  env["KCACHE_QUIET"] = "1";
  testing::CommandResult quiet = run_command(program, env);
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_EQ(quiet.err.find("kcache run:"), std::string::npos) << quiet.err;

  // The program's exit status is kcache's, a signal's included; the program
  // sees KCACHE_EXE, this kcache.
  env.erase("KCACHE_QUIET");
  testing::CommandResult seven =
      run_command({testing::kcache_binary(), "run", "--", "sh", "-c",
                   "test \"$KCACHE_EXE\" -ef \"" + testing::kcache_binary() + "\" && exit 7"},
                  env);
  EXPECT_EQ(seven.exit_code, 7) << seven.err;
  EXPECT_NE(seven.err.find("kcache run: no NVRTC compile went through kcache"), std::string::npos)
      << seven.err;
  testing::CommandResult killed =
      run_command({testing::kcache_binary(), "run", "--", "sh", "-c", "kill -TERM $$"}, env);
  EXPECT_EQ(killed.exit_code, 128 + SIGTERM) << killed.err;
  // A signal sent to kcache reaches the program.
  testing::CommandResult forwarded = run_command(
      {"/bin/sh", "-c",
       "\"$0\" run -- sh -c 'trap \"exit 42\" USR1; while :; do sleep 0.05; done' & pid=$!; "
       "sleep 1; kill -USR1 $pid; wait $pid",
       std::filesystem::absolute(testing::kcache_binary()).string()},
      env);
  EXPECT_EQ(forwarded.exit_code, 42) << forwarded.err << forwarded.out;
}

}  // namespace
}  // namespace kcache
