// A function template, reached through name expressions ("scale<float>").
template <typename T>
__global__ void scale(T* x, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * factor;
}

template __global__ void scale<float>(float*, float, int);
template __global__ void scale<int>(int*, int, int);
template __global__ void scale<double>(double*, double, int);
