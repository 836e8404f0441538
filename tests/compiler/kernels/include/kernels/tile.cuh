// Included by half_cg.cu through -I tests/compiler/kernels/include.
#pragma once

#include "tile_size.cuh"  // next to this header: resolved relative to it

constexpr int kTile = KCACHE_TILE_SIZE;
