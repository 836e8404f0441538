#!/usr/bin/env python3
"""What a miss through the drop-in costs against NVRTC alone (issue 27).

    served_miss_bench.py SHIM REAL_NVRTC KERNELS_DIR [--n N] [--rounds R] [--cutlass INCLUDE]
                         [--only KERNEL] [--variants nvrtc,served,...] [--parallel P]
                         [--same-ptx] [--before DIR]

One process per variant and round, each compiling N sources through NVRTC's C
API (every source made new by a device variable of its own, so each compile is
a new kernel, with new PTX, and each drop-in compile is a miss: the scanner, the key, the sealed NVRTC in a compile process with every
file it opens served from a snapshot, the store, an empty store each):
  nvrtc      the REAL_NVRTC alone
  served     the drop-in SHIM (libnvrtc.so.13 of nvrtc_shim/), program NAME.cu
  unsealed   the same with KCACHE_SEAL=off (compiled, not stored): the seal's
             share of `served` is served - unsealed
  in-folder  the drop-in, program /tmp/bench/NAME.cu as CuPy names them: also
             compiled under another name at once (the name check, issue 26)
  before     with --before DIR: DIR's libnvrtc.so.13 and kcache (another build,
             to compare two trees in one run); add it to --variants
The variants take turns, ROUNDS times per kernel, so all see the same machine.
With --parallel P each round runs P processes of every variant at the same
time instead (P x variants processes at once), in lockstep: all start their
Nth compile together, and the next only when all have finished it. A shared
host's speed drifts by more than the differences measured; variants running
side by side, step by step, see the same drift. Ratios are then per step.
Prints each kernel's p50s and the ratios to NVRTC alone. The first compile of
each process (NVRTC's start, the drop-in's compile process start) is left out.

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
    if spec["lockstep"] and not sys.stdin.readline():  # the go for this step
        break
    # A new kernel each time: new PTX (a device variable of its own), so NVRTC
    # alone cannot take its PTX's machine code from the driver's JIT cache
    # (~/.nv/ComputeCache: NVRTC starts the driver where there is one), which
    # the sealed NVRTC is not given. --same-ptx: a numbered comment only.
    unique = "".join(c if c.isalnum() else "_" for c in spec["tag"]) + "_%d" % i
    new = "// %s\n" if spec["same_ptx"] else "__device__ int kcache_bench_miss_%s;\n"
    src = (spec["source"] + "\n" + new % unique).encode()
    prog = ctypes.c_void_p()
    lib.nvrtcCreateProgram(ctypes.byref(prog), src, spec["name"].encode(), 0, None, None)
    opts = (ctypes.c_char_p * len(spec["options"]))(*[o.encode() for o in spec["options"]])
    start = time.perf_counter()
    result = lib.nvrtcCompileProgram(prog, len(spec["options"]), opts)
    size = ctypes.c_size_t()
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    times.append((time.perf_counter() - start) * 1000)
    if spec["lockstep"]:
        print(times[-1], flush=True)
    if result != 0:
        n = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetProgramLog(prog, log)
        sys.exit("compile failed: %d\n%s" % (result, log.value.decode()))
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
print(json.dumps(times[1:]), flush=True)
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
    # (tag, library, program name, extra environment). A name without a
    # folder is the program's own (no second compile under another name: the
    # seal's cost alone); one in a folder, as CuPy names them, is also
    # compiled in another folder at the same time, to share its entry.
    variants = [("nvrtc", real, "NAME.cu", {}),
                ("served", shim, "NAME.cu", {}),
                ("unsealed", shim, "NAME.cu", {"KCACHE_SEAL": "off"}),
                ("in-folder", shim, "/tmp/bench/NAME.cu", {})]
    if "--before" in sys.argv:  # another build's drop-in and kcache side by side, e.g. the last release
        before = sys.argv[sys.argv.index("--before") + 1]
        variants.append(("before", os.path.join(before, "libnvrtc.so.13"), "NAME.cu",
                         {"KCACHE_EXE": os.path.join(before, "kcache")}))
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 2
    if "--only" in sys.argv:  # one kernel, e.g. --only cute_gemm
        kernels = [k for k in kernels if k[0] == sys.argv[sys.argv.index("--only") + 1]]
    if "--variants" in sys.argv:  # e.g. --variants nvrtc,served (nvrtc first)
        keep = sys.argv[sys.argv.index("--variants") + 1].split(",")
        variants = [v for v in variants if v[0] in keep]
    same_ptx = "--same-ptx" in sys.argv
    parallel = int(sys.argv[sys.argv.index("--parallel") + 1]) if "--parallel" in sys.argv else 0
    run_id = "%x" % int.from_bytes(os.urandom(4), "little")
    rows = []
    for name, file, options in kernels:
        with open(os.path.join(kdir, file)) as f:
            source = f.read()
        got = {tag: [] for tag, _, _, _ in variants}
        per_round = {tag: [] for tag, _, _, _ in variants}  # p50 of each round
        def start(tag, lib, program, extra, label):
            # This run's own: a later run on the same host must not find
            # NVRTC alone's PTX in the driver's JIT cache.
            spec = {"n": n, "source": source, "tag": "%s %s" % (run_id, label), "same_ptx": same_ptx,
                    "lockstep": bool(parallel),
                    "name": program.replace("NAME", name), "options": ["-arch=sm_90"] + options}
            env = dict(os.environ, KCACHE_DIR=tempfile.mkdtemp(), KCACHE_REMOTE="off", **extra)
            return subprocess.Popen([sys.executable, "-c", CHILD, lib, json.dumps(spec)], env=env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)

        def finish(tag, child):
            if child.stdin:  # lockstep: a child still waiting for a step ends
                child.stdin.close()
            out, err = child.stdout.read(), child.stderr.read()  # through what readline() buffered
            child.wait()
            out = out.strip().splitlines()[-1] if out.strip() else ""
            if child.returncode != 0:
                sys.exit("%s %s failed:\n%s" % (tag, name, err))
            # A drop-in that cannot cache (no kcache binary beside it, an
            # option it leaves to NVRTC) is NVRTC alone: nothing measured.
            sealed = tag != "unsealed"  # which says its compiles are not cached
            if "was not found" in err or "without the cache" in err or (sealed and "not cached" in err):
                sys.exit("%s %s did not go through kcache:\n%s" % (tag, name, err))
            return json.loads(out)

        for r in range(rounds):
            if parallel:  # P of each variant at once, in lockstep
                children = [(v[0], start(*v, "%s %d %d" % (v[0], r, p)))
                            for p in range(parallel) for v in variants]
                # Every process starts its compile of a step at once and the
                # step ends when all have finished: each step's compiles see
                # the same host, whichever variant is slower.
                for step in range(n + 1):
                    for _, child in children:
                        child.stdin.write("go\n")
                        child.stdin.flush()
                    took = [(tag, child.stdout.readline()) for tag, child in children]
                    if any(not t for _, t in took):
                        break  # a child failed: finish() says why
                    if step == 0:
                        continue  # NVRTC's start, the compile process's start
                    for tag, _, _, _ in variants:
                        times = [float(t) for got_tag, t in took if got_tag == tag]
                        got[tag] += times
                        per_round[tag].append(statistics.median(times))
                for tag, child in children:
                    finish(tag, child)
                continue
            for tag, lib, program, extra in variants:  # the variants take turns
                times = finish(tag, start(tag, lib, program, extra, "%s %d" % (tag, r)))
                got[tag] += times
                per_round[tag].append(statistics.median(times))
        rows.append((name, {tag: statistics.median(t) for tag, t in got.items()}, got, per_round))
    print("%-10s" % "kernel" + "".join("%14s" % tag for tag, _, _, _ in variants) +
          "".join("%12s" % (tag + "/nvrtc") for tag, _, _, _ in variants[1:]))
    for name, p50, got, per_round in rows:
        print("%-10s" % name + "".join("%12.1fms" % p50[tag] for tag, _, _, _ in variants) +
              "".join("%12.3f" % (p50[tag] / p50["nvrtc"]) for tag, _, _, _ in variants[1:]))
        for tag, _, _, _ in variants:
            print("  %-10s %s" % (tag, " ".join("%.0f" % t for t in got[tag])))
        # The host's speed drifts from round to round by as much as the
        # differences measured: each round's ratio to that round's NVRTC.
        for tag, _, _, _ in variants[1:]:
            ratios = sorted(a / b for a, b in zip(per_round[tag], per_round["nvrtc"]))
            print("  %-10s /nvrtc per round (step): median %.3f, range %.3f-%.3f" %
                  (tag, statistics.median(ratios), ratios[0], ratios[-1]))


if __name__ == "__main__":
    main()
