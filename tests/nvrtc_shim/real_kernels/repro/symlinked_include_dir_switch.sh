#!/bin/bash
# Stale-hit probe: the -I folder is a symbolic link (like a "current -> v1" release link); it is
# switched to v2 whose header has the same size and mtime but other bytes.
set -e
H=$(cd "$(dirname "$0")/.." && pwd); ROOT=$(cd "$H/../../.." && pwd)
T=$(mktemp -d); mkdir -p "$T/v1" "$T/v2" "$T/w"
printf '#pragma once\n#define SCALE 1.0f\n' > "$T/v1/cfg.h"; printf '#pragma once\n#define SCALE 7.0f\n' > "$T/v2/cfg.h"
touch -d "2024-01-01 00:00:00" "$T/v1/cfg.h" "$T/v2/cfg.h" "$T/v1" "$T/v2"
ln -s v1 "$T/current"
cat > "$T/c.json" <<J
{"src": "#include <cfg.h>\nextern \"C\" __global__ void k(float* x){ x[threadIdx.x] *= SCALE; }\n",
 "options": ["-arch=sm_80", "-I$T/current"], "name_exprs": [], "headers": {}, "name": "k.cu"}
J
export KCACHE_EXE=$ROOT/bazel-bin/cli/kcache KCACHE_DIR=$T/store KCACHE_REMOTE=off KCACHE_SHIM_STATS=$T/stats
SHIM=$ROOT/bazel-bin/nvrtc_shim/libnvrtc.so.13; REAL=/usr/local/cuda/lib64/libnvrtc.so.13
cd "$T/w"
python3 "$H/runner.py" $SHIM ../c.json miss.json; python3 "$H/runner.py" $SHIM ../c.json hit.json
ln -sfn v2 "$T/current"
python3 "$H/runner.py" $SHIM ../c.json after.json; python3 "$H/runner.py" $REAL ../c.json real_after.json
cat "$T/stats"
if cmp -s <(grep -v destroy after.json) <(grep -v destroy real_after.json); then echo "OK: not stale"; else echo "STALE"; fi
