// Runs a program as a child process and captures what it printed, for tests
// that exercise the `kcache` binary the way a user or Bazel does.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kcache::testing {

struct CommandResult {
  int exit_code = -1;  // 128 + signal if killed
  std::string out;
  std::string err;
  // The child's peak resident set (wait4's ru_maxrss) and wall time.
  long peak_rss_kb = 0;
  double seconds = 0;
};

// `env` entries are added to (or replace) the current environment; an empty
// value removes the variable.
CommandResult run_command(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env = {});

// The kcache binary in the test's runfiles.
std::string kcache_binary();

// A test's data dependency by its workspace path (under Bazel's runfiles
// when the test runs there, else as given).
std::string runfile(const std::string& path);

}  // namespace kcache::testing
