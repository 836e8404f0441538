#include "common/safe_path.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "common/error.h"

namespace kcache {
namespace {

// NAME_MAX on Linux and macOS.
constexpr size_t kMaxNameBytes = 255;

}  // namespace

size_t find_control_character(std::string_view text) {
  // Eight bytes at a time while no byte of the word is below 0x20 or is
  // 0x7f (the classic "has a byte less than n" test, exact as a yes or no
  // for n up to 0x80): a lookup record's ~1,500 paths are checked at every
  // hit. The word that holds one is looked at byte by byte.
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHighs = 0x8080808080808080ull;
  size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, text.data() + i, sizeof w);
    const uint64_t del = w ^ (kOnes * 0x7f);
    if ((((w - kOnes * 0x20) & ~w) | ((del - kOnes) & ~del)) & kHighs) break;
  }
  for (; i < text.size(); ++i) {
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
