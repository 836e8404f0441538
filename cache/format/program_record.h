// What one NVRTC program compile answered, stored as the payload of a cache
// entry (cache/format/entry.h) so a later process can answer every nvrtcGet* call of
// the same compile without NVRTC: the compile's result code, its log, and for
// each output kind what nvrtcGet<Kind>Size answered and, where that was
// success, the bytes nvrtcGet<Kind> copied. Lowered names travel in the
// entry itself. Used by the drop-in libnvrtc (nvrtc_shim/, compiler/program.h).
//
// Format (integers little-endian; str = u32 length + bytes):
//
//   record  ::= magic:"KCPROG\0\0"(8 bytes) version:u16 compile_result:u32 log:str
//               output{4}                 (PTX, CUBIN, LTO-IR, OptiX-IR, in that order)
//   output  ::= size_result:u32 bytes:str (bytes empty unless size_result is 0)
//
// compile_result and size_result are nvrtcResult values (0 to kMaxNvrtcResult);
// log and bytes are at most kMaxProgramOutputBytes each; nothing may follow.
// The entry's checksum covers the record; this parser still checks every field
// (records arrive from remotes), and fails with CorruptError naming it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kcache::cache {

// Bump me when the bytes written for the same record change (readers refuse
// newer versions; the key of a program compile names this version too).
constexpr uint16_t kProgramRecordVersion = 1;
constexpr std::string_view kProgramRecordMagic{"KCPROG\0\0", 8};
// nvrtcResult values the cache must tell apart (cache/ includes no CUDA header).
constexpr uint32_t kNvrtcSuccess = 0;
constexpr uint32_t kNvrtcErrorCompilation = 6;
// NVRTC 13's largest nvrtcResult (NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED).
constexpr uint32_t kMaxNvrtcResult = 17;
// A cubin of a large CUTLASS kernel is tens of MiB; 1 GiB bounds a lie.
constexpr uint32_t kMaxProgramOutputBytes = 1u << 30;

enum class ProgramOutput { ptx = 0, cubin = 1, ltoir = 2, optixir = 3 };
constexpr size_t kProgramOutputs = 4;

struct ProgramRecord {
  struct Output {
    uint32_t size_result = 0;  // what nvrtcGet<Kind>Size answered
    std::string bytes;         // what nvrtcGet<Kind> copied (NUL included for PTX)
    friend bool operator==(const Output& a, const Output& b) {
      return a.size_result == b.size_result && a.bytes == b.bytes;
    }
  };
  uint32_t compile_result = 0;  // nvrtcCompileProgram's answer
  std::string log;              // nvrtcGetProgramLog's text, without the trailing NUL
  std::array<Output, kProgramOutputs> outputs;

  Output& output(ProgramOutput kind) { return outputs[static_cast<size_t>(kind)]; }
  const Output& output(ProgramOutput kind) const { return outputs[static_cast<size_t>(kind)]; }

  // Throws InvalidArgument if a field is out of the bounds above.
  std::string encode() const;
  // Throws CorruptError naming the field and `what`, or IncompatibleVersionError.
  static ProgramRecord decode(std::string_view bytes, const std::string& what = "program record");

  friend bool operator==(const ProgramRecord& a, const ProgramRecord& b) {
    return a.compile_result == b.compile_result && a.log == b.log && a.outputs == b.outputs;
  }
};

}  // namespace kcache::cache
