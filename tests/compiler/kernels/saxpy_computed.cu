// saxpy with its scale chosen by a computed include (-D VARIANT=name): the
// scanner cannot see the header, NVRTC asks for it, and a hit is found
// through a manifest (cache/manifest.h). bench/compile_bench.cc compares its
// hit with saxpy_literal.cu's, which includes the same header literally.
#define KCACHE_STR2(x) #x
#define KCACHE_STR(x) KCACHE_STR2(x)
#include KCACHE_STR(variants/VARIANT.cuh)

extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = SCALE * a * x[i] + y[i];
}
