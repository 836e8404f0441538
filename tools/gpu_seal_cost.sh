#!/usr/bin/env bash
# What the seal costs a compile on a lent GPU host (issue 27), in one device
# call. Two steps, like tools/gpu_drop_in.sh:
#
#   tools/gpu_seal_cost.sh build [DEST]   on the build machine: the bench, the
#                                         drop-in, the kernels, CUTLASS's headers
#   DEST/gpu_seal_cost.sh run [ROUNDS]    on the GPU machine (~7 minutes at 4)
#
# With the session's device tool:
#   tools/gpu_seal_cost.sh build /work/main/.gpu-carry-seal
#   run(command="bash .gpu-carry-seal/gpu_seal_cost.sh run", carry=[".gpu-carry-seal"])
#
# Runs bench/seal_compile_bench (one NVRTC compile per seal mode, the modes
# taking turns; per-thread CPU time; the CUBIN's hash) for the CuTe GEMM and
# the CUB kernel, then bench/served_miss_bench.py (the drop-in's miss against
# NVRTC alone, per-round ratios). docs/PERFORMANCE.md, "Where CuTe's seal cost
# goes", says what each mode isolates.
set -uo pipefail

build() {
  local repo dest bin
  repo=$(cd "$(dirname "$0")/.." && pwd)
  dest=${1:-$repo/.gpu-carry-seal}
  cd "$repo" || exit 1
  bazel build -c opt //bench:seal_compile_bench //nvrtc_shim:libnvrtc.so.13 || exit 1
  bin=$(bazel info -c opt bazel-bin 2>/dev/null) || exit 1
  rm -rf "$dest" && mkdir -p "$dest/lib" || exit 1
  cp "$bin/bench/seal_compile_bench" "$bin/nvrtc_shim/libnvrtc.so.13" bench/served_miss_bench.py \
    tools/gpu_seal_cost.sh "$dest/" || exit 1
  cp -r tests/compiler/kernels "$dest/kernels" || exit 1
  local cutlass=${CUTLASS_INCLUDE:-/opt/kcache-cutlass/cutlass_library/source/include}
  [ -d "$cutlass/cute" ] || { echo "no CUTLASS headers at $cutlass (set CUTLASS_INCLUDE)"; exit 1; }
  tar czf "$dest/cutlass.tgz" -C "$cutlass/.." include/cute include/cutlass || exit 1
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
  local here rounds nvrtc cute cub
  here=$(cd "$(dirname "$0")" && pwd)
  rounds=${1:-4}
  cd "$here" || exit 1
  [ -d include ] || tar xzf cutlass.tgz || exit 1
  echo "date: $(date -u +%FT%TZ), $(nproc) cores, $(uname -r), load: $(cut -d' ' -f1-3 /proc/loadavg)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  nvrtc=/usr/local/cuda/lib64/libnvrtc.so.13
  cute="-arch=sm_90 --std=c++17 -default-device -I$here/include -I/usr/local/cuda/include
        -I/usr/local/cuda/include/cccl"
  cub="-arch=sm_90 --std=c++17 -I/usr/local/cuda/include -I/usr/local/cuda/include/cccl"
  local modes=${SEAL_COST_MODES:-thread,landlock,trap-ping,trap-read,recorded,served}
  echo "== seal_compile_bench, CuTe GEMM"
  # shellcheck disable=SC2086
  SEAL_BENCH_MODES=$modes ./seal_compile_bench "$nvrtc" kernels/cutlass/cute_gemm.cu "$rounds" $cute
  echo "== seal_compile_bench, CUB"
  # shellcheck disable=SC2086
  SEAL_BENCH_MODES=$modes ./seal_compile_bench "$nvrtc" kernels/cub_block.cu "$rounds" $cub
  echo "== served_miss_bench"
  LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64" python3 served_miss_bench.py \
    "$here/libnvrtc.so.13" "$nvrtc" kernels --n 1 --rounds "$rounds" --cutlass "$here/include" \
    --variants nvrtc,served,unsealed
  echo "date: $(date -u +%FT%TZ)"
}

case "${1:-}" in
  build) shift; build "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 build [DEST] | run [ROUNDS]"; exit 2 ;;
esac
