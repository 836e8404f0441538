// Half-precision dot products, one per block, with cooperative groups: exercises
// the toolkit headers NVRTC reads itself (cuda_fp16.h, cooperative_groups).
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_fp16.h>

#include "kernels/tile.cuh"

namespace cg = cooperative_groups;

extern "C" __global__ void half_dot(const __half* x, const __half* y, float* out, int n) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<kTile> tile = cg::tiled_partition<kTile>(block);
  float sum = 0.f;
  for (int i = block.thread_rank(); i < n; i += block.size()) {
    sum += __half2float(__hmul(x[i], y[i]));
  }
  sum = cg::reduce(tile, sum, cg::plus<float>());
  if (tile.thread_rank() == 0) atomicAdd(out + blockIdx.x, sum);
}
