// The "add it to hdrs" hint: an include a compile could not find that exists
// in the Bazel workspace but is not among the action's declared inputs.
//
// Under Bazel a KcacheCompile action sees only its declared inputs: in the
// sandbox nothing else is there, in the persistent worker may_read refuses the
// rest (cli/declared_inputs.h). Either way the scanner or NVRTC reports the
// header as not found, which is true but does not say what to fix. Here kcache
// looks for it where the action would have found it had it been declared:
// - relative to the working directory (the worker runs in the execroot; a
//   file there that was not read was refused);
// - in the real execroot behind the sandbox: Bazel links each input into the
//   sandbox as a symlink to <execroot>/<its path>, so the source's link target,
//   less the source's path, is the execroot;
// - in the workspace itself: Bazel 4 links into the execroot only the
//   packages the build loaded (`bazel build //mypkg:k` does not load devlib/),
//   so a header of another package may be in neither place above. The
//   source's real path (through the execroot's link to its package), less the
//   source's path, is the workspace root.
// Only relative folders are searched (the toolkit's are absolute and never
// undeclared). Nothing found read or keyed: this runs only on a failure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "compiler/includes.h"

namespace kcache::compiler {

// Where `name`, searched in `dirs` (as the failed search did, in order), lies in
// the workspace of the action compiling `source_path`: the execroot-relative
// path ("pkg/x.cuh"), or nullopt. `name` absolute: never found.
std::optional<std::string> find_undeclared(const std::string& name,
                                           const std::vector<std::string>& dirs,
                                           const std::string& source_path);

// "\"pkg/x.cuh\" exists in the workspace but is not an input of //pkg:k: add
// it to hdrs, or add the cc_library that has it to deps" (`target` empty:
// "of this compile").
std::string undeclared_hint(const std::string& path, const std::string& target);

// For each missing include whose "not found" stub NVRTC's log reports (served:
// whose "cannot open source file" it reports) and that find_undeclared finds:
// the hint, first, one line each, then what was searched; the log is dropped
// (it only echoes the stub's #error). Served, one found nowhere adds a line
// naming the folders searched to the message, the log kept. The error itself
// when there is neither.
CompileError with_undeclared_hints(const CompileError& error,
                                   const std::vector<MissingInclude>& missing, bool served,
                                   const std::string& source_path, const std::string& target);

// Served: the include NVRTC's `log` says it could not open, searched as
// NVRTC searched (quoted: its includer's folder, then `include_dirs`), added
// to `missing` unless the scanner saw it (a computed include it could not).
void add_unopened_include(const std::string& log, const std::vector<std::string>& include_dirs,
                          std::vector<MissingInclude>* missing);

// The folders `m` was searched in, as a message lists them ("a, b").
std::string searched_folders(const MissingInclude& m);

// Served under Bazel's worker (`may_read`: the action's declared inputs): the
// regular files among `paths` (absolute, as NVRTC named them) the action did
// not declare, relative to the execroot (the working folder), `..` folded,
// each once. A sandboxed build's folder lacks them.
std::vector<std::string> undeclared_files(const MayRead& may_read,
                                          const std::vector<std::string>& paths);

// The error for `files` (undeclared_files): the hint for each, then where
// the scanner saw each included, if it did.
CompileError undeclared_error(const std::vector<std::string>& files,
                              const std::vector<MissingInclude>& scanned_missing,
                              const std::string& source_path, const std::string& target);

}  // namespace kcache::compiler
