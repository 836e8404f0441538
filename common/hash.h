// XXH3 hashing (libxxhash): the 128-bit digest that names cache entries and the
// 64-bit checksum that guards stored bytes.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kcache {

struct Hash128 {
  uint64_t high = 0;
  uint64_t low = 0;

  // 32 lowercase hex digits, high half first; never truncated.
  std::string hex() const;
  // Parses exactly 32 hex digits (either case); nullopt otherwise.
  static std::optional<Hash128> from_hex(std::string_view text);

  friend bool operator==(const Hash128& a, const Hash128& b) {
    return a.high == b.high && a.low == b.low;
  }
  friend bool operator!=(const Hash128& a, const Hash128& b) { return !(a == b); }
  friend bool operator<(const Hash128& a, const Hash128& b) {
    return a.high != b.high ? a.high < b.high : a.low < b.low;
  }
};

Hash128 xxh3_128(std::string_view data);
uint64_t xxh3_64(std::string_view data);

// Streaming XXH3-128 for inputs assembled piece by piece.
class Hasher128 {
 public:
  Hasher128();
  ~Hasher128();
  Hasher128(const Hasher128&) = delete;
  Hasher128& operator=(const Hasher128&) = delete;
  void update(std::string_view data);
  Hash128 digest() const;
  // Starts again from nothing; allocates nothing (the seal's supervisor
  // hashes with one made beforehand).
  void reset();

 private:
  void* state_;  // XXH3_state_t*; xxhash.h stays out of this header
};

// 16 lowercase hex digits.
std::string hex64(uint64_t value);

}  // namespace kcache
