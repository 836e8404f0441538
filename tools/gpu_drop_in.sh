#!/usr/bin/env bash
# The drop-in inside real programs on a GPU machine (issue 26). Two steps,
# like tools/gpu_check.sh:
#
#   tools/gpu_drop_in.sh build [DEST]   on the build machine: kcache, the shim
#                                       and the scripts, -c opt, into DEST
#   DEST/gpu_drop_in.sh run [OUT]       on the GPU machine (CuPy installed)
#
# With the session's device tool:
#   tools/gpu_drop_in.sh build /work/main/.gpu-carry-26
#   run(command="bash .gpu-carry-26/gpu_drop_in.sh run", carry=[".gpu-carry-26"])
#
# Steps (each a fresh process under a time limit; "kcache run" as a user runs it):
#   before_cuda_*   NVRTC compile before the first CUDA call, then the kernel runs
#   alone_cold/warm CuPy's workload (bench/cupy_workload.py), default mode, no kcache:
#                   NVRTC, then CuPy's own disk cache
#   kcache_cold     under kcache run, empty store and CuPy cache
#   kcache_warm     under kcache run, a new CuPy cache folder: every compile a kcache hit
#                   (through lookup records; kcache_warm_no_records: without them)
#   default_mode1/2 the drop-in preloaded by hand, CuPy's default mode (temporary names)
#   *_edited        the -I header edited (SCALE 3 -> 5): CuPy's own cache answers the
#                   old kernel; kcache must answer the new one
#   headers_hit     the hit cost of a kernel with CuPy's headers, NVRTC alone vs a hit
# Prints "N passed, N failed"; the timings are in OUT/log.txt.
set -uo pipefail

build() {
  local repo dest
  repo=$(cd "$(dirname "$0")/.." && pwd)
  dest=${1:-$repo/.gpu-carry-26}
  cd "$repo" || exit 1
  bazel build -c opt //cli:kcache //nvrtc_shim:libnvrtc.so.13 || exit 1
  local bin
  bin=$(bazel info -c opt bazel-bin 2>/dev/null) || exit 1
  rm -rf "$dest" && mkdir -p "$dest/lib" || exit 1
  cp "$bin/nvrtc_shim/libnvrtc.so.13" "$bin/cli/kcache" "$dest/" || exit 1
  cp bench/cupy_workload.py bench/cupy_headers_hit.py tests/nvrtc_shim/compile_before_cuda.py \
    tools/gpu_drop_in.sh "$dest/" || exit 1
  local lib path soname
  for lib in libxxhash.so libsqlite3.so; do
    path=$(readlink -f "/usr/lib/x86_64-linux-gnu/$lib")
    soname=$(readelf -d "$path" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
    cp "$path" "$dest/lib/$soname"
  done
  chmod -R u+w "$dest"
  du -sh "$dest"
}

run() {
  local here out work passed=0 failed=0
  here=$(cd "$(dirname "$0")" && pwd)
  out=${1:-${OUT:-$here/out}}
  mkdir -p "$out"
  work=$(mktemp -d)
  export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PYTHONUNBUFFERED=1 KCACHE_REMOTE=off
  # Cold means new to the driver too: NVRTC alone takes machine code for PTX
  # it has seen from the driver's cache (~/.nv/ComputeCache), which the sealed
  # NVRTC may not read, so a warmed-up driver cache favours CuPy alone.
  export CUDA_CACHE_DISABLE=1
  unset KCACHE_CONFIG
  {
    echo "date: $(date -u +%FT%TZ) on $(uname -n), $(nproc) cores"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
    python3 -c 'import cupy; print("cupy", cupy.__version__)' 2>&1
  } | tee "$out/log.txt"
  step() {  # NAME EXPECT COMMAND...: passes when it exits 0 and prints EXPECT
    local name=$1 expect=$2 status start
    shift 2
    start=$(date +%s%N)
    timeout "${STEP_TIMEOUT:-300}" "$@" >"$work/$name.out" 2>"$work/$name.err"
    status=$?
    local ms=$((($(date +%s%N) - start) / 1000000))
    if [ "$status" -eq 0 ] && grep -q -- "$expect" "$work/$name.out"; then
      passed=$((passed + 1))
      echo "PASS $name (${ms} ms): $(tail -1 "$work/$name.out")" | tee -a "$out/log.txt"
    else
      failed=$((failed + 1))
      echo "FAIL $name (exit $status, ${ms} ms): $(tail -1 "$work/$name.out")" | tee -a "$out/log.txt"
      tail -5 "$work/$name.err" | tee -a "$out/log.txt"
    fi
    grep '^kcache' "$work/$name.err" | head -3 | tee -a "$out/log.txt"
    if [ -s "$work/$name.stats" ]; then
      echo "  stats: $(cut -d' ' -f1 "$work/$name.stats" | sort | uniq -c | tr '\n' ' ')" |
        tee -a "$out/log.txt"
    fi
  }
  local k="$here/kcache"
  local store="$work/store"

  # A compile before CUDA starts, then CUDA and the kernel.
  step before_cuda_alone "^ok" python3 "$here/compile_before_cuda.py"
  step before_cuda_miss "^ok" env KCACHE_DIR="$store" KCACHE_SHIM_STATS="$work/before_cuda_miss.stats" \
    "$k" run -- python3 "$here/compile_before_cuda.py"
  step before_cuda_hit "^ok" env KCACHE_DIR="$store" KCACHE_SHIM_STATS="$work/before_cuda_hit.stats" \
    "$k" run -- python3 "$here/compile_before_cuda.py"

  # CuPy's workload in its default mode.
  mkdir -p "$work/inc"
  echo "#define SCALE 3" >"$work/inc/scale.cuh"
  local wl="$here/cupy_workload.py"
  step alone_warmup '"ok": true' env CUPY_CACHE_DIR="$work/cupy0" python3 "$wl" "$work/inc"
  step alone_cold '"ok": true' env CUPY_CACHE_DIR="$work/cupyA" python3 "$wl" "$work/inc"
  step alone_warm '"ok": true' env CUPY_CACHE_DIR="$work/cupyA" python3 "$wl" "$work/inc"
  step kcache_cold '"ok": true' env CUPY_CACHE_DIR="$work/cupyB" KCACHE_DIR="$store" \
    KCACHE_SHIM_STATS="$work/kcache_cold.stats" "$k" run -- python3 "$wl" "$work/inc"
  step kcache_warm '"ok": true' env CUPY_CACHE_DIR="$work/cupyC" KCACHE_DIR="$store" \
    KCACHE_SHIM_STATS="$work/kcache_warm.stats" "$k" run -- python3 "$wl" "$work/inc"
  step kcache_warm2 '"ok": true' env CUPY_CACHE_DIR="$work/cupyD" KCACHE_DIR="$store" \
    KCACHE_SHIM_STATS="$work/kcache_warm2.stats" "$k" run -- python3 "$wl" "$work/inc"
  # The same without lookup records (every hit resolves its includes), and
  # CuPy's own warm cache again: the comparison in one session.
  step kcache_warm_no_records '"ok": true' env CUPY_CACHE_DIR="$work/cupyH" KCACHE_DIR="$store" \
    KCACHE_LOOKUP_RECORDS=off KCACHE_SHIM_STATS="$work/kcache_warm_no_records.stats" \
    "$k" run -- python3 "$wl" "$work/inc"
  step alone_warm2 '"ok": true' env CUPY_CACHE_DIR="$work/cupyA" python3 "$wl" "$work/inc"
  step kcache_warm3 '"ok": true' env CUPY_CACHE_DIR="$work/cupyI" KCACHE_DIR="$store" \
    KCACHE_SHIM_STATS="$work/kcache_warm3.stats" "$k" run -- python3 "$wl" "$work/inc"
  step kcache_warm_cupy_cache '"ok": true' env CUPY_CACHE_DIR="$work/cupyB" KCACHE_DIR="$store" \
    KCACHE_SHIM_STATS="$work/kcache_warm_cupy_cache.stats" "$k" run -- python3 "$wl" "$work/inc"
  # The drop-in preloaded by hand (no kcache run): CuPy in its default mode names
  # each program by a new temporary folder; a new CuPy cache folder each time so
  # its own cache never answers. The second process must be all kcache hits.
  local pre=(LD_PRELOAD="$here/libnvrtc.so.13" KCACHE_EXE="$k" KCACHE_DIR="$work/dstore")
  step default_mode1 '"ok": true' env "${pre[@]}" CUPY_CACHE_DIR="$work/cupyF" \
    KCACHE_SHIM_STATS="$work/default_mode1.stats" python3 "$wl" "$work/inc"
  step default_mode2 '"ok": true' env "${pre[@]}" CUPY_CACHE_DIR="$work/cupyG" \
    KCACHE_SHIM_STATS="$work/default_mode2.stats" python3 "$wl" "$work/inc"
  grep -v '^hit ' "$work/default_mode2.stats" | cut -c1-300 | tee -a "$out/log.txt"
  grep -c 'name-dependent' "$work/default_mode1.stats" | sed 's/^/  name-dependent in default_mode1: /' |
    tee -a "$out/log.txt"
  echo "#define SCALE 5" >"$work/inc/scale.cuh"
  # CuPy's own cache keys the source text only: the old kernel (scale 3).
  step alone_edited_stale '"scale": 3' env CUPY_CACHE_DIR="$work/cupyA" python3 "$wl" "$work/inc"
  step kcache_edited '"scale": 5' env CUPY_CACHE_DIR="$work/cupyB" KCACHE_DIR="$store" \
    KCACHE_SHIM_STATS="$work/kcache_edited.stats" "$k" run -- python3 "$wl" "$work/inc"
  step kcache_edited_new_cupy_cache '"scale": 5' env CUPY_CACHE_DIR="$work/cupyE" \
    KCACHE_DIR="$store" KCACHE_SHIM_STATS="$work/kcache_edited_new_cupy_cache.stats" \
    "$k" run -- python3 "$wl" "$work/inc"

  # The hit cost of CuPy's headers kernel: NVRTC alone, then kcache's miss
  # and hits (the median is over hits in one process; the first is the miss).
  step headers_nvrtc median env NVRTC=/usr/local/cuda/lib64/libnvrtc.so.13 \
    python3 "$here/cupy_headers_hit.py" 15
  step headers_kcache_first median env KCACHE_DIR="$work/hstore" LD_PRELOAD="$here/libnvrtc.so.13" \
    python3 "$here/cupy_headers_hit.py" 15
  step headers_kcache_hits median env KCACHE_DIR="$work/hstore" LD_PRELOAD="$here/libnvrtc.so.13" \
    python3 "$here/cupy_headers_hit.py" 15
  step headers_kcache_hit_new_process median env KCACHE_DIR="$work/hstore" \
    LD_PRELOAD="$here/libnvrtc.so.13" python3 "$here/cupy_headers_hit.py" 1

  # Every step's per-compile lines (hit/miss, NVRTC's time, the call's wall
  # time): where a cold run's time goes against CuPy alone.
  mkdir -p "$out/stats" && cp "$work"/*.stats "$out/stats/" 2>/dev/null
  echo "$passed passed, $failed failed" | tee -a "$out/log.txt"
  [ "$failed" -eq 0 ]
}

case "${1:-}" in
  build) shift; build "$@" ;;
  run) shift; run "$@" ;;
  *) sed -n '2,24p' "$0"; exit 2 ;;
esac
