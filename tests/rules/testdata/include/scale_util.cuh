#pragma once
namespace kcache_test {
template <typename T>
__device__ T times(T a, T b) { return a * b; }
}  // namespace kcache_test
