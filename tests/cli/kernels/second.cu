// The other source of tests/cli:several: two kernels, one with no parameters.
extern "C" __global__ void second(const char* s, unsigned short n, int* out) { *out = s[0] + n; }
extern "C" __global__ void nothing() {}
