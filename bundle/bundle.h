// The kernel bundle (.kcb): every compiled image of one kernel source, in one
// self-checking file. The precompiler writes it; the rules embed it in binaries;
// the runtime picks an image from it.
//
// Format (all integers little-endian; str = u32 length + bytes):
//
//   bundle       ::= header body checksum
//   header       ::= magic:"KCBUNDL\0"(8 bytes) format_version:u16 flags:u16(=0) body_size:u64
//   body         ::= source_name:str compiler_identity:str
//                    image_count:u32 image{image_count}
//                    name_count:u32 lowered_name{name_count}
//   image        ::= kind:u8(1=ptx, 2=cubin) arch:str key:str lean_record
//                    data_size:u64 data_checksum:u64
//                    padding(zero bytes up to a 16-byte file offset) data:bytes(data_size) 0x00
//   lean_record  ::= common/lean_record.h (flags:u8 bytes_removed:i64
//                    variables_removed:u32); from format_version 2 on: a
//                    version 1 image has none and reads as "unknown"
//   lowered_name ::= name_expression:str lowered_name:str
//   checksum     ::= u64, XXH3-64 of header and body without the image data
//                    (each image's data is covered by its data_checksum, which
//                    this checksum covers: every byte is hashed once)
//
// What each field may hold (anything else is a CorruptError naming the field,
// even with valid checksums: a checksum is no signature, anyone can recompute
// one, and `kcache bundle --extract` turns archs into file names):
//
//   source_name       at most 4096 bytes, no control characters (< 0x20, 0x7f)
//   compiler_identity at most 1024 bytes, no control characters
//   arch              the arch grammar of common/arch.h; a real arch (sm_90a)
//                     for a cubin, a virtual one (compute_90) for PTX; each
//                     arch at most once per bundle
//   key               empty, or 32 lower-case hex digits
//   name_expression,  1 to 65536 bytes each, no control characters
//   lowered_name
//   lean_record       one of the forms common/lean_record.h lists
//
// Image data starts 16-byte aligned (relative to the start of the bundle) and is
// followed by a NUL, so a view can be handed to the driver as is: aligned for a
// cubin, NUL-terminated for PTX.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/lean_record.h"

namespace kcache::bundle {

// Bump me whenever the bytes written for the same Bundle change, and add a new
// golden file (tests/bundle/golden/): readers refuse versions above theirs.
// Version 2 added the lean record per image.
constexpr uint16_t kFormatVersion = 2;
constexpr std::string_view kMagic{"KCBUNDL\0", 8};
// Image data offsets are multiples of this, so an embedded bundle declared
// alignas(kImageAlignment) hands the driver aligned cubins.
constexpr size_t kImageAlignment = 16;

enum class ImageKind : uint8_t {
  ptx = 1,    // PTX text for a virtual arch ("compute_90"), JIT-compiled by the driver
  cubin = 2,  // machine code for a real arch ("sm_90", "sm_90a")
};

const char* to_string(ImageKind kind);

// Views: a parsed bundle points into the bytes it was parsed from, which the
// caller keeps alive (an embedded array, a mapped or read file). Parsing copies
// no image data.
struct Image {
  Image() = default;
  // Not an aggregate, so `{kind, arch, key, data}` still reads as it did
  // before `lean` (and -Wmissing-field-initializers has nothing to say).
  Image(ImageKind kind, std::string_view arch, std::string_view key, std::string_view data,
        LeanRecord lean = {})
      : kind(kind), arch(arch), key(key), data(data), lean(lean) {}

  ImageKind kind = ImageKind::cubin;
  std::string_view arch;  // "sm_90", "sm_90a", "compute_90"
  std::string_view key;   // the cache key it was stored under, 32 hex digits (may be empty)
  std::string_view data;  // PTX text or cubin ELF; followed by a NUL in a parsed bundle
  // What the lean pass did to `data` (default: off, NVRTC's bytes); unknown()
  // in a version 1 bundle.
  LeanRecord lean;
};

struct LoweredName {
  std::string_view name_expression;  // as the user wrote it: "scale<float>"
  std::string_view lowered_name;     // the mangled symbol NVRTC produced
};

struct Bundle {
  uint16_t format_version = kFormatVersion;
  std::string_view source_name;        // logical name of the main source, e.g. "saxpy.cu"
  std::string_view compiler_identity;  // NVRTC and toolkit versions that made the images
  std::vector<Image> images;
  std::vector<LoweredName> lowered_names;

  // The mangled name for a name expression, or an empty view.
  std::string_view lowered(std::string_view name_expression) const;
};

// Serializes `bundle` into the format above, always as kFormatVersion
// (bundle.format_version is ignored). Throws InvalidArgument when an image's
// lean record is not one of its forms.
std::string serialize(const Bundle& bundle);

// Parses and fully verifies `bytes` (magic, version, bounds, every checksum).
// The result views into `bytes`. Throws CorruptError on any damage and
// IncompatibleVersionError for a bundle from a newer kcache; both messages name
// `what` (a file path, or "embedded bundle <symbol>").
Bundle parse(std::string_view bytes, const std::string& what = "bundle");

}  // namespace kcache::bundle
