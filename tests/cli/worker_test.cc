// `kcache compile --persistent_worker` driven as Bazel drives it: protobuf
// WorkRequests on stdin, WorkResponses on stdout. A request does exactly what
// the same `kcache compile` does (byte-identical bundles, with the worker's
// precompiled headers in play), a bad source fails only its request, hits go
// through the store, a request that lists its inputs reads only those (as a
// sandboxed action would), and stdin EOF ends the worker and its scratch
// folder.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/work_protocol.h"
#include "common/file_system.h"
#include "tests/compiler/test_files.h"
#include "tests/testing/run_command.h"

extern char** environ;

namespace kcache::cli {
namespace {

using compiler::testing::test_dir;
using compiler::testing::write;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const std::string kKernels = "tests/compiler/kernels/";

// A `kcache compile --persistent_worker` child, with $TMPDIR set to `tmp`
// and $KCACHE_DIR to `store` (as Bazel's --action_env does), started in
// `cwd` (Bazel starts it in the execroot) or in the test's own folder.
class Worker {
 public:
  explicit Worker(const std::string& tmp, const std::string& store = "",
                  const std::string& cwd = "") {
    int in[2], out[2];
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
    std::string binary = kcache::testing::kcache_binary();
    std::vector<std::string> args = {binary, "compile", "--persistent_worker"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
      std::string var = *e;
      if (var.compare(0, 7, "TMPDIR=") != 0 && var.compare(0, 11, "KCACHE_DIR=") != 0) {
        env_strings.push_back(var);
      }
    }
    env_strings.push_back("TMPDIR=" + tmp);
    if (!store.empty()) env_strings.push_back("KCACHE_DIR=" + store);
    std::vector<char*> env;
    for (std::string& e : env_strings) env.push_back(&e[0]);
    env.push_back(nullptr);
    EXPECT_EQ(::posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), env.data()), 0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~Worker() {
    if (to_ >= 0) ::close(to_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
    ::close(from_);
  }

  // `inputs`: the action's declared inputs, as Bazel sends them (none: the
  // request may read anything).
  WorkResponse call(const std::vector<std::string>& arguments, int id,
                    const std::vector<std::string>& inputs = {}) {
    WorkRequest request;
    request.arguments = arguments;
    request.request_id = id;
    for (const std::string& path : inputs) request.inputs.push_back({path, "0123abcd"});
    write_all_to(to_, encode_work_request(request));
    std::string message;
    EXPECT_TRUE(read_frame(from_, message)) << "the worker closed its stdout";
    return decode_work_response(message);
  }

  void send(const std::vector<std::string>& arguments, int id) {
    WorkRequest request;
    request.arguments = arguments;
    request.request_id = id;
    write_all_to(to_, encode_work_request(request));
  }
  pid_t pid() const { return pid_; }
  // Kills it as `bazel shutdown` may; returns when it is reaped.
  void kill() {
    ::kill(pid_, SIGKILL);
    wait();
    pid_ = 0;
  }

  // Closes stdin as Bazel does at shutdown; returns the exit status.
  int close_and_wait() {
    ::close(to_);
    to_ = -1;
    int status = wait();
    pid_ = 0;
    return status;
  }

 private:
  int wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
  }
  pid_t pid_ = 0;
  int to_ = -1, from_ = -1;
};

class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_dir();
    tmp_ = dir_ + "/tmp";
    std::filesystem::create_directories(tmp_);
  }
  std::string dir_, tmp_;
};

// The same CUB prefix with a different kernel: the second compile in one
// worker loads the first one's precompiled header.
std::string cub_variant(const std::string& dir) {
  std::string source = *read_file(kKernels + "cub_block.cu");
  source.replace(source.find("sort_and_sum"), 12, "sort_and_sum_again");
  return write(dir, "cub_again.cu", source);
}

TEST_F(WorkerTest, RequestsGiveTheBundlesOfTheCliByteForByte) {
  struct Kernel {
    std::string source;
    std::vector<std::string> flags;
  };
  std::vector<Kernel> kernels = {
      {kKernels + "cub_block.cu", {"--arch", "sm_90", "--std", "c++17"}},
      {cub_variant(dir_), {"--arch", "sm_90", "--std", "c++17"}},
      {kKernels + "cub_block.cu", {"--arch", "sm_80", "--std", "c++17", "-DUNUSED=1"}},
      {kKernels + "saxpy.cu", {"--arch", "sm_80,sm_90", "--ptx", "compute_90"}},
      {kKernels + "scale_template.cu", {"--arch", "sm_90", "--name-expression", "scale<float>"}},
  };
  Worker worker(tmp_);
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::vector<std::string> args = {"--no-store", kernels[i].source};
    args.insert(args.end(), kernels[i].flags.begin(), kernels[i].flags.end());
    std::vector<std::string> cli = {kcache::testing::kcache_binary(), "compile"};
    cli.insert(cli.end(), args.begin(), args.end());
    std::string from_cli = dir_ + "/cli" + std::to_string(i) + ".kcb";
    std::string from_worker = dir_ + "/worker" + std::to_string(i) + ".kcb";
    cli.insert(cli.end(), {"-o", from_cli});
    args.insert(args.end(), {"-o", from_worker});

    WorkResponse r = worker.call(args, static_cast<int>(i) + 1);
    EXPECT_EQ(r.request_id, static_cast<int>(i) + 1);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_FALSE(contains(r.output, "precompiled header")) << r.output;
    EXPECT_FALSE(contains(r.output, "PCH")) << r.output;
    kcache::testing::CommandResult c = kcache::testing::run_command(cli);
    ASSERT_EQ(c.exit_code, 0) << c.err;
    EXPECT_EQ(r.output, c.out + c.err) << kernels[i].source;
    EXPECT_EQ(*read_file(from_worker), *read_file(from_cli)) << kernels[i].source;
  }
  EXPECT_EQ(worker.close_and_wait(), 0);
}

TEST_F(WorkerTest, ABrokenSourceFailsOnlyItsRequestWithNvrtcsLog) {
  Worker worker(tmp_);
  WorkResponse bad = worker.call(
      {"--no-store", kKernels + "broken.cu", "--arch", "sm_90", "-o", dir_ + "/bad.kcb"}, 7);
  EXPECT_EQ(bad.request_id, 7);
  EXPECT_EQ(bad.exit_code, 3);
  EXPECT_TRUE(contains(bad.output, "identifier \"undeclared_variable\" is undefined"))
      << bad.output;
  EXPECT_FALSE(contains(bad.output, "-pch")) << "the plain compile's options: " << bad.output;
  WorkResponse usage = worker.call({"--no-store", kKernels + "saxpy.cu", "--arch", "sm_9x"}, 8);
  EXPECT_EQ(usage.exit_code, 2) << usage.output;
  WorkResponse good = worker.call(
      {"--no-store", kKernels + "saxpy.cu", "--arch", "sm_90", "-o", dir_ + "/good.kcb"}, 9);
  EXPECT_EQ(good.exit_code, 0) << good.output;
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/good.kcb"));
  EXPECT_EQ(worker.close_and_wait(), 0);
}

TEST_F(WorkerTest, ParamsFilesAreExpandedAndTheStoreGivesHits) {
  std::string params = write(dir_, "k.params",
                             kKernels + "saxpy.cu\n--arch\nsm_90\n" + "-o\n" + dir_ + "/k.kcb\n-v");
  Worker worker(tmp_, dir_ + "/store");
  WorkResponse first = worker.call({"@" + params}, 1);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_TRUE(contains(first.output, "sm_90 cubin miss")) << first.output;
  WorkResponse second = worker.call({"@" + params}, 2);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_TRUE(contains(second.output, "sm_90 cubin hit")) << second.output;
  EXPECT_EQ(worker.close_and_wait(), 0);
}

TEST_F(WorkerTest, StdinEofEndsTheWorkerAndRemovesItsScratchFolder) {
  Worker worker(tmp_);
  WorkResponse r =
      worker.call({"--no-store", cub_variant(dir_), "--arch", "sm_90", "-o", dir_ + "/k.kcb"}, 1);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(std::filesystem::is_empty(tmp_)) << "the worker keeps its scratch under $TMPDIR";
  int status = worker.close_and_wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(std::filesystem::is_empty(tmp_));
}

// An execroot as Bazel's worker sees it: a kernel whose header is chosen by
// a macro (a computed include, which kcache resolves when NVRTC asks for it)
// and one with a literal include, each next to its header.
void write_execroot(const std::string& root) {
  write(root, "kernels/computed.cu",
        "#define STR2(x) #x\n#define STR(x) STR2(x)\n#include STR(VARIANT.cuh)\n"
        "extern \"C\" __global__ void k(int* p) { *p = V; }\n");
  write(root, "kernels/v9.cuh", "#define V 9\n");
  write(root, "kernels/literal.cu",
        "#include \"lit.cuh\"\nextern \"C\" __global__ void k(int* p) { *p = L; }\n");
  write(root, "kernels/lit.cuh", "#define L 3\n");
}

const std::string kHint =
    "exists in the workspace but is not an input of this compile: add it to hdrs, or add the "
    "cc_library that has it to deps";

TEST_F(WorkerTest, AComputedIncludeOfAnUndeclaredHeaderFailsSayingWhatToDeclare) {
  std::string root = dir_ + "/execroot";
  write_execroot(root);
  Worker worker(tmp_, "", root);
  std::vector<std::string> args = {
      "--no-store", "kernels/computed.cu", "--arch", "sm_90", "-I", ".",
      "-D",         "VARIANT=v9",          "-o",     "k.kcb"};
  WorkResponse undeclared = worker.call(args, 1, {"kernels/computed.cu"});
  EXPECT_EQ(undeclared.exit_code, 3) << undeclared.output;
  // The hint first (compiler/undeclared.h), without NVRTC's log: NVRTC,
  // served, found the file the action did not declare.
  EXPECT_TRUE(contains(undeclared.output, "kcache compile: \"kernels/v9.cuh\" " + kHint))
      << undeclared.output;
  EXPECT_FALSE(std::filesystem::exists(root + "/k.kcb"));

  WorkResponse declared = worker.call(args, 2, {"kernels/computed.cu", "kernels/v9.cuh"});
  EXPECT_EQ(declared.exit_code, 0) << declared.output;
  EXPECT_TRUE(std::filesystem::exists(root + "/k.kcb"));
  // Spelled as an -I folder makes it, "./kernels/v9.cuh", and absolute: the same file.
  std::string absolute = std::filesystem::canonical(root).string();  // as getcwd() says it
  WorkResponse spelled =
      worker.call(args, 3, {"./kernels//computed.cu", absolute + "/kernels/v9.cuh"});
  EXPECT_EQ(spelled.exit_code, 0) << spelled.output;
  EXPECT_EQ(worker.close_and_wait(), 0);
}

// A review of issue 27's serving: the worker's store must not answer a
// request whose inputs lack a file the stored compile read (a sandboxed
// build would not find it), and NVRTC's errors from an undeclared file are
// the hint, every undeclared file named at once.
TEST_F(WorkerTest, AnUndeclaredHeaderIsNeverAHitAndEveryOneIsNamed) {
  std::string root = dir_ + "/execroot";
  write_execroot(root);
  Worker worker(tmp_, dir_ + "/store", root);
  std::vector<std::string> args = {"kernels/computed.cu", "--arch", "sm_90", "-I",
                                   ".",                   "-D",     "VARIANT=v9", "-o", "k.kcb"};
  WorkResponse declared = worker.call(args, 1, {"kernels/computed.cu", "kernels/v9.cuh"});
  EXPECT_EQ(declared.exit_code, 0) << declared.output;
  WorkResponse hit = worker.call(args, 2, {"kernels/computed.cu", "kernels/v9.cuh"});
  EXPECT_EQ(hit.exit_code, 0) << hit.output;
  WorkResponse undeclared = worker.call(args, 3, {"kernels/computed.cu"});
  EXPECT_EQ(undeclared.exit_code, 3) << undeclared.output;
  EXPECT_TRUE(contains(undeclared.output, "kcache compile: \"kernels/v9.cuh\" " + kHint))
      << undeclared.output;

  // Two undeclared headers, one of them broken: both named, no NVRTC error.
  write(root, "kernels/two.cu",
        "#include \"a.cuh\"\n#include \"b.cuh\"\nextern \"C\" __global__ void k(int* p) { *p = A + B; }\n");
  write(root, "kernels/a.cuh", "#define A 1\n");
  write(root, "kernels/b.cuh", "#define B 2\nint broken = ;\n");
  WorkResponse two = worker.call({"kernels/two.cu", "--arch", "sm_90", "-o", "two.kcb"}, 4,
                                 {"kernels/two.cu"});
  EXPECT_EQ(two.exit_code, 3) << two.output;
  EXPECT_TRUE(contains(two.output, "\"kernels/a.cuh\" " + kHint)) << two.output;
  EXPECT_TRUE(contains(two.output, "\"kernels/b.cuh\" " + kHint)) << two.output;
  EXPECT_FALSE(contains(two.output, "expected an expression")) << two.output;
  EXPECT_EQ(worker.close_and_wait(), 0);
}

TEST_F(WorkerTest, ALiteralIncludeOfAnUndeclaredHeaderFailsWithANote) {
  std::string root = dir_ + "/execroot";
  write_execroot(root);
  Worker worker(tmp_, "", root);
  std::vector<std::string> args = {
      "--no-store", "kernels/literal.cu", "--arch", "sm_90", "-I", ".", "-o", "k.kcb"};
  WorkResponse undeclared = worker.call(args, 1, {"kernels/literal.cu"});
  EXPECT_EQ(undeclared.exit_code, 3) << undeclared.output;
  EXPECT_TRUE(contains(undeclared.output, "\"lit.cuh\" (included from kernels/literal.cu:1)"))
      << undeclared.output;
  // The hint (compiler/undeclared.h), once: the worker's own note for a
  // refused file is not added when the output already names it.
  const std::string hint = "\"kernels/lit.cuh\" " + kHint;
  EXPECT_EQ(undeclared.output.rfind("kcache compile: " + hint, 0), 0u) << undeclared.output;
  EXPECT_EQ(undeclared.output.find(hint), undeclared.output.rfind(hint)) << undeclared.output;
  EXPECT_FALSE(contains(undeclared.output, "kcache: note: kernels/lit.cuh")) << undeclared.output;
  WorkResponse declared = worker.call(args, 2, {"kernels/literal.cu", "kernels/lit.cuh"});
  EXPECT_EQ(declared.exit_code, 0) << declared.output;
  EXPECT_EQ(worker.close_and_wait(), 0);
}

TEST_F(WorkerTest, ARequestWithAllItsInputsGivesTheBundleOfTheCli) {
  std::string root = dir_ + "/execroot";
  write_execroot(root);
  Worker worker(tmp_, "", root);
  struct Kernel {
    std::vector<std::string> args;
    std::vector<std::string> inputs;
  };
  std::vector<Kernel> kernels = {
      {{"kernels/computed.cu", "-D", "VARIANT=v9"}, {"kernels/computed.cu", "kernels/v9.cuh"}},
      {{"kernels/literal.cu"}, {"kernels/literal.cu", "kernels/lit.cuh"}},
  };
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::vector<std::string> args = kernels[i].args;
    args.insert(args.end(), {"--no-store", "--arch", "sm_90", "-I", "."});
    std::string n = std::to_string(i);
    std::string cli = "cd '" + root + "' && '" + kcache::testing::kcache_binary() + "' compile";
    for (const std::string& a : args) cli += " '" + a + "'";
    cli += " -o cli" + n + ".kcb";
    args.insert(args.end(), {"-o", "worker" + n + ".kcb"});
    WorkResponse r = worker.call(args, static_cast<int>(i) + 1, kernels[i].inputs);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    kcache::testing::CommandResult c = kcache::testing::run_command({"/bin/sh", "-c", cli});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    EXPECT_EQ(*read_file(root + "/worker" + n + ".kcb"), *read_file(root + "/cli" + n + ".kcb"));
  }
  EXPECT_EQ(worker.close_and_wait(), 0);
}

TEST_F(WorkerTest, ARequestWithoutInputsReadsAnyFileAsTheCliDoes) {
  // Old Bazel versions, and tests driving the worker by hand, send none.
  std::string root = dir_ + "/execroot";
  write_execroot(root);
  Worker worker(tmp_, "", root);
  WorkResponse r = worker.call(
      {"--no-store", "kernels/computed.cu", "--arch", "sm_90", "-D", "VARIANT=v9", "-o", "k.kcb"},
      1);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(worker.close_and_wait(), 0);
}

// The pool's compile processes under `scratch` (`kcache __nvrtc-worker
// --loop --pch-dir SCRATCH/...`): not the worker's children (NvrtcPool hands
// them to init), so found by their command line.
std::vector<pid_t> compile_processes_under(const std::string& scratch) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::optional<std::string> cmdline = read_file(entry.path().string() + "/cmdline");
    if (!cmdline || cmdline->find("__nvrtc-worker") == std::string::npos ||
        cmdline->find(scratch) == std::string::npos) {
      continue;
    }
    out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

bool alive(pid_t pid) {  // a zombie is dead
  std::optional<std::string> stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  size_t paren = stat->rfind(')');
  return paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] != 'Z';
}

TEST_F(WorkerTest, AKilledWorkerLeavesNoNvrtcProcessBehind) {
  Worker worker(tmp_);
  worker.send({"--no-store", kKernels + "cub_block.cu", "--arch", "sm_80,sm_90", "--ptx",
               "compute_90", "--std", "c++17", "-o", dir_ + "/k.kcb"},
              1);
  std::vector<pid_t> children;
  // One NVRTC process per compile: sm_80, and sm_90, whose PTX is compute_90's.
  for (int i = 0; i < 300 && children.size() < 2; ++i) {  // up to 30 s to start them
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    children = compile_processes_under(tmp_);
  }
  ASSERT_EQ(children.size(), 2u) << "one NVRTC process per compile, compiling";
  worker.kill();
  for (pid_t c : children) {
    for (int i = 0; i < 100 && alive(c); ++i) {  // they notice within 0.2 s
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_FALSE(alive(c)) << "NVRTC child " << c << " outlived its worker";
  }
}

TEST_F(WorkerTest, AGarbledStreamEndsTheWorkerWithAnError) {
  // Not a protobuf frame: a length prefix past the limit.
  kcache::testing::CommandResult r = kcache::testing::run_command(
      {"/bin/sh", "-c",
       "printf '\\377\\377\\377\\377\\177' | TMPDIR='" + tmp_ + "' '" +
           kcache::testing::kcache_binary() + "' compile --persistent_worker"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "over the limit")) << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace kcache::cli
