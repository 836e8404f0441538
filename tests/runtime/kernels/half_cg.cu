// cuda_fp16 + cooperative_groups: a dot product of two __half vectors,
// reduced per warp tile, then across the grid after grid.sync() (so it needs
// a cooperative launch).
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_fp16.h>

namespace cg = cooperative_groups;

// partial: one float per block; result: the sum of all partials.
extern "C" __global__ void half_dot(const __half* a, const __half* b, float* partial,
                                    float* result, int n) {
  cg::grid_group grid = cg::this_grid();
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
  __shared__ float tile_sums[32];

  float sum = 0.0f;
  for (int i = static_cast<int>(grid.thread_rank()); i < n; i += static_cast<int>(grid.size())) {
    sum += __half2float(__hmul(a[i], b[i]));
  }
  sum = cg::reduce(tile, sum, cg::plus<float>());
  if (tile.thread_rank() == 0) tile_sums[tile.meta_group_rank()] = sum;
  block.sync();
  if (block.thread_rank() == 0) {
    float block_sum = 0.0f;
    for (unsigned t = 0; t < tile.meta_group_size(); ++t) block_sum += tile_sums[t];
    partial[blockIdx.x] = block_sum;
  }
  grid.sync();
  if (grid.thread_rank() == 0) {
    float total = 0.0f;
    for (unsigned i = 0; i < gridDim.x; ++i) total += partial[i];
    *result = total;
  }
}
