// An NVRTC program compiled through the cache: what the drop-in libnvrtc
// (nvrtc_shim/) does with the programs someone else's code builds through
// NVRTC's C API.
//
// The program's options are mapped onto the CompileOptions of `kcache
// compile` (program_options): -arch picks the one target, -I folders are
// passed as written and searched by NVRTC itself on the real file system,
// which the seal serves from hashed snapshots (issue 27: every file read is
// keyed by its bytes), -D and -U are keyed as -DX / -UX in the program's order (NVRTC
// applies them in order), -std= once, every other option is keyed and passed
// as written, in order. Each mapped option is taken in every spelling NVRTC
// 13 takes (the value glued, after '=', or as the next argument) and all
// spellings share one key (docs/NVRTC_SHIM.md). Headers the program hands in memory are keyed by name and bytes.
// compile_program() then runs Compiler::compile in program mode
// (CompileOptions::program): the same key, store and manifests, the serving
// seal, every answer NVRTC gives stored as one cache::ProgramRecord.
//
// What this cannot make exact is refused (ProgramOptions::unsupported) and the
// caller compiles with the real NVRTC instead: options that read or write
// files kcache does not key (-include, PCH, -time, -fdevice-time-trace), -dlto
// and -optix-ir (their output embeds the working directory), an -arch given
// twice or not at all (NVRTC's default target is not kcache's to guess), a
// second -std, a value kcache cannot spell back exactly as NVRTC read it.
//
// Known differences from NVRTC alone, documented in docs/NVRTC_SHIM.md: a
// computed include of a file in /proc, /sys, /etc or of a lib*.so* name is
// refused (NVRTC's own files are not served).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cache/format/entry.h"
#include "cache/format/key.h"
#include "cache/format/program_record.h"
#include "compiler/compiler.h"
#include "compiler/program_api.h"

namespace kcache::compiler {

struct ProgramOptions {
  CompileOptions options;   // valid when `unsupported` is empty
  std::string unsupported;  // the option kcache cannot compile exactly, and why
};

// Maps `nvrtc_options` (as the program passed them) onto kcache's options;
// the lean pass is off (a program may look any variable up by its own name),
// a caller may turn it on (the shim: KCACHE_SHIM_LEAN=1).
ProgramOptions program_options(const ProgramSource& program,
                               const std::vector<std::string>& nvrtc_options);

// Compiles `program` through `compiler`'s cache (thread-safe, as
// Compiler::compile). Throws what Compiler::compile throws (a file NVRTC
// opened that the seal cannot serve: a FIFO, a device, a folder, /proc), and
// Error for a failed compile that was not stored (unsealed, a time macro):
// the real NVRTC answers those instead. A compile NVRTC rejects, an include
// found nowhere included, is NVRTC's own answer and is stored.
//
// One entry for every folder: a program's folder (CuPy names each program
// by a new temporary folder) is keyed only where the answer does not depend
// on it. Its file name stays keyed: NVRTC writes it into the names of
// internal symbols (_ZN80_INTERNAL_00000000_49_<file>_cu_...; measured on
// CuPy's CCCL kernels). A program named with a folder whose own text,
// options and name expressions use no __FILE__, __BASE_FILE__, __FILE_NAME__
// or __builtin_FILE (nor its in-memory headers __BASE_FILE__) is looked up
// under the key of its file name in any folder first; on a miss NVRTC
// compiles it under its name and again, from the same input, under the same
// file name in another folder, of another length (other_program_name). Only
// where the two
// answers agree (result code, every output byte for byte, no output holding
// the name, and the logs equal once each names its program only in NVRTC's
// diagnostic places: "NAME(3): error", "in the compilation of "NAME"", "at
// line 3 of NAME") is the entry stored under the key of no name, with a
// placeholder in the log that a hit replaces with the asking program's name.
// Otherwise it is keyed by its name. A macro that pastes __FILE__ together, a
// header's __BASE_FILE__ or a __builtin_FILE() default argument all show as
// answers that differ. What this cannot see: a dependence on the name that
// two names of different lengths and characters answer alike.
ProgramResult compile_program(Compiler& compiler, const CompileOptions& options);

// The entry payload (an encoded ProgramRecord) to share across every name,
// or nothing when the answer names the program `name` (see above); and the
// reverse for a shared record. Exposed for tests.
std::optional<std::string> shared_record(const std::string& payload, const std::string& name);
std::string other_program_name(const std::string& name);
constexpr int kNameCheckDepth = 40;  // folders below the name check's first
std::string shared_program_name(const std::string& name);
bool same_answer_for_any_name(const cache::ProgramRecord& answer, const std::string& name,
                              const cache::ProgramRecord& other, const std::string& other_name);
void restore_name(cache::ProgramRecord& record, const std::string& name);

}  // namespace kcache::compiler
