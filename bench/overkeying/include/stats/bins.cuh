#pragma once

#include "range.cuh"

#if 0
#include "bins_reference.cuh"  // a slower exact version, for comparisons
#endif

namespace stats {
__device__ inline int bin_of(float v) {
  int b = static_cast<int>((v - kLow) / (kHigh - kLow) * kBins);
  return b < 0 ? 0 : b >= kBins ? kBins - 1 : b;
}
}  // namespace stats
