#!/bin/bash
# Finding 1: a program named by an absolute path in the *working folder* is stored "name-dependent"
# (never shared with another folder) although NVRTC's answers do not depend on the folder;
# the same program named in a folder other than the working folder is stored "any-name".
# usage: repro/cwd_is_program_folder.sh   (from the worktree, after bazel build -c opt //nvrtc_shim:libnvrtc.so.13 //cli:kcache)
set -e
H=$(cd "$(dirname "$0")/.." && pwd); ROOT=$(cd "$H/../../.." && pwd)
T=$(mktemp -d); mkdir -p "$T/a" "$T/b"
cat > "$T/case.json" <<'J'
{"src": "#include <cuda_fp16.h>\nextern \"C\" __global__ void k(__half2* x){ x[threadIdx.x] = __hmul2(x[threadIdx.x], x[threadIdx.x]); }\n",
 "options": ["-arch=sm_80", "-I/usr/local/cuda/include"], "name_exprs": [], "headers": {}, "name": "NAME"}
J
export KCACHE_EXE=$ROOT/bazel-bin/cli/kcache KCACHE_DIR=$T/store KCACHE_REMOTE=off KCACHE_SHIM_STATS=$T/stats KCACHE_DEBUG_NAME_CHECK=1
for cwd_and_name in "a:$T/a/kernel.cu" "b:$T/a/kernel2.cu"; do
  cwd=${cwd_and_name%%:*}; name=${cwd_and_name#*:}
  sed "s#NAME#$name#" "$T/case.json" > "$T/c.json"
  (cd "$T/$cwd" && python3 "$H/runner.py" "$ROOT/bazel-bin/nvrtc_shim/libnvrtc.so.13" "$T/c.json" "$T/o.json")
done
cat "$T/stats"
