#!/usr/bin/env bash
# `kcache prewarm` of N CUB kernels sharing headers (the kernels of
# tools/bench_worker.sh), no store, with and without precompiled headers and
# long-lived NVRTC processes (--no-pch), interleaved, ROUNDS times, with
# JOBS NVRTC compiles at once (default: prewarm's, one per CPU). Each row
# also gives the load average at its start (other builds share the CPUs) and
# what the pool asked its children for: PCHs made, used, compiles without.
# Where `perf stat` works, each mode's CPU time too (task-clock of kcache and
# every process it started, NVRTC's children included): on a shared machine
# the CPU ratio moves less with the others' load than the wall ratio.
# On a quiet host, pin it to two CPUs: `taskset -c 0,1 bench/prewarm_pch.sh ...`.
#
#   bench/prewarm_pch.sh KCACHE_BINARY [N=50] [ROUNDS=1] [ARCHS=sm_80,sm_90] [PTX=compute_90] [JOBS]
set -euo pipefail
kcache=$(realpath "$1")
n=${2:-50}
rounds=${3:-1}
archs=${4:-sm_80,sm_90}
ptx=${5:-compute_90}
jobs=()
[ -n "${6:-}" ] && jobs=(-j "$6")
work=$(mktemp -d /tmp/kcache-prewarm-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
for i in $(seq 1 "$n"); do
  cat > "$work/k$i.cu" <<CU
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
extern "C" __global__ void sort_and_sum$i(int* keys, int* sums) {
  using Sort = cub::BlockRadixSort<int, 128, 4>;
  using Reduce = cub::BlockReduce<int, 128>;
  __shared__ union {
    typename Sort::TempStorage sort;
    typename Reduce::TempStorage reduce;
  } temp;
  int items[4];
  int* block_keys = keys + blockIdx.x * 512;
  for (int i = 0; i < 4; ++i) items[i] = block_keys[threadIdx.x * 4 + i] * $i;
  Sort(temp.sort).Sort(items);
  __syncthreads();
  int sum = Reduce(temp.reduce).Sum(items);
  if (threadIdx.x == 0) sums[blockIdx.x] = sum;
}
CU
done
ptx_flag=()
[ -n "$ptx" ] && ptx_flag=(--ptx "$ptx")
cpu=()
perf stat -x, -e task-clock -o "$work/perf" -- true 2>/dev/null && cpu=(perf stat -x, -e task-clock -o "$work/perf" --)
cpu_seconds() { [ ${#cpu[@]} -gt 0 ] && awk -F, '/task-clock/ {printf "%.1f", $1 / 1000}' "$work/perf" || echo "-"; }
ratio() { python3 -c "print(f'{$1 / $2:.2f}×')" 2>/dev/null || echo "-"; }
echo "| round | load | --no-pch | default (PCH, long-lived NVRTC) | ratio | CPU s --no-pch / PCH | CPU ratio | PCH made / used / without |"
echo "|---|---|---|---|---|---|---|---|"
for r in $(seq 1 "$rounds"); do
  t=() c=()
  load=$(cut -d' ' -f1 /proc/loadavg)
  for mode in --no-pch ""; do
    t0=$(date +%s.%N)
    "${cpu[@]}" "$kcache" prewarm --no-store $mode "$work" --arch "$archs" "${ptx_flag[@]}" \
      --std c++17 "${jobs[@]}" >/dev/null 2>"$work/stderr" || { cat "$work/stderr" >&2; exit 1; }
    t1=$(date +%s.%N)
    t+=("$(python3 -c "print(f'{$t1 - $t0:.1f}')")")
    c+=("$(cpu_seconds)")
  done
  routing=$(sed -n 's/.*NVRTC PCH: \([0-9]*\) made, \([0-9]*\) used, \([0-9]*\) without.*/\1 \/ \2 \/ \3/p' "$work/stderr")
  echo "| $r | $load | ${t[0]} s | ${t[1]} s | $(ratio "${t[0]}" "${t[1]}") | ${c[0]} / ${c[1]} | $(ratio "${c[0]}" "${c[1]}") | ${routing:-?} |"
done
