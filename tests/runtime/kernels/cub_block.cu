// CUB block-wide radix sort and reduction: each block sorts its
// kThreads * ItemsPerThread keys in place and writes their sum. The template is
// instantiated for several key types and tile sizes, which also makes this the
// large image of the test set (the module-load benchmark uses it).
#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_store.cuh>

constexpr int kThreads = 128;

template <typename T, int ItemsPerThread>
__global__ void block_sort_reduce(const T* in, T* sorted, T* sums) {
  using Sort = cub::BlockRadixSort<T, kThreads, ItemsPerThread>;
  using Reduce = cub::BlockReduce<T, kThreads>;
  __shared__ union {
    typename Sort::TempStorage sort;
    typename Reduce::TempStorage reduce;
  } temp;

  const int offset = blockIdx.x * kThreads * ItemsPerThread;
  T keys[ItemsPerThread];
  cub::LoadDirectBlocked(threadIdx.x, in + offset, keys);
  T thread_sum = 0;
  for (int i = 0; i < ItemsPerThread; ++i) thread_sum += keys[i];
  T block_sum = Reduce(temp.reduce).Sum(thread_sum);
  __syncthreads();  // temp is reused by the sort
  Sort(temp.sort).Sort(keys);
  cub::StoreDirectBlocked(threadIdx.x, sorted + offset, keys);
  if (threadIdx.x == 0) sums[blockIdx.x] = block_sum;
}

template __global__ void block_sort_reduce<int, 4>(const int*, int*, int*);
template __global__ void block_sort_reduce<int, 16>(const int*, int*, int*);
template __global__ void block_sort_reduce<unsigned, 4>(const unsigned*, unsigned*, unsigned*);
template __global__ void block_sort_reduce<unsigned, 16>(const unsigned*, unsigned*, unsigned*);
template __global__ void block_sort_reduce<float, 4>(const float*, float*, float*);
template __global__ void block_sort_reduce<float, 16>(const float*, float*, float*);
template __global__ void block_sort_reduce<double, 4>(const double*, double*, double*);
template __global__ void block_sort_reduce<double, 16>(const double*, double*, double*);
