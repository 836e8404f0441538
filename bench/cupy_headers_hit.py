"""The hit cost of a kernel as CuPy builds every generated one: including
<cupy/carray.cuh> with CuPy's include folder and its bundled CCCL folders on
-I, compiled through NVRTC's C API. Run it twice under the drop-in (the first
run fills the store), and once against the real NVRTC:

    LD_PRELOAD=bazel-bin/nvrtc_shim/libnvrtc.so.13 KCACHE_DIR=/tmp/store \\
      python3 bench/cupy_headers_hit.py [N]
    NVRTC=/usr/local/cuda/lib64/libnvrtc.so.13 python3 bench/cupy_headers_hit.py [N]

Prints the median and each of N compiles in milliseconds (the first run's
first compile is the miss). Needs CuPy (cupy-cuda13x) for its headers only:
no GPU.
"""
import ctypes
import os
import statistics
import sys
import time

import cupy

INCLUDE = os.path.join(os.path.dirname(cupy.__file__), "_core", "include")
OPTIONS = [
    "-I" + INCLUDE + "/cupy/_cccl/cub",
    "-I" + INCLUDE + "/cupy/_cccl/thrust",
    "-I" + INCLUDE + "/cupy/_cccl/libcudacxx",
    "--std=c++17",
    "-I" + INCLUDE,
    "-I/usr/local/cuda/include",
    "-ftz=true",
    "-arch=sm_90",
    "--device-as-default-execution-space",
]
SOURCE = ("#include <cupy/carray.cuh>\n#include <cupy/complex.cuh>\n"
          'extern "C" __global__ void f(CArray<float, 1> x) { x[threadIdx.x] = 1; }\n')


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    lib = ctypes.CDLL(os.environ.get("NVRTC", "libnvrtc.so.13"))
    times = []
    for i in range(n):
        prog = ctypes.c_void_p()
        # CuPy's default mode: a new temporary folder's name each time.
        name = ("/tmp/tmpbench%06d/kern.cu" % i).encode()
        start = time.perf_counter()
        lib.nvrtcCreateProgram(ctypes.byref(prog), SOURCE.encode(), name, 0, None, None)
        opts = (ctypes.c_char_p * len(OPTIONS))(*[o.encode() for o in OPTIONS])
        result = lib.nvrtcCompileProgram(prog, len(OPTIONS), opts)
        size = ctypes.c_size_t()
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        cubin = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetCUBIN(prog, cubin)
        times.append((time.perf_counter() - start) * 1000)
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
        if result != 0:
            sys.exit("compile failed: %d" % result)
    print("median %.2f ms; each: %s" % (statistics.median(times),
                                        " ".join("%.1f" % t for t in times)))


if __name__ == "__main__":
    main()
