// Lookup notes: what the last stored compile of a source started from (its
// text's hash, the toolkit, the options, the targets), kept so that a later
// miss can say why it missed where nothing stored matches at all ("options
// changed: -DN=4", "toolkit changed", "k.cu changed", "inc/v.h changed" for
// a header the lookup's scanner read, "new source").
//
// A note is a message's source only: it never leads to an entry, never
// decides a hit, and a missing, damaged or foreign one only makes a reason
// less precise. Notes live in the local store's notes/ folder, one file per
// slot (kNoteSlots slots, chosen by the note key), so they take bounded room
// whatever compiles a machine sees; a note whose key is not the one asked for
// (another source in the same slot) reads as no note. Written only after a
// miss was stored (hits write nothing), read only on a miss.
//
// On-disk format (integers little-endian; str = u32 length + bytes):
//
//   note     ::= magic:"KCNOTE\0\0"(8 bytes) format_version:u16
//                key:bytes(16) source_hash:bytes(16) toolkit:str
//                option_count:u32 option:str{option_count}
//                target_count:u32 target:str{target_count}
//                header_count:u32 path:str{header_count}
//                content_hash:u64{header_count}   (XXH3-64 of each header, in order)
//                checksum
//   checksum ::= u64, XXH3-64 of every byte before it
//
// Every str is at most kMaxNoteTextBytes without control characters, the
// counts at most kMaxNoteItems, the file at most kMaxNoteBytes. A wrong magic,
// checksum or bound is a CorruptError, a newer version an
// IncompatibleVersionError; callers take both as no note.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/hash.h"

namespace kcache::cache {

// Bump me whenever the bytes written for the same LookupNote change, and add
// a golden file (tests/cache/golden/): readers refuse newer versions.
constexpr uint16_t kLookupNoteFormatVersion = 1;
constexpr std::string_view kLookupNoteMagic{"KCNOTE\0\0", 8};
constexpr uint64_t kNoteSlots = 1024;  // files in notes/, at most
constexpr size_t kMaxNoteTextBytes = 4096;
constexpr size_t kMaxNoteItems = 4096;
constexpr size_t kMaxNoteBytes = 1 << 20;

struct LookupNote {
  Hash128 key;  // what it is a note of (compiler.cc: the source's path and name, the folder)
  Hash128 source_hash;
  std::string toolkit;
  std::vector<std::string> options;
  std::vector<std::string> targets;  // "sm_90", "compute_90"
  // The headers the lookup read itself (an NVRTC program's, the runtime
  // JIT's: their bytes are in the key it looks up, so a manifest names none
  // of them): where each was read, and XXH3-64 of its bytes.
  std::vector<std::pair<std::string, uint64_t>> headers;

  // Throws InvalidArgument for a field out of the bounds above.
  std::string encode() const;
  // Throws CorruptError naming `what`, or IncompatibleVersionError.
  static LookupNote decode(std::string_view bytes, const std::string& what);
};

// The note of `key` in the store folder `store_dir`, or nullopt (none, or
// one that does not read: see above). Never throws.
std::optional<LookupNote> read_lookup_note(const std::string& store_dir, const Hash128& key);
// Replaces the note in its slot, atomically. Throws IoError or InvalidArgument.
void write_lookup_note(const std::string& store_dir, const LookupNote& note);

}  // namespace kcache::cache
