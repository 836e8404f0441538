// The store's blob files: one file per entry (the encoded Entry, which
// carries its key and checksum), at blobs/<ab>/<key>.<id>, where `ab` is the
// key's first two hex digits (so no folder grows huge) and `id` 16 random
// hex digits.
//
// Each write goes to a file name no one else uses, and the index row naming
// it is inserted only once the file is complete. So a reader never sees a
// partial file, an eviction can never delete a file a newer row names, and a
// process killed at any point leaves at worst a stray file. The blob files
// are the truth; the index is derived from them (store_recovery.h).
//
// Private to cache/local/store.cc and its parts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cache/format/entry.h"
#include "cache/local/store_folder.h"
#include "common/hash.h"

namespace kcache::cache {

constexpr const char* kBlobDirName = "blobs";

// From the kernel each time: a generator's state would be copied by fork(),
// and a parent and child storing the same key would then pick the same name.
uint64_t random_u64();
std::string random_id();  // 16 hex digits

// "<32 hex>.<16 hex>" -> the key, or nullopt for anything else (temp files).
std::optional<Hash128> key_of_blob_name(const std::string& name);

// Whether `file` is a blob name of key `hex`: a row naming another key's
// blob (a damaged or crafted index) must never make us read it as ours or
// delete it (that entry is intact).
bool blob_of_key(const std::string& file, const std::string& hex);

class BlobFiles {
 public:
  explicit BlobFiles(StoreFolder& folder);

  const std::string& dir() const { return dir_; }  // blobs/

  // The path of blob `file`. Names are stored without their shard folder; it
  // follows from the key. The index is data too (a store folder restored by
  // CI, shared, or damaged): a name that is not "<32 hex>.<16 hex>" must not
  // make us read or delete a file outside blobs/, so it is a CorruptError.
  std::string path(const std::string& file) const;

  // Writes `entry` to a new blob file and returns its name. Throws IoError.
  std::string write(const Entry& entry);
  // The bytes of blob `file`; nullopt when it is missing.
  std::optional<std::string> read(const std::string& file) const;
  // Why blob `file` is not the entry of `hex` with `size` bytes, or "" when
  // it is (or holds a newer kcache's entry: not ours to judge).
  std::string problem(const std::string& hex, const std::string& file, int64_t size) const;

  // Deletes the blob the row of `hex` named, unless the name is no blob name
  // of that key (then the name is reported): a row naming another key's
  // blob must not delete that intact entry.
  void remove(const std::string& hex, const std::string& file);

  // The shard folders of blobs/: a file or anything else there (a stray
  // README) is no shard, and must not stop a rebuild or a cleanup.
  std::vector<std::string> shard_names() const;
  std::string shard_dir(const std::string& shard) const { return dir_ + "/" + shard; }

  // The blob files of `key` written after `after_ns` (a file's mtime), by
  // name, whether a row names them or not; none when the shard is missing.
  struct Found {
    std::string name;
    int64_t mtime_ns = 0;
  };
  std::vector<Found> files_of(const Hash128& key, int64_t after_ns) const;
  // The entry in blob file `path` (in a shard folder), which must hold
  // `key`: nullopt when the file is gone; CorruptError when it is damaged or
  // holds another key; IncompatibleVersionError for a newer kcache's.
  std::optional<Entry> read_entry(const std::string& path, const Hash128& key) const;

 private:
  StoreFolder& folder_;
  const std::string dir_;
};

}  // namespace kcache::cache
