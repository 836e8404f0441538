#include "compiler/undeclared.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kcache::compiler {
namespace {

bool is_regular_file(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The execroot behind a sandbox: `source_path` is a symlink to
// <execroot>/<source_path>. Empty when it is not (the worker, a plain run).
std::string execroot_behind(const std::string& source_path) {
  if (source_path.empty() || source_path.front() == '/') return {};
  char target[PATH_MAX];
  const ssize_t n = ::readlink(source_path.c_str(), target, sizeof target - 1);
  if (n <= 0) return {};
  const std::string link(target, static_cast<size_t>(n));
  std::string tail = source_path;
  while (tail.rfind("./", 0) == 0) tail.erase(0, 2);
  tail = "/" + tail;
  if (link.size() <= tail.size() || link.compare(link.size() - tail.size(), tail.size(), tail) != 0) {
    return {};
  }
  return link.substr(0, link.size() - tail.size());
}

// The workspace root: the source's real path less the source's path. Empty
// when the two do not end alike (a generated or external source).
std::string workspace_behind(const std::string& source_path) {
  if (source_path.empty() || source_path.front() == '/') return {};
  char real[PATH_MAX];
  if (!::realpath(source_path.c_str(), real)) return {};
  const std::string path(real);
  std::string tail = source_path;
  while (tail.rfind("./", 0) == 0) tail.erase(0, 2);
  tail = "/" + tail;
  if (path.size() <= tail.size() || path.compare(path.size() - tail.size(), tail.size(), tail) != 0) {
    return {};
  }
  return path.substr(0, path.size() - tail.size());
}

std::string candidate_path(const std::string& dir, const std::string& name) {
  return dir.empty() || dir == "." ? name : dir + "/" + name;
}

}  // namespace

std::optional<std::string> find_undeclared(const std::string& name,
                                           const std::vector<std::string>& dirs,
                                           const std::string& source_path) {
  if (name.empty() || name.front() == '/') return std::nullopt;
  std::vector<std::string> roots{""};
  for (const std::string& root : {execroot_behind(source_path), workspace_behind(source_path)}) {
    if (!root.empty()) roots.push_back(root + "/");
  }
  for (const std::string& dir : dirs) {
    if (!dir.empty() && dir.front() == '/') continue;
    const std::string path = candidate_path(dir, name);
    for (const std::string& root : roots) {
      if (is_regular_file(root + path)) return path;
    }
  }
  return std::nullopt;
}

std::string undeclared_hint(const std::string& path, const std::string& target) {
  return "\"" + path + "\" exists in the workspace but is not an input of " +
         (target.empty() ? "this compile" : target) +
         ": add it to hdrs, or add the cc_library that has it to deps";
}

std::string searched_folders(const MissingInclude& m) {
  std::string dirs;
  for (const std::string& d : m.searched) dirs += (dirs.empty() ? "" : ", ") + d;
  return dirs;
}

CompileError with_undeclared_hints(const CompileError& error,
                                   const std::vector<MissingInclude>& missing, bool served,
                                   const std::string& source_path, const std::string& target) {
  std::string hints, searched, notes;
  for (const MissingInclude& m : missing) {
    // Only a stub NVRTC compiled (its #error is in the log) failed the
    // build; served, NVRTC's own "cannot open" names it.
    const bool stubbed = !m.stub.empty();
    if (!stubbed && !served) continue;
    const std::string said = stubbed ? "kcache: \"" + m.name + "\""
                                     : "cannot open source file \"" + m.name + "\"";
    if (error.log().find(said) == std::string::npos) continue;
    const std::string dirs = searched_folders(m);
    if (std::optional<std::string> path = find_undeclared(m.name, m.searched, source_path)) {
      hints += (hints.empty() ? "" : "\n") + undeclared_hint(*path, target);
      searched += "\n  \"" + m.name + "\" (included from " + m.included_from +
                  ") was not found among the inputs in: " + dirs;
    } else if (!stubbed) {
      notes += "\n  \"" + m.name + "\" (included from " + m.included_from +
               ") was not found in: " + dirs;
    }
  }
  if (!hints.empty()) {
    // No log: NVRTC's only echoes the stub's #error (or says it cannot
    // open the file), which says less than this.
    return CompileError(hints + searched, "", error.options());
  }
  if (!notes.empty()) return CompileError(error.what() + notes, error.log(), error.options());
  return error;
}

}  // namespace kcache::compiler
