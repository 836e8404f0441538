// The flags `kcache compile` takes, shared with `kcache prewarm` (whose
// manifest lines are compile command lines) and turned into the precompiler's
// options here, so both verbs read them the same way.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/storage.h"
#include "cli/command.h"
#include "common/error.h"
#include "bundle/bundle.h"
#include "compiler/image/codegen.h"
#include "compiler/compiler.h"

namespace CLI {
class App;
}

namespace kcache::cli {

struct CompileFlags {
  std::string source;
  std::string source_name;  // --source-name
  std::string target;       // --target //pkg:k (messages only)
  std::vector<std::string> archs;
  std::string ptx;
  std::vector<std::string> include_dirs;
  // -D NAME[=VALUE], -U NAME and --nvrtc-opt=-UNAME in the order given, as
  // "-DNAME[=VALUE]" / "-UNAME": NVRTC applies them in order (issue 26).
  std::vector<std::string> macros;
  std::string std;
  std::vector<std::string> name_expressions;
  std::vector<std::string> nvrtc_options;
  bool no_lean = false;  // --no-lean: NVRTC's bytes exactly
  std::string output;    // -o OUT.kcb
  std::string cc_out;    // --cc-out F.cc
  std::string h_out;     // --h-out F.h
  std::string symbol;    // --symbol S
};

// Adds the compile flags to `app`, filling `flags` on parse. The source and
// the outputs belong to one kernel: only with `per_kernel`.
void add_compile_flags(CLI::App& app, CompileFlags& flags, bool per_kernel);

compiler::CompileOptions to_options(const CompileFlags& flags);

// Fails fast, before any compile, on outputs that could not be written: a
// missing output folder, --cc-out/--h-out without --symbol.
void check_outputs(const CompileFlags& flags);

// The kernels of a bundle, from its PTX (compiler/image/codegen.h): for the header
// and `kcache bundle --format json`.
compiler::KernelList bundle_kernels(const bundle::Bundle& b);

// Writes the outputs asked for (each atomically).
void write_outputs(const CompileFlags& flags, const compiler::CompileResult& result);

// The flags both verbs share for the toolkit, parallelism and the store.
struct CompilerSetup {
  std::string cuda_path;
  int jobs = 0;                   // 0: one per CPU
  bool no_store = false;          // --no-store
  bool no_default_store = false;  // --no-default-store: only a store named by --dir or $KCACHE_DIR
};
void add_setup_flags(CLI::App& app, CompilerSetup& setup);

// The storage to compile through, or null when the flags say not to use one.
std::unique_ptr<cache::Storage> open_storage(const GlobalOptions& global,
                                             const CompilerSetup& setup);

// This binary with the hidden verb that runs compiler::run_nvrtc_worker, for
// compiling several targets in parallel processes (see nvrtc_worker.h).
std::vector<std::string> worker_command();

// Prints NVRTC's log as NVRTC wrote it, then the options, to stderr; nothing
// for an error without a log (its message says it all).
void print_compile_error(const std::string& verb, const CompileError& e);

}  // namespace kcache::cli
