#include "cache/local/store_deferred.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "cache/local/store_blobs.h"
#include "common/error.h"
#include "common/hash.h"

namespace kcache::cache {
namespace {

constexpr const char* kHeader = "kcache-deferred 1\n";

bool is_counter_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '_')) {
      return false;
    }
  }
  return true;
}

bool is_hex(const std::string& text, size_t size) {
  if (text.size() != size) return false;
  for (char c : text) {
    if (!std::isxdigit(static_cast<unsigned char>(c)) || std::isupper(static_cast<unsigned char>(c)))
      return false;
  }
  return true;
}

std::optional<int64_t> parse_int(const std::string& text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size()) return std::nullopt;
  return static_cast<int64_t>(value);
}

}  // namespace

void DeferredRecord::add(const DeferredRecord& other) {
  for (const auto& [name, delta] : other.counters) counters[name] += delta;
  for (const auto& [key, when] : other.used) {
    int64_t& latest = used[key];
    if (when > latest) latest = when;
  }
}

std::string encode_deferred(const DeferredRecord& record) {
  std::string out = kHeader;
  for (const auto& [name, delta] : record.counters) {
    if (delta != 0 && is_counter_name(name)) out += "c " + name + " " + std::to_string(delta) + "\n";
  }
  for (const auto& [key, when] : record.used) {
    out += "t " + key + " " + std::to_string(when) + "\n";
  }
  return out;
}

DeferredRecord decode_deferred(const std::string& text) {
  DeferredRecord record;
  const std::string header = kHeader;
  if (text.size() > kMaxDeferredBytes || text.compare(0, header.size(), header) != 0) return record;
  std::istringstream lines(text.substr(header.size()));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string tag, name, number, extra;
    if (!(fields >> tag >> name >> number) || (fields >> extra)) continue;
    std::optional<int64_t> value = parse_int(number);
    if (!value) continue;
    if (tag == "c" && is_counter_name(name)) {
      record.counters[name] += *value;
    } else if (tag == "t" && is_hex(name, 32) && *value >= 0) {
      int64_t& latest = record.used[name];
      if (*value > latest) latest = *value;
    }
  }
  return record;
}

bool is_deferred_name(const std::string& name) { return is_hex(name, 16); }

// -- the deferred/ folder -----------------------------------------------------

DeferredFiles::DeferredFiles(StoreFolder& folder)
    : folder_(folder), dir_(folder.dir() + "/" + kDeferredDirName) {}

uint64_t DeferredFiles::write(const DeferredRecord& record) {
  const uint64_t id = random_u64();
  folder_.make_folder(dir_);
  folder_.write_file(dir_ + "/" + hex64(id), encode_deferred(record));
  return id;
}

DeferredRecord DeferredFiles::claim(std::vector<Claimed>* claimed) {
  DeferredRecord all;
  std::vector<std::string> names;
  try {
    names = folder_.fs().list_directory(dir_);
  } catch (const Error&) {
    return all;
  }
  for (const std::string& name : names) {
    if (!is_deferred_name(name)) continue;
    Claimed file{dir_ + "/" + name, dir_ + "/" + name + ".merging." + random_id()};
    if (::rename(file.path.c_str(), file.claimed.c_str()) != 0) continue;  // another's now
    claimed->push_back(file);
    all.add(read(file.claimed));
  }
  return all;
}

DeferredRecord DeferredFiles::read(const std::string& path) const {
  try {
    std::optional<FileInfo> info = folder_.fs().stat(path);
    if (!info || info->is_directory || info->size > kMaxDeferredBytes) return {};
    std::optional<std::string> bytes = folder_.fs().read_file(path);
    return bytes ? decode_deferred(*bytes) : DeferredRecord{};
  } catch (const Error&) {
    return {};  // unreadable: those counts are lost, nothing else
  }
}

DeferredRecord DeferredFiles::peek() const {
  DeferredRecord all;
  try {
    for (const std::string& name : folder_.fs().list_directory(dir_)) {
      if (is_deferred_name(name)) all.add(read(dir_ + "/" + name));
    }
  } catch (const Error&) {
  }
  return all;
}

void DeferredFiles::remove(const std::vector<Claimed>& claimed) {
  for (const Claimed& file : claimed) ::unlink(file.claimed.c_str());
}

void DeferredFiles::give_back(const std::vector<Claimed>& claimed) {
  for (const Claimed& file : claimed) ::rename(file.claimed.c_str(), file.path.c_str());
}

uint64_t DeferredFiles::remove_stale(int64_t cutoff_ns) {
  uint64_t removed = 0;
  FileSystem& fs = folder_.fs();
  for (const std::string& name : fs.list_directory(dir_)) {
    if (is_deferred_name(name)) continue;
    std::optional<FileInfo> info = fs.stat(dir_ + "/" + name);
    if (!info || info->is_directory || info->mtime_ns > cutoff_ns) continue;
    if (fs.remove_file(dir_ + "/" + name)) removed += 1;
  }
  return removed;
}

}  // namespace kcache::cache
