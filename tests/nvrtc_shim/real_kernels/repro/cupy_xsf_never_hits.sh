#!/bin/bash
# Finding 1 (CuPy): cupyx.scipy.special-style kernels (cupy/xsf/cephes/*.h include "../config.h") never hit,
# through the venv path lib/ and through its lib64 -> lib link alike.
set -e
H=$(cd "$(dirname "$0")/.." && pwd); ROOT=$(cd "$H/../../.." && pwd)
T=$(mktemp -d); mkdir -p "$T/w"
export KCACHE_EXE=$ROOT/bazel-bin/cli/kcache KCACHE_DIR=$T/store KCACHE_REMOTE=off KCACHE_SHIM_STATS=$T/stats
SHIM=$ROOT/bazel-bin/nvrtc_shim/libnvrtc.so.13; REAL=/usr/local/cuda/lib64/libnvrtc.so.13
for lib in lib64 lib; do
INC=$(echo /opt/kcache-cupy/$lib/python3*/site-packages/cupy/_core/include)
cat > "$T/c.json" <<J
{"src": "#include <cupy/carray.cuh>\n#include <cupy/xsf/cephes/ellik.h>\nextern \"C\" __global__ void cupyx_scipy_special_ellipkinc(const CArray<float,1,true,true> _raw_in0, const CArray<float,1,true,true> _raw_in1, CArray<float,1,true,true> _raw_out0, CIndexer<1,true> _ind){ CUPY_FOR(i, _ind.size()) { _ind.set(i); const float in0 = _raw_in0[_ind.get()]; const float in1 = _raw_in1[_ind.get()]; float &out0 = _raw_out0[_ind.get()]; out0 = xsf::cephes::ellik(in0, in1); } }\n",
 "options": ["-arch=sm_90", "--std=c++17", "-I$INC", "-I$INC/cupy/_cccl/libcudacxx", "-I/usr/local/cuda/include"], "name_exprs": [], "headers": {}, "name": "k.cu"}
J
  echo "== -I$INC"; : > "$T/stats"
  (cd "$T/w" && python3 "$H/runner.py" $REAL ../c.json r.json && grep '"compile"' r.json)
  for i in 1 2 3; do (cd "$T/w" && python3 "$H/runner.py" $SHIM ../c.json s$i.json && cmp -s <(grep -v destroy s$i.json) <(grep -v destroy r.json) && echo "answer $i equals real"); done
  cat "$T/stats"
done
