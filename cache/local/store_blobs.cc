#include "cache/local/store_blobs.h"

#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <random>
#include <string_view>

#include "common/error.h"
#include "common/safe_path.h"

namespace kcache::cache {

uint64_t random_u64() {
  uint64_t value = 0;
  if (getrandom(&value, sizeof value, 0) != static_cast<ssize_t>(sizeof value)) {
    static std::atomic<uint64_t> counter{0};
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    value = std::random_device{}() ^ (static_cast<uint64_t>(getpid()) << 32) ^
            static_cast<uint64_t>(now) ^ (++counter * 0x9E3779B97F4A7C15ull);
  }
  return value;
}

std::string random_id() { return hex64(random_u64()); }

std::optional<Hash128> key_of_blob_name(const std::string& name) {
  if (name.size() != 32 + 1 + 16 || name[32] != '.') return std::nullopt;
  for (size_t i = 33; i < name.size(); ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
  }
  return Hash128::from_hex(std::string_view(name).substr(0, 32));
}

bool blob_of_key(const std::string& file, const std::string& hex) {
  std::optional<Hash128> key = key_of_blob_name(file);
  return key && key->hex() == hex;
}

BlobFiles::BlobFiles(StoreFolder& folder)
    : folder_(folder), dir_(folder.dir() + "/" + kBlobDirName) {}

std::string BlobFiles::path(const std::string& file) const {
  if (!key_of_blob_name(file)) {
    throw CorruptError("the index in " + folder_.dir() + " names \"" + escape_for_message(file) +
                       "\" as a blob file, which is not a blob name (<32 hex>.<16 hex>)");
  }
  return join_plain_name(join_plain_name(dir_, file.substr(0, 2), "blob shard"), file,
                         "blob file name");
}

std::string BlobFiles::write(const Entry& entry) {
  const std::string file = entry.key().hex() + "." + random_id();
  const std::string where = path(file);
  folder_.make_folder(where.substr(0, where.rfind('/')));
  folder_.write_file(where, entry.encoded());
  return file;
}

std::optional<std::string> BlobFiles::read(const std::string& file) const {
  return folder_.fs().read_file(path(file));
}

std::string BlobFiles::problem(const std::string& hex, const std::string& file,
                               int64_t size) const {
  try {
    std::optional<std::string> bytes;
    if (!blob_of_key(file, hex)) {
      return "the index names \"" + escape_for_message(file) +
             "\" as its blob file, which is not a blob name of this key";
    }
    if (!(bytes = read(file))) return "blob file " + path(file) + " is missing";
    if (static_cast<int64_t>(bytes->size()) != size) {
      return "blob file has " + std::to_string(bytes->size()) + " bytes, the index says " +
             std::to_string(size);
    }
    if (Entry::decode(std::move(*bytes), "cache entry " + hex).key().hex() != hex) {
      return "the blob file holds the entry of another key";
    }
    return "";
  } catch (const IncompatibleVersionError&) {
    return "";  // a newer kcache's entry: not corrupt
  } catch (const Error& e) {
    return e.what();
  }
}

void BlobFiles::remove(const std::string& hex, const std::string& file) {
  if (!blob_of_key(file, hex)) {
    folder_.notice("not-a-blob-name", "not removing \"" + escape_for_message(file) +
                                          "\", named as a blob file by the index, which is not "
                                          "a blob name of its key");
    return;
  }
  folder_.remove_quietly(path(file));
}

std::vector<std::string> BlobFiles::shard_names() const {
  std::vector<std::string> out;
  for (const std::string& name : folder_.fs().list_directory(dir_)) {
    std::optional<FileInfo> info = folder_.fs().stat(dir_ + "/" + name);
    if (info && info->is_directory) out.push_back(name);
  }
  return out;
}

std::vector<BlobFiles::Found> BlobFiles::files_of(const Hash128& key, int64_t after_ns) const {
  const std::string hex = key.hex();
  const std::string shard = shard_dir(hex.substr(0, 2));
  std::vector<std::string> names;
  try {
    names = folder_.fs().list_directory(shard);
  } catch (const Error&) {
    return {};  // no such shard (yet)
  }
  std::vector<Found> out;
  for (const std::string& name : names) {
    if (!blob_of_key(name, hex)) continue;
    std::optional<FileInfo> written = folder_.fs().stat(shard + "/" + name);
    if (!written || written->mtime_ns <= after_ns) continue;
    out.push_back({name, written->mtime_ns});
  }
  return out;
}

std::optional<Entry> BlobFiles::read_entry(const std::string& path, const Hash128& key) const {
  std::optional<std::string> bytes = folder_.fs().read_file(path);
  if (!bytes) return std::nullopt;
  Entry entry = Entry::decode(std::move(*bytes), path);
  if (entry.key() != key) throw CorruptError(path + " holds the entry of another key");
  return entry;
}

}  // namespace kcache::cache
