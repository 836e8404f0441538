// A CUB block-wide sort then reduce (needs -I <cuda>/include/cccl, which kcache
// passes to NVRTC itself).
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>

constexpr int kThreads = 128;
constexpr int kItems = 4;

extern "C" __global__ void sort_and_sum(int* keys, int* sums) {
  using Sort = cub::BlockRadixSort<int, kThreads, kItems>;
  using Reduce = cub::BlockReduce<int, kThreads>;
  __shared__ union {
    typename Sort::TempStorage sort;
    typename Reduce::TempStorage reduce;
  } temp;
  int items[kItems];
  int* block_keys = keys + blockIdx.x * kThreads * kItems;
  for (int i = 0; i < kItems; ++i) items[i] = block_keys[threadIdx.x * kItems + i];
  Sort(temp.sort).Sort(items);
  __syncthreads();
  for (int i = 0; i < kItems; ++i) block_keys[threadIdx.x * kItems + i] = items[i];
  int sum = Reduce(temp.reduce).Sum(items);
  if (threadIdx.x == 0) sums[blockIdx.x] = sum;
}
