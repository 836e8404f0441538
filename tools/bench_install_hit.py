#!/usr/bin/env python3
"""A whole-process `kcache compile` hit, per kcache binary, in the same run.

usage: tools/bench_install_hit.py N KERNEL.cu BINARY...

Each binary gets its own new store, warmed by two compiles (a miss, then a hit
that writes the lookup record); then N rounds run every binary once in turn,
so load on the machine falls on all of them alike. Prints, per binary, the
median wall time and the median CPU time (user + system, from the kernel's
rusage: steadier than wall time on a busy machine) of its hits, and each
binary's ratio to the first one's. Used for `-c opt` (//:install) against
fastbuild (`bazel-bin/cli/kcache`) and the rules' -O1 tool (docs/PERFORMANCE.md).
"""

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def hit(binary, source, store, out):
    env = dict(os.environ, KCACHE_DIR=store, KCACHE_REMOTE="off")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([binary, "compile", source, "--arch", "sm_90", "-o", out], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall * 1e3, cpu * 1e3


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    rounds, source, binaries = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    work = tempfile.mkdtemp(prefix="kcache-hit-bench.")
    try:
        places = [(os.path.join(work, "store%d" % i), os.path.join(work, "out%d.kcb" % i))
                  for i in range(len(binaries))]
        for binary, (store, out) in zip(binaries, places):
            hit(binary, source, store, out)
            hit(binary, source, store, out)
        walls = [[] for _ in binaries]
        cpus = [[] for _ in binaries]
        for _ in range(rounds):
            for i, (binary, (store, out)) in enumerate(zip(binaries, places)):
                wall, cpu = hit(binary, source, store, out)
                walls[i].append(wall)
                cpus[i].append(cpu)
        base_wall, base_cpu = statistics.median(walls[0]), statistics.median(cpus[0])
        for i, binary in enumerate(binaries):
            wall, cpu = statistics.median(walls[i]), statistics.median(cpus[i])
            print("%-50s hit: wall %6.1f ms (%.2fx), cpu %6.1f ms (%.2fx)" %
                  (binary, wall, wall / base_wall, cpu, cpu / base_cpu))
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
