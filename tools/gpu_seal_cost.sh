#!/usr/bin/env bash
# What the seal costs a compile on a lent GPU host (issue 27), in one device
# call. Two steps, like tools/gpu_drop_in.sh:
#
#   tools/gpu_seal_cost.sh build [DEST]   on the build machine: the bench, the
#                                         drop-in, the kernels, CUTLASS's headers
#                                         (BEFORE_TREE=DIR: also DIR's build, for
#                                         `final` to compare side by side)
#   DEST/gpu_seal_cost.sh run [ROUNDS]    on the GPU machine (~5 minutes at 4)
#   DEST/gpu_seal_cost.sh final           the issue's bar and the drop-in suite
#
# With the session's device tool:
#   tools/gpu_seal_cost.sh build /work/main/.gpu-carry-seal
#   run(command="bash .gpu-carry-seal/gpu_seal_cost.sh run", carry=[".gpu-carry-seal"])
#
# Runs bench/served_miss_bench.py (the drop-in's miss against NVRTC alone,
# SEAL_COST_PARALLEL (4) processes of each variant at once, per-round ratios),
# then as many bench/seal_compile_bench processes at once (one NVRTC compile
# per seal mode, the modes taking turns; per-thread CPU time) for the CuTe
# GEMM and the CUB kernel. docs/PERFORMANCE.md, "Where CuTe's seal cost goes",
# says what each mode isolates.
set -uo pipefail

build() {
  local repo dest bin
  repo=$(cd "$(dirname "$0")/.." && pwd)
  dest=${1:-$repo/.gpu-carry-seal}
  cd "$repo" || exit 1
  # The drop-in, its compile processes' binary and libraries, as gpu_drop_in.sh carries them.
  bash tools/gpu_drop_in.sh build "$dest" >/dev/null || exit 1
  bazel build -c opt //bench:seal_compile_bench || exit 1
  bin=$(bazel info -c opt bazel-bin 2>/dev/null) || exit 1
  cp "$bin/bench/seal_compile_bench" bench/served_miss_bench.py tools/gpu_seal_cost.sh "$dest/" || exit 1
  cp -r tests/compiler/kernels "$dest/kernels" || exit 1
  if [ -n "${BEFORE_TREE:-}" ]; then  # another checkout (a git worktree) for `final` to run side by side
    (cd "$BEFORE_TREE" && bazel build -c opt //cli:kcache //nvrtc_shim:libnvrtc.so.13) || exit 1
    bin=$(cd "$BEFORE_TREE" && bazel info -c opt bazel-bin 2>/dev/null) || exit 1
    mkdir -p "$dest/before" && cp "$bin/cli/kcache" "$bin/nvrtc_shim/libnvrtc.so.13" "$dest/before/" || exit 1
  fi
  local cutlass=${CUTLASS_INCLUDE:-/opt/kcache-cutlass/cutlass_library/source/include}
  [ -d "$cutlass/cute" ] || { echo "no CUTLASS headers at $cutlass (set CUTLASS_INCLUDE)"; exit 1; }
  tar czf "$dest/cutlass.tgz" -C "$cutlass/.." include/cute include/cutlass || exit 1
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
  grep -m1 'model name' /proc/cpuinfo
  echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>&1)"
  grep -H . /sys/devices/system/cpu/vulnerabilities/* 2>/dev/null | sed 's|.*/||'
  nvrtc=/usr/local/cuda/lib64/libnvrtc.so.13
  cute="-arch=sm_90 --std=c++17 -default-device -I$here/include -I/usr/local/cuda/include
        -I/usr/local/cuda/include/cccl"
  cub="-arch=sm_90 --std=c++17 -I/usr/local/cuda/include -I/usr/local/cuda/include/cccl"
  # A lent host's speed drifts by +-30 % from one compile to the next, more
  # than what is measured: everything below runs side by side, so each
  # comparison sees the same drift.
  local parallel=${SEAL_COST_PARALLEL:-4}
  if [ -z "${SEAL_COST_NO_MISS:-}" ]; then  # SEAL_COST_NO_MISS=1: only the modes below
    echo "== served_miss_bench, $parallel processes of each variant at once, $rounds rounds"
    LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64" python3 served_miss_bench.py \
      "$here/libnvrtc.so.13" "$nvrtc" kernels --n 1 --rounds "$rounds" --cutlass "$here/include" \
      --variants nvrtc,served,unsealed --parallel "$parallel"
  fi
  # seal_compile_bench: $parallel processes at once, each taking every mode in
  # turn (each starting at another mode), per-thread CPU time per mode.
  local modes=${SEAL_COST_MODES:-thread,notify-sync,notify-landlock,notify-all,arena,recorded,served}
  local kernel opts i order
  for kernel in ${SEAL_COST_KERNELS:-cute cub}; do  # SEAL_COST_KERNELS=cute: only the CuTe GEMM
    if [ $kernel = cute ]; then opts=$cute; src=kernels/cutlass/cute_gemm.cu; else opts=$cub; src=kernels/cub_block.cu; fi
    echo "== seal_compile_bench, $kernel, ${SEAL_COST_BENCH_PARALLEL:-$parallel} processes at once"
    for ((i = 0; i < ${SEAL_COST_BENCH_PARALLEL:-$parallel}; i++)); do
      order=$(echo "$modes" | tr , '\n' | awk -v k=$i '{a[NR]=$0} END {for (j=0;j<NR;j++) printf "%s%s", (j?",":""), a[(j+k)%NR+1]}')
      # shellcheck disable=SC2086
      SEAL_BENCH_MODES=$order ./seal_compile_bench "$nvrtc" $src "$rounds" $opts >"bench.$i.txt" 2>/dev/null &
    done
    wait
    [ "${SEAL_COST_BENCH_PARALLEL:-$parallel}" = 1 ] && cat bench.0.txt
    cat bench.*.txt | awk '$1 ~ /^[a-z0-9-]+$/ && NF == 13 && $2 ~ /^[0-9]+$/ {print}' | sort | awk '
      {n[$1]++; wall[$1]=wall[$1] " " $2; user[$1]=user[$1] " " $4}
      END {for (m in n) print m, "wall p50s:" wall[m], " user p50s:" user[m]}'
    rm -f bench.*.txt
  done
  echo "date: $(date -u +%FT%TZ)"
}

# The issue's bar in one call (~5 minutes): the drop-in's miss against NVRTC
# alone (lockstep, a new kernel each compile), 8 seal_compile_bench processes
# at once (CPU moves under load), then tools/gpu_drop_in.sh's suite.
final() {
  local here nvrtc cute i
  here=$(cd "$(dirname "$0")" && pwd)
  cd "$here" || exit 1
  [ -d include ] || tar xzf cutlass.tgz || exit 1
  nvrtc=/usr/local/cuda/lib64/libnvrtc.so.13
  echo "date: $(date -u +%FT%TZ), $(nproc) cores, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  echo "== served_miss_bench --n 3 --rounds 3 --parallel 4 (lockstep), new PTX"
  # With before/ (a kcache and drop-in of another tree: build BEFORE_TREE), both side by side.
  local variants=nvrtc,served,unsealed before=()
  [ -x before/kcache ] && { variants=nvrtc,served,before,unsealed; before=(--before "$here/before"); }
  LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64" python3 served_miss_bench.py "$here/libnvrtc.so.13" "$nvrtc" \
    kernels --n 3 --rounds 3 --cutlass "$here/include" --variants $variants --parallel 4 "${before[@]}" 2>&1 | tail -28
  [ -n "${FINAL_NO_SEAL_BENCH:-}" ] || final_seal_bench
  echo "== gpu_drop_in.sh run; $(date -u +%FT%TZ)"
  bash gpu_drop_in.sh run 2>&1 | grep -E "PASS|FAIL|passed" | tail -30
  echo "date: $(date -u +%FT%TZ)"
}

# 8 seal_compile_bench processes at once, CuTe (CPU moves under load).
final_seal_bench() {
  local nvrtc=/usr/local/cuda/lib64/libnvrtc.so.13 here cute i
  here=$(pwd)
  echo "== seal_compile_bench, CuTe, 8 processes at once, thread and served; $(date -u +%FT%TZ)"
  cute="-arch=sm_90 --std=c++17 -default-device -I$here/include -I/usr/local/cuda/include -I/usr/local/cuda/include/cccl"
  for i in 0 1 2 3 4 5 6 7; do
    # shellcheck disable=SC2086
    SEAL_BENCH_MODES=$([ $((i % 2)) = 0 ] && echo thread,served || echo served,thread) \
      ./seal_compile_bench $nvrtc kernels/cutlass/cute_gemm.cu 2 $cute >"b.$i.txt" 2>"e.$i.txt" &
  done
  wait
  grep -h "^thread \|^served " b.*.txt | sort | awk '{w[$1]=w[$1] " " $2} END {for (m in w) print m, "p50s:" w[m]}'
  grep -h "CPU moves" e.*.txt | sort | uniq -c
  rm -f b.*.txt e.*.txt
}

case "${1:-}" in
  build) shift; build "$@" ;;
  run) shift; run "$@" ;;
  final) shift; final "$@" ;;
  *) echo "usage: $0 build [DEST] | run [ROUNDS] | final"; exit 2 ;;
esac
