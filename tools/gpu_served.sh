#!/usr/bin/env bash
# `kcache compile` served (issue 27, session 9) on a GPU machine. Two steps,
# like tools/gpu_check.sh:
#
#   tools/gpu_served.sh build [DEST]    on the build machine: the drop-in's
#                                       carry (tools/gpu_drop_in.sh build), the
#                                       served-miss bench, CUTLASS's headers and
#                                       the GPU scripts, -c opt, into DEST
#   DEST/gpu_served.sh images [OUT]     the CuTe GEMM, the CUTLASS epilogue and
#                                       the CUTLASS 2.x GEMM compiled here by
#                                       `kcache compile` (served; lean and
#                                       --no-lean, then again: a hit) and by nvcc;
#                                       results, kernel and load times
#                                       (bench/runtime_cutlass_lean.py,
#                                       bench/runtime_cubin_load.py)
#   DEST/gpu_served.sh bench [OUT]      bench/served_compile_bench: a served miss
#                                       against NVRTC alone, and a hit
#   DEST/gpu_served.sh lockstep [OUT]   the same miss side by side: P processes
#                                       of NVRTC alone and P served, in lockstep
#                                       (P=${P:-4}, ${STEPS:-12} steps a kernel)
#
# Run from the repository root (the device tool's working folder): the bench
# and the images read tests/compiler/kernels there.
set -uo pipefail

build() {
  local repo dest
  repo=$(cd "$(dirname "$0")/.." && pwd)
  dest=${1:-$repo/.gpu-carry-served}
  bash "$repo/tools/gpu_drop_in.sh" build "$dest" || exit 1
  cd "$repo" || exit 1
  bazel build -c opt //bench:served_compile_bench || exit 1
  cp "$(bazel info -c opt bazel-bin 2>/dev/null)/bench/served_compile_bench" "$dest/" || exit 1
  cp tools/gpu_served.sh bench/runtime_cutlass_lean.py bench/runtime_cubin_load.py "$dest/" || exit 1
  local cutlass=${CUTLASS_INCLUDE:-/opt/kcache-cutlass/cutlass_library/source/include}
  [ -d "$cutlass/cute" ] || { echo "no CUTLASS headers at $cutlass (set CUTLASS_INCLUDE)"; exit 1; }
  tar czf "$dest/cutlass.tgz" -C "$cutlass/.." include/cute include/cutlass || exit 1
  chmod -R u+w "$dest"
  du -sh "$dest"
}

setup() {
  here=$(cd "$(dirname "$0")" && pwd)
  out=${1:-${OUT:-$here/out}}
  mkdir -p "$out"
  export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export KCACHE_REMOTE=off
  unset KCACHE_CONFIG
  cutlass_root=/tmp/kcache-cutlass
  if [ ! -d "$cutlass_root/cutlass_library/source/include/cute" ]; then
    mkdir -p "$cutlass_root/cutlass_library/source" &&
      tar xzf "$here/cutlass.tgz" -C "$cutlass_root/cutlass_library/source" || exit 1
  fi
  include=$cutlass_root/cutlass_library/source/include
  echo "date: $(date -u +%FT%TZ) on $(uname -n), $(nproc) cores; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1)"
}

images() {
  setup "$@"
  local k store=$out/store kernels=tests/compiler/kernels/cutlass
  local flags=(--arch sm_90 --ptx none --std c++17 --nvrtc-opt=-default-device -I "$include")
  for k in cute_gemm cutlass_epilogue cutlass2_gemm; do
    (
      for round in miss hit; do
        "$here/kcache" --dir "$store" compile -v "${flags[@]}" -o "$out/$k.lean.kcb" "$kernels/$k.cu" \
          2>&1 | grep -v "warning\|^ \|^$" | sed "s/^/$k lean $round: /"
        "$here/kcache" --dir "$store" compile -v "${flags[@]}" --no-lean -o "$out/$k.nvrtc.kcb" \
          "$kernels/$k.cu" 2>&1 | grep -v "warning\|^ \|^$" | sed "s/^/$k nvrtc $round: /"
      done
      /usr/local/cuda/bin/nvcc -cubin -arch=sm_90 -std=c++17 -I "$include" "$kernels/$k.cu" \
        -o "$out/$k.nvcc.cubin" >"$out/$k.nvcc.log" 2>&1 || echo "$k nvcc failed"
    ) &
  done
  wait
  local short
  for k in cute_gemm cutlass_epilogue cutlass2_gemm; do
    case $k in cute_gemm) short=cute ;; cutlass_epilogue) short=cutlass ;; *) short=cutlass2 ;; esac
    for v in lean nvrtc; do
      rm -rf "$out/x" && "$here/kcache" bundle --extract "$out/x" "$out/$k.$v.kcb" >/dev/null &&
        cp "$out"/x/*.cubin "$out/${short}_$v.cubin"
    done
    cp "$out/$k.nvcc.cubin" "$out/${short}_nvcc.cubin"
    ls -l "$out/${short}"_*.cubin | awk '{print $5, $9}'
    python3 "$here/runtime_cubin_load.py" "$k" "$out/${short}_lean.cubin" "$out/${short}_nvrtc.cubin" \
      "$out/${short}_nvcc.cubin" 2>&1 | tail -5
  done
  (cd "$out" && python3 "$here/runtime_cutlass_lean.py" . 2>&1 | tail -40)
  "$here/kcache" --dir "$store" -s | grep -E "Hits|Misses|Entries"
}

bench() {
  setup "$@"
  KCACHE_CUTLASS_DIR=$cutlass_root "$here/served_compile_bench" "${ROUNDS:-8}" cub_block half_cg \
    cute_gemm 2>&1 | tee "$out/served_compile_bench.txt"
}

lockstep() {
  setup "$@"
  KCACHE_CUTLASS_DIR=$cutlass_root "$here/served_compile_bench" --lockstep "${P:-4}" \
    "${STEPS:-12}" ${KERNELS:-cub_block half_cg cute_gemm} 2>&1 | tee "$out/served_lockstep.txt"
}

case ${1:-} in
  build) shift; build "$@" ;;
  images) shift; images "$@" ;;
  bench) shift; bench "$@" ;;
  lockstep) shift; lockstep "$@" ;;
  *) echo "usage: $0 build [DEST] | images [OUT] | bench [OUT] | lockstep [OUT]"; exit 2 ;;
esac
