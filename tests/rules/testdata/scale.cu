#include "scale_util.cuh"

template <typename T>
__global__ void scale(T* data, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = kcache_test::times(data[i], factor);
}
