#!/usr/bin/env python3
"""A new process's time to its first finished kernel: kcache (embedded bundle)
against CuPy's RawModule on a cache hit and cuda.core's Program.compile, on
the same saxpy source and device; with a third argument, also kcache_jit on a
store hit and on a miss (NVRTC). Each is run as RUNS fresh processes and the
median is printed, both the in-process time (from before the first CUDA call
to the kernel finished) and the wall time of the whole process (interpreter
start and imports included for the Python ones).

    runtime_first_launch.py path/to/runtime_first_launch path/to/saxpy.cu \
        [path/to/runtime_first_launch_jit]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = 5

CUPY = r"""
import json, sys, time
import numpy as np
import cupy as cp
src = open(sys.argv[1]).read()
t0 = time.perf_counter()
mod = cp.RawModule(code=src)
f = mod.get_function("saxpy")
n = 1 << 20
x = cp.ones(n, dtype=cp.float32)
y = cp.ones(n, dtype=cp.float32)
f(((n + 255) // 256,), (256,), (np.float32(2.0), x, y, np.int32(n)))
cp.cuda.runtime.deviceSynchronize()
print(json.dumps({"first_launch_ms": (time.perf_counter() - t0) * 1e3}))
"""

CUDA_CORE = r"""
import json, sys, time
import numpy as np
try:
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
except ImportError:
    from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
src = open(sys.argv[1]).read()
t0 = time.perf_counter()
dev = Device(0)
dev.set_current()
stream = dev.create_stream()
prog = Program(src, code_type="c++", options=ProgramOptions(arch="sm_" + dev.arch))
kernel = prog.compile("cubin").get_kernel("saxpy")
n = 1 << 20
x = dev.allocate(n * 4, stream=stream)
y = dev.allocate(n * 4, stream=stream)
launch(stream, LaunchConfig(grid=(n + 255) // 256, block=256), kernel,
       np.float32(2.0), x, y, np.int32(n))
stream.sync()
print(json.dumps({"first_launch_ms": (time.perf_counter() - t0) * 1e3}))
"""


def measure(name, argv, warmups=0, store=None):
    """store: None, a folder (every process uses it as KCACHE_DIR), or "fresh"
    (each process gets an empty one: a miss)."""
    def env():
        if store is None:
            return None
        folder = tempfile.mkdtemp(prefix="kcache-first-launch-") if store == "fresh" else store
        return dict(os.environ, KCACHE_DIR=folder, KCACHE_REMOTE="off")

    for _ in range(warmups):
        subprocess.run(argv, capture_output=True, text=True, env=env())
    inside, wall = [], []
    for _ in range(RUNS):
        run_env = env()
        start = time.perf_counter()
        p = subprocess.run(argv, capture_output=True, text=True, env=run_env)
        wall.append((time.perf_counter() - start) * 1e3)
        if p.returncode != 0:
            print(f"{name}: failed (exit {p.returncode}): {p.stderr.strip()[-2000:]}")
            return None
        inside.append(json.loads(p.stdout.strip().splitlines()[-1])["first_launch_ms"])
    row = (name, statistics.median(inside), statistics.median(wall))
    print(f"{name}: in-process {row[1]:.1f} ms, whole process {row[2]:.1f} ms "
          f"(medians of {RUNS}; in-process runs: {', '.join(f'{v:.1f}' for v in inside)})")
    return row


def main():
    binary, source = sys.argv[1], sys.argv[2]
    jit = sys.argv[3] if len(sys.argv) > 3 else None
    rows = [
        measure("kcache (embedded bundle)", [binary], warmups=1),
        # The first process fills CuPy's on-disk kernel cache; the measured ones hit it.
        measure("CuPy RawModule (cache hit)", [sys.executable, "-c", CUPY, source], warmups=1),
        measure("cuda.core Program.compile (no cache)", [sys.executable, "-c", CUDA_CORE, source],
                warmups=1),
    ]
    if jit:
        # The warm-up process compiles and stores; the measured ones hit.
        rows.append(measure("kcache_jit (store hit)", [jit, source], warmups=1,
                            store=tempfile.mkdtemp(prefix="kcache-first-launch-")))
        rows.append(measure("kcache_jit (miss: NVRTC, then stored)", [jit, source], warmups=1,
                            store="fresh"))
    print("\n| new process, saxpy | first kernel done (in-process) | whole process |")
    print("|---|---|---|")
    for row in rows:
        if row:
            print(f"| {row[0]} | {row[1]:.1f} ms | {row[2]:.1f} ms |")
    return 0 if rows[0] else 1


if __name__ == "__main__":
    sys.exit(main())
