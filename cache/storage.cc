#include "cache/storage.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "common/paths.h"

namespace kcache::cache {
namespace {

// Its folder made by the store, with the owner and mode of the store's own.
void write_manifest(Store& local, const Manifest& manifest) {
  const std::string path = manifest_path(local.dir(), manifest.key());
  local.make_folder(parent_folder(path));
  write_manifest_file(local.dir(), manifest);
}

}  // namespace

Storage::Storage(StorageOptions options) : Storage(std::move(options), nullptr) {
  if (!options_.remote) return;
  try {
    remote_ = std::make_unique<Remote>(*options_.remote);
  } catch (const Error& e) {
    count_locked("remote_errors", 1);
    warn_once("remote-open",
              std::string("cannot use the remote cache: ") + e.what() + "; continuing without it");
  }
}

Storage::Storage(StorageOptions options, std::unique_ptr<Remote> remote)
    : options_(std::move(options)), remote_(std::move(remote)) {
  if (!options_.warn) {
    options_.warn = [](const std::string& m) {
      if (!store_quiet()) std::fprintf(stderr, "kcache: warning: %s\n", m.c_str());
    };
  }
  open_local();
}

void Storage::open_local() {
  if (!options_.local_enabled) return;
  try {
    std::string dir = options_.local_dir.empty() ? default_store_dir() : options_.local_dir;
    StoreOptions store_options;
    store_options.fs = options_.fs;
    store_options.warn = options_.warn;
    store_options.umask = options_.umask;
    local_ = Store::open(dir, store_options);
    if (local_->read_only()) {
      // Writable by this user, read-only all the same: its index could not be
      // opened for writing (a full disk; the store said why).
      const bool writable = ::access(dir.c_str(), W_OK) == 0;
      warn_once("read-only", "the store in " + dir + " is read-only " +
                                 (writable ? "in this process" : "for this user") +
                                 ": cached results are used, new ones are not stored");
    }
  } catch (const Error& e) {
    warn_once("open", std::string(e.what()) + "; continuing without the cache");
  }
}

Storage::~Storage() = default;

void Storage::flush() {
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || !local_) return;
  try {
    local_->flush();
  } catch (const std::exception&) {
    // counters are best effort; the store says nothing at a host's exit
  }
}

// What the remote answers for one object, under the contract in storage.h:
// a rejected object is a miss (and the remote stays in use), one written by a
// newer kcache is a miss, a failure stops asking the remote.
template <typename T>
std::optional<T> Storage::fetch_remote(const std::function<std::optional<T>()>& fetch) {
  if (!remote_usable()) return std::nullopt;
  std::optional<T> object;
  try {
    object = fetch();
  } catch (const CorruptError& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    count_locked("remote_rejected", 1);
    warn_once("remote-rejected", std::string(e.what()) + "; compiling instead");
    return std::nullopt;
  } catch (const IncompatibleVersionError&) {
    // Written by a newer kcache sharing the remote: not for us, not wrong.
    std::lock_guard<std::mutex> lock(mutex_);
    count_locked("remote_misses", 1);
    return std::nullopt;
  } catch (const std::exception& e) {
    remote_failed("reading from", e);
    return std::nullopt;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  count_locked(object ? "remote_hits" : "remote_misses", 1);
  return object;
}

void Storage::store_locally(const std::function<void(Store&)>& write) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!local_ || local_->read_only()) return;
  try {
    write(*local_);
  } catch (const Error& e) {
    warn_once("put", std::string("storing in the cache failed: ") + e.what() +
                         "; the result is used but not cached");
  }
}

void Storage::upload(const Hash128& key, const std::function<void(Remote&)>& send) {
  if (!remote_usable() || remote_->options().read_only) return;
  try {
    send(*remote_);
  } catch (const std::exception& e) {
    remote_failed("uploading to", e);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    count_locked("remote_stored", 1);
  }
  probe_upload(key);
}

void Storage::probe_upload(const Hash128& key) {
  if (upload_came_back_.load() || probed_uploads_.load() >= kWriteOnlyProbeUploads) return;
  bool found = false;
  try {
    found = remote_->backend().exists(key);
  } catch (const std::exception& e) {
    remote_failed("reading from", e);
    return;
  }
  if (found) {
    upload_came_back_.store(true);
    return;
  }
  if (++probed_uploads_ != kWriteOnlyProbeUploads || upload_came_back_.load()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  warn_once("remote-write-only",
            "the remote cache " + remote_->options().url + " took " +
                std::to_string(kWriteOnlyProbeUploads) +
                " uploads but had none of them when asked right after (a miss for the same "
                "key): it stores but never returns, so every machine compiles and uploads "
                "again. Check that the server reads from where it writes (instance name, "
                "storage, a proxy in front); `kcache remote check` tries a write and a read");
}

std::optional<Entry> Storage::get(const Hash128& key, Store::Access access) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (local_) {
      try {
        if (std::optional<Entry> entry = local_->get(key, access)) return entry;
      } catch (const Error& e) {
        warn_once("get",
                  std::string("reading the cache failed: ") + e.what() + "; treating it as a miss");
      }
    }
  }
  std::optional<Entry> entry = fetch_remote<Entry>([&] { return remote_->get(key); });
  if (!entry) return std::nullopt;
  if (access == Store::Access::lookup) {
    std::lock_guard<std::mutex> lock(mutex_);
    count_locked("compile_ms_saved", entry->compile_ms());
  }
  store_locally([&](Store& local) { local.put(*entry); });
  return entry;
}

void Storage::put(const Entry& entry) {
  store_locally([&](Store& local) { local.put(entry); });
  upload(entry.key(), [&](Remote& remote) { remote.put(entry); });
}

std::optional<Manifest> Storage::local_manifest(const Hash128& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!local_) return std::nullopt;
  try {
    if (std::optional<std::string> bytes = read_manifest_file(local_->dir(), key)) {
      Manifest manifest =
          Manifest::decode(*bytes, key, "manifest " + manifest_path(local_->dir(), key));
      // Used now: eviction by age and by the cap go by last use (store.h).
      if (!local_->read_only()) touch_manifest_file(local_->dir(), key);
      return manifest;
    }
  } catch (const CorruptError&) {
    // A miss; the next put_manifest replaces it.
  } catch (const IncompatibleVersionError&) {
    // Written by a newer kcache: not ours to use.
  } catch (const Error& e) {
    warn_once("get",
              std::string("reading the cache failed: ") + e.what() + "; treating it as a miss");
  }
  return std::nullopt;
}

std::optional<Manifest> Storage::get_manifest(const Hash128& key) {
  if (std::optional<Manifest> local = local_manifest(key)) return local;
  std::optional<Manifest> manifest =
      fetch_remote<Manifest>([&] { return remote_->get_manifest(key); });
  if (manifest) store_locally([&](Store& local) { write_manifest(local, *manifest); });
  return manifest;
}

std::optional<Manifest> Storage::get_lookup_record(const Hash128& key) {
  return local_manifest(key);
}

std::optional<std::string> Storage::get_lookup_record_bytes(const Hash128& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!local_) return std::nullopt;
  try {
    std::optional<std::string> bytes = read_manifest_file(local_->dir(), key);
    if (bytes && !local_->read_only()) touch_manifest_file(local_->dir(), key);
    return bytes;
  } catch (const CorruptError&) {
    // Larger than any manifest: a miss; the next record replaces it.
  } catch (const Error& e) {
    warn_once("get",
              std::string("reading the cache failed: ") + e.what() + "; treating it as a miss");
  }
  return std::nullopt;
}

void Storage::put_lookup_record(const Manifest& record) {
  store_locally([&](Store& local) { write_manifest(local, record); });
}

void Storage::put_manifest(const Manifest& manifest) {
  store_locally([&](Store& local) { write_manifest(local, manifest); });
  upload(manifest.key(), [&](Remote& remote) { remote.put_manifest(manifest); });
}

void Storage::count(const std::string& counter, int64_t delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  count_locked(counter, delta);
}

Store* Storage::local() { return local_.get(); }

Remote* Storage::remote() { return remote_.get(); }

bool Storage::remote_usable() const { return remote_ && !remote_failed_.load(); }

void Storage::count_locked(const std::string& counter, int64_t delta) {
  if (local_) local_->count(counter, delta);
}

void Storage::remote_failed(const std::string& what, const std::exception& e) {
  remote_failed_.store(true);
  std::lock_guard<std::mutex> lock(mutex_);
  count_locked("remote_errors", 1);
  warn_once("remote", what + " the remote cache failed: " + e.what() +
                          "; not using it again in this process");
}

void Storage::warn_once(const std::string& kind, const std::string& message) {
  if (std::find(warned_.begin(), warned_.end(), kind) != warned_.end()) return;
  warned_.push_back(kind);
  options_.warn(message);
}

}  // namespace kcache::cache
