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

}  // namespace kcache
