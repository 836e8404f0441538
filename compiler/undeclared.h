// The "add it to hdrs" hint: an include a compile could not find that exists
// in the Bazel workspace but is not among the action's declared inputs.
//
// Under Bazel a KcacheCompile action sees only its declared inputs: in the
// sandbox nothing else is there, in the persistent worker may_read refuses the
// rest (cli/declared_inputs.h). Either way the scanner or NVRTC reports the
// header as not found, which is true but does not say what to fix. Here kcache
// looks for it where the action would have found it had it been declared:
// - relative to the working directory (the worker runs in the execroot, where
//   every workspace file is; a file there that was not read was refused);
// - in the real execroot behind the sandbox: Bazel links each input into the
//   sandbox as a symlink to <execroot>/<its path>, so the source's link target,
//   less the source's path, is the execroot.
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

// "; \"x.cuh\" exists at pkg/x.cuh but is not among this action's inputs: add
// it to the cuda_kernel's hdrs (or deps)"
std::string undeclared_hint(const std::string& name, const std::string& path);

// `error` with a hint appended to its message (not to NVRTC's log, which the
// CLI prints too, so the hint appears once) for each missing include whose
// "not found" stub NVRTC's log reports and that find_undeclared finds. The
// error itself when there is none.
CompileError with_undeclared_hints(const CompileError& error,
                                   const std::vector<MissingInclude>& missing,
                                   const std::string& source_path);

}  // namespace kcache::compiler
