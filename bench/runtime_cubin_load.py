#!/usr/bin/env python3
"""Times the driver's load of cubin files: cuModuleLoadData + cuModuleGetFunction
+ cuModuleUnload, and the same with cuLibraryLoadData, median of RUNS after a
warm-up, one line per file. For comparing cubins of one source made by
different compilers (NVRTC's own, kcache's lean images, nvcc), whose load
times differ by much more than their sizes. A .ptx file is JIT-compiled by the
driver at each load (run with CUDA_CACHE_DISABLE=1 to time the JIT itself),
median of PTX_RUNS.

    runtime_cubin_load.py KERNEL_SYMBOL FILE.cubin|FILE.ptx [...]
"""
import statistics
import subprocess
import sys
import time

RUNS = 50
PTX_RUNS = 5


def check(result):
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        raise RuntimeError(f"CUDA error {err}")
    return result[1] if isinstance(result, tuple) and len(result) > 1 else None


def symbols(path):
    if path.endswith(".ptx"):
        return "(PTX)"
    try:
        out = subprocess.run(["readelf", "-s", "-W", path], capture_output=True, text=True).stdout
        return sum(1 for line in out.splitlines() if line.strip()[:1].isdigit())
    except OSError:
        return "?"


def main():
    try:
        from cuda.bindings import driver as cu
    except ImportError as e:
        print(f"cuda.bindings is not importable here ({e}); nothing timed")
        return 2
    symbol, files = sys.argv[1].encode(), sys.argv[2:]
    check(cu.cuInit(0))
    device = check(cu.cuDeviceGet(0))
    context = check(cu.cuDevicePrimaryCtxRetain(device))
    check(cu.cuCtxSetCurrent(context))
    print("| image | bytes | ELF symbols | cuModuleLoadData (+ get, unload) | cuLibraryLoadData (+ get, unload) |")
    print("|---|---|---|---|---|")
    for path in files:
        data = open(path, "rb").read()
        if path.endswith(".ptx") and not data.endswith(b"\0"):
            data += b"\0"  # the driver reads PTX as a C string
        runs = PTX_RUNS if path.endswith(".ptx") else RUNS

        def module_load():
            m = check(cu.cuModuleLoadData(data))
            check(cu.cuModuleGetFunction(m, symbol))
            check(cu.cuModuleUnload(m))

        def library_load():
            lib = check(cu.cuLibraryLoadData(data, [], [], 0, [], [], 0))
            kernel = check(cu.cuLibraryGetKernel(lib, symbol))
            check(cu.cuKernelGetFunction(kernel))
            check(cu.cuLibraryUnload(lib))

        row = [path, str(len(data)), str(symbols(path))]
        for load in (module_load, library_load):
            try:
                load()
                times = []
                for _ in range(runs):
                    start = time.perf_counter()
                    load()
                    times.append((time.perf_counter() - start) * 1e6)
                row.append(f"{statistics.median(times):.0f} us")
            except Exception as e:  # one API's trouble should not hide the other's figure
                row.append(f"{type(e).__name__}: {e}")
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
