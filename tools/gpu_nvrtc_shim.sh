#!/usr/bin/env bash
# The drop-in libnvrtc under CuPy (a program no one here wrote), on a GPU
# machine. Two steps, like tools/gpu_check.sh:
#
#   tools/gpu_nvrtc_shim.sh build [DEST]   on the build machine: gather the
#                                          shim, kcache and the CuPy script
#   DEST/gpu_nvrtc_shim.sh run [OUT]       on the GPU machine (CuPy installed):
#                                          fresh processes, timings, stats
#
# With the session's device tool:
#   tools/gpu_nvrtc_shim.sh build /work/main/.gpu-carry-20
#   run(command="bash .gpu-carry-20/gpu_nvrtc_shim.sh run", carry=[".gpu-carry-20"])
#
# Each phase is a fresh Python process compiling N RawKernels and one
# ReductionKernel (bench/cupy_shim_bench.py):
#   nvrtc      CuPy's cache off (CUPY_CACHE_IN_MEMORY=1), no shim: NVRTC each time
#   shim1      the same through the shim (as kcache run sets it), empty store (misses)
#   shim2/3    again, new processes on that store: must make no NVRTC compile
#   cupy1/2    no shim, CuPy's own disk cache (fresh CUPY_CACHE_DIR): the anchor
# The shim's $KCACHE_SHIM_STATS counts hits, misses and real compiles per phase.
set -uo pipefail

build() {
  local repo dest
  repo=$(cd "$(dirname "$0")/.." && pwd)
  dest=${1:-$repo/.gpu-carry-20}
  cd "$repo" || exit 1
  bazel build -c opt //cli:kcache //nvrtc_shim:libnvrtc.so.13 || exit 1
  rm -rf "$dest" && mkdir -p "$dest/lib" || exit 1
  cp bazel-bin/nvrtc_shim/libnvrtc.so.13 "$dest/lib/" || exit 1
  cp bazel-bin/cli/kcache bench/cupy_shim_bench.py tools/gpu_nvrtc_shim.sh "$dest/" || exit 1
  chmod -R u+w "$dest"
  du -sh "$dest"
}

run() {
  local here out n=${N:-20}
  here=$(cd "$(dirname "$0")" && pwd)
  out=${1:-${OUT:-$here/out}}
  mkdir -p "$out"
  local work
  work=$(mktemp -d)
  {
    echo "date: $(date -u +%FT%TZ)"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
    python3 -c 'import cupy; print("cupy", cupy.__version__)' 2>&1
  } | tee "$out/device.txt"
  phase() {  # NAME ENV... : one fresh process
    local name=$1
    shift
    echo "== $name" | tee -a "$out/log.txt"
    env "$@" KCACHE_SHIM_STATS="$work/$name.stats" python3 "$here/cupy_shim_bench.py" "$n" \
      >"$work/$name.json" 2>"$work/$name.err"
    echo "rc=$?" >>"$out/log.txt"
    cat "$work/$name.json" | tee -a "$out/log.txt"
    grep -v '^probe \|^keyed ' "$work/$name.err" | tee -a "$out/log.txt"
    # With KCACHE_DEBUG_PROBES=1: what the sealed NVRTC named, less the
    # system's library folders (docs/KEYS.md), once each.
    grep '^probe \|^keyed ' "$work/$name.err" | grep -v ' /lib\| /usr/lib\| /proc\| /sys\|hwcaps' |
      sort | uniq -c | sort -rn | head -200 >"$out/probes_$name.txt"
    [ -s "$out/probes_$name.txt" ] || rm -f "$out/probes_$name.txt"
    local hit miss real
    hit=$(grep -c '^hit ' "$work/$name.stats" 2>/dev/null)
    miss=$(grep -c '^miss ' "$work/$name.stats" 2>/dev/null)
    real=$(grep -c '^real ' "$work/$name.stats" 2>/dev/null)
    echo "stats: hit=${hit:-0} miss=${miss:-0} real=${real:-0}" | tee -a "$out/log.txt"
    # Each miss's key and why it was not stored, if it was not (the first few).
    head -5 "$work/$name.stats" 2>/dev/null | cut -c1-400 | tee -a "$out/log.txt"
  }
  # As `kcache run` sets them: CuPy 14 opens the pip wheel's NVRTC by path
  # unless one is loaded already, so the shim is preloaded too.
  local lib="LD_LIBRARY_PATH=$here/lib:/usr/local/cuda/lib64"
  local pre="LD_PRELOAD=$here/lib/libnvrtc.so.13"
  phase warmup CUPY_CACHE_IN_MEMORY=1  # page cache: Python, CuPy, NVRTC, the driver
  phase nvrtc CUPY_CACHE_IN_MEMORY=1
  phase shim1 CUPY_CACHE_IN_MEMORY=1 "$lib" "$pre" KCACHE_DIR="$work/store"
  phase shim2 CUPY_CACHE_IN_MEMORY=1 "$lib" "$pre" KCACHE_DIR="$work/store" KCACHE_DEBUG_PROBES=1
  phase shim3 CUPY_CACHE_IN_MEMORY=1 "$lib" "$pre" KCACHE_DIR="$work/store"
  phase cupy1 CUPY_CACHE_DIR="$work/cupy"
  phase cupy2 CUPY_CACHE_DIR="$work/cupy"
  phase cupy3 CUPY_CACHE_DIR="$work/cupy"
  KCACHE_DIR="$work/store" "$here/kcache" -s | tee -a "$out/log.txt"
  rm -rf "$work"
}

case "${1:-}" in
  build) shift; build "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 build [DEST] | run [OUT]" >&2; exit 2 ;;
esac
