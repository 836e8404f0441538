#pragma once

__device__ inline void add_one(unsigned* p) { atomicAdd(p, 1u); }
