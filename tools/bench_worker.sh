#!/usr/bin/env bash
# The persistent worker against one process per action, same run, interleaved:
# a generated workspace of N CUB-heavy kernels that share their headers
# (BlockRadixSort + BlockReduce, each kernel different), each built cold
# (fresh output base, empty store) with
#   A: --strategy=KcacheCompile=sandboxed   (a new kcache process per kernel)
#   B: the default: the persistent worker   (kcache compile --persistent_worker)
# ROUNDS times, A then B. Each build first builds one trivial kernel (k0),
# which also starts B's worker, then times the N kernels.
#
#   [SIDES="sandboxed worker"] tools/bench_worker.sh [N=50] [ROUNDS=1] [WORKDIR]
#
# Uses a clone of HEAD and the kcache built from it (installed, so the tool's
# own build is not timed). Prints a Markdown table; logs stay in WORKDIR.
set -euo pipefail

n=${1:-50}
rounds=${2:-1}
work=${3:-$(mktemp -d /tmp/kcache-bench-worker.XXXXXX)}
here=$(cd "$(dirname "$0")/.." && pwd)
kcache_root="$work/kcache"
rm -rf "$kcache_root"
git clone -q "$here" "$kcache_root"
(cd "$kcache_root" && bazel build -c opt //cli:kcache >"$work/log.tool" 2>&1)
mkdir -p "$work/installed" "$work/ws/kernels"
cp "$kcache_root/bazel-bin/cli/kcache" "$work/installed/kcache"
(cd "$kcache_root" && bazel shutdown >/dev/null 2>&1 || true)

cd "$work/ws"
cat > WORKSPACE <<WS
workspace(name = "bench")

local_repository(name = "kcache", path = "$kcache_root")

load("@kcache//rules:deps.bzl", "kcache_dependencies")

kcache_dependencies()
WS
cat > .bazelrc <<'RC'
build --cxxopt=-std=c++17 --host_cxxopt=-std=c++17
build --nosandbox_debug
build --@kcache//rules:kcache_tool=//kernels:installed_kcache
RC
cat > kernels/installed_kcache.sh <<SH
#!/bin/sh
exec "$work/installed/kcache" "\$@"
SH
chmod +x kernels/installed_kcache.sh
{
  echo 'load("@kcache//rules:defs.bzl", "cuda_kernel")'
  echo 'sh_binary(name = "installed_kcache", srcs = ["installed_kcache.sh"])'
  echo 'extern "C" __global__ void k0() {}' > kernels/k0.cu
  echo 'cuda_kernel(name = "k0", srcs = ["k0.cu"])'
  for i in $(seq 1 "$n"); do
    cat > "kernels/k$i.cu" <<CU
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
    printf 'cuda_kernel(name = "k%d", srcs = ["k%d.cu"], std = "c++17")\n' "$i" "$i"
  done
} > kernels/BUILD.bazel

seconds() { python3 -c 'import time; print(f"{time.time():.3f}")'; }
declare -a results
timed() {  # timed LABEL COMMAND...
  local label=$1; shift
  local t0 t1 s
  t0=$(seconds)
  "$@" >"$work/log.$(echo "$label" | tr -c 'a-zA-Z0-9' '_')" 2>&1 || { echo "failed: $label (see $work)"; exit 1; }
  t1=$(seconds)
  s=$(python3 -c "print(f'{$t1 - $t0:.1f}')")
  results+=("| $label | $s s |")
  echo "$label: $s s" >&2
}
ob() { echo "$work/ob-$1"; }
shutdown_all() {
  for d in "$work"/ob-*; do [ -d "$d" ] && bazel --output_base="$d" shutdown >/dev/null 2>&1 || true; done
}
trap shutdown_all EXIT
store="$work/store"

for r in $(seq 1 "$rounds"); do
  for side in ${SIDES:-sandboxed worker}; do
    rm -rf "$store" && mkdir -p "$store"
    # No Bazel disk or remote cache (~/.bazelrc may set one): the second side
    # would get the first side's outputs.
    flags=(--action_env=KCACHE_DIR="$store" --sandbox_writable_path="$store" --disk_cache=
      --noremote_accept_cached)
    [ "$side" = sandboxed ] && flags+=(--strategy=KcacheCompile=sandboxed)
    base=$(ob "$side-$r")
    bazel --output_base="$base" build "${flags[@]}" //kernels:k0 >"$work/log.k0.$side.$r" 2>&1
    timed "round $r, $side: $n CUB kernels, empty store" \
      bazel --output_base="$base" build "${flags[@]}" //kernels:all
    bazel --output_base="$base" shutdown >/dev/null 2>&1
  done
done

echo
echo "| step ($n CUB kernels, sm_80 + sm_90 cubins + compute_90 PTX each) | wall time |"
echo "|---|---|"
printf '%s\n' "${results[@]}"
