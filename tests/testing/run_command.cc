#include "tests/testing/run_command.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>

#include "tests/testing/temp_dir.h"

extern char** environ;

namespace kcache::testing {

CommandResult run_command(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env) {
  TempDir tmp;
  const std::string out_path = tmp / "out", err_path = tmp / "err";
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0) _exit(126);
    dup2(out, 1);
    dup2(err, 2);
#if defined(__SANITIZE_ADDRESS__)
    // Under --config=asan the binary under test is instrumented too. Its
    // LeakSanitizer, started from this forked child, crashes in its own tracer
    // thread ("Tracer caught signal 11") at the exit of a process that ran
    // NVRTC in process; the same command run from a shell is clean. Leak
    // checking of that code stays on in the in-process tests (tests/compiler,
    // tests/runtime/jit); the address checks stay on here.
    setenv("ASAN_OPTIONS", "detect_leaks=0", /*overwrite=*/0);
#endif
    for (const auto& [name, value] : env) {
      if (value.empty()) {
        unsetenv(name.c_str());
      } else {
        setenv(name.c_str(), value.c_str(), 1);
      }
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  CommandResult result;
  result.peak_rss_kb = usage.ru_maxrss;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file_or_die(out_path);
  result.err = read_file_or_die(err_path);
  return result;
}

std::string kcache_binary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir && workspace) return std::string(srcdir) + "/" + workspace + "/cli/kcache";
  return "cli/kcache";
}

std::string runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir && workspace) return std::string(srcdir) + "/" + workspace + "/" + path;
  return path;
}

}  // namespace kcache::testing
