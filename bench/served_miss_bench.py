#!/usr/bin/env python3
"""What a miss through the drop-in costs against NVRTC alone (issue 27).

    served_miss_bench.py SHIM REAL_NVRTC KERNELS_DIR [--n N] [--cutlass INCLUDE]

One process per library (the drop-in SHIM, libnvrtc.so.13 of nvrtc_shim/, with
an empty store; the REAL_NVRTC), each compiling the same N sources through
NVRTC's C API, one kernel after the other: every source is made new (a
comment with its number), so each drop-in compile is a miss: the scanner,
the key, the sealed NVRTC in a compile process with every file it opens
served from a snapshot, the store. The two processes take turns, kernel by
kernel, so both see the same machine. Prints each kernel's p50 and the ratio.
The first compile of each process (NVRTC's own start, the drop-in's compile
process start) is left out.

Kernels: cub_block.cu (CUB, from the toolkit's CCCL), half_cg.cu (cuda_fp16 and
cooperative groups), and with --cutlass the CuTe GEMM (cutlass/cute_gemm.cu).
"""
import os
import statistics
import subprocess
import sys
import tempfile
import json

CHILD = r"""
import ctypes, json, sys, time
lib = ctypes.CDLL(sys.argv[1])
spec = json.loads(sys.argv[2])
times = []
for i in range(spec["n"] + 1):
    src = (spec["source"] + "\n// %d %s\n" % (i, spec["tag"])).encode()
    prog = ctypes.c_void_p()
    lib.nvrtcCreateProgram(ctypes.byref(prog), src, spec["name"].encode(), 0, None, None)
    opts = (ctypes.c_char_p * len(spec["options"]))(*[o.encode() for o in spec["options"]])
    start = time.perf_counter()
    result = lib.nvrtcCompileProgram(prog, len(spec["options"]), opts)
    size = ctypes.c_size_t()
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    times.append((time.perf_counter() - start) * 1000)
    if result != 0:
        n = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetProgramLog(prog, log)
        sys.exit("compile failed: %d\n%s" % (result, log.value.decode()))
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
print(json.dumps(times[1:]))
"""


def main():
    shim, real, kdir = sys.argv[1:4]
    n = int(sys.argv[sys.argv.index("--n") + 1]) if "--n" in sys.argv else 8
    cutlass = sys.argv[sys.argv.index("--cutlass") + 1] if "--cutlass" in sys.argv else None
    cuda = os.environ.get("CUDA_PATH", "/usr/local/cuda")
    toolkit = ["-I" + cuda + "/include", "-I" + cuda + "/include/cccl"]
    kernels = [("cub_block", "cub_block.cu", ["--std=c++17"] + toolkit),
               ("half_cg", "half_cg.cu", ["-I" + os.path.join(kdir, "include")] + toolkit)]
    if cutlass:
        kernels.append(("cute_gemm", "cutlass/cute_gemm.cu",
                        ["--std=c++17", "-default-device", "-I" + cutlass] + toolkit))
    store = tempfile.mkdtemp()
    rows = []
    for name, file, options in kernels:
        with open(os.path.join(kdir, file)) as f:
            source = f.read()
        got = {}
        for tag, lib in (("nvrtc", real), ("drop-in", shim)):
            spec = {"n": n, "source": source, "tag": tag, "name": "/tmp/bench/" + name + ".cu",
                    "options": ["-arch=sm_90"] + options}
            env = dict(os.environ, KCACHE_DIR=store, KCACHE_REMOTE="off", KCACHE_QUIET="1")
            out = subprocess.run([sys.executable, "-c", CHILD, lib, json.dumps(spec)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if out.returncode != 0:
                sys.exit("%s %s failed:\n%s" % (tag, name, out.stderr))
            got[tag] = json.loads(out.stdout)
        a, b = statistics.median(got["nvrtc"]), statistics.median(got["drop-in"])
        rows.append((name, a, b, b / a, got))
    print("%-10s %12s %14s %8s" % ("kernel", "NVRTC p50", "drop-in miss", "ratio"))
    for name, a, b, r, got in rows:
        print("%-10s %10.1fms %12.1fms %8.3f" % (name, a, b, r))
        for tag in ("nvrtc", "drop-in"):
            print("  %-8s %s" % (tag, " ".join("%.0f" % t for t in got[tag])))


if __name__ == "__main__":
    main()
