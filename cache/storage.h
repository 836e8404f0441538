// The storage facade the precompiler and the JIT use (ccache's
// storage/Storage): the local store first, then the remote tier.
//
// Cache trouble never fails a build: if the local store cannot be opened or
// written (read-only folder, full disk, corrupt index), Storage prints one
// warning and carries on without it. get() then misses and put() does nothing.
//
// Thread-safe: the precompiler compiles archs in parallel threads that share
// one Storage.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cache/entry.h"
#include "cache/store.h"
#include "common/hash.h"

namespace kcache::cache {

struct StorageOptions {
  std::string local_dir;  // empty: default_store_dir()
  bool local_enabled = true;
  // Where the one warning per kind of trouble goes; default: stderr.
  std::function<void(const std::string&)> warn;
  FileSystem* fs = nullptr;  // default: FileSystem::real()
};

class Storage {
 public:
  explicit Storage(StorageOptions options);
  ~Storage();

  // A miss is nullopt; so is any cache failure (warned once).
  std::optional<Entry> get(const Hash128& key);
  // Best effort: failures are warned once and otherwise ignored.
  void put(const Entry& entry);
  // Adds to a named counter of the local store ("nvrtc_invocations", ...).
  void count(const std::string& counter, int64_t delta);

  // The local store, or nullptr if it is disabled or could not be opened.
  Store* local();

 private:
  void warn_once(const std::string& kind, const std::string& message);

  StorageOptions options_;
  std::mutex mutex_;
  std::unique_ptr<Store> local_;
  std::vector<std::string> warned_;
};

}  // namespace kcache::cache
