#include "compiler/undeclared.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/paths.h"
#include "compiler/seal/seal.h"

namespace kcache::compiler {
namespace {

// The execroot a worker runs in: its working folder.
std::string worker_folder() {
  char cwd[PATH_MAX];
  return ::getcwd(cwd, sizeof cwd) ? std::string(cwd) : std::string();
}

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

void add_unopened_include(const std::string& log, const std::vector<std::string>& include_dirs,
                          std::vector<MissingInclude>* missing) {
  std::optional<AskedInclude> a = parse_cannot_open(log);
  if (!a || std::any_of(missing->begin(), missing->end(),
                        [&](const MissingInclude& m) { return m.name == a->name; })) {
    return;
  }
  MissingInclude m;
  m.name = a->name;
  m.included_from = a->includer + ":" + std::to_string(a->line);
  if (!a->angled) {
    m.searched.push_back(parent_folder(a->includer));
  }
  m.searched.insert(m.searched.end(), include_dirs.begin(), include_dirs.end());
  missing->push_back(std::move(m));
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

// Served under Bazel's worker (may_read: the action's declared inputs): the
// regular files among `paths` (absolute, as NVRTC named them) the action did
// not declare, as Bazel names inputs (relative to the execroot, the working
// folder; `..` folded), each once. A sandboxed build's folder lacks them, so
// NVRTC would answer otherwise there.
std::vector<std::string> undeclared_files(const MayRead& may_read,
                                          const std::vector<std::string>& paths) {
  const std::string cwd = worker_folder() + "/";
  std::vector<std::string> out;
  for (const std::string& path : paths) {
    const std::string folded = resolve_lexically("/", path);
    const std::string shown = folded.rfind(cwd, 0) == 0 ? folded.substr(cwd.size()) : folded;
    struct stat st;
    if (may_read(shown) || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
        std::find(out.begin(), out.end(), shown) != out.end()) {
      continue;
    }
    out.push_back(shown);
  }
  return out;
}

// The error for `files` (undeclared_files): the hint for each (undeclared.h),
// then where the scanner saw each included, if it did.
CompileError undeclared_error(const std::vector<std::string>& files,
                              const std::vector<MissingInclude>& scanned_missing,
                              const std::string& source_path, const std::string& target) {
  std::string hints, searched;
  for (const std::string& file : files) {
    hints += (hints.empty() ? "" : "\n") + undeclared_hint(file, target);
    for (const MissingInclude& m : scanned_missing) {
      if (find_undeclared(m.name, m.searched, source_path) != file) continue;
      searched += "\n  \"" + m.name + "\" (included from " + m.included_from +
                  ") was not found among the inputs in: " + searched_folders(m);
    }
  }
  return CompileError(hints + searched, "", {});
}

}  // namespace kcache::compiler
