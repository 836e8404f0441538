#pragma once
#include <c.cuh>
__device__ float b_fn(float x){ return x+C_VAL; }
