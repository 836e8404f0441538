// A sum with CUB's BlockReduce: each block adds up BlockThreads *
// ItemsPerThread values and writes one partial sum. The template is compiled
// for the instances the BUILD file lists as name expressions; the host finds
// each one by that expression ("block_reduce<float, 256, 4>").
#include <cub/block/block_reduce.cuh>

template <typename T, int BlockThreads, int ItemsPerThread>
__global__ void block_reduce(const T* in, T* partial, int n) {
  using Reduce = cub::BlockReduce<T, BlockThreads>;
  __shared__ typename Reduce::TempStorage temp;
  const int base = blockIdx.x * BlockThreads * ItemsPerThread;
  T items[ItemsPerThread];
  for (int i = 0; i < ItemsPerThread; ++i) {
    int index = base + i * BlockThreads + threadIdx.x;  // coalesced
    items[i] = index < n ? in[index] : T(0);
  }
  T sum = Reduce(temp).Sum(items);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}
