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
// Private to cache/store.cc.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kcache::cache {

constexpr uint64_t kMaxDeferredBytes = 1 << 20;

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

}  // namespace kcache::cache
