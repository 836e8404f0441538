// What the lean pass (compiler/image/lean_image.h) did to one image, as entries
// (cache/format/entry.h) and bundles (bundle/bundle.h) store it from format version 2
// on, so a hit and `kcache bundle` can say what a miss knew.
//
// Wire form, inside the checksummed bytes of an entry or a bundle image
// (integers little-endian):
//
//   lean_record ::= flags:u8 bytes_removed:i64 variables_removed:u32
//
//   flags             exactly one of
//                       0x00 off:       the lean pass was not asked for (--no-lean);
//                                       NVRTC's bytes
//                       0x01 asked:     asked for, nothing to remove; NVRTC's bytes
//                       0x03 asked|lean: the image is the lean one, not NVRTC's
//                       0x05 asked|declined: asked for, but not applied safely
//                                       (PTX the parser does not know, an option
//                                       nvJitLink cannot take, an nvJitLink error;
//                                       `kcache compile -v` says which on a miss);
//                                       NVRTC's bytes
//                       0x08 unknown:   the image came from a format 1 entry,
//                                       which did not record it
//   bytes_removed     NVRTC's image size less this image's, |n| <= 1 GiB; 0 unless
//                     lean. Signed: nothing in the pass forbids a lean cubin from
//                     being larger, and a record must be able to say so.
//   variables_removed module-scope variables the pass cut, >= 1 when lean, else 0
//
// Anything else is a CorruptError naming the field: these records arrive from
// remotes and archives, whose checksums prove no author.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <cstdint>
#include <string>

namespace kcache {

class ByteReader;
class ByteWriter;

struct LeanRecord {
  static constexpr uint8_t kAsked = 0x01;
  static constexpr uint8_t kLean = 0x02;
  static constexpr uint8_t kDeclined = 0x04;
  static constexpr uint8_t kUnknown = 0x08;
  // Encoded size, for parsers' lower bounds.
  static constexpr size_t kSize = 1 + 8 + 4;
  static constexpr int64_t kMaxBytesRemoved = int64_t{1} << 30;

  uint8_t flags = 0;  // 0: off, NVRTC's bytes
  int64_t bytes_removed = 0;
  uint32_t variables_removed = 0;

  bool asked() const { return flags & kAsked; }
  bool lean() const { return flags & kLean; }          // the image is not NVRTC's
  bool declined() const { return flags & kDeclined; }  // asked, not applied
  bool unknown() const { return flags & kUnknown; }

  static LeanRecord unknown_record() { return LeanRecord{kUnknown, 0, 0}; }

  // Empty when the record is one of the forms above; else what is wrong,
  // naming the field ("lean flags 0x02 ...").
  std::string problem() const;

  friend bool operator==(const LeanRecord& a, const LeanRecord& b) {
    return a.flags == b.flags && a.bytes_removed == b.bytes_removed &&
           a.variables_removed == b.variables_removed;
  }
  friend bool operator!=(const LeanRecord& a, const LeanRecord& b) { return !(a == b); }
};

void write_lean_record(ByteWriter& w, const LeanRecord& record);
// Reads and validates one record; fails through `r` (a CorruptError naming the
// field and the byte) when truncated or not one of the forms above.
LeanRecord read_lean_record(ByteReader& r);

// For people: "-154,272 B, -1,001 variables", "nothing to remove", "off
// (NVRTC's bytes)", "not applied (NVRTC's bytes)", "unknown (format 1)".
std::string describe(const LeanRecord& record);

// One word for scripts (`--format json`): "lean", "nothing_to_remove",
// "not_applied", "off", "unknown".
const char* state_name(const LeanRecord& record);

}  // namespace kcache
