// A fixture for bench/overkeying_hit_rate: a kernel as it looks mid-debugging,
// with includes that are never compiled (an `#if 0` debugging block, an
// include commented out, a tracing header behind a macro not defined).
#include <stats/bins.cuh>

#include "atomics.cuh"
// #include "old_bins.cuh"  // the first version, kept for reference

#if 0  // debugging: dump every bin
#include "debug_print.cuh"
#define DUMP_BIN(b, v) debug_print_bin(b, v)
#else
#define DUMP_BIN(b, v)
#endif

#ifdef HISTOGRAM_TRACE
#include "trace.cuh"
#endif

extern "C" __global__ void histogram(const float* x, int n, unsigned* bins) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int b = stats::bin_of(x[i]);
  add_one(bins + b);
  DUMP_BIN(b, bins[b]);
}
