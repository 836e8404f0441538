#!/usr/bin/env bash
# A new user's workspace, outside this repository, uses kcache through
# local_repository exactly as the README says: it declares a cuda_kernel, links
# it into a cc_binary, builds with its own Bazel server and runs the binary.
set -euo pipefail

# The kcache checkout: runfiles are symlinks into the source tree.
kcache_root=$(dirname "$(readlink -f "$TEST_SRCDIR/$TEST_WORKSPACE/WORKSPACE")")
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/user-ws.XXXXXX")
trap 'cd /; bazel --output_user_root="$work/bazel-root" shutdown >/dev/null 2>&1 || true; chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/ws/kernels"
cd "$work/ws"

# From the README, "Using kcache in your workspace".
cat > WORKSPACE <<WS
workspace(name = "user_project")

local_repository(
    name = "kcache",
    path = "$kcache_root",
)

load("@kcache//rules:deps.bzl", "kcache_dependencies")

kcache_dependencies()
WS
cat > .bazelrc <<'RC'
build --cxxopt=-std=c++17 --host_cxxopt=-std=c++17
build --nosandbox_debug
RC
cat > kernels/scale.cu <<'CU'
#include "kernels/factor.cuh"
extern "C" __global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= kFactor;
}
CU
cat > kernels/factor.cuh <<'CUH'
#pragma once
constexpr float kFactor = 3.0f;
CUH
cat > kernels/main.cc <<'CC'
#include <cstdio>

#include "bundle/bundle.h"
#include "bundle/embedded.h"

// Every cuda_kernel linked in registers its bundle; list them.
int main() {
  for (const auto& embedded : kcache::bundle::embedded_bundles()) {
    auto bundle = kcache::bundle::parse(
        std::string_view(reinterpret_cast<const char*>(embedded.data), embedded.size),
        embedded.symbol);
    std::printf("%s %s", embedded.symbol, std::string(bundle.source_name).c_str());
    for (const auto& image : bundle.images) {
      std::printf(" %s:%s", kcache::bundle::to_string(image.kind), std::string(image.arch).c_str());
    }
    std::printf("\n");
  }
  return 0;
}
CC
cat > kernels/BUILD.bazel <<'BUILD'
load("@kcache//rules:defs.bzl", "cuda_kernel")

cuda_kernel(
    name = "scale_kernel",
    srcs = ["scale.cu"],
    hdrs = ["factor.cuh"],
    archs = ["sm_80", "sm_90"],
)

cc_binary(
    name = "list_kernels",
    srcs = ["main.cc"],
    deps = [
        ":scale_kernel",
        "@kcache//bundle",
    ],
)
BUILD

bazel --output_user_root="$work/bazel-root" build //kernels:list_kernels
out=$(bazel-bin/kernels/list_kernels)
echo "list_kernels printed: $out"
expected="kcache_kernels_scale_kernel kernels/scale.cu cubin:sm_80 cubin:sm_90 ptx:compute_90"
if [ "$out" != "$expected" ]; then
  echo "FAIL: expected: $expected" >&2
  exit 1
fi

# A CUTLASS 2.x device GEMM (its Params built on the device) through
# cuda_kernel: the CUTLASS include folder comes from a new_local_repository as
# a cc_library in deps, whose `includes` become -I folders; -default-device as
# an nvrtc option. It joins the store check below.
cutlass_include="${KCACHE_CUTLASS_DIR:-/opt/kcache-cutlass}/cutlass_library/source/include"
targets=(//kernels:list_kernels)
cutlass_kernels=0
if [ -f "$cutlass_include/cutlass/gemm/kernel/default_gemm.h" ]; then
  cat >> WORKSPACE <<WS

new_local_repository(
    name = "cutlass",
    path = "$cutlass_include",
    build_file_content = """
cc_library(
    name = "cutlass",
    hdrs = glob(["cutlass/**/*.h", "cutlass/**/*.hpp", "cutlass/**/*.inl",
                 "cute/**/*.h", "cute/**/*.hpp", "cute/**/*.inl"]),
    includes = ["."],
    visibility = ["//visibility:public"],
)
""",
)
WS
  mkdir -p cutlass_kernels
  cp "$kcache_root/tests/compiler/kernels/cutlass/cutlass2_gemm.cu" cutlass_kernels/
  cat > cutlass_kernels/BUILD.bazel <<'BUILD'
load("@kcache//rules:defs.bzl", "cuda_kernel")

cuda_kernel(
    name = "cutlass2_gemm",
    srcs = ["cutlass2_gemm.cu"],
    deps = ["@cutlass"],
    archs = ["sm_90"],
    ptx = "none",
    std = "c++17",
    nvrtc_opts = ["-default-device"],
)
BUILD
  targets+=(//cutlass_kernels:cutlass2_gemm)
  cutlass_kernels=1
else
  echo "CUTLASS part skipped: no CUTLASS headers at $cutlass_include (run tools/install_deps.sh or set KCACHE_CUTLASS_DIR)"
fi

# Opting in to a shared store: after `bazel clean` (Bazel's caches gone) the
# kernels are store hits and NVRTC does not run again.
store="$work/store"
mkdir -p "$store"
opt_in=(--action_env=KCACHE_DIR="$store" --sandbox_writable_path="$store")
bazel --output_user_root="$work/bazel-root" build "${opt_in[@]}" "${targets[@]}"
bazel --output_user_root="$work/bazel-root" clean
bazel --output_user_root="$work/bazel-root" build "${opt_in[@]}" "${targets[@]}"
if [ "$cutlass_kernels" = 1 ] && [ ! -s bazel-bin/cutlass_kernels/cutlass2_gemm.kcb ]; then
  echo "FAIL: no bundle for //cutlass_kernels:cutlass2_gemm" >&2
  exit 1
fi
# The actions' kcache against the actions' store (rules/private/stats.bzl).
stats=$(bazel --output_user_root="$work/bazel-root" run "${opt_in[@]}" @kcache//rules:stats -- -s --format json)
echo "store after a clean rebuild: $stats"
python3 - "$stats" "$cutlass_kernels" <<'PY'
import json, sys
c = json.loads(sys.argv[1])["counters"]
n = 3 + int(sys.argv[2])  # sm_80, sm_90, compute_90 (+ the CUTLASS GEMM's sm_90)
# Once each, compute_90's PTX from sm_90's compile.
assert c.get("nvrtc_invocations") == n - 1, c
assert c.get("hits") == n, c                 # all again after the clean
PY

# Only declared inputs are readable, under the persistent worker as in a
# sandbox: a header chosen by a macro (a computed include, which kcache
# resolves when NVRTC asks for it) that is not in hdrs fails the build with a
# clear message, whichever strategy runs the action; declared, it builds.
cat > kernels/computed.cu <<'CU'
#define STR2(x) #x
#define STR(x) STR2(x)
#include STR(VARIANT.cuh)
extern "C" __global__ void variant(int* p) { *p = kVariant; }
CU
cat > kernels/v9.cuh <<'CUH'
#pragma once
constexpr int kVariant = 9;
CUH
cat >> kernels/BUILD.bazel <<'BUILD'

cuda_kernel(
    name = "undeclared_kernel",
    srcs = ["computed.cu"],
    archs = ["sm_90"],
    defines = ["VARIANT=v9"],
    ptx = "none",
)

# The same twice: each strategy runs its own action.
[cuda_kernel(
    name = "declared_kernel_" + strategy,
    srcs = ["computed.cu"],
    hdrs = ["v9.cuh"],
    archs = ["sm_90"],
    defines = ["VARIANT=v9"],
    ptx = "none",
) for strategy in ["worker", "sandboxed"]]
BUILD
# The worker's NVRTC finds the file in the execroot and kcache refuses it;
# sandboxed, NVRTC cannot open it and kcache says where it looked.
not_found='"v9.cuh" (included from kernels/computed.cu:3) was not found among the inputs in: kernels, .'
hint='kcache compile: "kernels/v9.cuh" exists in the workspace but is not an input of //kernels:undeclared_kernel: add it to hdrs, or add the cc_library that has it to deps'
if bazel --output_user_root="$work/bazel-root" build --strategy=KcacheCompile=worker \
  //kernels:undeclared_kernel 2>"$work/err"; then
  echo "FAIL: an undeclared computed include built in the worker" >&2
  exit 1
fi
grep -qF "$hint" "$work/err" || { cat "$work/err" >&2; exit 1; }
if bazel --output_user_root="$work/bazel-root" build --strategy=KcacheCompile=sandboxed \
  //kernels:undeclared_kernel 2>"$work/err"; then
  echo "FAIL: an undeclared computed include built sandboxed" >&2
  exit 1
fi
grep -qF "$hint" "$work/err" || { cat "$work/err" >&2; exit 1; }
grep -qF "$not_found" "$work/err" || { cat "$work/err" >&2; exit 1; }
for strategy in worker sandboxed; do
  bazel --output_user_root="$work/bazel-root" build --strategy=KcacheCompile=$strategy \
    --disk_cache= --output_groups=bundles //kernels:declared_kernel_$strategy
done

# An unknown arch fails at analysis and lists the valid ones.
sed -i 's/"sm_80", "sm_90"/"sm_91"/' kernels/BUILD.bazel
if bazel --output_user_root="$work/bazel-root" build //kernels:scale_kernel 2>"$work/err"; then
  echo "FAIL: an unknown arch built" >&2
  exit 1
fi
grep -q 'unknown arch "sm_91". Valid archs for CUDA' "$work/err" || { cat "$work/err" >&2; exit 1; }
echo PASS
