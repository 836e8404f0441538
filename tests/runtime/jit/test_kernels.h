// Kernel sources the JIT tests compile at run time.
#pragma once

namespace kcache::runtime::jit::testing {

// scale<T> multiplies and adds OFFSET, a macro chosen at run time; saxpy is
// plain extern "C".
inline constexpr const char* kScaleSource = R"(
#ifndef OFFSET
#define OFFSET 0
#endif
template <typename T>
__global__ void scale(T* x, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * factor + T(OFFSET);
}
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

// A CUB block reduction whose block size is a template argument.
inline constexpr const char* kBlockSumSource = R"(
#include <cub/block/block_reduce.cuh>
template <int Block>
__global__ void block_sum(const int* in, int* out) {
  using Reduce = cub::BlockReduce<int, Block>;
  __shared__ typename Reduce::TempStorage temp;
  int sum = Reduce(temp).Sum(in[blockIdx.x * Block + threadIdx.x]);
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}
)";

}  // namespace kcache::runtime::jit::testing
