// Fuzzes cache::Manifest::decode and cache::read_lookup_record, which read the local store's
// manifest files and manifests fetched from remote servers that may lie. Beyond "no crash, no
// sanitizer report, only kcache::Error on bad input", checks what decode
// promises: every bound of manifest.h holds, no name holds a control
// character, no set repeats, and an accepted manifest encodes back to exactly
// the same bytes.
//
// The expected key is the one the input holds (bytes 12 to 28), so inputs get
// past the key check; each input is also tried with its trailing checksum
// recomputed, and the mutator (LLVMFuzzerCustomMutator) fixes the checksum
// after every byte-level mutation, so mutations reach the field parsing behind
// the checksum gate.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "cache/format/manifest.h"
#include "common/error.h"
#include "common/hash.h"
#include "common/safe_path.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size)
    __attribute__((weak));

namespace {

using kcache::cache::Manifest;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "manifest_fuzzer: broken promise: %s\n", what);
    std::abort();
  }
}

bool clean(const std::string& name) {
  return !name.empty() && name.size() <= kcache::cache::kMaxManifestNameBytes &&
         kcache::find_control_character(name) == std::string::npos;
}

kcache::Hash128 key_in(const std::string& bytes) {
  kcache::Hash128 key;
  if (bytes.size() < 28) return key;
  for (int i = 0; i < 8; ++i)
    key.high = (key.high << 8) | static_cast<unsigned char>(bytes[12 + i]);
  for (int i = 0; i < 8; ++i) key.low = (key.low << 8) | static_cast<unsigned char>(bytes[20 + i]);
  return key;
}

void check_decode(const std::string& bytes) {
  try {
    Manifest m = Manifest::decode(bytes, key_in(bytes), "fuzz input");
    check(m.key() == key_in(bytes), "the key filed under");
    check(!m.sets().empty() && m.sets().size() <= kcache::cache::kMaxManifestSets, "set count");
    for (size_t s = 0; s < m.sets().size(); ++s) {
      const kcache::cache::ManifestSet& set = m.sets()[s];
      check(!(set.empty() && set.probes.empty()) && set.size() <= kcache::cache::kMaxManifestAsks,
            "ask count");
      check(set.probes.size() <= kcache::cache::kMaxManifestProbes, "probe count");
      for (const kcache::cache::ManifestProbe& p : set.probes) {
        check(clean(p.path), "clean probe path");
        check(!(p.present && p.has_folder), "a probe is present or has a folder, not both");
      }
      check(std::find(m.sets().begin(), m.sets().begin() + s, set) == m.sets().begin() + s,
            "no repeated set");
      for (const kcache::cache::ManifestAsk& a : set) {
        check(clean(a.spelling) && clean(a.includer), "clean spelling and includer");
        check(!a.headers.empty() && a.headers.size() <= kcache::cache::kMaxManifestHeadersPerAsk,
              "header count");
        for (const kcache::cache::ManifestHeader& h : a.headers) check(clean(h.name), "clean name");
      }
    }
    // Older formats are read and written back as the newest.
    const bool newest =
        static_cast<unsigned char>(bytes[8]) == kcache::cache::kManifestFormatVersion &&
        bytes[9] == 0;
    if (newest) check(m.encode() == bytes, "encode(decode(x)) == x");
  } catch (const kcache::Error&) {
    // CorruptError or IncompatibleVersionError: what bad input must give.
  }
}

// The lookup record's in-place reader (read_lookup_record, the hit path's)
// on the same input: it reads only what decode reads (nothing decode
// refuses), and what it reads is decode's one set: the same probes, in
// order, and the same results.
void check_record_read(const std::string& bytes) {
  std::vector<kcache::cache::ProbeView> seen;
  std::optional<std::vector<kcache::cache::ManifestResult>> results;
  try {
    results = kcache::cache::read_lookup_record(
        bytes, key_in(bytes), "fuzz input", [&](const kcache::cache::ProbeView& p) {
          check(clean(std::string(p.path)), "clean record probe path");
          seen.push_back(p);
          return true;
        });
  } catch (const kcache::Error&) {
    return;
  }
  if (!results) return;
  std::optional<Manifest> m;
  try {
    m = Manifest::decode(bytes, key_in(bytes), "fuzz input");
  } catch (const kcache::Error&) {
    check(false, "a record read in place that decode refuses");
  }
  check(m->sets().size() == 1 && m->sets()[0].empty(), "a record is one set of no asks");
  const kcache::cache::ManifestSet& set = m->sets()[0];
  check(set.probes.size() == seen.size(), "the record's probe count");
  for (size_t i = 0; i < seen.size(); ++i) {
    const kcache::cache::ManifestProbe& p = set.probes[i];
    const kcache::cache::ProbeView& v = seen[i];
    check(p.path == v.path && p.present == v.present && p.has_folder == v.has_folder &&
              p.folder_depth == v.folder_depth && p.dev == v.dev && p.ino == v.ino &&
              p.size == v.size && p.mtime_ns == v.mtime_ns && p.ctime_ns == v.ctime_ns &&
              p.content == v.content,
          "a record's probe as decode reads it");
  }
  check(set.results == *results, "the record's results");
}

void fix_checksum(std::string& bytes) {
  if (bytes.size() < 8) return;
  uint64_t sum = kcache::xxh3_64(std::string_view(bytes).substr(0, bytes.size() - 8));
  for (int i = 0; i < 8; ++i) bytes[bytes.size() - 8 + i] = static_cast<char>(sum >> (8 * i));
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int /*seed*/) {
  size = LLVMFuzzerMutate ? LLVMFuzzerMutate(data, size, max_size) : size;
  std::string out(reinterpret_cast<char*>(data), size);
  fix_checksum(out);
  std::copy(out.begin(), out.end(), data);
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  check_decode(bytes);
  check_record_read(bytes);
  std::string fixed = bytes;
  fix_checksum(fixed);
  if (fixed != bytes) {
    check_decode(fixed);
    check_record_read(fixed);
  }
  return 0;
}
