#include "cache/storage.h"

#include <algorithm>
#include <cstdio>

#include "common/error.h"

namespace kcache::cache {

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
      std::fprintf(stderr, "kcache: warning: %s\n", m.c_str());
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
    local_ = Store::open(dir, store_options);
    if (local_->read_only()) {
      warn_once("read-only", "the store in " + dir +
                                 " is read-only for this user: cached results are used, new ones "
                                 "are not stored");
    }
  } catch (const Error& e) {
    warn_once("open", std::string(e.what()) + "; continuing without the cache");
  }
}

Storage::~Storage() = default;

std::optional<Entry> Storage::get(const Hash128& key) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (local_) {
      try {
        if (std::optional<Entry> entry = local_->get(key)) return entry;
      } catch (const Error& e) {
        warn_once("get",
                  std::string("reading the cache failed: ") + e.what() + "; treating it as a miss");
      }
    }
  }
  if (!remote_usable()) return std::nullopt;

  std::optional<Entry> entry;
  try {
    entry = remote_->get(key);
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
  if (!entry) {
    count_locked("remote_misses", 1);
    return std::nullopt;
  }
  count_locked("remote_hits", 1);
  count_locked("compile_ms_saved", entry->compile_ms());
  if (local_ && !local_->read_only()) {
    try {
      local_->put(*entry);
    } catch (const Error& e) {
      warn_once("put", std::string("storing in the cache failed: ") + e.what() +
                           "; the result is used but not cached");
    }
  }
  return entry;
}

void Storage::put(const Entry& entry) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (local_ && !local_->read_only()) {
      try {
        local_->put(entry);
      } catch (const Error& e) {
        warn_once("put", std::string("storing in the cache failed: ") + e.what() +
                             "; the result is used but not cached");
      }
    }
  }
  if (!remote_usable() || remote_->options().read_only) return;
  try {
    remote_->put(entry);
  } catch (const std::exception& e) {
    remote_failed("uploading to", e);
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  count_locked("remote_stored", 1);
}

std::optional<Manifest> Storage::get_manifest(const Hash128& key) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (local_) {
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
    }
  }
  if (!remote_usable()) return std::nullopt;
  std::optional<Manifest> manifest;
  try {
    manifest = remote_->get_manifest(key);
  } catch (const CorruptError& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    count_locked("remote_rejected", 1);
    warn_once("remote-rejected", std::string(e.what()) + "; compiling instead");
    return std::nullopt;
  } catch (const IncompatibleVersionError&) {
    std::lock_guard<std::mutex> lock(mutex_);
    count_locked("remote_misses", 1);
    return std::nullopt;
  } catch (const std::exception& e) {
    remote_failed("reading from", e);
    return std::nullopt;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!manifest) {
    count_locked("remote_misses", 1);
    return std::nullopt;
  }
  count_locked("remote_hits", 1);
  if (local_ && !local_->read_only()) {
    try {
      write_manifest_file(local_->dir(), *manifest);
    } catch (const Error& e) {
      warn_once("put", std::string("storing in the cache failed: ") + e.what() +
                           "; the result is used but not cached");
    }
  }
  return manifest;
}

void Storage::put_manifest(const Manifest& manifest) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (local_ && !local_->read_only()) {
      try {
        write_manifest_file(local_->dir(), manifest);
      } catch (const Error& e) {
        warn_once("put", std::string("storing in the cache failed: ") + e.what() +
                             "; the result is used but not cached");
      }
    }
  }
  if (!remote_usable() || remote_->options().read_only) return;
  try {
    remote_->put_manifest(manifest);
  } catch (const std::exception& e) {
    remote_failed("uploading to", e);
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  count_locked("remote_stored", 1);
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
