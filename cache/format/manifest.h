// Direct-mode manifests (ccache's): how a lookup finds a result that needed
// headers NVRTC asked for (computed includes), without compiling.
//
// A target's scanner key (compiler/compiler.h) covers the source, options,
// compiler identity, the scanner's headers, the target and the lean pass. When
// NVRTC then asked for headers the scanner could not see, the result is keyed
// over everything handed (the full key) and a manifest, filed under
// manifest_key(scanner key), records the asks of that compile in order: each
// include NVRTC asked for and the (header name, XXH3-64 of content) pairs that
// resolving it handed over. A lookup replays a recorded set against the disk
// (resolving each ask again, the same way) and, when every step yields the same
// names and contents, computes the full key from the contents read now and
// looks it up. The hashes below are never used to build a key: a damaged or
// forged manifest can only cause a miss (docs/KEYS.md says why a match is
// exact).
//
// On-disk format (integers little-endian; str = u32 length + bytes):
//
//   manifest ::= magic:"KCMANIF\0"(8 bytes) format_version:u16 reserved:u16(=0)
//                key:bytes(16, high half first, big-endian) set_count:u32
//                set{set_count} checksum
//   set      ::= ask_count:u32 ask{ask_count}            (a compile's asks, in order)
//                probe_count:u32 probe{probe_count}      (format 2 and later)
//                result_count:u32 result{result_count}   (format 3 and later)
//   ask      ::= spelling:str includer:str angled:u8(0|1) header_count:u32
//                header{header_count}
//   header   ::= name:str content_hash:u64               (XXH3-64 of the content)
//   probe    ::= state:u8(=0) path:str                    (absent)
//              | state:u8(=1) path:str content:bytes(16) dev:u64 ino:u64 size:u64
//                mtime_ns:u64 ctime_ns:u64               (present: XXH3-128 of it,
//                                                          and its stat when recorded)
//              | state:u8(=2) path:str folder_depth:u32 dev:u64 ino:u64
//                mtime_ns:u64 ctime_ns:u64               (absent, and the stat of the
//                                                          deepest folder on its path
//                                                          that existed, folder_depth
//                                                          components below the base)
//   result   ::= kind:u8(0 ptx|1 cubin) arch:str any_name:u8(0|1) key:bytes(16)
//                                                        (a lookup record's: below)
//   checksum ::= u64, XXH3-64 of every byte before it
//
// Bounds: 1 <= set_count <= kMaxManifestSets (newest first);
// 0 <= ask_count <= kMaxManifestAsks, 0 <= probe_count <= kMaxManifestProbes,
// not both 0; 1 <= header_count <=
// kMaxManifestHeadersPerAsk; the whole manifest at most kMaxManifestBytes;
// 0 <= result_count <= kMaxManifestResults;
// every string 1 to kMaxManifestNameBytes bytes
// without control characters (NUL, newline, ESC, ...). No two sets are equal.
//
// Manifests arrive from remotes: a wrong magic, size, checksum, bound or name
// is a CorruptError naming the field, a newer version an
// IncompatibleVersionError; callers treat both as a miss and replace the
// manifest on the next write.
//
// Lookup records (compiler/lookup_record.h) are manifests too, filed under
// a record key in the local store only (never sent to or read from a remote):
// one set whose probes are what a lookup looked at on the disk and whose
// results are the keys it found, one per target. Unlike a manifest's hashes,
// those keys are used as they are: a local file, like the entries beside it.
// Regular manifests have no results.
//
// Concurrency: writers read, add a set and replace the whole manifest (a file
// renamed into place, or a remote object): the last writer wins. A lost set is
// a lost hit, never a wrong one.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/file_system.h"
#include "common/hash.h"

namespace kcache::cache {

// Bump me whenever the bytes written for the same Manifest change, and add a
// golden file (tests/cache/golden/): readers refuse newer versions.
// Format 2 (issue 18) added each set's probes; format 1 files still read
// (sets without probes). Format 3 (issue 26) added each set's results; a
// manifest without results is still written as format 2.
constexpr uint16_t kManifestFormatVersion = 3;
constexpr std::string_view kManifestMagic{"KCMANIF\0", 8};

// Sets kept per manifest, newest first: enough for a few -D variants of one
// header layout; a lookup replays at most this many.
constexpr size_t kMaxManifestSets = 16;
// Asks per set: the compiler goes back to NVRTC at most this many times.
constexpr size_t kMaxManifestAsks = 64;
// Headers one ask may bring (the header and the literal includes it makes).
constexpr size_t kMaxManifestHeadersPerAsk = 4096;
// Paths NVRTC named per set (toolkit headers read, paths found absent): a
// CUB kernel names about a thousand.
constexpr size_t kMaxManifestProbes = 16384;
// Results per set: one per target of a compile.
constexpr size_t kMaxManifestResults = 64;
// A spelling or name: a path, so PATH_MAX.
constexpr size_t kMaxManifestNameBytes = 4096;
// A whole manifest. The counts above alone would allow ~16 GiB; this keeps a
// crafted file from costing more memory than a lookup is worth (add() drops
// the oldest sets to stay under it; a real one is a few KiB).
constexpr size_t kMaxManifestBytes = 4 << 20;

struct ManifestHeader {
  std::string name;           // the spelling NVRTC is handed it under
  uint64_t content_hash = 0;  // XXH3-64 of its content
  friend bool operator==(const ManifestHeader& a, const ManifestHeader& b) {
    return a.name == b.name && a.content_hash == b.content_hash;
  }
};

// One include NVRTC asked for, and what resolving it handed over.
struct ManifestAsk {
  std::string spelling;  // as written between the quotes or brackets
  std::string includer;  // as NVRTC names it: the source's name or a header's spelling
  bool angled = false;
  std::vector<ManifestHeader> headers;  // the header first, then the ones it brought
  friend bool operator==(const ManifestAsk& a, const ManifestAsk& b) {
    return a.spelling == b.spelling && a.includer == b.includer && a.angled == b.angled &&
           a.headers == b.headers;
  }
};

// A path the compile's sealed NVRTC named that is not a handed header
// (compiler/seal/seal.h): a toolkit header it read, keyed by content, or a path it
// found absent, keyed by that. `path` is "toolkit:<path under the toolkit's
// include root>" or an absolute path. A lookup checks each against the disk:
// a present one whose stat is still the recorded one (same device, inode,
// size, mtime and ctime) is taken as unchanged where a stamp was recorded
// (common/stamp_trust.h: only where it stood for the bytes; otherwise mtime
// and ctime are 0, which no file has), any other is read and hashed again.
struct ManifestProbe {
  std::string path;
  bool present = false;
  Hash128 content;  // present only: XXH3-128 of the bytes
  // Present: the file's stat. Absent with has_folder: the stat of the deepest
  // folder on the path that existed (folder_depth components below the
  // toolkit folder, or below / for an absolute path), which lets a lookup
  // check many absent names with one stat of their folder.
  uint64_t dev = 0, ino = 0, size = 0, mtime_ns = 0, ctime_ns = 0;
  bool has_folder = false;
  uint32_t folder_depth = 0;
  friend bool operator==(const ManifestProbe& a, const ManifestProbe& b) {
    return a.path == b.path && a.present == b.present && a.content == b.content &&
           a.dev == b.dev && a.ino == b.ino && a.size == b.size && a.mtime_ns == b.mtime_ns &&
           a.ctime_ns == b.ctime_ns && a.has_folder == b.has_folder &&
           a.folder_depth == b.folder_depth;
  }
};

// A lookup record's answer for one target: the key its lookup found.
struct ManifestResult {
  bool cubin = true;  // else PTX
  std::string arch;
  bool any_name = false;  // the entry of every program name (compiler.h)
  Hash128 key;
  friend bool operator==(const ManifestResult& a, const ManifestResult& b) {
    return a.cubin == b.cubin && a.arch == b.arch && a.any_name == b.any_name && a.key == b.key;
  }
};

// One compile's asks, in order (the vector), and the probes of its final
// round of NVRTC; a lookup record's results.
struct ManifestSet : std::vector<ManifestAsk> {
  using std::vector<ManifestAsk>::vector;
  std::vector<ManifestProbe> probes;
  std::vector<ManifestResult> results;
  friend bool operator==(const ManifestSet& a, const ManifestSet& b) {
    return static_cast<const std::vector<ManifestAsk>&>(a) ==
               static_cast<const std::vector<ManifestAsk>&>(b) &&
           a.probes == b.probes && a.results == b.results;
  }
};

// A probe as a lookup record holds it: `path` views the record's bytes.
struct ProbeView {
  std::string_view path;
  bool present = false;
  bool has_folder = false;
  Hash128 content;
  uint32_t folder_depth = 0;
  uint64_t dev = 0, ino = 0, size = 0, mtime_ns = 0, ctime_ns = 0;

  // The probe with its own copy of the path.
  ManifestProbe owned() const;
};

// manifest_key = XXH3-128("kcache-manifest" label + the target's scanner key):
// never equal to an entry's key, so both can share one remote namespace.
Hash128 manifest_key(const Hash128& scanner_key);

class Manifest {
 public:
  explicit Manifest(const Hash128& key) : key_(key) {}

  // Parses and verifies `encoded`, which must be filed under `expected_key`.
  // Throws CorruptError naming `what` and the field, or IncompatibleVersionError.
  static Manifest decode(std::string_view encoded, const Hash128& expected_key,
                         const std::string& what = "manifest");
  std::string encode() const;

  // Adds `set` as the newest, dropping an equal older one and the oldest past
  // kMaxManifestSets. Throws InvalidArgument for a set outside the bounds
  // above (the caller then stores no manifest).
  void add(ManifestSet set);

  const Hash128& key() const { return key_; }
  const std::vector<ManifestSet>& sets() const { return sets_; }  // newest first

 private:
  Hash128 key_;
  std::vector<ManifestSet> sets_;
};

// A lookup record read in place, its paths not copied (a CUB kernel's holds
// ~1,500 probes): `encoded` is checked as Manifest::decode checks it (throws
// the same errors), and each probe, in order, handed to `probe` once its
// fields are checked; reading stops at the first it answers false (nullopt).
// Else the record's results. Where `encoded` is a manifest but no record (not
// one set of probes and no asks, or a format before results): nullopt.
std::optional<std::vector<ManifestResult>> read_lookup_record(
    std::string_view encoded, const Hash128& expected_key, const std::string& what,
    const std::function<bool(const ProbeView&)>& probe);

// The local store's manifests: <store dir>/manifests/<2 hex>/<32 hex>, one
// file each (not in the SQLite index: a whole-file replace is all they need).
// Errors: IoError naming the file; a missing file is nullopt.
std::string manifest_path(const std::string& store_dir, const Hash128& key);
std::optional<std::string> read_manifest_file(const std::string& store_dir, const Hash128& key);
// Temp file in the same folder, then rename: a reader sees the old manifest
// or the whole new one; after a power loss, possibly torn bytes, which read
// as a miss (the checksum).
void write_manifest_file(const std::string& store_dir, const Manifest& manifest);
// Removes every manifest file (kcache -C); returns how many.
uint64_t remove_manifest_files(const std::string& store_dir, FileSystem& fs);

// Sets the manifest file's mtime to now: a lookup used it, so eviction by age
// and by the size cap (Store) goes by last use, not last write. Best effort:
// a failure (read-only store, file replaced meanwhile) is ignored.
void touch_manifest_file(const std::string& store_dir, const Hash128& key);

// A file under <store dir>/manifests/, for the store's housekeeping.
struct ManifestFile {
  std::string path;
  // The key its name says: "<32 lowercase hex>" in the folder of its first
  // two digits. nullopt for anything else: a writer's temp file
  // ("<32 hex>.tmp.<pid>.<n>"), a misplaced or foreign file.
  std::optional<Hash128> key;
  FileInfo info;
};
// Every plain file in the manifests' shard folders. Throws IoError for a
// folder that cannot be listed.
std::vector<ManifestFile> list_manifest_files(const std::string& store_dir, FileSystem& fs);

}  // namespace kcache::cache
