// What a process that only looked entries up has to record (its counters and
// the entries it used), kept in a file of its own under the store's
// deferred/ folder instead of the index: a hit then takes no write lock,
// writes no journal and syncs nothing. The next process that writes the
// index merges these files into it (Store: put, stats, housekeeping), as
// ccache batches its statistics.
//
// File grammar (text, one record a line; the file is data, so a reader skips
// any line that does not parse and never reads more than kMaxDeferredBytes):
//
//   file    ::= "kcache-deferred 1\n" line*
//   line    ::= "c " counter " " int64 "\n"     a counter's delta
//             | "t " hex32 " " int64 "\n"       an entry used at that unix time
//   counter ::= [a-z0-9_]{1,64}
//
// Private to cache/local/store.cc and its parts.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cache/local/store_folder.h"

namespace kcache::cache {

constexpr uint64_t kMaxDeferredBytes = 1 << 20;
constexpr const char* kDeferredDirName = "deferred";

struct DeferredRecord {
  std::map<std::string, int64_t> counters;
  std::map<std::string, int64_t> used;  // key hex -> unix seconds (the latest)
  bool empty() const { return counters.empty() && used.empty(); }
  void add(const DeferredRecord& other);
};

std::string encode_deferred(const DeferredRecord& record);
// What parses of `text`; a file of another format reads as empty.
DeferredRecord decode_deferred(const std::string& text);

// A deferred file's name: 16 hex digits (temp files and claimed files have
// more).
bool is_deferred_name(const std::string& name);

// The store's deferred/ folder.
class DeferredFiles {
 public:
  explicit DeferredFiles(StoreFolder& folder);

  // Writes `record` to a new deferred file; returns its random id (a caller
  // merges the folder about once in so many writes). Throws IoError.
  uint64_t write(const DeferredRecord& record);

  // A deferred file taken by one writer: renamed, so that two writers never
  // add one twice.
  struct Claimed {
    std::string path;
    std::string claimed;
  };
  // Takes every deferred file and returns what they hold together.
  DeferredRecord claim(std::vector<Claimed>* claimed);
  // What the deferred files hold now, without taking them (a read-only
  // user's statistics).
  DeferredRecord peek() const;
  // The claimed files removed (their counts are in the index now) or given
  // back (the write failed).
  static void remove(const std::vector<Claimed>& claimed);
  static void give_back(const std::vector<Claimed>& claimed);
  // Temp files and claimed files written before `cutoff_ns`: left by a
  // killed process. Returns how many were removed.
  uint64_t remove_stale(int64_t cutoff_ns);

 private:
  DeferredRecord read(const std::string& path) const;

  StoreFolder& folder_;
  const std::string dir_;
};

}  // namespace kcache::cache
