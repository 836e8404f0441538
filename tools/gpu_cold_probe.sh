#!/bin/bash
# A cold CuPy workload, compile by compile: alone, under `kcache run` and in
# CuPy's default mode with the drop-in preloaded, three rounds, each process
# with a fresh store and CuPy cache and the driver's JIT cache off.
#   tools/gpu_drop_in.sh build DEST && cp tools/gpu_cold_probe.sh DEST/
#   run(command="bash DEST/gpu_cold_probe.sh $OUT", carry=[DEST])
# Writes OUT/{alone,run,dm}N.times (ms and name per compile, as CuPy timed it)
# and OUT/{run,dm}N.stats (the drop-in's per-compile lines).
here=$(cd "$(dirname "$0")" && pwd); out=$1; work=$(mktemp -d)
export LD_LIBRARY_PATH="$here/lib:${LD_LIBRARY_PATH:-}" CUDA_CACHE_DISABLE=1
nproc
mkdir -p $work/inc; echo "#define SCALE 3" >$work/inc/scale.cuh
wl=$here/cupy_workload.py
WL_COMPILE_TIMES=$out/warm.times CUPY_CACHE_DIR=$work/c0 python3 $wl $work/inc
for r in 1 2 3; do
WL_COMPILE_TIMES=$out/alone$r.times CUPY_CACHE_DIR=$work/a$r python3 $wl $work/inc
WL_COMPILE_TIMES=$out/run$r.times KCACHE_DIR=$work/s$r KCACHE_SHIM_STATS=$out/run$r.stats CUPY_CACHE_DIR=$work/b$r $here/kcache run -- python3 $wl $work/inc
WL_COMPILE_TIMES=$out/dm$r.times LD_PRELOAD=$here/libnvrtc.so.13 KCACHE_EXE=$here/kcache KCACHE_DIR=$work/d$r KCACHE_SHIM_STATS=$out/dm$r.stats CUPY_CACHE_DIR=$work/e$r python3 $wl $work/inc
done
