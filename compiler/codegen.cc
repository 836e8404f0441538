#include "compiler/codegen.h"

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

}  // namespace

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
  return summary(info) +
         "#pragma once\n\n"
         "#include \"bundle/embedded.h\"\n\n" +
         open +
         "// The kernel bundle (.kcb bytes, static storage), registered at static\n"
         "// initialization; hand it to kcache::bundle::parse or the runtime.\n"
         "const kcache::bundle::EmbeddedBundle& " +
         parts.back() + "();\n" + close;
}

}  // namespace kcache::compiler
