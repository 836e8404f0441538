#include "cache/storage.h"

#include <algorithm>
#include <cstdio>

#include "common/error.h"

namespace kcache::cache {

Storage::Storage(StorageOptions options) : options_(std::move(options)) {
  if (!options_.warn) {
    options_.warn = [](const std::string& m) {
      std::fprintf(stderr, "kcache: warning: %s\n", m.c_str());
    };
  }
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
  std::lock_guard<std::mutex> lock(mutex_);
  if (!local_) return std::nullopt;
  try {
    return local_->get(key);
  } catch (const Error& e) {
    warn_once("get",
              std::string("reading the cache failed: ") + e.what() + "; treating it as a miss");
    return std::nullopt;
  }
}

void Storage::put(const Entry& entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!local_ || local_->read_only()) return;
  try {
    local_->put(entry);
  } catch (const Error& e) {
    warn_once("put", std::string("storing in the cache failed: ") + e.what() +
                         "; the result is used but not cached");
  }
}

void Storage::count(const std::string& counter, int64_t delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (local_) local_->count(counter, delta);
}

Store* Storage::local() { return local_.get(); }

void Storage::warn_once(const std::string& kind, const std::string& message) {
  if (std::find(warned_.begin(), warned_.end(), kind) != warned_.end()) return;
  warned_.push_back(kind);
  options_.warn(message);
}

}  // namespace kcache::cache
