#pragma once
#include <cstdio>

__device__ inline void debug_print_bin(int b, unsigned v) { printf("bin %d: %u\n", b, v); }
