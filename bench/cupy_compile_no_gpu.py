"""CuPy's own compile code through the drop-in libnvrtc on a machine with no
GPU (the build machine): CuPy asks the driver for the device's arch before it
compiles, so that lookup is replaced by sm_90 here, and the compiled module is
never loaded (no driver). Everything else is CuPy's: its options, its program
names (a new temporary folder per compile in its default mode), its headers and -I folders.

    LD_PRELOAD=bazel-bin/nvrtc_shim/libnvrtc.so.13 \\
      KCACHE_DIR=/tmp/store KCACHE_SHIM_STATS=/tmp/stats python3 bench/cupy_compile_no_gpu.py N

Compiles N RawKernel-style sources and one source including CuPy's headers
(carray.cuh, complex.cuh: its bundled CCCL through -I), printing the seconds
of each part; SHOW_OPTS=1 prints each program's name and options.
"""
import os
import sys
import time

from cupy.cuda import compiler

compiler._get_arch_for_options_for_nvrtc = lambda arch=None: ("-arch=sm_90", "cubin")
compiler._get_arch = lambda: "90"
_compile = compiler._NVRTCProgram.compile


def _show(self, options=(), log_stream=None):
    if os.environ.get("SHOW_OPTS"):
        print("name=%r options=%r" % (self.name, options), file=sys.stderr)
    return _compile(self, options, log_stream)


compiler._NVRTCProgram.compile = _show


def no_driver(e):
    return "river" in str(e)  # the module load after the compile, which needs one


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    start = time.perf_counter()
    for i in range(n):
        src = ('extern "C" __global__ void k%d(float* x, int n) {'
               " int t = threadIdx.x; if (t < n) x[t] *= %d.0f; }\n" % (i, i + 2))
        try:
            compiler._compile_module_with_cache(src, ())
        except Exception as e:  # noqa: BLE001
            if not no_driver(e):
                raise
    raw_s = time.perf_counter() - start

    from cupy._core import core
    start = time.perf_counter()
    try:
        core.compile_with_cache(
            "#include <cupy/carray.cuh>\n#include <cupy/complex.cuh>\n"
            'extern "C" __global__ void f(float* x) { x[0] = 1; }\n')
    except Exception as e:  # noqa: BLE001
        if not no_driver(e):
            raise
    headers_s = time.perf_counter() - start
    print("raw %d: %.3f s, with CuPy's headers: %.3f s" % (n, raw_s, headers_s))


if __name__ == "__main__":
    main()
