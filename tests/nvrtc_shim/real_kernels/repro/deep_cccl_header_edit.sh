#!/bin/bash
# Stale-hit probe on a real library: a private copy of the toolkit's CCCL on -I, a CUB kernel compiled
# (miss, hit), then a header deep in CUB's include graph edited; the drop-in must answer as the real
# NVRTC does for the new bytes (and again in a later process).
set -e
H=$(cd "$(dirname "$0")/.." && pwd); ROOT=$(cd "$H/../../.." && pwd)
T=$(mktemp -d); cp -r /usr/local/cuda/include/cccl "$T/cccl"; mkdir -p "$T/w"
cat > "$T/c.json" <<J
{"src": "#include <cub/block/block_reduce.cuh>\nextern \"C\" __global__ void bsum(const float* in, float* out){ using BR = cub::BlockReduce<float, 128>; __shared__ typename BR::TempStorage t; float s = BR(t).Sum(in[threadIdx.x]); if(threadIdx.x==0) *out = s; }\n",
 "options": ["--std=c++17", "-arch=sm_90", "-I$T/cccl"], "name_exprs": [], "headers": {}, "name": "k.cu"}
J
export KCACHE_EXE=$ROOT/bazel-bin/cli/kcache KCACHE_DIR=$T/store KCACHE_REMOTE=off KCACHE_SHIM_STATS=$T/stats
SHIM=$ROOT/bazel-bin/nvrtc_shim/libnvrtc.so.13; REAL=/usr/local/cuda/lib64/libnvrtc.so.13
cd "$T/w"
python3 "$H/runner.py" $SHIM ../c.json miss.json; python3 "$H/runner.py" $SHIM ../c.json hit.json
# a header deep in the graph: cub/warp/specializations/warp_reduce_shfl.cuh (reached through block_reduce -> warp reductions)
f=$(grep -rl "struct WarpReduceShfl" "$T/cccl/cub/" | head -1); echo "editing $f"
sed -i '0,/struct WarpReduceShfl/s//__device__ int kcache_probe_marker = 42;\nstruct WarpReduceShfl/' "$f"
python3 "$H/runner.py" $SHIM ../c.json after.json; python3 "$H/runner.py" $SHIM ../c.json after2.json
python3 "$H/runner.py" $REAL ../c.json real_after.json
cat "$T/stats"
for x in after after2; do python3 - $x <<'P'
import json,sys
a=json.load(open(sys.argv[1]+".json")); r=json.load(open("real_after.json")); m=json.load(open("miss.json"))
k=[x for x in ("ptx_norm_sha","ptx_size","cubin_size","log","compile") if a.get(x)!=r.get(x)]
print(sys.argv[1], "differs from real after edit:" , k, "| real changed vs before:", r.get("ptx_norm_sha")!=m.get("ptx_norm_sha"))
P
done
