#!/usr/bin/env bash
# A fresh workspace's first build (issue 21): two kernels (one includes a header
# from another package, one is a template with name expressions) and a
# cc_binary with the runtime, built with a fresh output base and no caches, by:
#   full     the full kcache built from source (--@kcache//rules:kcache_tool=@kcache//cli:kcache,
#            the rules' default before issue 21: gRPC plugin included)
#   source   the default: @kcache//cli:kcache_tool built from source
#   installed a kcache installed by `bazel run //:install -- PREFIX`, found on
#            PATH (kcache_dependencies() "auto")
# Each build runs Bazel with --batch, so /usr/bin/time counts the server and
# every action: wall time and CPU time (user + sys) of the whole build.
#
#   tools/bench_first_build.sh [WORKDIR]
#   KCACHE_BENCH_ROWS="installed" tools/bench_first_build.sh   # some rows only
#
# Uses this checkout as it is (do not edit it while this runs).
set -euo pipefail
kcache_root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/kcache-first-build.XXXXXX)}
mkdir -p "$work/ws/lib" "$work/ws/app" "$work/bin"
cd "$work/ws"
cat > WORKSPACE <<WS
local_repository(name = "kcache", path = "$kcache_root")
load("@kcache//rules:deps.bzl", "kcache_dependencies")
kcache_dependencies()
WS
cat > .bazelrc <<'RC'
build --cxxopt=-std=c++17 --host_cxxopt=-std=c++17
build --nosandbox_debug
RC
cat > lib/BUILD.bazel <<'B'
cc_library(name = "scale_h", hdrs = ["scale.cuh"], visibility = ["//visibility:public"])
B
cat > lib/scale.cuh <<'H'
#pragma once
__device__ inline float scaled(float v, float by) { return v * by; }
H
cat > app/saxpy.cu <<'CU'
#include "lib/scale.cuh"
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = scaled(x[i], a) + y[i];
}
CU
cat > app/fill.cu <<'CU'
template <typename T>
__global__ void fill(T* p, T v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}
CU
cat > app/main.cc <<'CC'
#include <cstdio>
#include "app/saxpy_kernel.h"
#include "runtime/registry.h"
int main() { std::printf("%s\n", kcache_app_saxpy_kernel().symbol); }
CC
cat > app/BUILD.bazel <<'B'
load("@kcache//rules:defs.bzl", "cuda_kernel")
cuda_kernel(name = "saxpy_kernel", srcs = ["saxpy.cu"], deps = ["//lib:scale_h"])
cuda_kernel(name = "fill_kernel", srcs = ["fill.cu"], name_expressions = ["fill<float>", "fill<int>"])
cc_binary(name = "app", srcs = ["main.cc"], deps = [":saxpy_kernel", ":fill_kernel", "@kcache//runtime"])
B

measure() {  # name, then extra bazel options
  local name=$1
  shift
  rm -rf "$work/root-$name"
  /usr/bin/time -f "%e %U %S" -o "$work/time-$name" \
    bazel --batch --output_user_root="$work/root-$name" build "$@" //app:app >"$work/log-$name" 2>&1
  read -r wall user sys <"$work/time-$name"
  printf '| %s | %s s | %.1f s (%s user + %s sys) |\n' "$name" "$wall" "$(echo "$user + $sys" | bc)" "$user" "$sys"
  chmod -R u+w "$work/root-$name" && rm -rf "$work/root-$name"
}

echo "| first build of //app:app | wall | CPU (user + sys) |"
echo "|---|---|---|"
PATH_NO_KCACHE=$PATH
rows=" ${KCACHE_BENCH_ROWS:-full source installed} "
case $rows in *" full "*) measure full --@kcache//rules:kcache_tool=@kcache//cli:kcache ;; esac
case $rows in *" source "*) measure source ;; esac
case $rows in
  *" installed "*)
    # As a user installs it (the README's Install section).
    (cd "$kcache_root" && bazel run //:install -- "$work/prefix" >/dev/null 2>&1)
    PATH="$work/prefix/bin:$PATH_NO_KCACHE" measure installed
    ;;
esac
echo "(logs in $work; $(nproc) cores, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
