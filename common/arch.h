// The one arch grammar of kcache, shared by the compiler (--arch, --ptx), the
// bundle and entry parsers (untrusted input) and the runtime (image selection).
// It matches what rules/private/archs.bzl accepts:
//
//   arch         ::= real | virtual
//   real         ::= "sm_" number [ suffix ]        a cubin: sm_80, sm_90a, sm_100f
//   virtual      ::= "compute_" number [ suffix ]   PTX: compute_90, compute_100f
//   number       ::= digit{2,3}, first digit not "0"  (major = all but the last digit)
//   suffix       ::= "a" (arch-specific) | "f" (family, CUDA 12.9+)
//
// Nothing else is an arch: no upper case, no spaces, no path characters. So a
// valid arch is also safe as a file name part and in a log line.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <optional>
#include <string>
#include <string_view>

namespace kcache {

// "sm_90a" is {real, 9, 0, 'a'}, "compute_100f" is {virtual, 10, 0, 'f'}.
// major/minor follow nvcc: the last digit is the minor.
struct Arch {
  bool is_virtual = false;  // compute_XY (PTX) rather than sm_XY (cubin)
  int major = 0;
  int minor = 0;
  char suffix = '\0';  // '\0', 'a' (arch-specific) or 'f' (family)

  int number() const { return major * 10 + minor; }  // 90 for sm_90a
};

// nullopt for anything the grammar above does not produce.
std::optional<Arch> parse_arch(std::string_view name);

// The arch a near miss of the grammar meant: `typed` lower-cased, with the
// separator after "sm"/"compute" and any '_', '-', '.' or space among its
// digits dropped, when that is an arch ("sm90", "SM_90", "sm-90a",
// "sm_9.0", "compute90" give "sm_90", "sm_90a", "compute_90"). nullopt when
// `typed` is an arch already or nothing near it is.
std::optional<std::string> suggest_arch(std::string_view typed);

// " (did you mean sm_90?)" for a near miss (suggest_arch), else "": for the
// messages that refuse an arch.
std::string did_you_mean_arch(std::string_view typed);

}  // namespace kcache
