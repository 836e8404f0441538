#!/bin/bash
# Finding 2: cooperative_groups/reduce.h (also scan.h, memcpy_async.h) include "../cooperative_groups.h";
# with the toolkit's standard layout (/usr/local/cuda -> /usr/local/cuda-13.0) and -I/usr/local/cuda/include,
# every compile is a miss: it is stored each time but never found again (stats say "miss ... any-name").
# With the resolved folder (-I/usr/local/cuda-13.0/include) it hits.
set -e
H=$(cd "$(dirname "$0")/.." && pwd); ROOT=$(cd "$H/../../.." && pwd)
T=$(mktemp -d); mkdir -p "$T/w"
export KCACHE_EXE=$ROOT/bazel-bin/cli/kcache KCACHE_DIR=$T/store KCACHE_REMOTE=off KCACHE_SHIM_STATS=$T/stats
SHIM=$ROOT/bazel-bin/nvrtc_shim/libnvrtc.so.13
for inc in /usr/local/cuda/include $(readlink -f /usr/local/cuda)/include; do
cat > "$T/c.json" <<J
{"src": "#include <cooperative_groups.h>\n#include <cooperative_groups/reduce.h>\nnamespace cg = cooperative_groups;\nextern \"C\" __global__ void k(const int* in, int* out){ auto w = cg::tiled_partition<32>(cg::this_thread_block()); int v = cg::reduce(w, in[threadIdx.x], cg::plus<int>()); if(w.thread_rank()==0) atomicAdd(out, v); }\n",
 "options": ["--std=c++17", "-arch=sm_80", "-I/usr/local/cuda/include/cccl", "-I$inc"], "name_exprs": [], "headers": {}, "name": "k.cu"}
J
  echo "== -I$inc"; : > "$T/stats"
  for i in 1 2 3; do (cd "$T/w" && python3 "$H/runner.py" $SHIM ../c.json o.json); done
  cat "$T/stats"
done
