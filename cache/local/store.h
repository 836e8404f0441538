// The local store: entries indexed by key in SQLite, in one folder that many
// processes share (Bazel runs actions in parallel).
//
// Thread safety: a Store is used by one thread at a time; open one per thread
// or process. Any number of Stores, in any processes, may use one folder at
// once: SQLite (a rollback journal, busy timeout) serializes the index, and
// blob files are written to a temporary name and renamed. No file of the
// store is memory-mapped: truncating any of them costs at worst a rebuilt
// index, never a signal. Messages (StoreOptions::warn) are said once per
// reason and store folder per process, across its threads and Stores.
//
// Crash safety: a process killed at any point leaves a store that opens, whose
// `verify()` is clean, and that never returns a torn entry.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "cache/format/entry.h"
#include "common/file_system.h"
#include "common/hash.h"

namespace kcache::cache {

constexpr uint64_t kDefaultMaxSize = 5ull << 30;  // 5 GiB, as ccache

// $KCACHE_DIR, else $XDG_CACHE_HOME/kcache, else $HOME/.cache/kcache.
std::string default_store_dir();

// $KCACHE_QUIET set (and not "0"): the default sinks of store and storage
// messages print nothing.
bool store_quiet();

struct EntryInfo {
  Hash128 key;
  TargetKind kind = TargetKind::cubin;
  std::string arch;
  uint64_t size = 0;  // bytes on disk
  uint32_t compile_ms = 0;
  int64_t created_unix_s = 0;
  int64_t last_used_unix_s = 0;
};

// Counters are named; the store keeps the ones it knows (hits, misses, ...)
// and any other a caller adds with Store::count (e.g. "nvrtc_invocations").
struct StoreStats {
  std::map<std::string, int64_t> counters;
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t max_size = 0;
  int64_t counter(const std::string& name) const {
    auto it = counters.find(name);
    return it == counters.end() ? 0 : it->second;
  }
};

struct CleanupResult {
  uint64_t entries_removed = 0;
  uint64_t bytes_removed = 0;
  uint64_t stray_files_removed = 0;  // files with no index row (a killed writer's leftovers)
  // Blob files no row named that checked out and were indexed again (an
  // index deleted or rebuilt while a writer ran).
  uint64_t stray_files_adopted = 0;
  // Direct-mode manifests (cache/format/manifest.h) removed by age or with the
  // entries the size cap evicted. Temp and corrupt manifest files count as strays.
  uint64_t manifests_removed = 0;
};

struct VerifyResult {
  uint64_t entries_checked = 0;
  uint64_t manifests_checked = 0;
  // One line per corrupt or missing entry and per manifest file that does not
  // parse or holds another key's manifest; each is removed.
  std::vector<std::string> problems;
};

struct StoreOptions {
  FileSystem* fs = nullptr;  // default: FileSystem::real()
  // Notices that are not errors (an index rebuilt, a corrupt entry removed),
  // at most one per reason per Store; default: printed to stderr with a
  // "kcache: " prefix unless store_quiet().
  std::function<void(const std::string&)> warn;
  // The network file system the folder is on ("NFS", "Lustre", "9p", ...),
  // or "" for a local one; default: statfs(). Tests pretend.
  std::function<std::string(const std::string& dir)> network_file_system;
  // Seconds since the epoch; tests move time forward to check eviction by age.
  std::function<int64_t()> clock;
  // Permission bits the store's new folders and files leave out (ccache's
  // `umask`; cache/config.h's `umask` setting), whatever the process's umask.
  // Unset: they take the store folder's permission bits and group (its setgid
  // bit too), so a store made group-shared (`chmod 2775`, `chgrp`) stays
  // usable by every member of the group. Either way, what root makes in a
  // store another user owns is given to that user (docs/REMOTE.md, "One
  // store shared by the users of a machine").
  std::optional<mode_t> umask;
  // About one flush in this many (chosen at random) also merges the deferred
  // files into the index, so they do not pile up in a store that only serves
  // hits. 0: a flush never merges (a test that checks a hit writes nothing).
  uint64_t merge_deferred_one_in = 64;
};

class Store {
 public:
  // Opens the store in `dir`, creating it (mode 0700) if needed. A folder we
  // may read but not write opens read-only: get() works, put() throws IoError.
  // The blob files are the truth, the index is derived from them: an index
  // that is missing, empty, a folder, or damaged (here or when any later
  // query reports it) is moved aside and rebuilt from the blob files (one
  // warning); one deleted or replaced while this Store is open, or a fork of
  // the process, is noticed before the next operation and reopened. On a
  // network file system (NFS, Lustre, 9p, ...) the index syncs every commit
  // (synchronous FULL), with one warning pointing to the remote tier. An
  // index an older kcache left in WAL mode leaves it once no other process
  // has it open.
  // Throws IncompatibleVersionError for a store written by a newer,
  // incompatible kcache, IoError if the folder cannot be used at all.
  static std::unique_ptr<Store> open(const std::string& dir, StoreOptions options = {});
  virtual ~Store() = default;  // flushes buffered counters (errors are logged, not thrown)

  enum class Access {
    lookup,       // a cache lookup: counted as a hit or miss, refreshes LRU order
    // A lookup whose caller counts the outcome once it is decided (one
    // target can take several gets): refreshes LRU order, counts nothing.
    uncounted,
    maintenance,  // export, inspection: leaves statistics and LRU order alone
  };
  // A miss is nullopt. A corrupt entry (bad checksum, or holding another key)
  // is removed, counted and reported as a miss.
  virtual std::optional<Entry> get(const Hash128& key, Access access = Access::lookup) = 0;
  // Stores (or replaces) an entry under entry.key(), then evicts least
  // recently used entries if the store is over its size cap. Throws IoError
  // (disk full, read-only): nothing stored before is lost.
  virtual void put(const Entry& entry) = 0;
  virtual bool remove(const Hash128& key) = 0;
  virtual std::optional<EntryInfo> info(const Hash128& key) = 0;
  virtual std::vector<EntryInfo> list() = 0;

  // Adds to a named counter; buffered until flush() or the destructor.
  virtual void count(const std::string& counter, int64_t delta) = 0;
  // Writes the buffered counters and LRU times (of hits) to a file of this
  // process under deferred/, not to the index, so a process that only had
  // hits takes no write lock and syncs nothing; whoever next writes the index
  // (a put, stats(), housekeeping, list()) merges every such file into it.
  // Throws IoError (the counts are then dropped).
  virtual void flush() = 0;

  virtual StoreStats stats() = 0;
  virtual void zero_stats() = 0;
  virtual void set_max_size(uint64_t bytes) = 0;
  // Manifests (cache/format/manifest.h) are files beside the index, not rows in it:
  // their bytes are not in the size cap's total (stats().bytes). They are
  // small in practice (a set is the asks of one compile, a few hundred bytes;
  // at most kMaxManifestSets sets, one manifest per kernel and target that
  // needed NVRTC's asks) but the format's bounds do not make them small, so
  // housekeeping removes them with the entries they lead to:
  //  - clear(): every manifest file;
  //  - whenever the cap evicts entries (put, set_max_size, cleanup): the
  //    manifests last used (mtime) before the least recently used entry kept,
  //    all of them when no entry is left;
  //  - cleanup(): also temp files older than the stray grace period (a writer
  //    killed mid-write) and manifests that do not parse or hold another key;
  //  - evict_older_than(age): manifests whose mtime is older than `age`
  //    (a lookup that reads one sets its mtime: cache/format/manifest.h);
  //  - verify(): checks each parses and carries its file name's key.
  // clear() empties the store whatever state its index is in; cleanup()
  // also adopts blob files no row names once they are older than the grace
  // period (or removes them when they do not check out); verify() first
  // runs SQLite's quick_check on the index and rebuilds it when that fails.
  virtual CleanupResult clear() = 0;
  virtual CleanupResult cleanup() = 0;  // enforce the size cap, remove stray files
  virtual CleanupResult evict_older_than(std::chrono::seconds age) = 0;
  virtual VerifyResult verify() = 0;

  virtual const std::string& dir() const = 0;
  // How many times this store let go of its index's open files (to reopen
  // it: deleted, replaced, a fork). The drop-in watches those files in its
  // host (nvrtc_shim/shim.cc) and takes a change there as the store's own
  // only when this moved.
  virtual uint64_t files_let_go() const = 0;
  virtual bool read_only() const = 0;
  // Creates `folder` (inside the store, mkdir -p) with the owner, group and
  // mode the store's own folders get (StoreOptions::umask), for files that
  // other code writes into the store (manifests). Throws IoError.
  virtual void make_folder(const std::string& folder) = 0;
};

}  // namespace kcache::cache
