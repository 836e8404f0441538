// One stored compile result: a PTX or cubin image with what is needed to
// account for it (compile time saved, age) and to trust it (checksum).
//
// On-disk format (integers little-endian; str = u32 length + bytes):
//
//   entry    ::= header payload checksum
//   header   ::= magic:"KCENTRY\0"(8 bytes) format_version:u16 kind:u8(1=ptx, 2=cubin)
//                reserved:u8(=0) arch:str compile_ms:u32 created_unix_s:i64
//                payload_size:u64
//   payload  ::= bytes(payload_size)
//   checksum ::= u64, XXH3-64 of header and payload
//
// A wrong magic, size or checksum is a CorruptError: the store treats it as a
// miss and deletes the entry, never loads it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cache/key.h"

namespace kcache::cache {

// Bump me whenever the bytes written for the same Entry change, and add a
// golden file (tests/cache/golden/): readers refuse newer versions.
constexpr uint16_t kEntryFormatVersion = 1;
constexpr std::string_view kEntryMagic{"KCENTRY\0", 8};

struct Entry {
  TargetKind kind = TargetKind::cubin;
  std::string arch;            // "sm_90", "compute_90"
  uint32_t compile_ms = 0;     // what NVRTC took; a hit saves this much
  int64_t created_unix_s = 0;  // when it was compiled
  std::string payload;         // PTX text or cubin bytes
};

std::string encode_entry(const Entry& entry);

// Parses and verifies. Throws CorruptError (naming `what`, e.g. the key or the
// file) or IncompatibleVersionError.
Entry decode_entry(std::string_view bytes, const std::string& what = "cache entry");

}  // namespace kcache::cache
