// saxpy_computed.cu with the header included literally: its hit is found by
// the scanner's key alone (the baseline for the manifest hit).
#include "variants/double.cuh"

extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = SCALE * a * x[i] + y[i];
}
