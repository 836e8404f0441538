#!/bin/bash
# Stale-hit probe: edit an -I header keeping its size and mtime (as cp -p / tar / rsync -t do),
# then compile again through the drop-in; the answer must be the real NVRTC's for the new bytes.
set -e
H=$(cd "$(dirname "$0")/.." && pwd); ROOT=$(cd "$H/../../.." && pwd)
T=$(mktemp -d); mkdir -p "$T/inc" "$T/w"
printf '#pragma once\n#define SCALE 1.0f\n' > "$T/inc/cfg.h"
cat > "$T/c.json" <<J
{"src": "#include <cfg.h>\nextern \"C\" __global__ void k(float* x){ x[threadIdx.x] *= SCALE; }\n",
 "options": ["-arch=sm_80", "-I$T/inc"], "name_exprs": [], "headers": {}, "name": "k.cu"}
J
export KCACHE_EXE=$ROOT/bazel-bin/cli/kcache KCACHE_DIR=$T/store KCACHE_REMOTE=off KCACHE_SHIM_STATS=$T/stats
SHIM=$ROOT/bazel-bin/nvrtc_shim/libnvrtc.so.13; REAL=/usr/local/cuda/lib64/libnvrtc.so.13
cd "$T/w"
python3 "$H/runner.py" $SHIM ../c.json miss.json
python3 "$H/runner.py" $SHIM ../c.json hit.json
touch -r "$T/inc/cfg.h" "$T/ref"
printf '#pragma once\n#define SCALE 7.0f\n' > "$T/inc/cfg.h"; touch -r "$T/ref" "$T/inc/cfg.h"
python3 "$H/runner.py" $SHIM ../c.json after.json
python3 "$H/runner.py" $REAL ../c.json real_after.json
cat "$T/stats"
if cmp -s <(grep -v destroy after.json) <(grep -v destroy real_after.json); then echo "OK: not stale"; else echo "STALE: drop-in answer differs from real NVRTC after the edit"; fi
