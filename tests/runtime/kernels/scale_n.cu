// An int and a float side by side: swapping them at launch must not compile
// (tests/runtime/launch_kinds.cc).
extern "C" __global__ void scale_n(int n, float scale, float* data) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= scale;
}
