// A copy of a CUDA toolkit made of symlinks, for tests that add or edit a
// header in a toolkit's include folder without touching the real toolkit:
// every entry of the root but include/ is a symlink to the real one, and
// include/ is a real folder holding one symlink per entry, so one header can
// be added there or replaced by a modified copy. Pass the copy as the toolkit
// (find_toolkit(copy), the --cuda-path flag).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>

#include "common/file_system.h"

namespace kcache::compiler::testing {

inline void make_toolkit_copy(const std::string& real_root, const std::string& copy) {
  namespace fs = std::filesystem;
  fs::create_directories(copy + "/include");
  for (const fs::directory_entry& e : fs::directory_iterator(real_root)) {
    const std::string name = e.path().filename().string();
    if (name != "include") fs::create_symlink(e.path(), copy + "/" + name);
  }
  for (const fs::directory_entry& e : fs::directory_iterator(real_root + "/include")) {
    fs::create_symlink(e.path(), copy + "/include/" + e.path().filename().string());
  }
}

// Replaces the copy's include/<name> (a symlink into the real toolkit) by a
// file holding the real header's bytes followed by `appended`: the toolkit
// header edited in place, as a site install or a patch would.
inline void edit_toolkit_header(const std::string& real_root, const std::string& copy,
                                const std::string& name, const std::string& appended) {
  std::optional<std::string> bytes = FileSystem::real().read_file(real_root + "/include/" + name);
  ASSERT_TRUE(bytes) << real_root << "/include/" << name;
  std::filesystem::remove(copy + "/include/" + name);
  FileSystem::real().write_file_atomically(copy + "/include/" + name, *bytes + appended);
}

}  // namespace kcache::compiler::testing
