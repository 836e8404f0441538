// The storage facade the precompiler and the JIT use (ccache's
// storage/Storage): the local store first, then the remote tier.
//
// get: local store; on a miss, the remote (if configured); a remote hit is
//      written to the local store, so the next lookup is a local hit.
// put: local store; then an upload to the remote unless it is read-only.
//
// Cache trouble never fails a build: if the local store cannot be opened or
// written (read-only folder, full disk, corrupt index), Storage prints one
// warning and carries on without it. get() then misses and put() does nothing.
//
// The remote costs at most its timeout once per process: after the first
// failure (refused, timed out, HTTP 5xx or 4xx) Storage warns once and asks it
// nothing more for the rest of its life (one Storage per process is the
// intended use: the precompiler and the JIT each hold one). An object the
// remote answers with that fails its checks (checksum, key, signature) is
// never used: it is a miss, counted as `remote_rejected`, and the remote stays
// in use. A reply larger than what was asked (a lying remote: the backend
// cuts it off while it arrives, cache/remote/reapi/reapi_backend.cc) is a failure.
//
// A remote that takes uploads but never gives them back (a write-only or
// misconfigured server: reads and writes going to different places) would
// otherwise cost a silent miss and a fresh upload on every machine. So the
// first uploads of a process are each looked up right after (one HEAD or
// GetActionResult): once one is found, no more are; if
// kWriteOnlyProbeUploads in a row are not, Storage warns once.
//
// Counters (in the local store, shown by `kcache -s`): remote_hits,
// remote_misses, remote_errors, remote_rejected, remote_stored (manifests
// count in these too); a remote hit
// also adds the entry's compile time to compile_ms_saved.
//
// Thread-safe: the precompiler compiles archs in parallel threads that share
// one Storage. Remote transfers run without holding Storage's lock, so
// parallel lookups fetch in parallel.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cache/format/entry.h"
#include "cache/format/manifest.h"
#include "cache/remote/remote.h"
#include "cache/local/store.h"
#include "common/hash.h"

namespace kcache::cache {

struct StorageOptions {
  std::string local_dir;  // empty: default_store_dir()
  bool local_enabled = true;
  // The remote tier; nullopt for none. cache/config.h fills this (and
  // local_dir) from flags, the environment and the config file.
  std::optional<RemoteOptions> remote;
  // Where the one warning per kind of trouble goes; default: stderr.
  std::function<void(const std::string&)> warn;
  FileSystem* fs = nullptr;  // default: FileSystem::real()
  // `sloppiness = time_macros` (cache/config.h): the precompiler caches
  // compiles that use time macros as any other (compiler/time_macros.h).
  bool sloppy_time_macros = false;
  // `umask` (cache/config.h): StoreOptions::umask.
  std::optional<mode_t> umask;
};

// Uploads looked up right after, in a row, that were all missing before
// Storage warns that the remote stores but never returns.
constexpr int kWriteOnlyProbeUploads = 2;

class Storage {
 public:
  explicit Storage(StorageOptions options);
  // Tests and benchmarks: a remote over any backend (ignores options.remote).
  Storage(StorageOptions options, std::unique_ptr<Remote> remote);
  ~Storage();

  // A miss is nullopt; so is any cache failure (warned once). `access`:
  // Store::Access::lookup counts the hit or miss (and a remote hit's
  // compile time saved) here; uncounted leaves that to the caller.
  std::optional<Entry> get(const Hash128& key, Store::Access access = Store::Access::lookup);
  // Best effort: failures are warned once and otherwise ignored.
  void put(const Entry& entry);
  // Manifests (cache/format/manifest.h), under their manifest key, with the same
  // failure policy: local files first, then the remote; a remote manifest is
  // copied to the local store. A corrupt or newer manifest is a miss (the
  // next put_manifest replaces it).
  std::optional<Manifest> get_manifest(const Hash128& key);
  // Replaces the manifest locally, then uploads it unless the remote is
  // read-only. Best effort, like put().
  void put_manifest(const Manifest& manifest);
  // Lookup records (compiler/lookup_record.h): manifests in the local
  // store only, never sent to or read from the remote (they name this
  // machine's paths). Same failure policy.
  std::optional<Manifest> get_lookup_record(const Hash128& key);
  // The same record's bytes, not decoded (a hit reads them in place:
  // lookup_record.h's record_holds), marked used; nullopt where there is none
  // or it cannot be read (a warning once, as get()).
  std::optional<std::string> get_lookup_record_bytes(const Hash128& key);
  void put_lookup_record(const Manifest& record);
  // Adds to a named counter of the local store ("nvrtc_invocations", ...).
  void count(const std::string& counter, int64_t delta);

  // The local store, or nullptr if it is disabled or could not be opened.
  Store* local();
  // A host's fork() (pthread_atfork, nvrtc_shim/shim.cc): held across it, so
  // that no SQLite call or store change of another thread is under way in
  // the child, which reopens the store itself (cache/local/store_recovery.h).
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }
  // Writes the local store's buffered counters and use times now (best
  // effort, never throws): for a Storage that is never destroyed (the
  // drop-in's, at the host's exit). Skipped if another thread holds the
  // store right now: a host's exit must not wait on it.
  void flush();
  // The remote tier, or nullptr if none is configured or it could not be
  // opened (a credential file missing, ...).
  Remote* remote();
  // False once the remote has failed in this process (and it is no longer asked).
  bool remote_usable() const;
  bool sloppy_time_macros() const { return options_.sloppy_time_macros; }

 private:
  void open_local();
  std::optional<Manifest> local_manifest(const Hash128& key);
  void warn_once(const std::string& kind, const std::string& message);
  void count_locked(const std::string& counter, int64_t delta);
  void remote_failed(const std::string& what, const std::exception& e);
  // The shared paths of entries and manifests: a remote lookup with its
  // failure policy and counters, a best-effort local write, an upload.
  template <typename T>
  std::optional<T> fetch_remote(const std::function<std::optional<T>()>& fetch);
  void store_locally(const std::function<void(Store&)>& write);
  void upload(const Hash128& key, const std::function<void(Remote&)>& send);
  void probe_upload(const Hash128& key);

  StorageOptions options_;
  std::mutex mutex_;  // guards local_ (a Store is used by one thread at a time), warned_
  std::unique_ptr<Store> local_;
  std::unique_ptr<Remote> remote_;
  std::atomic<bool> remote_failed_{false};
  // The write-only probe (above): uploads probed so far, and whether one
  // came back (then probing stops).
  std::atomic<int> probed_uploads_{0};
  std::atomic<bool> upload_came_back_{false};
  std::vector<std::string> warned_;
};

}  // namespace kcache::cache
