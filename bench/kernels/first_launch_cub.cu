// The CUB kernel of issue 10's first-launch comparison: each block of 128
// threads sorts its 512 ints with cub::BlockRadixSort<int, 128, 4>, the
// instance NVRTC's cubin of which carries ~950 unreferenced globals.
#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_store.cuh>

extern "C" __global__ void block_sort(const int* in, int* out) {
  using Sort = cub::BlockRadixSort<int, 128, 4>;
  __shared__ typename Sort::TempStorage temp;
  int keys[4];
  const int offset = blockIdx.x * 128 * 4;
  cub::LoadDirectBlocked(threadIdx.x, in + offset, keys);
  Sort(temp).Sort(keys);
  cub::StoreDirectBlocked(threadIdx.x, out + offset, keys);
}
