#pragma once

namespace stats {
constexpr float kLow = 0.f;
constexpr float kHigh = 1.f;
constexpr int kBins = 64;
}  // namespace stats
