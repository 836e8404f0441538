#include "cli/units.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/error.h"

namespace kcache::cli {
namespace {

// Splits "1.5GiB" into 1.5 and "GiB"; throws unless a number leads.
double leading_number(const std::string& text, std::string* suffix, const char* what,
                      const char* example) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(value) || value < 0) {
    throw InvalidArgument("invalid " + std::string(what) + " \"" + text + "\"; use e.g. " +
                          example);
  }
  *suffix = std::string(end);
  return value;
}

}  // namespace

uint64_t parse_size(const std::string& text) {
  static constexpr const char* kExample = "5G, 500M, 1.5GiB or 0 for no limit";
  std::string suffix;
  double value = leading_number(text, &suffix, "size", kExample);
  // "G", "GB", "Gi" and "GiB" all mean 2^30: the store's default is 5 GiB and
  // sizes are printed in binary units, so input and output agree.
  if (!suffix.empty() && suffix.back() == 'B') suffix.pop_back();
  if (!suffix.empty() && suffix.back() == 'i') suffix.pop_back();
  double multiplier = 0;
  if (suffix.empty() || suffix == "G" || suffix == "g") {
    multiplier = 1024.0 * 1024 * 1024;
  } else if (suffix == "k" || suffix == "K") {
    multiplier = 1024.0;
  } else if (suffix == "M" || suffix == "m") {
    multiplier = 1024.0 * 1024;
  } else if (suffix == "T" || suffix == "t") {
    multiplier = 1024.0 * 1024 * 1024 * 1024;
  } else {
    throw InvalidArgument("invalid size \"" + text + "\": unknown unit; use e.g. " + kExample);
  }
  return static_cast<uint64_t>(std::llround(value * multiplier));
}

std::chrono::seconds parse_age(const std::string& text) {
  static constexpr const char* kExample = "3600s, 30m, 12h or 7d";
  std::string suffix;
  double value = leading_number(text, &suffix, "age", kExample);
  double seconds = 0;
  if (suffix.empty() || suffix == "d")
    seconds = value * 86400;
  else if (suffix == "s")
    seconds = value;
  else if (suffix == "m")
    seconds = value * 60;
  else if (suffix == "h")
    seconds = value * 3600;
  else
    throw InvalidArgument("invalid age \"" + text + "\": unknown unit; use e.g. " + kExample);
  return std::chrono::seconds(std::llround(seconds));
}

std::string format_size(uint64_t bytes) {
  char buf[32];
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
    return buf;
  }
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  std::snprintf(buf, sizeof buf, "%.1f %s", value, kUnits[unit]);
  return buf;
}

std::string format_duration_ms(int64_t ms) {
  char buf[48];
  if (ms < 60 * 1000) {
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000);
  } else if (ms < 3600 * 1000) {
    std::snprintf(buf, sizeof buf, "%lld min %lld s", static_cast<long long>(ms / 60000),
                  static_cast<long long>(ms / 1000 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lld h %lld min", static_cast<long long>(ms / 3600000),
                  static_cast<long long>(ms / 60000 % 60));
  }
  return buf;
}

}  // namespace kcache::cli
