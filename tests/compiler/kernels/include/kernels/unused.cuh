// Included by no kernel: editing it must not change any key.
#pragma once
#define KCACHE_UNUSED 1
