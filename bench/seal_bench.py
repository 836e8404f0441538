#!/usr/bin/env python3
"""The seal's cost (issue 18), whole `kcache` processes, two builds side by side.

  seal_bench.py OLD_KCACHE NEW_KCACHE KERNELS_DIR [--hits N] [--misses N]

For each kernel: the hit process p50 of each build (the store warmed by one
compile first; runs alternate old/new so both see the same machine), and the
new build's miss (`--no-store`) p50 with the seal and with KCACHE_SEAL=off.
Prints a table with ratios. Kernels: saxpy.cu (no toolkit include),
half_cg.cu (cuda_fp16 + cooperative_groups), cub_block.cu (CUB).
"""
import os, subprocess, sys, tempfile, time, statistics

def run(cmd, env=None):
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr.decode()}")
    return dt

def main():
    old, new, kdir = sys.argv[1:4]
    hits = int(sys.argv[sys.argv.index("--hits") + 1]) if "--hits" in sys.argv else 100
    misses = int(sys.argv[sys.argv.index("--misses") + 1]) if "--misses" in sys.argv else 5
    kernels = [("saxpy", ["saxpy.cu"]), ("half_cg", ["half_cg.cu", "-I", "include"]),
               ("cub_block", ["cub_block.cu"])]
    tmp = tempfile.mkdtemp()
    rows = []
    for name, args in kernels:
        src = [os.path.join(kdir, args[0])] + [os.path.join(kdir, a) if a == "include" else a for a in args[1:]]
        res = {}
        for tag, binary in (("old", old), ("new", new)):
            store = os.path.join(tmp, f"{tag}-{name}")
            res[tag] = ([binary, "--dir", store, "compile"] + src +
                        ["--arch", "sm_90", "-o", os.path.join(tmp, f"{tag}.kcb")])
            run(res[tag])  # warm: a miss that stores
        times = {"old": [], "new": []}
        for _ in range(hits):
            for tag in ("old", "new"):
                times[tag].append(run(res[tag]))
        nostore = [new, "compile"] + src + ["--arch", "sm_90", "--no-store", "-o", os.path.join(tmp, "m.kcb")]
        sealed, unsealed = [], []
        env_off = dict(os.environ, KCACHE_SEAL="off")
        for _ in range(misses):
            sealed.append(run(nostore))
            unsealed.append(run(nostore, env_off))
        o, n = statistics.median(times["old"]), statistics.median(times["new"])
        s, u = statistics.median(sealed), statistics.median(unsealed)
        rows.append((name, o * 1e3, n * 1e3, n / o, s * 1e3, u * 1e3, s / u))
    print(f"{'kernel':10} {'hit p50 old':>12} {'hit p50 new':>12} {'new/old':>8} "
          f"{'miss sealed':>12} {'miss unsealed':>14} {'sealed/un':>10}")
    for r in rows:
        print(f"{r[0]:10} {r[1]:10.2f}ms {r[2]:10.2f}ms {r[3]:8.3f} {r[4]:10.1f}ms {r[5]:12.1f}ms {r[6]:10.3f}")

if __name__ == "__main__":
    main()
