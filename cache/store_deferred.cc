#include "cache/store_deferred.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace kcache::cache {
namespace {

constexpr const char* kHeader = "kcache-deferred 1\n";

bool is_counter_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '_')) {
      return false;
    }
  }
  return true;
}

bool is_hex(const std::string& text, size_t size) {
  if (text.size() != size) return false;
  for (char c : text) {
    if (!std::isxdigit(static_cast<unsigned char>(c)) || std::isupper(static_cast<unsigned char>(c)))
      return false;
  }
  return true;
}

std::optional<int64_t> parse_int(const std::string& text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return std::nullopt;
  return static_cast<int64_t>(value);
}

}  // namespace

void DeferredRecord::add(const DeferredRecord& other) {
  for (const auto& [name, delta] : other.counters) counters[name] += delta;
  for (const auto& [key, when] : other.used) {
    int64_t& latest = used[key];
    if (when > latest) latest = when;
  }
}

std::string encode_deferred(const DeferredRecord& record) {
  std::string out = kHeader;
  for (const auto& [name, delta] : record.counters) {
    if (delta != 0 && is_counter_name(name)) out += "c " + name + " " + std::to_string(delta) + "\n";
  }
  for (const auto& [key, when] : record.used) {
    out += "t " + key + " " + std::to_string(when) + "\n";
  }
  return out;
}

DeferredRecord decode_deferred(const std::string& text) {
  DeferredRecord record;
  const std::string header = kHeader;
  if (text.size() > kMaxDeferredBytes || text.compare(0, header.size(), header) != 0) return record;
  std::istringstream lines(text.substr(header.size()));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string tag, name, number, extra;
    if (!(fields >> tag >> name >> number) || (fields >> extra)) continue;
    std::optional<int64_t> value = parse_int(number);
    if (!value) continue;
    if (tag == "c" && is_counter_name(name)) {
      record.counters[name] += *value;
    } else if (tag == "t" && is_hex(name, 32) && *value >= 0) {
      int64_t& latest = record.used[name];
      if (*value > latest) latest = *value;
    }
  }
  return record;
}

bool is_deferred_name(const std::string& name) { return is_hex(name, 16); }

}  // namespace kcache::cache
