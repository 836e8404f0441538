// The files a Bazel action declared (WorkRequest.inputs), which the persistent
// worker lets that action's compile read: what a sandboxed action would see.
//
// Why: a sandboxed action runs in a folder holding only its declared inputs,
// so a header missing from `hdrs` is not found there and the build fails. The
// worker runs in the real execroot, where every file of the workspace is
// reachable; without this, the same kernel would compile under the worker and
// fail sandboxed, and a cached result could depend on an undeclared file.
//
// Paths are compared lexically (no symlinks followed, nothing touches the
// disk but the refusal note): the execroot is a forest of symlinks into the
// workspace, and Bazel names inputs by their execroot-relative path.
#pragma once

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "compiler/includes.h"

namespace kcache::cli {

// `path` with "." components, repeated slashes and a trailing slash removed,
// and each ".." taking away the component before it: "a//b/./c/../d" is
// "a/b/d". A relative path stays relative ("" and "." give "."; a ".." with
// nothing left before it is kept: "../x"); an absolute one stays absolute
// ("/.." is "/"). Symlinks are not looked at.
std::string normalize_path(std::string_view path);

class DeclaredInputs {
 public:
  // `paths`: as Bazel sends them (execroot-relative; an absolute one under
  // the execroot is taken relative to it); `execroot`: the absolute folder
  // those are relative to (the worker's working directory).
  DeclaredInputs(const std::vector<std::string>& paths, const std::string& execroot);

  // Whether `path` (relative to the execroot, or absolute) is declared, or
  // lies in a declared folder (a source folder given as an input). An
  // absolute path under the execroot is taken relative to it. An absolute
  // path outside the execroot is readable, as in Bazel's sandboxes, which hide
  // the execroot's undeclared files and not the rest of the machine; a
  // relative one climbing out of it ("../x") is not.
  bool contains(std::string_view path) const;

  // A compiler::MayRead that allows what contains() does. It also notes each
  // path it refuses that exists as a file (see refused()). Thread-safe; this
  // object must outlive it.
  compiler::MayRead may_read() const;

  // The existing files may_read() refused, sorted: headers the kernel
  // includes that are missing from the action's inputs.
  std::vector<std::string> refused() const;

 private:
  // `path` normalized, relative to the execroot if it is an absolute path
  // under it; nullopt for an absolute path elsewhere.
  std::optional<std::string> relative(std::string_view path) const;

  std::string execroot_;  // normalized, absolute
  std::unordered_set<std::string> paths_;
  mutable std::mutex mutex_;
  mutable std::set<std::string> refused_;
};

}  // namespace kcache::cli
