#!/usr/bin/env python3
"""Compares kcache's occupancy figures with cuda.core's Kernel.occupancy.

Runs occupancy_report (which loads each fixture bundle through kcache and
prints its figures as JSON lines, naming the file `kcache bundle --extract`
wrote for the image it chose), loads those image bytes with cuda.core, asks
the same questions and prints every pair. Exits 1 on any difference, 2 if
cuda.core cannot be imported.

    occupancy_vs_cuda_core.py path/to/occupancy_report
(run from the folder holding tests/runtime/*.kcb and *_images/, as gpu_check.sh does)
"""
import json
import subprocess
import sys


def import_cuda_core():
    try:
        import cuda.core as cc  # cuda.core >= 0.4 / 1.x
        cc.Device  # noqa: B018 - fails on old layouts
        return cc
    except (ImportError, AttributeError):
        import cuda.core.experimental as cc  # older releases
        return cc


def main():
    report = sys.argv[1]
    try:
        cc = import_cuda_core()
    except ImportError as e:
        print(f"cuda.core is not importable here ({e}); nothing compared")
        return 2
    version = getattr(cc, "__version__", "unknown")
    p = subprocess.run([report], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"occupancy_report failed (exit {p.returncode}):\n{p.stderr}")
        return 1
    lines = p.stdout
    device = cc.Device(0)
    device.set_current()
    print(f"cuda.core {version} on {device.name}")

    compared = 0
    differences = 0
    errors = 0
    modules = {}

    def same(what, ours, ask):
        """ours: a value, or "error: CUDA_ERROR_X" where kcache's query threw."""
        nonlocal compared, differences
        compared += 1
        try:
            theirs = ask()
        except Exception as e:  # cuda.core raises CUDAError naming the CUresult
            theirs = f"raised {type(e).__name__}: {e}"
        if isinstance(ours, str) and ours.startswith("error: "):
            agree = isinstance(theirs, str) and ours[len("error: "):] in theirs
        else:
            agree = ours == theirs
        if not agree:
            differences += 1
        print(f"  {'ok  ' if agree else 'DIFF'} {what}: kcache {ours}, cuda.core {theirs}")

    def cluster_call(fn, config):
        # Newer cuda.core wants stream= keyword-only; older ones take none.
        try:
            return fn(config, stream=device.default_stream)
        except TypeError:
            return fn(config)

    for line in lines.splitlines():
        r = json.loads(line)
        print(f"{r['kcb']} {r['name']} ({r['symbol']}) from {r['image']}")
        try:
            if r["image"] not in modules:
                with open(r["image"], "rb") as f:
                    data = f.read()
                if r["image"].endswith(".ptx"):
                    modules[r["image"]] = cc.ObjectCode.from_ptx(data)
                else:
                    modules[r["image"]] = cc.ObjectCode.from_cubin(data)
            occ = modules[r["image"]].get_kernel(r["symbol"]).occupancy
            print(f"  (max threads per block {r['max_threads_per_block']}, "
                  f"{r['num_regs']} registers)")
            for block, smem, ours in r["max_active_blocks_per_multiprocessor"]:
                same(f"max_active_blocks_per_multiprocessor({block}, {smem})", ours,
                     lambda: occ.max_active_blocks_per_multiprocessor(block, smem))
            for row in r["max_potential_block_size"]:
                smem, limit, ours = row[0], row[1], row[2:]
                ours = ours[0] if len(ours) == 1 else tuple(ours)

                def ask():
                    res = occ.max_potential_block_size(smem, limit)
                    return (res.min_grid_size, res.max_block_size)
                same(f"max_potential_block_size({smem}, {limit})", ours, ask)
            for blocks, block, ours in r["available_dynamic_shared_memory_per_block"]:
                same(f"available_dynamic_shared_memory_per_block({blocks}, {block})", ours,
                     lambda: occ.available_dynamic_shared_memory_per_block(blocks, block))
            if "max_potential_cluster_size" in r:
                grid, block, ours = r["max_potential_cluster_size"]
                config = cc.LaunchConfig(grid=grid, block=block)
                same(f"max_potential_cluster_size(grid {grid}, block {block})", ours,
                     lambda: cluster_call(occ.max_potential_cluster_size, config))
            if "max_active_clusters" in r:
                grid, block, cluster, ours = r["max_active_clusters"]
                # cuda.core counts the grid in clusters when a cluster is given
                # (recent releases); 16 clusters of 2 = kcache's 32 blocks.
                config = cc.LaunchConfig(grid=grid // cluster, cluster=cluster, block=block)
                same(f"max_active_clusters(grid {grid} blocks, block {block}, cluster {cluster})",
                     ours, lambda: cluster_call(occ.max_active_clusters, config))
        except Exception as e:  # report and go on: one kernel should not hide the others
            errors += 1
            print(f"  ERROR {type(e).__name__}: {e}")

    print(f"occupancy vs cuda.core: {compared} figures compared, {differences} differ, "
          f"{errors} kernels could not be compared")
    return 0 if differences == 0 and errors == 0 and compared > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
