// C++ that embeds a bundle in a binary: what the Bazel rule compiles and links.
//
// The .cc defines the bundle's bytes as an alignas(16) array (so every image
// in it is aligned for the driver), registers it with
// kcache::bundle::register_embedded at static initialization, and defines the
// accessor the .h declares. It depends on //bundle:embedded only. A library
// holding it must be linked whole (cc_library alwayslink = True), or the
// linker drops the registration of a bundle nobody names.
//
// The bytes are written as one string literal: gcc reads a literal of several
// MB in well under a second, and an initializer list of numbers of the same
// size many times slower (see docs/PERFORMANCE.md).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/image/ptx_entries.h"

namespace kcache::compiler {

// A bundle's kernels as host code names them.
struct KernelInfo {
  std::string symbol;           // the entry's name in the image
  std::string name_expression;  // the name expression that lowered to it, if one did
  std::vector<PtxParam> params;
};

struct KernelList {
  bool known = false;  // false: no PTX to read them from, or PTX not understood (why)
  std::string why;
  std::vector<KernelInfo> kernels;
};

// The kernels of `ptx` (the bundle's PTX image; empty: it has none), each
// matched with the name expression in `lowered` (expression, lowered name)
// that names it.
KernelList kernel_list(std::string_view ptx,
                       const std::vector<std::pair<std::string, std::string>>& lowered);

struct EmbedInfo {
  std::string symbol;                         // "saxpy_bundle" or "my::ns::saxpy_bundle"
  std::string source_name;                    // for the comment at the top
  std::vector<std::string> archs;             // for the comment
  std::vector<std::string> name_expressions;  // for the comment
  // Declared in the header with their parameter sizes, so host code names
  // them (a typo does not compile) and launch() checks arguments at compile
  // time (runtime/module.h, Kernel).
  KernelList kernels;
};

// Throws InvalidArgument unless `symbol` is identifiers joined by "::".
void check_symbol(const std::string& symbol);

// The .cc defining and registering the bundle `bytes` under info.symbol.
std::string generate_source(std::string_view bytes, const EmbedInfo& info);

// The .h declaring `const kcache::bundle::EmbeddedBundle& <symbol>();` and,
// in namespace <symbol>_kernels, one constant per kernel of info.kernels:
//   inline constexpr entry_types::saxpy saxpy{};
// whose type says the kernel's name and its parameters' PTX types
// (param_types), and checks launch() arguments with a static_assert naming
// the parameter (its index and PTX name; the C++ name is not in the PTX):
//   - the count, and each argument's size;
//   - its kind, where the PTX type rules one out (ptx_param_kind): an
//     integer, enum or pointer for a .f16/.bf16/.f32/.f64 parameter, a
//     floating-point number for a .u/.s one. Nothing else is rejected, since
//     the PTX cannot tell it wrong: int, unsigned and an enum share .u32, a
//     pointer and a 64-bit integer .u64 (so a CUdeviceptr passes for a
//     pointer), a .b type or a .b8 array (a struct) takes any value of its
//     size, and a class type (a __half for a .f16) always passes.
// The kernel's C++ name is the symbol for an extern "C" kernel, the name
// expression made an identifier ("scale<float>" -> scale_float), else the
// function's name read from its mangling; a repeated one gets _2, _3, ...
std::string kernel_identifier(const KernelInfo& kernel);

// What a parameter's PTX type tells of its argument, for the header's
// comments and messages: "a float", "a pointer or a 64-bit integer",
// "a 32-bit integer or enum", "12 bytes: a struct, union or array".
std::string describe_param(const PtxParam& param);

// The .h declaring the accessor and the kernels (above).
std::string generate_header(const EmbedInfo& info);

// `bytes` as the body of a C++ string literal (without the quotes), escaped
// so any compiler in any -std mode reads back exactly `bytes`.
std::string escape_for_literal(std::string_view bytes);

}  // namespace kcache::compiler
