// `kcache run -- CMD [ARGS...]`: runs CMD with kcache's drop-in libnvrtc
// (nvrtc_shim/) first on LD_LIBRARY_PATH and in LD_PRELOAD, so the NVRTC
// compiles CMD makes go through the cache: through a linked libnvrtc, one it
// opens by soname, or one it takes because it is already loaded (CuPy 14
// looks for a loaded libnvrtc before opening its pip wheel's by path,
// measured on the GPU machine: docs/NVRTC_SHIM.md). A program linked to
// another NVRTC major binds none of the shim's symbols (their version node is
// libnvrtc.so.13). The store and remote are configured as for every kcache
// command, by the environment (KCACHE_DIR, KCACHE_REMOTE, ...), which CMD
// inherits.
#include <limits.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/error.h"
#include "common/file_system.h"

namespace kcache::cli {
namespace {

constexpr const char kShimName[] = "libnvrtc.so.13";

std::string folder_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The folder holding the shim: $KCACHE_NVRTC_SHIM_DIR, else next to this
// binary (an install), else bazel-bin's nvrtc_shim/ beside cli/.
std::string shim_dir() {
  std::vector<std::string> looked;
  auto has_shim = [&](const std::string& dir) {
    looked.push_back(dir);
    return ::access((dir + "/" + kShimName).c_str(), R_OK) == 0;
  };
  if (const char* dir = std::getenv("KCACHE_NVRTC_SHIM_DIR"); dir && *dir) {
    if (has_shim(dir)) return dir;
    throw NotFound(std::string("$KCACHE_NVRTC_SHIM_DIR is ") + dir + ", which holds no " +
                   kShimName + ": point it at the folder of kcache's drop-in libnvrtc");
  }
  char exe[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    std::string here = folder_of(exe);
    for (const std::string& dir : {here, here + "/../nvrtc_shim", here + "/../lib/kcache"}) {
      char real[PATH_MAX];
      if (has_shim(dir)) return ::realpath(dir.c_str(), real) ? std::string(real) : dir;
    }
  }
  std::string list;
  for (const std::string& d : looked) list += (list.empty() ? "" : ", ") + d;
  throw NotFound(std::string("kcache's drop-in ") + kShimName + " was not found (looked in " +
                 list + "): build it with `bazel build //nvrtc_shim:" + kShimName +
                 "`, install it next to kcache, or set KCACHE_NVRTC_SHIM_DIR");
}

int run_command(const std::vector<std::string>& command) {
  if (command.empty()) {
    throw InvalidArgument("no command: kcache run -- CMD [ARGS...]");
  }
  std::string path = shim_dir();
  const char* old = std::getenv("LD_LIBRARY_PATH");
  std::string value = old && *old ? path + ":" + old : path;
  ::setenv("LD_LIBRARY_PATH", value.c_str(), 1);
  std::string preload = path + "/" + kShimName;
  const char* old_preload = std::getenv("LD_PRELOAD");
  if (old_preload && *old_preload) preload += std::string(":") + old_preload;
  ::setenv("LD_PRELOAD", preload.c_str(), 1);
  // CuPy's own disk cache is keyed by a kernel's source text alone: after an
  // -I header changes it answers the old kernel, before NVRTC (and so kcache)
  // is asked. Under kcache run kcache is the cache, exact for headers; CuPy
  // keeps its in-memory cache. A user's own setting wins.
  ::setenv("CUPY_CACHE_IN_MEMORY", "1", /*overwrite=*/0);
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  int error = errno;
  throw NotFound("cannot run " + command[0] + ": " + std::strerror(error));
}

}  // namespace

void add_run_command(CLI::App& app, Dispatch& dispatch) {
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run a program with kcache's drop-in libnvrtc first on LD_LIBRARY_PATH and in LD_PRELOAD: "
      "its NVRTC compiles go through the cache (kcache run -- CMD [ARGS...]).");
  auto command = std::make_shared<std::vector<std::string>>();
  cmd->add_option("command", *command, "The program and its arguments, after --")->required();
  cmd->callback([&dispatch, command] {
    dispatch.verb = "run";
    dispatch.action = [command] { return run_command(*command); };
  });
}

}  // namespace kcache::cli
