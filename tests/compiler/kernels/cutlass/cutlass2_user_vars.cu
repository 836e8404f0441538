// CUTLASS 2.x class constants beside a user's variables of every kind the
// lean pass must keep (docs/LEAN.md, lean-v3). A static data member takes no
// memory space in CUDA ("memory qualifier on data member is not allowed"), so
// `template <class T> struct Cfg { __device__ static int v; };` cannot be written.
#include <cutlass/matrix_coord.h>
#include <cutlass/layout/matrix.h>

namespace user {
// A namespace spelled like CUTLASS's class cutlass::layout::RowMajor, with a
// member spelled like its constant kRank: both stay (the text cannot tell).
namespace RowMajor {
__device__ int kRank = 3;
}
__device__ int zero = 0;  // zero-initialised: no initializer in the PTX
__device__ int knob = 11;
}  // namespace user

namespace cutlass {
// A user's variable in CUTLASS's namespace, named like nothing of CUTLASS's.
__device__ int user_knob;
}  // namespace cutlass

__constant__ int user_constant = 5;

// With -default-device a non-const static data member is a device variable:
// it stays.
struct Counters {
  static int hits;
};
int Counters::hits = 7;

// A constant declared through a macro: its class body does not show it, so
// the lean pass cannot decide and keeps it.
#define KCACHE_TEST_CONSTANT(name, value) static int const name = value;
struct Tile {
  KCACHE_TEST_CONSTANT(kSize, 16)
};

extern "C" __global__ void cutlass2_user_vars(int* out) {
  cutlass::MatrixCoord c(threadIdx.x, 2);
  out[threadIdx.x] = c.row() + c.column() + Tile::kSize;
}
