#include "common/bytes.h"

#include "common/error.h"

namespace kcache {

std::string_view ByteReader::bytes(size_t n, const char* field) {
  if (n > remaining()) {
    fail(std::string("truncated: ") + field + " needs " + std::to_string(n) + " bytes, " +
         std::to_string(remaining()) + " left");
  }
  std::string_view out = data_.substr(pos_, n);
  pos_ += n;
  return out;
}

uint64_t ByteReader::get_le(int n, const char* field) {
  std::string_view b = bytes(static_cast<size_t>(n), field);
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
  return v;
}

void ByteReader::expect_end() const {
  if (remaining() != 0) fail(std::to_string(remaining()) + " unexpected trailing bytes");
}

void ByteReader::fail(const std::string& problem) const {
  throw CorruptError(what_ + " is corrupt at byte " + std::to_string(pos_) + ": " + problem);
}

}  // namespace kcache
