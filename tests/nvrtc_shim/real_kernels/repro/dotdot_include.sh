#!/bin/bash
# Minimal: an -I header in sub/ includes "../y.h" (no symbolic links anywhere). Variants: the compile
# succeeds / NVRTC rejects the source. Three processes each; all should be miss, hit, hit.
set -e
H=$(cd "$(dirname "$0")/.." && pwd); ROOT=$(cd "$H/../../.." && pwd)
T=$(mktemp -d); mkdir -p "$T/inc/sub" "$T/w"
printf '#pragma once\n#include "../y.h"\n' > "$T/inc/sub/x.h"; printf '#pragma once\n#define YV 2.0f\n' > "$T/inc/y.h"
export KCACHE_EXE=$ROOT/bazel-bin/cli/kcache KCACHE_DIR=$T/store KCACHE_REMOTE=off KCACHE_SHIM_STATS=$T/stats
SHIM=$ROOT/bazel-bin/nvrtc_shim/libnvrtc.so.13
for body in 'x[0] *= YV;' 'x[0] *= YV + undefined_name;'; do
cat > "$T/c.json" <<J
{"src": "#include <sub/x.h>\nextern \"C\" __global__ void k(float* x){ $body }\n",
 "options": ["-arch=sm_80", "-I$T/inc"], "name_exprs": [], "headers": {}, "name": "k.cu"}
J
  echo "== $body"; : > "$T/stats"
  for i in 1 2 3; do (cd "$T/w" && python3 "$H/runner.py" $SHIM ../c.json s.json; grep '"compile"' s.json); done
  cat "$T/stats"
done
