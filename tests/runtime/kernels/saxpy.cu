// saxpy, plus a kernel that runs for a given time (for stream/event tests).
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Spins for `ns` nanoseconds of the GPU's global timer, then sets *done = 1.
extern "C" __global__ void spin(unsigned long long ns, int* done) {
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  unsigned long long now = start;
  while (now - start < ns) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) *done = 1;
}
