// One file holding many entries, for CI systems that can only cache a file or
// a folder between jobs: `kcache export FILE` after a build, `kcache import
// FILE` before the next.
//
// Format (integers little-endian):
//
//   archive ::= magic:"KCARCHV\0"(8 bytes) format_version:u16 record* end
//   record  ::= tag:u8(=1) entry_size:u64 entry:bytes(entry_size)   (cache/format/entry.h)
//   end     ::= tag:u8(=0) record_count:u64 checksum:bytes(16)
//   checksum = XXH3-128 of every byte before it
//
// Every entry carries its own key and checksum, so import accepts each valid
// entry on its own merits: a truncated archive still imports the entries before
// the damage, and a damaged entry is rejected, never stored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/local/store.h"

namespace kcache::cache {

// Bump me when the bytes written change (tests/cache/archive_test.cc).
constexpr uint16_t kArchiveFormatVersion = 1;

struct ExportResult {
  uint64_t entries = 0;
  uint64_t bytes = 0;  // size of the archive file
};

// Writes every entry of `store` to `path` (temporary file, then rename: a
// killed export never leaves a partial archive under `path`). Statistics and
// LRU order are left alone. Throws IoError.
ExportResult export_archive(Store& store, const std::string& path);

struct ImportResult {
  uint64_t imported = 0;
  uint64_t already_present = 0;
  uint64_t rejected = 0;  // damaged entries, not stored
  bool complete = true;   // false if the archive ended early or its checksum failed
  std::vector<std::string> problems;
};

// Stores every valid entry of the archive at `path` that `store` does not have
// yet. Throws IoError if the file cannot be read, CorruptError if it is not an
// archive at all, IncompatibleVersionError if it is from a newer kcache.
ImportResult import_archive(Store& store, const std::string& path);

}  // namespace kcache::cache
