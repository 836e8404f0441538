// A template kernel instantiated only through name expressions
// (--name-expression 'scale<float>' --name-expression 'scale<double>').
#include "scale_op.cuh"

template <typename T>
__global__ void scale(T* data, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = ScaleOp<T>{factor}(data[i]);
}
