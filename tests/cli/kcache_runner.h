// Runs the kcache binary as a user would and captures what it says.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/file_system.h"

namespace kcache::cli::testing {

struct KcacheRun {
  int exit_code = -1;
  std::string out;
  std::string err;
  // Lines of stderr, without the trailing empty one.
  int err_lines() const {
    int n = 0;
    for (char c : err) n += c == '\n';
    return n;
  }
};

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `kcache args...` (in `cwd` if given, else the runfiles root, where
// tests/compiler/kernels/ lies); stdin, stdout and stderr are not terminals.
inline KcacheRun run_kcache(const std::vector<std::string>& args, const std::string& cwd = "") {
  static const std::string root = [] {
    char buf[4096];
    return std::string(::getcwd(buf, sizeof buf));
  }();
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string out = std::string(tmp ? tmp : "/tmp") + "/kcache.stdout";
  std::string err = std::string(tmp ? tmp : "/tmp") + "/kcache.stderr";
  std::string command =
      "cd " + quote(cwd.empty() ? root : cwd) + " && " + quote(root + "/cli/kcache");
  for (const std::string& a : args) command += " " + quote(a);
  command += " </dev/null >" + quote(out) + " 2>" + quote(err);
  int status = std::system(command.c_str());
  KcacheRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out).value_or("");
  r.err = read_file(err).value_or("");
  return r;
}

}  // namespace kcache::cli::testing
