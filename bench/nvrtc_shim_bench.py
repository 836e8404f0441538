"""The drop-in libnvrtc against NVRTC, no GPU needed: fresh processes that each
compile N small kernels through NVRTC's C API (ctypes, the library opened by
soname, as CuPy and cuda-python do), timed inside the process.

    python3 bench/nvrtc_shim_bench.py SHIM [N] [REPEATS]

SHIM is the drop-in libnvrtc.so.13 (bazel-bin/nvrtc_shim/libnvrtc.so.13); the
real NVRTC is the toolkit's (/usr/local/cuda/lib64). Prints the median seconds
of: NVRTC alone; the shim on an empty store (misses, sealed); the shim on the
store the miss filled (hits); and the hit's counts from $KCACHE_SHIM_STATS.
"""
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r'''
import ctypes, sys, time
lib = ctypes.CDLL("libnvrtc.so.13")
n = int(sys.argv[1])
opts = [b"-arch=sm_90", b"-ftz=true"]
arr = (ctypes.c_char_p * len(opts))(*opts)
t = time.perf_counter()
for i in range(n):
    prog = ctypes.c_void_p()
    src = (b'extern "C" __global__ void k%d(float* x, int n) {'
           b' int t = threadIdx.x; if (t < n) x[t] = x[t] * %d.0f + 1.0f; }\n' % (i, i))
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"", 0, None, None) == 0
    assert lib.nvrtcCompileProgram(prog, len(opts), arr) == 0
    size = ctypes.c_size_t()
    assert lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)) == 0
    cubin = ctypes.create_string_buffer(size.value)
    assert lib.nvrtcGetCUBIN(prog, cubin) == 0
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
print(time.perf_counter() - t)
'''


def run(n, env):
    out = subprocess.run([sys.executable, "-c", CHILD, str(n)], env=env, check=True,
                         capture_output=True, text=True)
    return float(out.stdout.strip())


def main():
    shim = os.path.abspath(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    real_dir = "/usr/local/cuda/lib64"
    base = dict(os.environ, LD_LIBRARY_PATH=real_dir)
    base.pop("LD_PRELOAD", None)
    real = [run(n, base) for _ in range(repeats)]
    misses, hits = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as d:
            env = dict(base, LD_LIBRARY_PATH=os.path.dirname(shim) + ":" + real_dir,
                       KCACHE_DIR=d + "/store", KCACHE_SHIM_STATS=d + "/stats")
            misses.append(run(n, env))
            os.remove(d + "/stats")
            hits.append(run(n, env))
            lines = open(d + "/stats").read().split("\n")
            assert sum(line.startswith("hit ") for line in lines) == n, lines[:3]
    med = statistics.median
    print("%d kernels, median of %d processes each" % (n, repeats))
    print("NVRTC          %.3f s" % med(real))
    print("shim, misses   %.3f s  (%.2fx NVRTC)" % (med(misses), med(misses) / med(real)))
    print("shim, hits     %.4f s  (NVRTC / hits = %.0fx; every compile a hit)" %
          (med(hits), med(real) / med(hits)))


if __name__ == "__main__":
    main()
