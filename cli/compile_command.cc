// `kcache compile SRC.cu --arch sm_80,sm_90 [--ptx compute_90] [-I DIR] [-D N[=V]]
//  [--std c++17] [--name-expression E] [--nvrtc-opt=OPT] [--source-name NAME]
//  -o OUT.kcb [--cc-out F.cc --h-out F.h --symbol S] [--cuda-path DIR] [-j N]
//  [--no-default-store | --no-store]`: one kernel source through the cache into
// a bundle. Quiet on success (it runs inside Bazel actions): NVRTC's warnings
// on a miss go to stderr; -v prints a line per target, --format json a summary
// on stdout.
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "cache/storage.h"
#include "cli/command.h"
#include "cli/compile_flags.h"
#include "cli/storage_flags.h"
#include "common/error.h"
#include "compiler/compiler.h"
#include "compiler/nvrtc/nvrtc_worker.h"
#include "compiler/program_service.h"
#include "compiler/toolkit.h"

namespace kcache::cli {
namespace {

struct CompileCommand {
  CompileFlags flags;
  CompilerSetup setup;
  bool verbose = false;
};

// "hit  KEY: looked up in 1.2 ms, saved 2359 ms of NVRTC" (what the lookup
// of every target took, and the compile the stored entry took once), or
// "miss KEY (inc/v.h changed): NVRTC took 2359 ms".
std::string outcome_words(const compiler::TargetResult& t, double lookup_ms) {
  char buf[96];
  if (t.hit) {
    std::snprintf(buf, sizeof buf, ": looked up in %.1f ms, saved %u ms of NVRTC", lookup_ms,
                  t.compile_ms);
    return "hit  " + t.key.hex() + buf;
  }
  std::snprintf(buf, sizeof buf, ": NVRTC took %u ms", t.compile_ms);
  return "miss " + t.key.hex() + " (" + t.miss_reason + ")" + buf;
}

void print_summary(const GlobalOptions& global, const CompileCommand& c,
                   const compiler::CompileResult& r) {
  if (global.format == "json") {
    nlohmann::json j;
    j["source"] = r.source_name;
    j["compiler"] = r.compiler_identity;
    j["hits"] = r.hits();
    j["misses"] = r.misses();
    for (const compiler::TargetResult& t : r.targets) {
      j["targets"].push_back({{"arch", t.target.arch},
                              {"kind", cache::to_string(t.target.kind)},
                              {"key", t.key.hex()},
                              {"hit", t.hit},
                              {"miss_reason", t.miss_reason},
                              {"compile_ms", t.compile_ms},
                              {"size", t.entry->payload().size()},
                              {"lean", t.lean},
                              {"lean_bytes_removed", t.lean_bytes_removed},
                              {"lean_variables_removed", t.lean_variables_removed}});
    }
    for (const cache::LoweredName& n : r.lowered_names) {
      j["lowered_names"][n.name_expression] = n.lowered_name;
    }
    j["lookup_ms"] = r.lookup_ms;
    j["bundle_size"] = r.bundle.size();
    std::printf("%s\n", j.dump(2).c_str());
  } else if (c.verbose) {
    for (const compiler::TargetResult& t : r.targets) {
      std::printf("kcache compile: %s %s %-5s %s\n", r.source_name.c_str(), t.target.arch.c_str(),
                  cache::to_string(t.target.kind), outcome_words(t, r.lookup_ms).c_str());
      if (t.lean) {
        std::printf("kcache compile: %s %s lean: %u variables, %lld bytes removed\n",
                    r.source_name.c_str(), t.target.arch.c_str(), t.lean_variables_removed,
                    static_cast<long long>(t.lean_bytes_removed));
      } else if (!t.lean_note.empty()) {
        std::printf("kcache compile: %s %s NVRTC's image kept: %s\n", r.source_name.c_str(),
                    t.target.arch.c_str(), t.lean_note.c_str());
      }
    }
  }
}

int run_compile(const GlobalOptions& global, const CompileCommand& c) {
  if (c.flags.output.empty() && c.flags.cc_out.empty()) {
    throw InvalidArgument("no output: give -o OUT.kcb and/or --cc-out F.cc --symbol NAME");
  }
  check_outputs(c.flags);
  compiler::CompileOptions options = to_options(c.flags);
  options.may_read = global.may_read;
  std::unique_ptr<cache::Storage> storage = open_storage(global, c.setup);
  // What the toolkit's files say is remembered in a store kcache may write
  // (compiler/toolkit_memo.h): a hit then reads none of them.
  const cache::Store* local = storage ? storage->local() : nullptr;
  compiler::Toolkit toolkit = compiler::find_toolkit(
      c.setup.cuda_path, local && !local->read_only() ? local->dir() : std::string());
  compiler::Compiler compiler(std::move(toolkit), storage.get(), c.setup.jobs, worker_command());
  if (!global.pch_dir.empty()) compiler.use_pch(global.pch_dir);
  if (global.pool) compiler.use_pool(global.pool);
  compiler::CompileResult result;
  try {
    result = compiler.compile(options);
  } catch (const CompileError& e) {
    print_compile_error("compile", e);
    throw;
  }
  if (!result.warnings.empty()) std::fputs(result.warnings.c_str(), stderr);
  write_outputs(c.flags, result);
  print_summary(global, c, result);
  return kExitOk;
}

// `kcache explain`: each target's lookup as `kcache compile` would make it
// now, without compiling. Exit 0 where every target hits, kExitMiss else.
int run_explain(const GlobalOptions& global, const CompileCommand& c) {
  compiler::CompileOptions options = to_options(c.flags);
  std::unique_ptr<cache::Storage> storage = open_storage(global, c.setup);
  compiler::Compiler compiler(compiler::find_toolkit(c.setup.cuda_path), storage.get());
  std::vector<compiler::TargetResult> found = compiler.explain(options);
  bool all_hit = true;
  nlohmann::json j;
  for (const compiler::TargetResult& t : found) {
    all_hit = all_hit && t.hit;
    if (global.format == "json") {
      j["targets"].push_back({{"arch", t.target.arch},
                              {"kind", cache::to_string(t.target.kind)},
                              {"key", t.key.hex()},
                              {"hit", t.hit},
                              {"miss_reason", t.miss_reason},
                              {"compile_ms", t.compile_ms}});
    } else {
      std::printf(
          "kcache explain: %s %s %-5s %s\n", options.logical_name().c_str(), t.target.arch.c_str(),
          cache::to_string(t.target.kind),
          t.hit ? ("hit  " + t.key.hex()).c_str() : ("miss (" + t.miss_reason + ")").c_str());
    }
  }
  if (global.format == "json") {
    j["source"] = options.logical_name();
    std::printf("%s\n", j.dump(2).c_str());
  }
  return all_hit ? kExitOk : kExitMiss;
}

}  // namespace

void add_explain_command(CLI::App& app, Dispatch& dispatch) {
  CLI::App* cmd = app.add_subcommand(
      "explain",
      "Say whether `kcache compile` with the same flags would hit, and why a target would miss "
      "(a header that changed, ...), without compiling. Exit code 0: every target hits; 5: one "
      "would miss.");
  auto c = std::make_shared<CompileCommand>();
  add_compile_flags(*cmd, c->flags, /*per_kernel=*/true);
  add_setup_flags(*cmd, c->setup);
  add_storage_flags(*cmd, dispatch.global);
  cmd->callback([&dispatch, c] {
    dispatch.verb = "explain";
    dispatch.action = [&dispatch, c] { return run_explain(dispatch.global, *c); };
  });
}

void add_compile_command(CLI::App& app, Dispatch& dispatch) {
  CLI::App* cmd = app.add_subcommand(
      "compile",
      "Compile one kernel source with NVRTC through the cache into a bundle (.kcb), and "
      "optionally C++ that embeds it. A hit skips NVRTC entirely.");
  auto c = std::make_shared<CompileCommand>();
  add_compile_flags(*cmd, c->flags, /*per_kernel=*/true);
  add_setup_flags(*cmd, c->setup);
  add_storage_flags(*cmd, dispatch.global);
  cmd->add_flag("-v,--verbose", c->verbose, "Print one line per target: hit or miss, key, time");
  cmd->callback([&dispatch, c] {
    dispatch.verb = "compile";
    dispatch.action = [&dispatch, c] { return run_compile(dispatch.global, *c); };
  });

  // Hidden (no group): kcache runs itself with it to compile targets in
  // parallel processes, since NVRTC serializes compiles within a process.
  CLI::App* worker = app.add_subcommand("__nvrtc-worker", "");
  worker->group("");
  // --loop: a long-lived child of compiler::NvrtcPool, with its PCH folder.
  auto loop = std::make_shared<bool>(false);
  auto pch_dir = std::make_shared<std::string>();
  worker->add_flag("--loop", *loop);
  worker->add_option("--pch-dir", *pch_dir);
  auto idle_exit_ms = std::make_shared<int>(0);
  worker->add_option("--idle-exit-ms", *idle_exit_ms);
  worker->callback([&dispatch, loop, pch_dir, idle_exit_ms] {
    dispatch.verb = "__nvrtc-worker";
    dispatch.action = [loop, pch_dir, idle_exit_ms] {
      if (!*loop) {
        // Dies with its parent (a killed persistent worker, `bazel
        // shutdown`): no orphan compiles on.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        return compiler::run_nvrtc_worker(0, 1);
      }
      // Descriptors a program that started this left open (posix_spawn
      // cannot close them) are not this process's to hold.
      ::syscall(SYS_close_range, 3, ~0U, 0);
      // The drop-in's whole program compiles (program_service.h): the
      // store lives here, never in the program. Never destroyed: the
      // thread below may flush it while a compile runs.
      auto* programs = new compiler::ProgramService(worker_command());
      programs->on_progress([](std::string_view frame) { compiler::write_frame(1, frame); });
      // A pool child is nobody's child (NvrtcPool's spawn_worker: init
      // adopts it), so it watches its stdin instead: when the pool's end
      // closes (the pool retired it, or its process ended) it writes the
      // store's counters and exits, even in the middle of a compile nobody
      // will read.
      std::thread([programs] {
        pollfd in{0, POLLRDHUP, 0};
        while (::poll(&in, 1, -1) < 0 && errno == EINTR) {
        }
        programs->flush(/*last=*/true);
        ::_exit(1);
      }).detach();
      compiler::OtherRequests other = [programs](std::string_view request)
          -> std::optional<std::string> {
        if (!compiler::is_program_request(request)) return std::nullopt;
        return programs->answer(request);
      };
      // Each compile's counters written once its answer is sent (a file under
      // the store's deferred/, no index write): `kcache -s` right after the
      // program ends sees them, without waiting for this process to end.
      int rc = compiler::run_nvrtc_worker_loop(0, 1, *pch_dir, *idle_exit_ms, other,
                                               [programs] { programs->flush(); });
      // An idle exit, or its input ended before the thread above saw it:
      // the same end as the thread's (no exit handler racing its flush).
      programs->flush(/*last=*/true);
      ::_exit(rc);
    };
  });
}

}  // namespace kcache::cli
