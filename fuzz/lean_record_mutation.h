// The lean record mutation the entry and bundle fuzzers share: one of the
// record's fields set to a value at or past its bound (common/lean_record.h),
// or all three to random bits. Header-only, for fuzz targets.
#pragma once

#include <cstdint>
#include <iterator>

namespace kcache::fuzz {

// Lean record values at and past each bound (common/lean_record.h).
inline const uint8_t kLeanFlags[] = {0x00, 0x01, 0x03, 0x05, 0x08, 0x02,
                                     0x04, 0x07, 0x09, 0x10, 0xff};
inline const int64_t kLeanBytes[] = {0,
                                     1,
                                     -1,
                                     154272,
                                     int64_t{1} << 30,
                                     (int64_t{1} << 30) + 1,
                                     -(int64_t{1} << 30),
                                     -(int64_t{1} << 30) - 1,
                                     INT64_MIN,
                                     INT64_MAX};
inline const uint32_t kLeanVariables[] = {0, 1, 1001, UINT32_MAX};

template <typename Rng>
void mutate_lean_record(uint8_t& flags, uint64_t& bytes, uint32_t& variables, Rng& rng) {
  switch (rng() % 4) {
    case 0:
      flags = kLeanFlags[rng() % std::size(kLeanFlags)];
      break;
    case 1:
      bytes = static_cast<uint64_t>(kLeanBytes[rng() % std::size(kLeanBytes)]);
      break;
    case 2:
      variables = kLeanVariables[rng() % std::size(kLeanVariables)];
      break;
    default:
      flags = static_cast<uint8_t>(rng());
      bytes = (uint64_t{rng()} << 32) ^ rng();
      variables = static_cast<uint32_t>(rng());
  }
}

}  // namespace kcache::fuzz
