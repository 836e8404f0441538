// The kernels (entry points) of a PTX module and their parameters, read from
// the `.entry` declarations: what `kcache bundle --format json` lists and
// what the header cuda_kernel generates declares, so host code names kernels
// and passes arguments checked at compile time (compiler/image/codegen.h).
//
// Grammar read (PTX ISA, "Kernel function declarations"; comments and
// whitespace between any two tokens):
//   entry  := linkage* ".entry" IDENT "(" [param ("," param)*] ")"
//   linkage:= ".visible" | ".weak" | ".extern"
//   param  := ".param" qual* TYPE qual* IDENT ["[" INT "]"]
//   qual   := ".align" INT | ".ptr" | ".global" | ".const" | ".local" | ".shared"
//   TYPE   := .b8 .u8 .s8 .b16 .u16 .s16 .f16 .bf16 .b32 .u32 .s32 .f32 .f16x2
//             .bf16x2 .b64 .u64 .s64 .f64 .b128
//   IDENT  := [A-Za-z_$%][A-Za-z0-9_$]*
// Every other token outside an entry's parameter list is skipped (bodies,
// `.func`, directives). A parameter's size is its type's times its count.
//
// A pure function of text, no I/O; fuzzed by fuzz/ptx_entries_fuzzer.cc.
// Bounds: over kMaxEntriesPtxBytes of input, kMaxEntries entries,
// kMaxEntryParams parameters in one entry, an identifier over
// kMaxEntryNameBytes or a parameter over kMaxEntryParamBytes: `ok` false with
// `why`, no entries.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kcache::compiler {

struct PtxParam {
  std::string name;      // "saxpy_param_0"
  std::string type;      // ".f32", ".b8" (of an array or struct)
  size_t size = 0;       // bytes: the type's times the array count
  size_t align = 0;      // .align, else the type's size
  bool pointer = false;  // the .ptr attribute: certainly a pointer (NVRTC never writes it)
};

struct PtxEntry {
  std::string name;  // as in the image: "saxpy", "_Z5scaleIfEvPT_i"
  std::vector<PtxParam> params;
};

struct PtxEntries {
  bool ok = true;
  std::string why;  // when !ok: what was not understood, and where
  std::vector<PtxEntry> entries;
};

constexpr size_t kMaxEntriesPtxBytes = size_t{256} << 20;
constexpr size_t kMaxEntries = 65536;
constexpr size_t kMaxEntryParams = 32768;  // 32,764 bytes of parameters at most (CUDA 12.1+)
constexpr size_t kMaxEntryNameBytes = 4096;
constexpr size_t kMaxEntryParamBytes = 32768;

PtxEntries ptx_entries(std::string_view ptx);

// The bytes of a PTX parameter type (".f32": 4), 0 for another word.
size_t ptx_type_size(std::string_view type);

// What a parameter's PTX type says of the C++ value passed for it. PTX gives
// its width and, for the .u, .s and .f types, whether its bits are an integer
// or a floating-point number; nothing finer. NVRTC declares int, unsigned and
// an enum alike .u32, a pointer and a 64-bit integer alike .u64 (the .ptr
// attribute is hand-written PTX's), and a struct, union or array as an
// `.align N .b8 name[size]` array whose members it does not say:
//   floating: .f16 .bf16 .f32 .f64 .f16x2 .bf16x2  never an integer, an enum
//             or a pointer (a class such as __half may hold its bits)
//   integer:  .u8-.u64 .s8-.s64                     never a floating-point
//             number (an integer, an enum, a pointer, a class)
//   bits:     .b8-.b128 and every array             any value of its size
enum class ParamKind { bits, integer, floating };
ParamKind ptx_param_kind(const PtxParam& param);

}  // namespace kcache::compiler
