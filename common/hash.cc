#include "common/hash.h"

#include <xxhash.h>

#include <new>

namespace kcache {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_hex(std::string& out, uint64_t v) {
  for (int shift = 60; shift >= 0; shift -= 4) out.push_back(kHexDigits[(v >> shift) & 0xf]);
}

}  // namespace

std::string Hash128::hex() const {
  std::string out;
  out.reserve(32);
  append_hex(out, high);
  append_hex(out, low);
  return out;
}

std::optional<Hash128> Hash128::from_hex(std::string_view text) {
  if (text.size() != 32) return std::nullopt;
  uint64_t halves[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    int v = hex_value(text[i]);
    if (v < 0) return std::nullopt;
    halves[i / 16] = (halves[i / 16] << 4) | static_cast<uint64_t>(v);
  }
  return Hash128{halves[0], halves[1]};
}

Hash128 xxh3_128(std::string_view data) {
  XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  return Hash128{h.high64, h.low64};
}

uint64_t xxh3_64(std::string_view data) { return XXH3_64bits(data.data(), data.size()); }

Hasher128::Hasher128() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}

Hasher128::~Hasher128() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Hasher128::update(std::string_view data) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), data.data(), data.size());
}

void Hasher128::reset() { XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_)); }

Hash128 Hasher128::digest() const {
  XXH128_hash_t h = XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_));
  return Hash128{h.high64, h.low64};
}

std::string hex64(uint64_t value) {
  std::string out;
  out.reserve(16);
  append_hex(out, value);
  return out;
}

}  // namespace kcache
