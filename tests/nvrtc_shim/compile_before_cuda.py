"""Compiles a kernel with NVRTC before the process's first CUDA call, then
starts CUDA and runs it (issue 26: under the old drop-in, the sealed thread
left in the process made CUDA fail with cudaErrorOperatingSystem). Run under
`kcache run` on a GPU machine by tools/gpu_drop_in.sh; exits 0 and prints
"ok <device count>" when the kernel ran and its result is right.
"""
import sys

import numpy as np
from cupy_backends.cuda.libs import nvrtc

SOURCE = b'extern "C" __global__ void add1(float* x) { x[threadIdx.x] += 1.0f; }\n'


def main():
    prog = nvrtc.createProgram(SOURCE.decode(), "add1.cu", [], [])
    nvrtc.compileProgram(prog, ["-arch=sm_90"])
    cubin = nvrtc.getCUBIN(prog)
    nvrtc.destroyProgram(prog)

    from cupy_backends.cuda.api import runtime  # the first CUDA call is below
    count = runtime.getDeviceCount()
    import cupy as cp
    module = cp.cuda.function.Module()
    module.load(cubin)
    x = cp.zeros(32, dtype=cp.float32)
    module.get_function("add1")((1,), (32,), (x,))
    ok = bool(cp.all(x == 1))
    print("ok" if ok else "WRONG", count)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
