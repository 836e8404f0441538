#!/usr/bin/env python3
"""A whole-process `kcache compile` hit against ccache's hit of a small g++
compile, in the same run (issue 43's "hit vs ccache").

  hit_vs_ccache.py OLD_KCACHE NEW_KCACHE KERNELS_DIR [--runs 9]

Both kcache builds (-c opt) and ccache get a store of their own, warmed by
one compile; then each round runs, in turn, every kernel's hit with OLD and
with NEW and one ccache hit, so all see the same machine. Prints each
median (of --runs) and its ratio to ccache's median, by wall time and by the
process's CPU time (user + sys: steadier on a loaded machine). Kernels: saxpy.cu (no
toolkit header), half_cg.cu (cuda_fp16), cub_block.cu (CUB).

Where nvcc is found (PATH, else /usr/local/cuda/bin), each round also runs
ccache's hit of `nvcc -c -arch=sm_90 cub_block.cu`: the same CUB kernel, so
the same ~800 headers to check, which the small g++ compile does not have.
"""
import os, shutil, statistics, subprocess, sys, tempfile, time

SMALL_CPP = """#include <vector>
int sum(const std::vector<int>& v) { int s = 0; for (int x : v) s += x; return s; }
"""


def run(cmd, env=None, cwd=None, cpu=None):
    """Wall seconds of one process; its CPU seconds appended to `cpu`."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err.decode()}")
    if cpu is not None:
        cpu.append(usage.ru_utime + usage.ru_stime)
    return dt


def main():
    old, new, kdir = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 9
    kernels = [("saxpy", ["saxpy.cu"]), ("half_cg", ["half_cg.cu", "-I", "include"]),
               ("cub_block", ["cub_block.cu"])]
    tmp = tempfile.mkdtemp()
    cmds = {}
    for name, args in kernels:
        src = [os.path.join(kdir, args[0])] + [os.path.join(kdir, a) if a == "include" else a
                                               for a in args[1:]]
        for tag, binary in (("old", old), ("new", new)):
            store = os.path.join(tmp, f"{tag}-{name}")
            cmds[(name, tag)] = ([binary, "--dir", store, "compile"] + src +
                                 ["--arch", "sm_90", "-o", os.path.join(tmp, f"{tag}.kcb")])
            run(cmds[(name, tag)])  # a miss that stores
            run(cmds[(name, tag)])  # records written by a hit
    with open(os.path.join(tmp, "small.cc"), "w") as f:
        f.write(SMALL_CPP)
    cenv = dict(os.environ, CCACHE_DIR=os.path.join(tmp, "ccache"))
    ccache = ["ccache", "g++", "-O2", "-c", "small.cc", "-o", "small.o"]
    run(ccache, cenv, tmp)
    run(ccache, cenv, tmp)
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                    if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else None)
    ccache_cub = None
    if nvcc:
        ccache_cub = ["ccache", nvcc, "-c", "-arch=sm_90", os.path.join(kdir, "cub_block.cu"),
                      "-o", os.path.join(tmp, "cub_block.o")]
        run(ccache_cub, cenv, tmp)  # nvcc's compile, stored
        run(ccache_cub, cenv, tmp)
    times = {key: [] for key in cmds}
    times["ccache"] = []
    times["ccache_cub"] = []
    cpu = {key: [] for key in times}
    for _ in range(runs):
        for name, _args in kernels:
            for tag in ("old", "new"):
                times[(name, tag)].append(run(cmds[(name, tag)], cpu=cpu[(name, tag)]))
            times["ccache"].append(run(ccache, cenv, tmp, cpu=cpu["ccache"]))
        if ccache_cub:
            times["ccache_cub"].append(run(ccache_cub, cenv, tmp, cpu=cpu["ccache_cub"]))
    stats = subprocess.run(["ccache", "-s"], env=cenv, capture_output=True, text=True).stdout
    c = statistics.median(times["ccache"])
    print(f"ccache hit (g++ -O2 -c, small file): {c * 1e3:.2f} ms (median of {len(times['ccache'])})")
    print(f"{'kernel':10} {'old hit':>10} {'old/ccache':>11} {'new hit':>10} {'new/ccache':>11} {'new/old':>8}")
    for name, _args in kernels:
        o = statistics.median(times[(name, "old")])
        n = statistics.median(times[(name, "new")])
        print(f"{name:10} {o * 1e3:8.2f}ms {o / c:11.2f} {n * 1e3:8.2f}ms {n / c:11.2f} {n / o:8.3f}")
    cc = statistics.median(cpu["ccache"])
    print(f"CPU (user + sys) of the process; ccache {cc * 1e3:.2f} ms")
    for name, _args in kernels:
        o = statistics.median(cpu[(name, "old")])
        n = statistics.median(cpu[(name, "new")])
        print(f"{name:10} {o * 1e3:8.2f}ms {o / cc:11.2f} {n * 1e3:8.2f}ms {n / cc:11.2f} {n / o:8.3f}")
    if ccache_cub:
        w = statistics.median(times["ccache_cub"])
        wc = statistics.median(cpu["ccache_cub"])
        n = statistics.median(times[("cub_block", "new")])
        nc = statistics.median(cpu[("cub_block", "new")])
        print(f"ccache hit of nvcc -c cub_block.cu (the same kernel): {w * 1e3:.2f} ms wall, "
              f"{wc * 1e3:.2f} ms CPU; new cub_block / it: {n / w:.2f} wall, {nc / wc:.2f} CPU")
    print("ccache -s hits line:", [l for l in stats.splitlines() if "Hits" in l or "hit" in l][:2])
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
