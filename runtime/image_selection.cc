#include "runtime/image_selection.h"

#include "common/error.h"

namespace kcache::runtime {
namespace {

// Among images for the same major.minor: arch-specific code was built for this
// exact GPU, family code for its family; both were asked for on purpose.
int suffix_rank(char suffix) {
  switch (suffix) {
    case 'a':
      return 2;
    case 'f':
      return 1;
    default:
      return 0;
  }
}

bool cubin_runs_on(const Arch& a, const DeviceArch& d) {
  if (a.major != d.major) return false;
  if (a.suffix == 'a') return d.arch_specific && a.minor == d.minor;
  return a.minor <= d.minor;
}

bool ptx_runs_on(const Arch& a, const DeviceArch& d) {
  if (a.suffix == 'a') return d.arch_specific && a.major == d.major && a.minor == d.minor;
  if (a.suffix == 'f') return a.major == d.major && a.minor <= d.minor;
  return a.major < d.major || (a.major == d.major && a.minor <= d.minor);
}

// Higher is better; only compared between images that run on the device.
struct Score {
  int tier;  // 2 exact cubin, 1 compatible cubin, 0 PTX
  int major;
  int minor;
  int suffix;
  bool operator>(const Score& o) const {
    if (tier != o.tier) return tier > o.tier;
    if (major != o.major) return major > o.major;
    if (minor != o.minor) return minor > o.minor;
    return suffix > o.suffix;
  }
};

}  // namespace

std::string DeviceArch::name() const {
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

const char* to_string(Match match) {
  switch (match) {
    case Match::exact_cubin:
      return "exact cubin";
    case Match::compatible_cubin:
      return "compatible cubin";
    case Match::ptx:
      return "PTX (driver JIT)";
  }
  return "unknown";
}

std::optional<Selection> find_image(const bundle::Bundle& bundle, const DeviceArch& device) {
  std::optional<Selection> best;
  Score best_score{};
  for (size_t i = 0; i < bundle.images.size(); ++i) {
    const bundle::Image& image = bundle.images[i];
    std::optional<Arch> arch = parse_arch(image.arch);
    if (!arch) continue;
    Score score{};
    Match match;
    if (image.kind == bundle::ImageKind::cubin) {
      if (arch->is_virtual || !cubin_runs_on(*arch, device)) continue;
      match = arch->minor == device.minor ? Match::exact_cubin : Match::compatible_cubin;
      score.tier = match == Match::exact_cubin ? 2 : 1;
    } else {
      if (!arch->is_virtual || !ptx_runs_on(*arch, device)) continue;
      match = Match::ptx;
      score.tier = 0;
    }
    score.major = arch->major;
    score.minor = arch->minor;
    score.suffix = suffix_rank(arch->suffix);
    if (!best || score > best_score) {  // strict: the first of equals wins
      best = Selection{i, match};
      best_score = score;
    }
  }
  return best;
}

Selection select_image(const bundle::Bundle& bundle, const DeviceArch& device,
                       const std::string& what) {
  if (std::optional<Selection> s = find_image(bundle, device)) return *s;
  std::string images;
  for (const bundle::Image& image : bundle.images) {
    if (!images.empty()) images += ", ";
    images += std::string(bundle::to_string(image.kind)) + " " + std::string(image.arch);
    std::optional<Arch> arch = parse_arch(image.arch);
    if (!arch) {
      images += " (unrecognised arch)";
    } else if (arch->is_virtual != (image.kind == bundle::ImageKind::ptx)) {
      images += " (arch does not match the image kind)";
    }
  }
  if (images.empty()) images = "no images at all";
  std::string device_name = device.name();
  throw NotFound("no image in " + what + " runs on this GPU (" + device_name +
                 "): the bundle has " + images +
                 ". A cubin runs on GPUs of the same major version and an equal or higher minor, "
                 "PTX on GPUs of an equal or higher arch. Rebuild the bundle with " +
                 device_name + " in its archs, or with a PTX target of compute_" +
                 std::to_string(device.major) + std::to_string(device.minor) + " or lower");
}

}  // namespace kcache::runtime
