#include "compiler/time_macros.h"

#include <cstdio>
#include <cstring>

namespace kcache::compiler {
namespace {

bool is_id(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}

// The first `word` in `text` at or after `from` (memmem: the hit path pays
// for this over every handed byte), or npos.
size_t find(std::string_view text, std::string_view word, size_t from) {
  if (from >= text.size()) return std::string_view::npos;
  const void* p = ::memmem(text.data() + from, text.size() - from, word.data(), word.size());
  return p ? static_cast<size_t>(static_cast<const char*>(p) - text.data()) : std::string_view::npos;
}

// `word` at `at` with no identifier character on either side.
bool whole_identifier(std::string_view text, size_t at, std::string_view word) {
  return text.compare(at, word.size(), word) == 0 && (at == 0 || !is_id(text[at - 1])) &&
         (at + word.size() == text.size() || !is_id(text[at + word.size()]));
}

}  // namespace

bool uses_time_macros(std::string_view text) {
  // One search finds both: "__TIME" starts __TIME__ and __TIMESTAMP__.
  for (size_t at = 0; (at = find(text, "__TIME", at)) != std::string_view::npos; ++at) {
    if (whole_identifier(text, at, "__TIME__") || whole_identifier(text, at, "__TIMESTAMP__")) {
      return true;
    }
  }
  return false;
}

bool uses_date_macro(std::string_view text) {
  for (size_t at = 0; (at = find(text, "__DATE__", at)) != std::string_view::npos; ++at) {
    if (whole_identifier(text, at, "__DATE__")) return true;
  }
  return false;
}
std::mutex& local_time_mutex() {
  static std::mutex m;  // constant-initialized: no guard
  return m;
}

std::string date_macro_value(std::time_t when) {
  static const char* const kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::tm tm{};
  {
    std::lock_guard<std::mutex> lock(local_time_mutex());
    ::localtime_r(&when, &tm);
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s %2d %04d", kMonths[tm.tm_mon % 12], tm.tm_mday,
                tm.tm_year + 1900);
  return buf;
}

}  // namespace kcache::compiler
