extern "C" __global__ void other(int* out) { *out = 1; }
