// One stored compile result: a PTX or cubin image with what is needed to
// account for it (compile time saved, age) and to trust it (checksum).
//
// On-disk format (integers little-endian; str = u32 length + bytes):
//
//   entry    ::= header payload checksum
//   header   ::= magic:"KCENTRY\0"(8 bytes) format_version:u16 kind:u8(1=ptx, 2=cubin)
//                reserved:u8(=0) key:bytes(16, high half first, big-endian) arch:str
//                compile_ms:u32 created_unix_s:i64 lowered_names lean_record
//                log source_name payload_size:u64
//   lowered_names ::= count:u32 (name_expression:str lowered_name:str){count}
//   lean_record   ::= common/lean_record.h (flags:u8 bytes_removed:i64
//                     variables_removed:u32); from format_version 2 on: a
//                     version 1 entry has none and reads as "unknown"
//   log           ::= str, NVRTC's warnings (from format_version 3 on: an
//                     older entry has none and reads as no warnings)
//   source_name   ::= str, the name of the source compiled (from
//                     format_version 4 on; empty: not given, as in an older
//                     entry): for `kcache ls`, never part of the key
//   payload  ::= bytes(payload_size)
//   checksum ::= u64, XXH3-64 of header and payload
//
// arch follows common/arch.h and matches kind (sm_XY for a cubin, compute_XY
// for PTX); name_expression and lowered_name are 1 to 65536 bytes without
// control characters; lean_record is one of the forms common/lean_record.h
// lists. Entries arrive from remotes and archives: a checksum
// proves no author, so these are checked even when it matches.
//
// A wrong magic, size or checksum is a CorruptError: the store treats it as a
// miss and deletes the entry, never loads it. The key is inside the checksummed
// bytes, so an entry filed under the wrong key (a copied file, a remote server
// answering with another object) is caught too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cache/format/key.h"
#include "common/hash.h"
#include "common/lean_record.h"

namespace kcache::cache {

// Bump me whenever the bytes written for the same Entry change, and add a
// golden file (tests/cache/golden/): readers refuse newer versions.
// Version 2 added the lean record, version 3 NVRTC's log, version 4 the
// source's name.
constexpr uint16_t kEntryFormatVersion = 4;
constexpr std::string_view kEntryMagic{"KCENTRY\0", 8};

// A name expression and the mangled name NVRTC lowered it to ("scale<float>" ->
// "_Z5scaleIfEvPT_S0_i"). Only NVRTC can compute it, so a hit must carry it
// beside the image (as jitify2 does).
struct LoweredName {
  std::string name_expression;
  std::string lowered_name;
  friend bool operator==(const LoweredName& a, const LoweredName& b) {
    return a.name_expression == b.name_expression && a.lowered_name == b.lowered_name;
  }
};

// A list of lowered names as an entry stores it and kcache's compile
// processes send it (nvrtc_worker.cc, program_protocol.cc): a u32 count, then
// each name expression and lowered name as a str.
void write_lowered_names(ByteWriter& w, const std::vector<LoweredName>& names);
// The list write_lowered_names wrote, from another kcache process: a count
// the bytes left cannot hold fails (ByteReader::fail). The names themselves
// are not checked; an entry's are (Entry::decode).
std::vector<LoweredName> read_lowered_names(ByteReader& r);

// An entry is always held in its encoded form, so a hit hands out the payload
// without copying it and a put writes the bytes as they are.
class Entry {
 public:
  // Encodes a new entry (always in kEntryFormatVersion). `lean` says what the
  // lean pass did to `payload` (default: off, NVRTC's bytes); it must be one
  // of the forms common/lean_record.h lists (else InvalidArgument).
  Entry(const Hash128& key, TargetKind kind, std::string arch, uint32_t compile_ms,
        int64_t created_unix_s, std::string_view payload,
        std::vector<LoweredName> lowered_names = {}, LeanRecord lean = {},
        std::string log = {}, std::string source_name = {});

  // Whether an entry may keep `log` (bounded, no control character but
  // lines and tabs: it is printed on a hit).
  static bool keeps_log(std::string_view log);
  // Whether an entry may keep `name` as its source's name (bounded, no
  // control character).
  static bool keeps_source_name(std::string_view name);

  // Parses and verifies `encoded`, taking ownership (no payload copy). Throws
  // CorruptError naming `what` (the key or the file) or IncompatibleVersionError.
  static Entry decode(std::string encoded, const std::string& what = "cache entry");

  const Hash128& key() const { return key_; }
  TargetKind kind() const { return kind_; }
  const std::string& arch() const { return arch_; }
  uint32_t compile_ms() const { return compile_ms_; }  // what NVRTC took; a hit saves this
  int64_t created_unix_s() const { return created_unix_s_; }
  const std::vector<LoweredName>& lowered_names() const { return lowered_names_; }
  // NVRTC's log of the compile (its warnings): a hit shows them again, as the
  // miss did.
  const std::string& log() const { return log_; }
  // The name of the source it was compiled from ("k.cu", an NVRTC program's
  // name), bounded and without control characters; empty where it was not
  // given or the entry is older than format 4.
  const std::string& source_name() const { return source_name_; }
  // What the lean pass did to the payload; unknown() for a version 1 entry.
  const LeanRecord& lean() const { return lean_; }
  uint16_t format_version() const { return format_version_; }
  std::string_view payload() const {  // PTX text or cubin bytes
    return std::string_view(encoded_).substr(payload_offset_, payload_size_);
  }
  const std::string& encoded() const { return encoded_; }

 private:
  Entry() = default;
  Hash128 key_;
  TargetKind kind_ = TargetKind::cubin;
  std::string arch_;
  uint32_t compile_ms_ = 0;
  int64_t created_unix_s_ = 0;
  std::vector<LoweredName> lowered_names_;
  LeanRecord lean_;
  std::string log_;
  std::string source_name_;
  uint16_t format_version_ = kEntryFormatVersion;
  std::string encoded_;
  size_t payload_offset_ = 0;
  size_t payload_size_ = 0;
};

}  // namespace kcache::cache
