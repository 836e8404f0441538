#pragma once

template <typename T>
struct ScaleOp {
  T factor;
  __device__ T operator()(T v) const { return v * factor; }
};
