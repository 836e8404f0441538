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
#include <vector>

namespace kcache::compiler {

struct EmbedInfo {
  std::string symbol;                         // "saxpy_bundle" or "my::ns::saxpy_bundle"
  std::string source_name;                    // for the comment at the top
  std::vector<std::string> archs;             // for the comment
  std::vector<std::string> name_expressions;  // for the comment
};

// Throws InvalidArgument unless `symbol` is identifiers joined by "::".
void check_symbol(const std::string& symbol);

// The .cc defining and registering the bundle `bytes` under info.symbol.
std::string generate_source(std::string_view bytes, const EmbedInfo& info);

// The .h declaring `const kcache::bundle::EmbeddedBundle& <symbol>();`.
std::string generate_header(const EmbedInfo& info);

// `bytes` as the body of a C++ string literal (without the quotes), escaped
// so any compiler in any -std mode reads back exactly `bytes`.
std::string escape_for_literal(std::string_view bytes);

}  // namespace kcache::compiler
