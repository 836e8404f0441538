// kcache: one binary, many verbs. See `kcache --help`.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/environment.h"
#include "common/error.h"

namespace kcache::cli {
namespace {

constexpr const char* kExitCodesHelp =
    "Exit codes: 0 success, 1 the operation failed (I/O, corrupt data, not found), "
    "2 bad flags or arguments, 3 NVRTC rejected a source, "
    "4 store or bundle from a newer incompatible kcache, 5 `kcache explain`: a target would "
    "miss.";

int exit_code_for(const Error& e) {
  switch (e.kind()) {
    case ErrorKind::invalid_argument:
      return kExitUsage;
    case ErrorKind::compile_failed:
      return kExitCompileFailed;
    case ErrorKind::incompatible_version:
      return kExitIncompatible;
    default:
      return kExitFailed;
  }
}

// "compile" where args name it as the verb with only --dir and --format
// (and their values) before it, as every build's compile does; else empty.
// Such a command parses the same with only that verb's flags declared, and
// declaring every verb's (a few hundred CLI11 options, made and destroyed)
// is a tenth of a hit's user time.
std::string compile_verb_alone(const std::vector<std::string>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--dir" || a == "--format") {
      ++i;
    } else if (a.rfind("--dir=", 0) != 0 && a.rfind("--format=", 0) != 0) {
      return a == "compile" ? a : "";
    }
  }
  return "";
}

int run(const std::vector<std::string>& args, const GlobalOptions& preset) {
  CLI::App app{"kcache: a content-addressed PTX/cubin cache for NVRTC-compiled CUDA kernels."};
  app.name("kcache");
  app.footer(kExitCodesHelp);
  app.set_version_flag("--version", "kcache 0.1.0");
  Dispatch dispatch;
  dispatch.global.pch_dir = preset.pch_dir;
  dispatch.global.pool = preset.pool;
  dispatch.global.may_read = preset.may_read;
  app.add_option("--dir", dispatch.global.dir,
                 "Store folder (default: $KCACHE_DIR, else $XDG_CACHE_HOME/kcache, else "
                 "~/.cache/kcache)");
  app.add_option("--format", dispatch.global.format, "Output format for stats and listings")
      ->check(CLI::IsMember({"text", "json"}));
  if (compile_verb_alone(args).empty()) {
    add_admin_commands(app, dispatch);
    add_remote_command(app, dispatch);
    add_compile_command(app, dispatch);
    add_explain_command(app, dispatch);
    add_prewarm_command(app, dispatch);
    add_bundle_command(app, dispatch);
    add_run_command(app, dispatch);
  } else {
    add_compile_command(app, dispatch);
  }
  app.require_subcommand(0, 1);

  try {
    // CLI11 wants argv without the program name, in reverse order.
    std::vector<std::string> rest(args.rbegin(), args.rend() - 1);
    app.parse(rest);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (!dispatch.action) {
    std::fprintf(stderr, "kcache: nothing to do; see kcache --help\n");
    return kExitUsage;
  }
  std::string prefix = dispatch.verb.empty() ? "kcache" : "kcache " + dispatch.verb;
  try {
    return dispatch.action();
  } catch (const CompileError& e) {
    // The verb printed NVRTC's log; this is the one-line summary.
    std::fprintf(stderr, "%s: %s\n", prefix.c_str(), e.what());
    return kExitCompileFailed;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", prefix.c_str(), e.what());
    return exit_code_for(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", prefix.c_str(), e.what());
    return kExitFailed;
  }
}

int main_with(int argc, char** argv) {
  // Under `bazel run`, relative paths are meant from where the user typed the
  // command, not from the runfiles tree Bazel starts us in.
  if (const char* cwd = env::value(env::Var::build_working_directory)) {
    if (::chdir(cwd) != 0) {
      std::fprintf(stderr, "kcache: cannot enter %s (BUILD_WORKING_DIRECTORY)\n", cwd);
      return kExitFailed;
    }
  }
  // Bazel starts a persistent worker as the action's command line without its
  // @params file, plus --persistent_worker; the params come in each request.
  std::vector<std::string> startup(argv, argv + argc);
  auto flag = std::find(startup.begin() + 1, startup.end(), "--persistent_worker");
  if (flag != startup.end()) {
    startup.erase(flag);
    return run_persistent_worker(startup, run);
  }
  std::vector<std::string> args;
  try {
    args = expand_params_files(argc, argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "kcache: %s\n", e.what());
    return kExitUsage;
  }
  return run(args, GlobalOptions());
}

}  // namespace
}  // namespace kcache::cli

int main(int argc, char** argv) { return kcache::cli::main_with(argc, argv); }
