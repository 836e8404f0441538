// How the `kcache` verbs plug into the one binary (rules_go's builder style:
// one tool, many verbs). Each verb file adds its CLI11 subcommand or flags and,
// when chosen, sets `Dispatch::action`; main() runs it and maps errors to exit
// codes, so verbs just throw kcache::Error.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace kcache::compiler {
class NvrtcPool;
}

namespace kcache::cli {

// Documented in `kcache --help`.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,         // the operation failed: I/O, corrupt data, not found
  kExitUsage = 2,          // bad flags or arguments
  kExitCompileFailed = 3,  // NVRTC rejected a source (its log is printed)
  kExitIncompatible = 4,   // the store or bundle is from a newer, incompatible kcache
  kExitMiss = 5,           // `kcache explain`: a target would miss
};

struct GlobalOptions {
  std::string dir;  // --dir; empty: $KCACHE_DIR, $XDG_CACHE_HOME/kcache, ~/.cache/kcache
  std::string format = "text";  // --format text|json
  // Values of the chosen verb's storage flags, keyed as in cache/config.h
  // (add_storage_flags in cli/storage_flags.h fills it).
  std::map<std::string, std::string> storage_flags;
  // Set inside a persistent worker: NVRTC's precompiled headers go here
  // (compiler/nvrtc/pch.h). Empty in a one-shot process.
  std::string pch_dir;
  // Set inside a persistent worker: its long-lived NVRTC worker processes.
  compiler::NvrtcPool* pool = nullptr;
  // Set inside a persistent worker for a request that lists its inputs: the
  // user files `kcache compile` may read (compiler::MayRead,
  // cli/declared_inputs.h). Empty: all.
  std::function<bool(const std::string& path)> may_read;
};

struct Dispatch {
  GlobalOptions global;
  std::string verb;             // log prefix: "kcache compile: ..."
  std::function<int()> action;  // set by the chosen verb
};

// Each verb file provides one of these.
void add_admin_commands(CLI::App& app, Dispatch& dispatch);
void add_compile_command(CLI::App& app, Dispatch& dispatch);
void add_explain_command(CLI::App& app, Dispatch& dispatch);
void add_prewarm_command(CLI::App& app, Dispatch& dispatch);
void add_remote_command(CLI::App& app, Dispatch& dispatch);
void add_bundle_command(CLI::App& app, Dispatch& dispatch);
void add_run_command(CLI::App& app, Dispatch& dispatch);

// Expands "@file" arguments into the file's lines (one argument per line, as
// Bazel writes params files); recursive expansion is not done.
std::vector<std::string> expand_params_files(int argc, char** argv);
std::vector<std::string> expand_params_files(const std::vector<std::string>& args);

// Runs one kcache command line (args[0] the program), with `preset`'s pch_dir,
// pool and may_read; returns its exit code.
using RunArgs =
    std::function<int(const std::vector<std::string>& args, const GlobalOptions& preset)>;

// A private folder under $TMPDIR ("PREFIX-XXXXXX"), removed with everything in
// it when destroyed. Throws IoError if it cannot be created.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Bazel's persistent worker (worker_command.cc): reads WorkRequests on stdin
// until EOF; each runs `run(startup + request arguments)` with its output
// captured into the WorkResponse. Returns the process exit code.
int run_persistent_worker(const std::vector<std::string>& startup, const RunArgs& run);

}  // namespace kcache::cli
