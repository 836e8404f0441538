#!/usr/bin/env bash
# Measures cuda_kernel in a generated workspace of N kernels (default 50):
#   1. cold build: fresh output base, empty kcache store
#   2. no-op rebuild
#   3. one kernel edited
#   4. fresh output base (Bazel's caches empty), kcache store warm
#   5. fresh output base, Bazel --disk_cache warm, no kcache store
#   6. fresh output base, kcache store warm, kcache installed (not built)
#   7. fresh output base, kcache store empty, kcache installed
# Each build is timed whole (server start included) and, where it applies,
# split into building the kcache tool and building the kernels.
#
#   tools/bench_rules.sh [N] [WORKDIR]
#
# Uses a clone of HEAD (commit first). Run it on an otherwise idle machine.
# Prints a Markdown table (and keeps the logs in WORKDIR).
set -euo pipefail

n=${1:-50}
work=${2:-$(mktemp -d /tmp/kcache-bench-rules.XXXXXX)}
# Steps 1, 4 and 5 first build one trivial kernel (k0), which builds the kcache
# tool (exec configuration), then the N kernels, so the two costs show apart.
# Step 6 uses an installed kcache through --@kcache//rules:kcache_tool.
#
# A clone of this checkout's HEAD: the kcache tool must not change under the
# benchmark (editing the checkout while it runs would rebuild it mid-way).
kcache_root="$work/kcache"
rm -rf "$kcache_root"
git clone -q "$(cd "$(dirname "$0")/.." && pwd)" "$kcache_root"
mkdir -p "$work/ws/kernels"
store="$work/store"
disk_cache="$work/disk_cache"
rm -rf "$store" "$disk_cache"
mkdir -p "$store" "$disk_cache"

# --- the workspace ---------------------------------------------------------
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
RC
# Kernels like the ones teams ship: cuda_fp16 and cooperative groups (about a
# second of NVRTC each on these machines), each one different.
{
  echo 'load("@kcache//rules:defs.bzl", "cuda_kernel")'
  echo 'sh_binary(name = "installed_kcache", srcs = ["installed_kcache.sh"])'
  echo 'extern "C" __global__ void k0() {}' > kernels/k0.cu
  echo 'cuda_kernel(name = "k0", srcs = ["k0.cu"])'
  for i in $(seq 1 "$n"); do
    cat > "kernels/k$i.cu" <<CU
#include <cooperative_groups.h>
#include <cuda_fp16.h>
namespace cg = cooperative_groups;
extern "C" __global__ void dot$i(const __half* a, const __half* b, float* out, int n) {
  cg::thread_block block = cg::this_thread_block();
  float sum = 0.f;
  for (int i = block.thread_rank(); i < n; i += block.size()) {
    sum += __half2float(__hmul(a[i], b[i])) * ${i}.0f;
  }
  atomicAdd(out, sum);
}
CU
    printf 'cuda_kernel(name = "k%d", srcs = ["k%d.cu"])\n' "$i" "$i"
  done
} > kernels/BUILD.bazel

# "An installed kcache": a copy of the tool outside any output base.
cat > kernels/installed_kcache.sh <<SH
#!/bin/sh
exec "$work/installed/kcache" "\$@"
SH
chmod +x kernels/installed_kcache.sh

seconds() { python3 -c 'import time; print(f"{time.time():.3f}")'; }
# timed LABEL COMMAND...: runs, records wall seconds in $results
declare -a results
timed() {
  local label=$1; shift
  local t0 t1
  t0=$(seconds)
  "$@" >"$work/log.$(echo "$label" | tr -c 'a-z0-9' '_')" 2>&1 || { echo "failed: $label (see $work)"; exit 1; }
  t1=$(seconds)
  local s
  s=$(python3 -c "print(f'{$t1 - $t0:.1f}')")
  results+=("| $label | $s s |")
  echo "$label: $s s" >&2
}

ob() { echo "$work/ob-$1"; }
shutdown_all() {
  for d in "$work"/ob-*; do [ -d "$d" ] && bazel --output_base="$d" shutdown >/dev/null 2>&1 || true; done
}
trap shutdown_all EXIT
store_flags=(--action_env=KCACHE_DIR="$store" --sandbox_writable_path="$store")

# 1. cold
timed "1. cold, fresh output base: the kcache tool (+ k0)" bazel --output_base="$(ob 1)" build "${store_flags[@]}" //kernels:k0
timed "1. cold: $n kernels, empty store" bazel --output_base="$(ob 1)" build "${store_flags[@]}" //kernels:all
mkdir -p "$work/installed"
cp "$(ls "$(ob 1)"/execroot/bench/bazel-out/*-opt-exec-*/bin/external/kcache/cli/kcache | head -1)" "$work/installed/kcache"
# 2. no-op
timed "2. no-op rebuild" bazel --output_base="$(ob 1)" build "${store_flags[@]}" //kernels:all
# 3. one edit
sed -i 's/\* 1\.0f/* 1.5f/' kernels/k1.cu
timed "3. one kernel edited" bazel --output_base="$(ob 1)" build "${store_flags[@]}" //kernels:all
sed -i 's/\* 1\.5f/* 1.0f/' kernels/k1.cu
bazel --output_base="$(ob 1)" shutdown >/dev/null 2>&1
# 4. fresh output base, warm store
timed "4. fresh output base, warm store: the kcache tool (+ k0)" bazel --output_base="$(ob 4)" build "${store_flags[@]}" //kernels:k0
timed "4. fresh output base, warm store: $n kernels" bazel --output_base="$(ob 4)" build "${store_flags[@]}" //kernels:all
bazel --output_base="$(ob 4)" shutdown >/dev/null 2>&1
# 5. Bazel's disk cache: fill it from a fresh output base, then use it from another.
bazel --output_base="$(ob 5a)" build --disk_cache="$disk_cache" //kernels:all >"$work/log.5a" 2>&1
bazel --output_base="$(ob 5a)" shutdown >/dev/null 2>&1
timed "5. fresh output base, warm --disk_cache, no store: the kcache tool (+ k0)" bazel --output_base="$(ob 5b)" build --disk_cache="$disk_cache" //kernels:k0
timed "5. fresh output base, warm --disk_cache, no store: $n kernels" bazel --output_base="$(ob 5b)" build --disk_cache="$disk_cache" //kernels:all
bazel --output_base="$(ob 5b)" shutdown >/dev/null 2>&1
# 6. fresh output base, warm store, kcache installed (nothing to build but k0's hit)
installed=(--@kcache//rules:kcache_tool=//kernels:installed_kcache)
timed "6. fresh output base, warm store, installed kcache: k0" bazel --output_base="$(ob 6)" build "${store_flags[@]}" "${installed[@]}" //kernels:k0
timed "6. fresh output base, warm store, installed kcache: $n kernels" bazel --output_base="$(ob 6)" build "${store_flags[@]}" "${installed[@]}" //kernels:all
# 7. the same with an empty store: the cold build without building the tool
rm -rf "$store" && mkdir -p "$store"
timed "7. fresh output base, empty store, installed kcache: k0" bazel --output_base="$(ob 7)" build "${store_flags[@]}" "${installed[@]}" //kernels:k0
timed "7. fresh output base, empty store, installed kcache: $n kernels" bazel --output_base="$(ob 7)" build "${store_flags[@]}" "${installed[@]}" //kernels:all

echo
echo "| step ($n kernels, sm_80 + sm_90 cubins + compute_90 PTX each) | wall time |"
echo "|---|---|"
printf '%s\n' "${results[@]}"
echo
echo "kcache store after the runs:"
"$work/installed/kcache" --dir "$store" -s || true
