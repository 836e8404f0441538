// `kcache compile --persistent_worker`: Bazel's persistent worker for
// KcacheCompile actions (see work_protocol.h for the protocol, docs/RULES in
// README.md for turning it on). Each WorkRequest is exactly one `kcache`
// command line; the response carries its exit code and everything it printed.
// What the worker adds is the long-lived process: NVRTC is loaded once, and
// compiles here reuse NVRTC's precompiled headers (compiler/nvrtc/pch.h) under a
// scratch folder of this process, removed when it exits.
//
// Unlike a one-shot `kcache compile`, a request that lists its inputs (Bazel
// always sends them) may read only those: the worker runs unsandboxed in the
// execroot, and a header missing from the cuda_kernel's hdrs must fail here
// as it fails in a sandbox (cli/declared_inputs.h).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/compile_flags.h"
#include "cli/declared_inputs.h"
#include "cli/work_protocol.h"
#include "common/environment.h"
#include "common/error.h"
#include "common/file_system.h"
#include "compiler/nvrtc/nvrtc_pool.h"

namespace kcache::cli {
namespace {

// Runs `run_one` with fds 1 and 2 pointing at a memory file, and returns what
// it printed. The protocol's own stdout is elsewhere (see below).
std::string run_captured(const std::function<int()>& run_one, int& exit_code, int log_fd) {
  std::fflush(stdout);
  std::fflush(stderr);
  int mem = ::memfd_create("kcache-request-output", MFD_CLOEXEC);
  if (mem < 0) throw IoError(errno_message("cannot create a memory file", "", errno));
  ::dup2(mem, 1);
  ::dup2(mem, 2);
  exit_code = run_one();
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(log_fd, 1);
  ::dup2(log_fd, 2);
  std::string out;
  char buf[1 << 16];
  for (off_t at = 0;;) {
    ssize_t n = ::pread(mem, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    at += n;
  }
  ::close(mem);
  return out;
}

// A note for each undeclared file the request was refused that its output
// does not already name (compiler.cc names those a computed include asked
// for; an undeclared literal include fails with the scanner's "not found").
std::string refusal_notes(const DeclaredInputs& inputs, const std::string& output) {
  std::string notes;
  for (const std::string& path : inputs.refused()) {
    if (output.find(path) != std::string::npos) continue;
    notes += "kcache: note: " + path +
             " exists but is not among this action's inputs, so this compile did not see it: if "
             "the kernel includes it, add it to the cuda_kernel's hdrs (or deps)\n";
  }
  return notes;
}

}  // namespace

ScratchDir::ScratchDir(const std::string& prefix) {
  const char* tmp = env::read(env::Var::tmpdir);
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
  if (!::mkdtemp(&templ[0])) {
    throw IoError(errno_message("cannot create a scratch folder", templ, errno));
  }
  path_ = templ;
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

int run_persistent_worker(const std::vector<std::string>& startup, const RunArgs& run) {
  // Bazel reads responses from our stdout: keep it private to the protocol,
  // and send anything else printed between requests to stderr (Bazel's
  // worker log).
  int protocol_out = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
  int log_fd = ::fcntl(2, F_DUPFD_CLOEXEC, 3);
  if (protocol_out < 0 || log_fd < 0) {
    std::fprintf(stderr, "kcache worker: cannot set up stdout: %s\n", std::strerror(errno));
    return kExitFailed;
  }
  ::dup2(log_fd, 1);
  try {
    ScratchDir scratch("kcache-worker");
    GlobalOptions preset;
    preset.pch_dir = scratch.path() + "/pch";
    std::filesystem::create_directories(preset.pch_dir);
    // Extra archs compile in long-lived children, which keep their PCH too.
    std::optional<compiler::NvrtcPool> pool;
    std::vector<std::string> child = worker_command();
    if (!child.empty()) {
      pool.emplace(child, scratch.path());
      preset.pool = &*pool;
    }
    // Bazel starts workers in the execroot; request inputs are relative to it.
    std::string execroot = std::filesystem::current_path().string();
    std::string message;
    while (read_frame(0, message)) {
      WorkRequest request = decode_work_request(message);
      // Bazel sends cancel requests only to workers that declare
      // supports-worker-cancellation, which this one does not: requests run
      // one at a time and each finishes.
      if (request.cancel) continue;
      WorkResponse response;
      response.request_id = request.request_id;
      std::vector<std::string> args = startup;
      args.insert(args.end(), request.arguments.begin(), request.arguments.end());
      std::optional<DeclaredInputs> declared;
      GlobalOptions options = preset;
      if (!request.inputs.empty()) {
        std::vector<std::string> paths;
        for (const WorkInput& in : request.inputs) paths.push_back(in.path);
        declared.emplace(paths, execroot);
        options.may_read = declared->may_read();
      }
      response.output = run_captured(
          [&] {
            std::vector<std::string> expanded;
            try {
              expanded = expand_params_files(args);
            } catch (const Error& e) {
              std::fprintf(stderr, "kcache: %s\n", e.what());
              return static_cast<int>(kExitUsage);
            }
            return run(expanded, options);
          },
          response.exit_code, log_fd);
      if (declared && response.exit_code != kExitOk) {
        response.output += refusal_notes(*declared, response.output);
      }
      write_all_to(protocol_out, encode_work_response(response));
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "kcache worker: %s\n", e.what());
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace kcache::cli
