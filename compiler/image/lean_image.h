// Lean images (lean_ptx.h): after NVRTC, the PTX loses the module-scope
// internal variables nothing references, and a cubin target's cubin is
// assembled from that lean PTX with nvJitLink. Whenever a step cannot be done
// safely (no PTX, an NVRTC option that cannot be handed to nvJitLink, PTX the
// parser does not understand, an nvJitLink failure) the image stays NVRTC's,
// and `note` says why (`kcache compile -v` prints it). It never throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cache/format/key.h"
#include "common/lean_record.h"

namespace kcache::compiler {

// The pass version keyed in cache::CompileRequest::image_pass (with nvJitLink's
// fingerprint). Bump me when the pass can give a different image for the same
// PTX. v2: the removal rule is "no host can name it" (mangled_name.h), no
// longer "named in a CCCL namespace"; v3: a class's constant static data
// members, read from the program's text, go too (class_constants.h).
constexpr const char* kLeanPassVersion = "lean-v3";

struct LeanInput {
  cache::TargetKind kind = cache::TargetKind::cubin;
  std::string arch;                  // "sm_90", "compute_90"
  std::string nvrtc_image;           // NVRTC's cubin or PTX
  std::string ptx;                   // NVRTC's PTX of a cubin target (nvrtcGetPTX)
  std::vector<std::string> options;  // the NVRTC options, -arch excluded
  std::vector<std::string> keep;     // lowered names of the name expressions
  std::string nvjitlink_path;
  // The source and every file NVRTC read (class_constants.h); empty: no
  // class constant is removed.
  std::vector<std::string> texts;
};

struct LeanImage {
  std::string image;  // the lean image, or NVRTC's
  bool lean = false;  // image is not NVRTC's
  int64_t bytes_removed = 0;
  uint32_t variables_removed = 0;
  std::string note;  // why the image is NVRTC's, when there was a reason

  // As entries and bundles record it: asked, and lean, declined (a note) or
  // nothing to remove.
  LeanRecord record() const;
};

LeanImage make_lean_image(const LeanInput& input);

// The nvJitLink options equivalent to `options` for ptxas (-lineinfo,
// -maxrregcount, -Xptxas), with -arch=<arch>; nullopt, with `why`, when an
// option may change what ptxas does and has no nvJitLink equivalent here.
std::optional<std::vector<std::string>> link_options(const std::string& arch,
                                                     const std::vector<std::string>& options,
                                                     std::string* why);

}  // namespace kcache::compiler
