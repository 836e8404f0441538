#pragma once
#define KCACHE_TILE_SIZE 32
