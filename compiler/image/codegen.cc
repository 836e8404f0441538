#include "compiler/image/codegen.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "common/error.h"

namespace kcache::compiler {
namespace {

// Escapes by byte: printable ASCII as itself, except `"`, `\` and `?` (no
// trigraph can form, in any -std); everything else as a three-digit octal
// escape, which a following digit cannot extend (hex escapes could be).
struct EscapeTable {
  std::array<std::array<char, 4>, 256> text;
  std::array<uint8_t, 256> size;
  EscapeTable() {
    for (int c = 0; c < 256; ++c) {
      bool plain = c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '?';
      if (plain) {
        text[c] = {static_cast<char>(c), 0, 0, 0};
        size[c] = 1;
      } else if (c == '"' || c == '\\' || c == '?') {
        text[c] = {'\\', static_cast<char>(c), 0, 0};
        size[c] = 2;
      } else {
        text[c] = {'\\', static_cast<char>('0' + (c >> 6)), static_cast<char>('0' + ((c >> 3) & 7)),
                   static_cast<char>('0' + (c & 7))};
        size[c] = 4;
      }
    }
  }
};

const EscapeTable& table() {
  static const EscapeTable t;
  return t;
}

std::vector<std::string> split_symbol(const std::string& symbol) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t end = symbol.find("::", start);
    parts.push_back(symbol.substr(start, end == std::string::npos ? end : end - start));
    if (end == std::string::npos) return parts;
    start = end + 2;
  }
}

std::string comment_line(const std::string& text) {
  std::string out;
  for (char c : text) out += (c == '\n' || c == '\r') ? ' ' : c;
  return out;
}

std::string summary(const EmbedInfo& info) {
  std::string s = "// Compiled by `kcache compile` from " + comment_line(info.source_name) + " for";
  for (const std::string& a : info.archs) s += " " + a;
  s += ".\n";
  if (!info.name_expressions.empty()) {
    s += "// Name expressions:";
    for (const std::string& e : info.name_expressions) s += " " + comment_line(e);
    s += "\n";
  }
  return s + "// Generated file: do not edit.\n";
}

// "namespace a {\nnamespace b {\n" and its closing, for "a::b::name".
std::pair<std::string, std::string> namespaces(const std::vector<std::string>& parts) {
  std::string open, close;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    open += "namespace " + parts[i] + " {\n";
    close = "}  // namespace " + parts[i] + "\n" + close;
  }
  return {open, close};
}

// `text` as an identifier: runs of other characters become one '_', none at
// either end ("scale<float>" -> "scale_float", "ns::k<1, 2>" -> "ns_k_1_2").
std::string identifier_of(std::string_view text) {
  std::string out;
  for (char c : text) {
    bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (word) {
      out += c;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

// The names of an Itanium mangled function's nested name, joined by '_'
// ("_Z5saxpyfPKfPfi" -> "saxpy", "_ZN2ns4kernEPf" -> "ns_kern"); empty when
// it does not start so.
std::string mangled_function_name(std::string_view symbol) {
  if (symbol.rfind("_Z", 0) != 0) return {};
  size_t at = 2;
  const bool nested = at < symbol.size() && symbol[at] == 'N';
  if (nested) ++at;
  std::string out;
  // One name, or a nested name's until its E (what follows is parameters).
  while (at < symbol.size() && symbol[at] >= '0' && symbol[at] <= '9' && (nested || out.empty())) {
    size_t len = 0;
    while (at < symbol.size() && symbol[at] >= '0' && symbol[at] <= '9' && len < 100000) {
      len = len * 10 + static_cast<size_t>(symbol[at++] - '0');
    }
    if (len == 0 || len > symbol.size() - at) return {};
    out += (out.empty() ? "" : "_") + std::string(symbol.substr(at, len));
    at += len;
  }
  return identifier_of(out);
}

std::string string_literal(std::string_view text) { return "\"" + escape_for_literal(text) + "\""; }

// "parameter 1 (saxpy_param_1, .u64)", for the static_assert messages.
std::string param_label(size_t i, const PtxParam& p) {
  std::string type = p.type;
  if (ptx_type_size(p.type) != 0 && p.size != ptx_type_size(p.type)) {
    type += "[" + std::to_string(p.size / ptx_type_size(p.type)) + "]";
  }
  return "parameter " + std::to_string(i) + " (" + p.name + ", " + type + ")";
}

std::string size_assert(const std::string& shown, size_t i, const PtxParam& p) {
  return "      static_assert(sizeof(std::tuple_element_t<" + std::to_string(i) +
         ", A>) == " + std::to_string(p.size) + ", " +
         string_literal("kcache: kernel " + shown + ", " + param_label(i, p) + " is " +
                        std::to_string(p.size) + (p.size == 1 ? " byte" : " bytes") +
                        ": argument " + std::to_string(i + 1) +
                        " has another size (pass the parameter's exact type, e.g. float "
                        "not double)") +
         ");\n";
}

// The kind check of one parameter, only where its PTX type rules a kind out
// and only once the sizes agree (a size mismatch has its own message).
std::string kind_assert(const std::string& shown, size_t i, const PtxParam& p) {
  const ParamKind kind = ptx_param_kind(p);
  if (kind == ParamKind::bits) return {};
  const bool floating = kind == ParamKind::floating;
  const std::string arg = "std::tuple_element_t<" + std::to_string(i) + ", A>";
  const std::string what =
      floating
          ? "takes a floating-point number (" + describe_param(p) + "): argument " +
                std::to_string(i + 1) +
                " is an integer, an enum or a pointer (pass a float or double, e.g. "
                "2.0f, not 2)"
          : std::string(p.size == 8 ? "takes an integer or a pointer (" : "takes an integer (") +
                describe_param(p) + "): argument " + std::to_string(i + 1) +
                " is a floating-point number (check the order of the arguments; convert "
                "one on purpose, e.g. static_cast<int>(x))";
  return "      static_assert(sizeof(" + arg + ") != " + std::to_string(p.size) + " || !" +
         (floating ? "integer_or_pointer<" : "floating_point<") + arg + ">, " +
         string_literal("kcache: kernel " + shown + ", " + param_label(i, p) + " " + what) + ");\n";
}

// One kernel's type: its name for Module::function, its parameters' PTX
// types, and the compile-time check of launch()'s arguments.
std::string entry_type(const std::string& identifier, const KernelInfo& k) {
  const std::string shown = comment_line(k.name_expression.empty() ? k.symbol : k.name_expression);
  const size_t n = k.params.size();
  std::string sizes, types, listing;
  for (size_t i = 0; i < n; ++i) {
    const PtxParam& p = k.params[i];
    sizes += (i ? ", " : "") + std::to_string(p.size);
    types += std::string(i ? ", " : "") + "\"" + p.type + (p.pointer ? " .ptr" : "") + "\"";
    listing += "  //   " + std::to_string(i) + " " + p.name + ": " + p.type +
               (p.pointer ? " .ptr" : "") + ", " + describe_param(p) + "\n";
  }
  std::string out = "struct " + identifier + " {\n" +
                    "  using kcache_entry_point = void;\n"
                    "  // " + comment_line(k.symbol) + " in the image.\n" +
                    "  static constexpr const char* name() { return " +
                    string_literal(k.name_expression.empty() ? k.symbol : k.name_expression) +
                    "; }\n"
                    "  static constexpr std::size_t param_count = " + std::to_string(n) + ";\n";
  if (n) {
    out += "  static constexpr std::size_t param_sizes[] = {" + sizes + "};\n" +
           "  // Its parameters as the PTX declares them, and what that tells of the\n"
           "  // argument (a .b8 array is a struct, union or array; .u64 a pointer or a\n"
           "  // 64-bit integer; .u32 an int, unsigned or enum):\n" +
           listing + "  static constexpr const char* param_types[] = {" + types + "};\n";
  }
  out += "  template <typename... Args>\n  static constexpr bool check() {\n";
  out += "    static_assert(sizeof...(Args) == " + std::to_string(n) + ", " +
         string_literal("kcache: kernel " + shown + " takes " + std::to_string(n) +
                        (n == 1 ? " argument" : " arguments") +
                        (n ? " (" + sizes + " bytes)" : std::string()) +
                        ": launch() was given another number") +
         ");\n";
  if (n) {
    out += "    if constexpr (sizeof...(Args) == " + std::to_string(n) + ") {\n" +
           "      using A = std::tuple<Args...>;\n";
    for (size_t i = 0; i < n; ++i) {
      out += size_assert(shown, i, k.params[i]) + kind_assert(shown, i, k.params[i]);
    }
    out += "    }\n";
  }
  out += "    return true;\n  }\n};\n";
  return out;
}

// The argument kinds a PTX type can rule out (ptx_entries.h, ParamKind), as
// the generated checks name them. An argument is deduced without const or
// reference; the traits see through volatile.
constexpr const char* kKindTraits =
    "// The argument kinds a parameter's PTX type rules out: an integer, an enum\n"
    "// or a pointer for a .f parameter, a floating-point number for a .u or .s one.\n"
    "template <typename T>\n"
    "inline constexpr bool integer_or_pointer =\n"
    "    std::is_integral_v<T> || std::is_enum_v<T> || std::is_pointer_v<T> ||\n"
    "    std::is_member_pointer_v<T> || std::is_null_pointer_v<T>;\n"
    "template <typename T>\n"
    "inline constexpr bool floating_point = std::is_floating_point_v<T>;\n\n";

}  // namespace

KernelList kernel_list(std::string_view ptx,
                       const std::vector<std::pair<std::string, std::string>>& lowered) {
  KernelList out;
  if (ptx.empty()) {
    out.why = "the bundle holds no PTX (ptx = \"none\"), which is where they are read from";
    return out;
  }
  PtxEntries entries = ptx_entries(ptx);
  if (!entries.ok) {
    out.why = "its PTX was not understood: " + entries.why;
    return out;
  }
  out.known = true;
  for (PtxEntry& e : entries.entries) {
    KernelInfo k{std::move(e.name), "", std::move(e.params)};
    for (const auto& [expression, name] : lowered) {
      if (name == k.symbol) {
        k.name_expression = expression;
        break;
      }
    }
    out.kernels.push_back(std::move(k));
  }
  return out;
}

std::string describe_param(const PtxParam& p) {
  const std::string t = p.type;
  switch (ptx_param_kind(p)) {
    case ParamKind::floating:
      if (t == ".f32") return "a float";
      if (t == ".f64") return "a double";
      if (t == ".f16x2" || t == ".bf16x2") return "two 16-bit floating-point numbers";
      return "a 16-bit floating-point number";
    case ParamKind::integer:
      if (p.pointer) return "a pointer";
      if (p.size == 8) return "a pointer or a 64-bit integer";
      if (p.size == 4) return "a 32-bit integer or enum";
      if (p.size == 1) return "a bool, char or 8-bit integer";
      return "a 16-bit integer";
    case ParamKind::bits:
      break;
  }
  if (p.size != ptx_type_size(t)) {
    return std::to_string(p.size) + " bytes: a struct, union or array";
  }
  return std::to_string(p.size * 8) + " bits of any kind";
}

std::string kernel_identifier(const KernelInfo& k) {
  std::string id = !k.name_expression.empty() ? identifier_of(k.name_expression)
                                               : mangled_function_name(k.symbol);
  if (id.empty()) id = identifier_of(k.symbol);
  if (id.empty() || (id[0] >= '0' && id[0] <= '9')) id = "kernel_" + id;
  return id;
}

void check_symbol(const std::string& symbol) {
  for (const std::string& part : split_symbol(symbol)) {
    bool ok = !part.empty() && !(part[0] >= '0' && part[0] <= '9');
    for (char c : part) {
      ok = ok &&
           ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
    }
    if (!ok) {
      throw InvalidArgument("--symbol \"" + symbol +
                            "\" is not a C++ name: use identifiers joined by ::, e.g. "
                            "my_project::saxpy_bundle");
    }
  }
}

std::string escape_for_literal(std::string_view bytes) {
  const EscapeTable& t = table();
  std::string out(bytes.size() * 4, '\0');
  char* p = &out[0];
  for (unsigned char c : bytes) {
    std::memcpy(p, t.text[c].data(), 4);
    p += t.size[c];
  }
  out.resize(static_cast<size_t>(p - out.data()));
  return out;
}

std::string generate_source(std::string_view bytes, const EmbedInfo& info) {
  check_symbol(info.symbol);
  std::vector<std::string> parts = split_symbol(info.symbol);
  auto [open, close] = namespaces(parts);
  std::string size = std::to_string(bytes.size());

  std::string out = summary(info);
  out +=
      "#include <cstddef>\n\n"
      "#include \"bundle/embedded.h\"\n\n"
      "#if defined(__GNUC__)\n"
      "#pragma GCC diagnostic ignored \"-Woverlength-strings\"\n"
      "#endif\n\n"
      "namespace {\n\n"
      "// The .kcb bytes; the alignment makes every image in them 16-byte aligned.\n"
      "alignas(16) const unsigned char kBundle[" +
      size + " + 1] =\n";
  // One literal split over lines of ~100 columns (the + 1 above is its NUL).
  const EscapeTable& t = table();
  out.reserve(out.size() + bytes.size() * 4 + bytes.size() / 24 + 1024);
  constexpr size_t kColumns = 100;
  size_t line = 0;
  out += '"';
  char buf[4];
  for (unsigned char c : bytes) {
    if (line >= kColumns) {
      out += "\"\n\"";
      line = 0;
    }
    std::memcpy(buf, t.text[c].data(), 4);
    out.append(buf, t.size[c]);
    line += t.size[c];
  }
  out += "\";\n\n";
  out +=
      "const kcache::bundle::EmbeddedBundle kEmbedded{\"" + info.symbol + "\", kBundle, " + size +
      "};\n"
      "[[maybe_unused]] const bool kRegistered = kcache::bundle::register_embedded(kEmbedded);\n\n"
      "}  // namespace\n\n";
  out += open + "const kcache::bundle::EmbeddedBundle& " + parts.back() +
         "() { return kEmbedded; }\n" + close;
  return out;
}

std::string generate_header(const EmbedInfo& info) {
  check_symbol(info.symbol);
  std::vector<std::string> parts = split_symbol(info.symbol);
  auto [open, close] = namespaces(parts);
  const std::string kernels_ns = parts.back() + "_kernels";
  std::string kernels;
  if (!info.kernels.known) {
    kernels = "\n// Its kernels are not declared here: " + comment_line(info.kernels.why) +
              ".\n// Look them up by name (Module::function(\"name\")).\n";
  } else {
    std::string types, constants;
    // The kind traits (kKindTraits) share the namespace: a kernel of their name gets _2.
    std::vector<std::string> taken = {"integer_or_pointer", "floating_point"};
    for (const KernelInfo& k : info.kernels.kernels) {
      std::string id = kernel_identifier(k);
      std::string unique = id;
      for (int n = 2; std::find(taken.begin(), taken.end(), unique) != taken.end(); ++n) {
        unique = id + "_" + std::to_string(n);
      }
      taken.push_back(unique);
      types += entry_type(unique, k);
      constants += "inline constexpr entry_types::" + unique + " " + unique + "{};\n";
    }
    kernels = "\n// Its kernels, from the .entry declarations of its PTX. Name them through\n"
              "// these (a misspelt one does not compile); kcache::runtime::launch checks\n"
              "// the number, size and kind of the arguments at compile time:\n"
              "//   kcache::runtime::Kernel k = module.function(" + kernels_ns + "::<kernel>);\n"
              "//   kcache::runtime::launch(stream, config, k, args...);\n"
              "namespace " + kernels_ns + " {\nnamespace entry_types {\n\n" + kKindTraits + types +
              "\n}  // namespace entry_types\n\n" + constants + "}  // namespace " + kernels_ns +
              "\n";
  }
  return summary(info) +
         "#pragma once\n\n"
         "#include <cstddef>\n"
         "#include <tuple>\n"
         "#include <type_traits>\n\n"
         "#include \"bundle/embedded.h\"\n\n" +
         open +
         "// The kernel bundle (.kcb bytes, static storage), registered at static\n"
         "// initialization; hand it to kcache::bundle::parse or the runtime.\n"
         "const kcache::bundle::EmbeddedBundle& " +
         parts.back() + "();\n" + kernels + close;
}

}  // namespace kcache::compiler
