#include "common/arch.h"

namespace kcache {

std::optional<Arch> parse_arch(std::string_view name) {
  Arch arch;
  if (name.substr(0, 3) == "sm_") {
    name.remove_prefix(3);
  } else if (name.substr(0, 8) == "compute_") {
    arch.is_virtual = true;
    name.remove_prefix(8);
  } else {
    return std::nullopt;
  }
  if (!name.empty() && (name.back() == 'a' || name.back() == 'f')) {
    arch.suffix = name.back();
    name.remove_suffix(1);
  }
  // Two or three digits: sm_35 ... sm_121. More would overflow nothing, but no
  // such arch exists and a typo should not become a match.
  if (name.size() < 2 || name.size() > 3) return std::nullopt;
  int number = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    number = number * 10 + (c - '0');
  }
  arch.major = number / 10;
  arch.minor = number % 10;
  if (arch.major == 0 || name[0] == '0') return std::nullopt;
  return arch;
}

std::optional<std::string> suggest_arch(std::string_view typed) {
  if (typed.size() > 32 || parse_arch(typed)) return std::nullopt;
  std::string lower;
  for (char c : typed) lower += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  std::string_view rest = lower;
  std::string out;
  for (const char* prefix : {"sm", "compute"}) {
    if (rest.substr(0, std::string_view(prefix).size()) == prefix) {
      out = std::string(prefix) + "_";
      rest.remove_prefix(std::string_view(prefix).size());
      break;
    }
  }
  if (out.empty()) return std::nullopt;
  for (char c : rest) {
    if (c != '_' && c != '-' && c != '.' && c != ' ') out += c;
  }
  if (!parse_arch(out)) return std::nullopt;
  return out;
}

std::string did_you_mean_arch(std::string_view typed) {
  std::optional<std::string> meant = suggest_arch(typed);
  return meant ? " (did you mean " + *meant + "?)" : "";
}

}  // namespace kcache
