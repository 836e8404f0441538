#include "common/hash.h"

#include <gtest/gtest.h>

namespace kcache {
namespace {

TEST(Hash128Test, HexIsThirtyTwoDigitsAndRoundTrips) {
  Hash128 h = xxh3_128("kcache");
  std::string hex = h.hex();
  EXPECT_EQ(hex.size(), 32u);
  EXPECT_EQ(Hash128::from_hex(hex), h);
}

TEST(Hash128Test, KnownValueOfEmptyInput) {
  // XXH3-128 of "" from the xxHash reference implementation's test vectors.
  EXPECT_EQ(xxh3_128("").hex(), "99aa06d3014798d86001c324468d497f");
}

TEST(Hash128Test, FromHexRejectsWrongLengthAndNonHex) {
  EXPECT_FALSE(Hash128::from_hex("abc"));
  EXPECT_FALSE(Hash128::from_hex(std::string(31, 'a') + "g"));
  EXPECT_TRUE(Hash128::from_hex(std::string(32, 'A')));
}

TEST(Hash128Test, StreamingEqualsOneShot) {
  Hasher128 h;
  h.update("kc");
  h.update("ache");
  EXPECT_EQ(h.digest(), xxh3_128("kcache"));
}

}  // namespace
}  // namespace kcache
