#!/bin/bash
# Stale-hit probe: -Ia -Ib, cfg.h only in b (hit), then a/cfg.h appears (shadows b's), then a nested
# quoted include next to the includer appears; each step must answer as the real NVRTC.
set -e
H=$(cd "$(dirname "$0")/.." && pwd); ROOT=$(cd "$H/../../.." && pwd)
T=$(mktemp -d); mkdir -p "$T/a" "$T/b/sub" "$T/w"
printf '#pragma once\n#include "sub/inner.h"\n' > "$T/b/cfg.h"; printf '#define SCALE 1.0f\n' > "$T/b/sub/inner.h"
cat > "$T/c.json" <<J
{"src": "#include <cfg.h>\nextern \"C\" __global__ void k(float* x){ x[threadIdx.x] *= SCALE; }\n",
 "options": ["-arch=sm_80", "-I$T/a", "-I$T/b"], "name_exprs": [], "headers": {}, "name": "k.cu"}
J
export KCACHE_EXE=$ROOT/bazel-bin/cli/kcache KCACHE_DIR=$T/store KCACHE_REMOTE=off KCACHE_SHIM_STATS=$T/stats
SHIM=$ROOT/bazel-bin/nvrtc_shim/libnvrtc.so.13; REAL=/usr/local/cuda/lib64/libnvrtc.so.13
cd "$T/w"
check() { python3 "$H/runner.py" $SHIM ../c.json s.json; python3 "$H/runner.py" $SHIM ../c.json s2.json; python3 "$H/runner.py" $REAL ../c.json r.json
  for x in s s2; do cmp -s <(grep -v destroy $x.json) <(grep -v destroy r.json) && echo "$1 $x OK" || echo "$1 $x STALE/DIFF"; done; }
check base
printf '#define SCALE 2.0f\n' > "$T/b/sub/inner2.h"; mkdir -p "$T/a/sub"; printf '#define SCALE 3.0f\n' > "$T/a/sub/inner.h"; check a-sub-inner-added
printf '#pragma once\n#define SCALE 9.0f\n' > "$T/a/cfg.h"; check a-cfg-added
rm "$T/a/cfg.h"; check a-cfg-removed
cat "$T/stats"
