// What the drop-in libnvrtc's host needs of an NVRTC program's compile
// through the cache (program.h), with nothing of the store: the program as
// NVRTC's C API built it, the mapping of its options (the host refuses what
// kcache cannot make exact before any round trip) and the result the compile
// process answers. The host links this, never the compiler or the store
// (libnvrtc.so.13 needs no SQLite: tests/nvrtc_shim/shim_links_no_store_test).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/format/entry.h"
#include "cache/format/program_record.h"
#include "common/hash.h"

namespace kcache::compiler {

// A program as nvrtcCreateProgram and nvrtcAddNameExpression built it.
struct ProgramSource {
  std::string source;
  std::string name;                    // as given; empty for NULL or ""
  std::vector<cache::Header> headers;  // handed in memory, in the order given
  std::vector<std::string> name_expressions;
};

// NVRTC's name for a program given no name (nvrtc.h: NULL or "").
constexpr const char kDefaultProgramName[] = "default_program";

// A program's options as kcache maps them (program.h says how): the fields
// of CompileOptions they fill, or why kcache cannot compile them exactly.
struct MappedProgramOptions {
  std::vector<std::string> archs;         // one sm_XX, or none with ptx_arch
  std::string ptx_arch;                   // compute_XX
  std::vector<std::string> include_dirs;  // as written, in order
  std::vector<std::string> macros;        // "-DX[=V]" / "-UX", in order
  std::string std;                        // -std='s value, or empty
  std::vector<std::string> nvrtc_options;  // every other option, as written, in order
  std::string unsupported;  // the option kcache cannot compile exactly, and why
};

MappedProgramOptions map_program_options(const std::vector<std::string>& nvrtc_options);

struct ProgramResult {
  cache::ProgramRecord record;
  std::vector<cache::LoweredName> lowered_names;
  bool hit = false;
  // The entry is one for every program name (program.h); `name_dependent`:
  // it could have been, but the second compile under another name answered
  // otherwise.
  bool any_name = false;
  bool name_dependent = false;
  Hash128 key;             // the entry's key
  std::string not_stored;  // a miss that was not stored: why
  std::string miss_reason;  // a miss: why (TargetResult::miss_reason)
  uint32_t compile_ms = 0;  // NVRTC's time: now on a miss, when stored on a hit (saved)
};

}  // namespace kcache::compiler
