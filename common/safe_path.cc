#include "common/safe_path.h"

#include <cstdio>

#include "common/error.h"

namespace kcache {
namespace {

// NAME_MAX on Linux and macOS.
constexpr size_t kMaxNameBytes = 255;

}  // namespace

size_t find_control_character(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) return i;
  }
  return std::string_view::npos;
}

bool is_plain_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes || name == "." || name == "..") return false;
  if (name.find('/') != std::string_view::npos) return false;
  return find_control_character(name) == std::string_view::npos;  // NUL included
}

std::string join_plain_name(const std::string& dir, std::string_view name,
                            const std::string& what) {
  if (!is_plain_name(name)) {
    throw InvalidArgument(what + " \"" + escape_for_message(name) +
                          "\" is not a plain file name (empty, \".\", \"..\", a \"/\", a control "
                          "character or too long): refusing to write outside " +
                          dir);
  }
  return dir + "/" + std::string(name);
}

std::string escape_for_message(std::string_view text, size_t max) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < max; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > max) out += "...";
  return out;
}

}  // namespace kcache
