#!/usr/bin/env python3
"""A new process's time to its first finished CUB kernel (issue 10):
bench/kernels/first_launch_cub.cu's block_sort (cub::BlockRadixSort<int,128,4>,
1024 blocks, 2 MiB copied in first), each way run as RUNS fresh processes after
one warm-up, medians printed:

- kcache, the lean bundle (the default) and the --no-lean bundle (NVRTC's bytes)
- CuPy RawModule, a hit in CuPy's on-disk kernel cache (the warm-up fills it)
- cuda.core ObjectCode.from_cubin of NVRTC's own cubin (what any cache of
  NVRTC's output hands the driver)
- cuda.core Program.compile (no cache: NVRTC every time)

    runtime_first_launch_cub.py BINARY LEAN.kcb NVRTC.kcb NVRTC.cubin SOURCE CCCL_INCLUDE
"""
import sys

from runtime_first_launch import measure

SETUP = r"""
import json, sys, time
import numpy as np
src = open(sys.argv[1]).read()
cccl = sys.argv[2]
host = ((np.arange(1024 * 512, dtype=np.uint64) * 2654435761) & 0xffffffff) >> 7
host = host.astype(np.int32)
def check(out):
    want = np.sort(host.reshape(1024, 512), axis=1).ravel()
    if not np.array_equal(out, want):
        sys.exit("blocks not sorted")
"""

CUPY = SETUP + r"""
import cupy as cp
t0 = time.perf_counter()
mod = cp.RawModule(code=src, options=("-std=c++17", "-I" + cccl))
f = mod.get_function("block_sort")
x = cp.asarray(host)
y = cp.empty_like(x)
f((1024,), (128,), (x, y))
cp.cuda.runtime.deviceSynchronize()
ms = (time.perf_counter() - t0) * 1e3
check(cp.asnumpy(y))
print(json.dumps({"first_launch_ms": ms}))
"""

CUDA_CORE = SETUP + r"""
try:
    from cuda.core import Device, LaunchConfig, ObjectCode, Program, ProgramOptions, launch
except ImportError:
    from cuda.core.experimental import (Device, LaunchConfig, ObjectCode, Program,
                                        ProgramOptions, launch)
cubin = sys.argv[3] if len(sys.argv) > 3 else None
t0 = time.perf_counter()
dev = Device(0)
dev.set_current()
stream = dev.create_stream()
if cubin:
    code = ObjectCode.from_cubin(open(cubin, "rb").read())
else:
    prog = Program(src, code_type="c++", options=ProgramOptions(
        arch="sm_" + dev.arch, std="c++17", include_path=[cccl]))
    code = prog.compile("cubin")
kernel = code.get_kernel("block_sort")
x = dev.allocate(host.nbytes, stream=stream)
y = dev.allocate(host.nbytes, stream=stream)
import cuda.bindings.driver as drv
drv.cuMemcpyHtoDAsync(int(x.handle), host.ctypes.data, host.nbytes, int(stream.handle))
launch(stream, LaunchConfig(grid=1024, block=128), kernel, x, y)
stream.sync()
ms = (time.perf_counter() - t0) * 1e3
out = np.empty_like(host)
drv.cuMemcpyDtoH(out.ctypes.data, int(y.handle), out.nbytes)
check(out)
print(json.dumps({"first_launch_ms": ms}))
"""


def main():
    binary, lean, nvrtc, nvrtc_cubin, source, cccl = sys.argv[1:7]
    py = sys.executable
    rows = [
        measure("kcache, lean bundle (default)", [binary, lean], warmups=1),
        measure("kcache, --no-lean bundle (NVRTC's images)", [binary, nvrtc], warmups=1),
        measure("CuPy RawModule (cache hit)", [py, "-c", CUPY, source, cccl], warmups=1),
        measure("cuda.core ObjectCode.from_cubin (NVRTC's cubin)",
                [py, "-c", CUDA_CORE, source, cccl, nvrtc_cubin], warmups=1),
        measure("cuda.core Program.compile (no cache)", [py, "-c", CUDA_CORE, source, cccl],
                warmups=1),
    ]
    print("\n| new process, CUB BlockRadixSort | first kernel done (in-process) | whole process |")
    print("|---|---|---|")
    for row in rows:
        if row:
            print(f"| {row[0]} | {row[1]:.1f} ms | {row[2]:.1f} ms |")
    return 0 if rows[0] and rows[1] else 1


if __name__ == "__main__":
    sys.exit(main())
