// Which image of a bundle a device runs: a pure function of the bundle's
// image list and the device's compute capability, so every rule is tested on
// machines without a GPU.
//
// The rules (CUDA's binary and PTX compatibility):
// - A cubin for sm_XY runs on a device X.Z with Z >= Y (same major only).
// - An arch-specific cubin (sm_90a) runs only on that exact arch.
// - A family cubin (CUDA 12.9+, sm_100f) runs on the same major with Z >= Y,
//   like a plain cubin, using features the family shares.
// - PTX for compute_XY is JIT-compiled by the driver for any device >= X.Y;
//   compute_90a PTX only for 9.0, compute_100f PTX for 10.Z with Z >= 0.
//
// Preference: an exact cubin (same major and minor; arch-specific before
// family before plain), then a compatible cubin of the same major (highest
// minor first), then PTX for the highest virtual arch the device supports.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <optional>
#include <string>
#include <string_view>

#include "bundle/bundle.h"
#include "common/arch.h"

namespace kcache::runtime {

// The arch grammar lives in common/arch.h (the parsers and the compiler use it
// too); image selection reads archs with it.
using kcache::Arch;
using kcache::parse_arch;

// What image selection needs to know about a device.
struct DeviceArch {
  int major = 0;
  int minor = 0;
  // Whether arch-specific images (sm_90a, compute_90a) may be chosen for a
  // device of exactly that arch. True for real devices; false to insist on
  // portable code.
  bool arch_specific = true;

  std::string name() const;  // "sm_90"
};

enum class Match {
  exact_cubin,       // cubin for the device's own major.minor
  compatible_cubin,  // cubin for the same major, lower minor
  ptx,               // PTX the driver JIT-compiles
};

const char* to_string(Match match);

struct Selection {
  size_t index = 0;  // into Bundle::images
  Match match = Match::exact_cubin;
};

// The best image for `device`, or nullopt if none runs on it. Images whose
// arch does not parse, or whose arch disagrees with their kind (a cubin named
// compute_90), are never chosen.
std::optional<Selection> find_image(const bundle::Bundle& bundle, const DeviceArch& device);

// find_image, or throws NotFound naming `what`, the device arch and every
// image the bundle has ("no image in saxpy.kcb runs on sm_86: it has cubin
// sm_90, ptx compute_90a, ...") with what to rebuild.
Selection select_image(const bundle::Bundle& bundle, const DeviceArch& device,
                       const std::string& what);

}  // namespace kcache::runtime
