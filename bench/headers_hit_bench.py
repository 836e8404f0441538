"""A hit's cost through the drop-in libnvrtc for a kernel that includes many
headers from disk, as CuPy's generated kernels do (<cupy/carray.cuh> and its
CCCL folders; bench/cupy_headers_hit.py needs CuPy itself): here CUB's
block reduction and libcu++'s complex from the toolkit, -I the toolkit's
include folder, each program named by a new folder as CuPy names them
(beneath the bench's own temporary folder, whose stamp stays old enough
for a lookup record).
No GPU. Compares drop-in builds in the same run, alternating, on one store
per build (the first process fills it):

    python3 bench/headers_hit_bench.py [--small] N ROUNDS NAME=SHIM_DIR [NAME=SHIM_DIR ...]

--small: a kernel of no include instead (a hit's round trip alone).

SHIM_DIR holds libnvrtc.so.13 and, beside it as Bazel lays them out,
../cli/kcache. Prints each build's median hit in milliseconds (the median
over every round's per-process median of compiles 2..N).
"""
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r'''
import ctypes, os, statistics, sys, time
lib = ctypes.CDLL("libnvrtc.so.13")
n = int(sys.argv[1])
small = sys.argv[2] == "small"
opts = [b"-I/usr/local/cuda/include/cccl", b"-I/usr/local/cuda/include", b"--std=c++17", b"-ftz=true", b"-arch=sm_90",
        b"--device-as-default-execution-space"]
arr = (ctypes.c_char_p * len(opts))(*opts)
src = (b"#include <cub/block/block_reduce.cuh>\n#include <cuda/std/complex>\n"
       b'extern "C" __global__ void f(float* x) {\n'
       b"  using R = cub::BlockReduce<float, 128>;\n"
       b"  __shared__ R::TempStorage t;\n"
       b"  cuda::std::complex<float> c(x[threadIdx.x], 1.0f);\n"
       b"  float s = R(t).Sum(c.real() * c.imag());\n"
       b"  if (threadIdx.x == 0) x[0] = s; }\n")
if small:
    src = b'extern "C" __global__ void f(float* x) { x[threadIdx.x] *= 2.0f; }\n'
times = []
for i in range(n):
    prog = ctypes.c_void_p()
    name = b"%s/tmphdrbench%06d/kern.cu" % (os.environ["HDR_BENCH_FOLDER"].encode(), i)
    t = time.perf_counter()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src, name, 0, None, None) == 0
    r = lib.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    cubin = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetCUBIN(prog, cubin)
    times.append((time.perf_counter() - t) * 1000)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    assert r == 0, r
print(statistics.median(times[1:]) if n > 1 else times[0])
'''


def run(shim_dir, store, n, kernel):
    env = dict(os.environ)
    # The programs' folder: one that does not change (a folder that never
    # exists is checked through its parent's stamp, and a busy /tmp's is
    # always too new for a lookup record).
    env["HDR_BENCH_FOLDER"] = os.path.dirname(store)
    env.update({"LD_LIBRARY_PATH": shim_dir + ":/usr/local/cuda/lib64", "KCACHE_DIR": store,
                "KCACHE_REMOTE": "", "KCACHE_QUIET": "1"})
    env.pop("KCACHE_EXE", None)
    out = subprocess.run([sys.executable, "-c", CHILD, str(n), kernel], env=env, check=True,
                         capture_output=True, text=True)
    return float(out.stdout.strip())


def main():
    args = sys.argv[1:]
    kernel = "small" if args and args[0] == "--small" else "headers"
    if kernel == "small":
        args = args[1:]
    n, rounds = int(args[0]), int(args[1])
    builds = [a.split("=", 1) for a in args[2:]]
    with tempfile.TemporaryDirectory() as tmp:
        stores = {name: os.path.join(tmp, name) for name, _ in builds}
        for name, d in builds:
            run(d, stores[name], 2, kernel)  # fills the store (a miss, then a hit)
        medians = {name: [] for name, _ in builds}
        for _ in range(rounds):
            for name, d in builds:
                medians[name].append(run(d, stores[name], n, kernel))
        for name, _ in builds:
            m = medians[name]
            print("%s: hit median %.3f ms (rounds: %s)" %
                  (name, statistics.median(m), " ".join("%.3f" % x for x in m)))


if __name__ == "__main__":
    main()
