"""The CuPy workload of issue 26, on a GPU: about twenty compiles of the kinds
CuPy makes (ElementwiseKernels, a ReductionKernel, a RawModule with name
expressions, a RawModule with an -I header, sum, cumsum, argmax, sort), each
result checked against NumPy. tools/gpu_drop_in.sh runs it in fresh
processes, with and without kcache, in CuPy's default mode.

    python3 cupy_workload.py HEADER_DIR

HEADER_DIR holds scale.cuh (`#define SCALE <n>`), which the RawModule
includes through -I: editing it must change the result (CuPy's own disk
cache, keyed by the source text, does not see the edit). Prints one JSON line:
seconds for the whole workload (CUDA initialised before), whether every
result was right, and the SCALE the -I kernel computed with.
"""
import json
import os
import sys
import time

import cupy as cp
import numpy as np


def time_compiles(path):
    """$WL_COMPILE_TIMES=FILE: one line per nvrtcCompileProgram as CuPy calls it
    (milliseconds, the program's name), to set each compile beside kcache's
    per-compile lines in the same run."""
    from cupy.cuda import compiler
    compile_ = compiler._NVRTCProgram.compile
    out = open(path, "a")

    def timed(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return compile_(self, *args, **kwargs)
        finally:
            out.write("%.1f %s\n" % ((time.perf_counter() - t) * 1e3, self.name))
            out.flush()

    compiler._NVRTCProgram.compile = timed


def main():
    header_dir = sys.argv[1]
    if os.environ.get("WL_COMPILE_TIMES"):
        time_compiles(os.environ["WL_COMPILE_TIMES"])
    x = cp.arange(1, 1025, dtype=cp.float32)  # initialises CUDA outside the timing
    cp.cuda.Device().synchronize()
    xs = cp.asnumpy(x)
    ok = True
    start = time.perf_counter()

    for i, op in enumerate(["x * 2", "x + 3", "x * x", "sqrt(x)", "x - 1"]):
        k = cp.ElementwiseKernel("T x", "T y", "y = %s" % op, "wl_ew%d" % i)
        ok &= bool(cp.allclose(k(x), cp.asarray(eval(op.replace("sqrt", "np.sqrt"),
                                                       {"np": np, "x": xs}))))
    l2 = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "wl_l2")
    ok &= abs(float(l2(x)) - float(np.sqrt((xs.astype(np.float64) ** 2).sum()))) < 1e-1

    module = cp.RawModule(code=r"""
template <typename T> __global__ void twice(T* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 2;
}""", options=("-std=c++17",), name_expressions=("twice<float>", "twice<int>"))
    y = x.copy()
    module.get_function("twice<float>")((4,), (256,), (y, np.int32(1024)))
    ok &= bool(cp.allclose(y, x * 2))

    scaled = cp.RawModule(code=r"""
#include "scale.cuh"
extern "C" __global__ void scaled(float* x, int n, int* scale) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * SCALE;
  if (i == 0) *scale = SCALE;
}""", options=("-I" + header_dir,))
    y = x.copy()
    scale = cp.zeros(1, dtype=cp.int32)
    scaled.get_function("scaled")((4,), (256,), (y, np.int32(1024), scale))
    s = int(scale.get()[0])
    ok &= bool(cp.allclose(y, x * s))

    ok &= abs(float(cp.sum(x)) - float(xs.sum())) < 1
    ok &= bool(cp.allclose(cp.cumsum(x), cp.asarray(np.cumsum(xs))))
    ok &= int(cp.argmax(x)) == int(np.argmax(xs))
    rev = x[::-1].copy()
    ok &= bool(cp.all(cp.sort(rev) == x))
    rev.sort()
    ok &= bool(cp.all(rev == x))
    cp.cuda.Device().synchronize()
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "ok": bool(ok), "scale": s}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
