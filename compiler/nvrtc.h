// NVRTC, opened with dlopen (jitify2's way): one table of function pointers,
// filled once per library path, and an error that names the missing library or
// symbol. kcache links no NVRTC, so a cache hit never loads it.
//
// Thread safety: Nvrtc::open() and every method may be called from any number
// of threads at once (NVRTC compiles separate programs concurrently).
#pragma once

#include <string>
#include <vector>

#include "cache/entry.h"

namespace kcache::compiler {

struct NvrtcHeader {
  std::string name;  // matched by NVRTC against the #include spelling, exactly
  std::string content;
};

struct NvrtcInput {
  std::string source_name;  // what NVRTC names the source in its log
  std::string source;
  std::vector<NvrtcHeader> headers;  // handed to NVRTC in memory
  std::vector<std::string> options;  // complete, "-arch=..." included
  std::vector<std::string> name_expressions;
  bool want_cubin = true;  // else PTX
  bool want_ptx = false;   // a cubin's PTX too, in NvrtcOutput::ptx (lean images)
};

struct NvrtcOutput {
  std::string image;  // cubin bytes or PTX text (without a trailing NUL)
  std::string log;    // warnings, if any
  std::string ptx;    // with want_ptx: the PTX of the cubin (no trailing NUL)
  std::vector<cache::LoweredName> lowered_names;  // in the order of name_expressions
  double ms = 0;                                  // wall time of nvrtcCompileProgram
};

class Nvrtc {
 public:
  // Loads the library at `path` once per process and resolves every symbol
  // kcache needs. Throws NotFound naming the library and dlerror() if it cannot
  // be loaded, or the missing symbol and the library if it is too old.
  static const Nvrtc& open(const std::string& path);

  const std::string& path() const { return path_; }
  // nvrtcVersion(), e.g. {13, 0}.
  std::pair<int, int> version() const;
  // nvrtcGetSupportedArchs(), e.g. {75, 80, 86, ..., 120}.
  std::vector<int> supported_archs() const;

  // Compiles one program. Throws CompileError carrying NVRTC's log exactly as
  // written and the options; Error for an NVRTC failure that is not a compile
  // error (out of memory, a bad option).
  NvrtcOutput compile(const NvrtcInput& input) const;

  struct Api;  // the function table, defined in nvrtc.cc

 private:
  explicit Nvrtc(std::string path);
  std::string path_;
  const Api* api_;
};

}  // namespace kcache::compiler
