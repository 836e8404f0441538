// Does not compile: the log must name this file and line 4.
extern "C" __global__ void broken(float* x) {
  int i = threadIdx.x;
  x[i] = undeclared_variable * 2.0f;
}
