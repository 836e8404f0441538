// A fresh folder per test, removed afterwards. Under $TEST_TMPDIR by default;
// world-traversable /tmp when a test must hand the folder to another user.
#pragma once

#include <string>

namespace kcache::testing {

class TempDir {
 public:
  enum class Where { test_tmpdir, world_traversable_tmp };
  explicit TempDir(Where where = Where::test_tmpdir);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes `data` to `path` (plain, not atomic), for planting test files.
void write_file(const std::string& path, const std::string& data);
std::string read_file_or_die(const std::string& path);

}  // namespace kcache::testing
