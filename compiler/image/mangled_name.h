// Which module variables a host program can look up by name (docs/LEAN.md).
//
// cuModuleGetGlobal takes the name in the image. A host can know that name
// without NVRTC only for a variable it could have declared itself with a
// name it can spell: a non-template variable with external linkage (its
// Itanium-mangled name, `_ZN4cuda2my4knobE`, follows from the declaration)
// or an unmangled one (`extern "C"`, or the global namespace). Every other
// variable is reachable only through nvrtcGetLoweredName, whose answers kcache
// keeps (the name expressions' lowered names), so the lean pass may remove it
// when nothing references it:
//   - template instances: static data members of class template
//     specializations (`cute::C<1>::value`, `_ZN4cute1CILi1EE5valueE`) and
//     variable template instances (`_ZN2ns1vIiEE`): template arguments anywhere
//     in the name;
//   - internal linkage: `_ZL`/`L` names, NVRTC's per-file anonymous namespace
//     (`_INTERNAL_<hash>_<file>`), GCC's `_GLOBAL__N_`;
//   - names reserved to the implementation: any component starting with `__`
//     or `_` and an uppercase letter (`cuda::std::__4`, `__cudart_i2opi_f`), and
//     CCCL's versioned ABI namespaces (`cub::CUB_300001_SM_900`).
// A name the parser does not fully understand (local names, ABI tags,
// expressions in template arguments, anything malformed) is answered
// not_understood, and the lean pass keeps it.
//
// A pure function of text; bounded (kMaxMangledNameBytes, kMaxMangledNesting);
// fuzzed by fuzz/mangled_name_fuzzer.cc.
#pragma once

#include <cstddef>
#include <string_view>

namespace kcache::compiler {

enum class HostReach {
  by_name,            // a host can name it: keep
  lowered_name_only,  // only nvrtcGetLoweredName can name it: removable
  not_understood,     // the parser cannot tell: keep
};

struct NameReach {
  HostReach reach = HostReach::not_understood;
  // Why, for tests and docs: "template instance", "internal linkage",
  // "reserved name", "versioned library namespace", "external linkage",
  // "unmangled", or what was not understood. Static storage.
  const char* why = "";
};

constexpr size_t kMaxMangledNameBytes = 64 << 10;  // the lean PTX pass's token bound
constexpr int kMaxMangledNesting = 128;            // template args / types inside each other

NameReach host_reach(std::string_view name);

}  // namespace kcache::compiler
