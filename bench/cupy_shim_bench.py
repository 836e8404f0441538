"""CuPy compiling kernels in a fresh process, for the drop-in libnvrtc's GPU
check and benchmark (tools/gpu_nvrtc_shim.sh runs it in several processes).

    python3 cupy_shim_bench.py N

Compiles N RawKernels (distinct sources) and one ReductionKernel, launches
each and checks its result, and prints one JSON line: the seconds the N
RawKernel compiles took, the ReductionKernel's first call, and which
libnvrtc the process mapped. CUDA is initialised before timing starts, so
the times are compiles (NVRTC or cache) plus module loads.
"""
import json
import sys
import time

import cupy as cp
import numpy as np


def raw_source(i):
    return (
        'extern "C" __global__ void k%d(float* x, int n) {\n'
        "  int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (t < n) x[t] = x[t] * %d.0f + %d.0f;\n"
        "}\n" % (i, i + 2, i)
    )


def main():
    n = int(sys.argv[1])
    x = cp.arange(256, dtype=cp.float32)  # initialises CUDA outside the timing
    cp.cuda.Device().synchronize()

    start = time.perf_counter()
    kernels = []
    for i in range(n):
        k = cp.RawKernel(raw_source(i), "k%d" % i)
        k.compile()
        kernels.append(k)
    raw_s = time.perf_counter() - start

    ok = True
    for i, k in enumerate(kernels):
        y = x.copy()
        k((1,), (256,), (y, np.int32(256)))
        ok &= bool(cp.allclose(y, x * (i + 2) + i))

    # A reduction CuPy generates, with its headers from -I folders.
    start = time.perf_counter()
    l2 = cp.ReductionKernel(
        "T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "shim_l2norm"
    )
    r = float(l2(x))
    cp.cuda.Device().synchronize()
    reduction_s = time.perf_counter() - start
    ok &= abs(r - float(np.sqrt((np.arange(256, dtype=np.float64) ** 2).sum()))) < 1e-2

    maps = open("/proc/self/maps").read()
    libs = sorted({line.split()[-1] for line in maps.splitlines() if "libnvrtc.so" in line})
    print(json.dumps({"n": n, "raw_s": raw_s, "reduction_s": reduction_s, "ok": ok,
                      "libnvrtc": libs}))


if __name__ == "__main__":
    main()
