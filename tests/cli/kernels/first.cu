// One of two sources of one cuda_kernel (tests/cli:several): a bundle each.
struct Pair {
  float a;
  double b;
};
extern "C" __global__ void first(Pair p, double* out) { *out = p.a + p.b; }
