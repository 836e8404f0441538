#!/usr/bin/env bash
# A new user's first hour, as issues 21 and 29 tried it: kcache installed with
# `bazel run //:install -- PREFIX` (the install script as that target runs it)
# and put on PATH; a workspace made of the README's snippets exactly (each
# fenced block after a `<!-- readme-test: FILE -->` line is FILE), built with
# its own Bazel server using the installed kcache, and run; the C++17 message
# without the .bazelrc; host files naming a misspelt kernel or passing a
# wrong argument, which must not compile; the hint for headers a kernel
# includes but does not declare, in every include style, sandboxed and in the
# persistent worker, and for a header of a package the build did not load;
# then `bazel run @kcache//rules:stats` showing the store the actions used.
set -euo pipefail

kcache_root=$(dirname "$(readlink -f "$TEST_SRCDIR/$TEST_WORKSPACE/WORKSPACE")")
readme="$kcache_root/README.md"
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/first-hour.XXXXXX")
root="$work/bazel-root"
trap 'cd /; bazel --output_user_root="$root" shutdown >/dev/null 2>&1 || true; chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/ws"
cd "$work/ws"
b() { bazel --output_user_root="$root" "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# --- the README's snippets, as files ------------------------------------------
python3 - "$readme" <<'PY'
import os, re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"<!-- readme-test: (\S+) -->\n```[a-z]*\n(.*?)```", text, re.S)
assert len(blocks) >= 6, "README has %d readme-test blocks" % len(blocks)
for name, body in blocks:
    os.makedirs(os.path.dirname(name) or ".", exist_ok=True)
    with open(name, "w") as f:
        f.write(body)
    print("README ->", name)
PY
grep -q 'path = "/path/to/kcache"' WORKSPACE || fail "the README's WORKSPACE no longer names /path/to/kcache"
sed -i "s|/path/to/kcache|$kcache_root|" WORKSPACE
grep -q -- '--nosandbox_debug' .bazelrc || fail "the README's .bazelrc lacks --nosandbox_debug"

# --- install ----------------------------------------------------------------------
# What `bazel run //:install -- PREFIX` runs (its args are the three files).
if command -v kcache >/dev/null; then fail "a kcache already on PATH would make this test use it"; fi
prefix="$work/prefix"
(cd "$TEST_SRCDIR/$TEST_WORKSPACE" &&
  ./install cli/kcache nvrtc_shim/libnvrtc.so.13 cache/remote/reapi/libkcache_reapi.so "$prefix") >"$work/install.out"
cat "$work/install.out"
for f in bin/kcache lib/kcache/libnvrtc.so.13 lib/kcache/libkcache_reapi.so; do
  [ -f "$prefix/$f" ] || fail "the install did not write PREFIX/$f"
done
grep -qF "export PATH=\"$prefix/bin:\$PATH\"" "$work/install.out" || fail "the install does not say what to put on PATH"
# The installed kcache run finds its drop-in in PREFIX/lib/kcache and reports at exit.
preload=$("$prefix/bin/kcache" run -- sh -c 'echo "$LD_PRELOAD"' 2>"$work/err")
[ "$preload" = "$prefix/lib/kcache/libnvrtc.so.13" ] || fail "kcache run preloads $preload"
grep -q "^kcache run: no NVRTC compile went through kcache" "$work/err" || { cat "$work/err" >&2; fail "no kcache run summary"; }
export PATH="$prefix/bin:$PATH"

# "auto" takes the kcache on PATH: the tool is not built.
b build //mypkg:app
if ls bazel-out/*-exec-*/bin/external/kcache/cli/kcache_tool >/dev/null 2>&1; then
  fail "the tool was built although kcache is installed"
fi
set +e
out=$(bazel-bin/mypkg/app 2>&1)
rc=$?
set -e
echo "app exited $rc: $out"
if [ "$rc" = 0 ]; then
  [ "$out" = "y[0] = 4 (expected 4)" ] || fail "app ran but printed: $out"
else
  # No GPU here: the README's error handling reports it (no abort, no crash).
  [ "$rc" = 1 ] || fail "app exited $rc (an uncaught exception aborts with 134)"
  echo "$out" | grep -q "^app: no CUDA driver found" || fail "app's error: $out"
fi

# --- C++17: one line ----------------------------------------------------------------
mv .bazelrc "$work/bazelrc.saved"
if b build //mypkg:app >"$work/out" 2>&1; then fail "built without -std=c++17"; fi
mv "$work/bazelrc.saved" .bazelrc
grep -qF 'kcache needs C++17: add `build --cxxopt=-std=c++17 --host_cxxopt=-std=c++17` to your .bazelrc' "$work/out" ||
  { cat "$work/out" >&2; fail "no C++17 message"; }
if grep -q "does not name a template type\|in namespace 'std'" "$work/out"; then
  cat "$work/out" >&2
  fail "errors from inside kcache's headers after the C++17 message"
fi
echo "C++17: one message"

# --- kernels named and launched through the generated header -------------------------
cat > mypkg/typo.cc <<'CC'
#include "mypkg/saxpy_kernel.h"
#include "runtime/module.h"
void look_up(const kcache::runtime::Module& m) { m.function(kcache_mypkg_saxpy_kernel_kernels::saxpyy); }
CC
cat > mypkg/wrong_arg.cc <<'CC'
#include "mypkg/saxpy_kernel.h"
#include "runtime/module.h"
namespace rt = kcache::runtime;
void run(const rt::Module& m, rt::StreamRef s, CUdeviceptr x, CUdeviceptr y) {
  rt::launch(s, {1, 256}, m.function(kcache_mypkg_saxpy_kernel_kernels::saxpy), 2.0, x, y, 4);
}
CC
cp mypkg/BUILD.bazel "$work/mypkg.BUILD"
cat >> mypkg/BUILD.bazel <<'BUILD'

[cc_library(
    name = name,
    srcs = [name + ".cc"],
    deps = [":saxpy_kernel", "@kcache//runtime"],
) for name in ["typo", "wrong_arg"]]
BUILD
if b build //mypkg:typo >"$work/out" 2>&1; then fail "a misspelt kernel compiled"; fi
grep -qE "saxpyy.* is not a member of .kcache_mypkg_saxpy_kernel_kernels" "$work/out" ||
  { cat "$work/out" >&2; fail "the misspelt kernel's error"; }
if b build //mypkg:wrong_arg >"$work/out" 2>&1; then fail "a double for float a compiled"; fi
grep -qF "kcache: kernel saxpy, parameter 0 (saxpy_param_0, .f32) is 4 bytes: argument 1 has another size" "$work/out" ||
  { cat "$work/out" >&2; fail "the wrong argument's error"; }
cp "$work/mypkg.BUILD" mypkg/BUILD.bazel
echo "kernel checks: a typo and a wrong argument do not compile"

# --- the hdrs/deps hint ---------------------------------------------------------
# hint/x.cuh exists in the workspace; no kernel declares it.
mkdir -p hint
cat > hint/x.cuh <<'CUH'
#pragma once
constexpr int kX = 7;
CUH
cat > hint/root.cu <<'CU'
#include "hint/x.cuh"
extern "C" __global__ void root(int* p) { *p = kX; }
CU
cat > hint/package.cu <<'CU'
#include "x.cuh"
extern "C" __global__ void package(int* p) { *p = kX; }
CU
cat > hint/angled.cu <<'CU'
#include <hint/x.cuh>
extern "C" __global__ void angled(int* p) { *p = kX; }
CU
cat > hint/BUILD.bazel <<'BUILD'
load("@kcache//rules:defs.bzl", "cuda_kernel")

# One target per include style and strategy: each runs its own action.
[cuda_kernel(
    name = style + "_" + strategy,
    srcs = [style + ".cu"],
    archs = ["sm_90"],
    ptx = "none",
) for style in ["root", "package", "angled"] for strategy in ["worker", "sandboxed"]]
BUILD
for strategy in sandboxed worker; do
  for style in root package angled; do
    case $style in
      package) spelling=x.cuh ;;
      *) spelling=hint/x.cuh ;;
    esac
    hint="kcache compile: \"hint/x.cuh\" exists in the workspace but is not an input of //hint:${style}_$strategy: add it to hdrs, or add the cc_library that has it to deps"
    if b build --strategy=KcacheCompile=$strategy "//hint:${style}_$strategy" 2>"$work/err"; then
      fail "an undeclared include ($style) built with $strategy"
    fi
    n=$(grep -cF "$hint" "$work/err" || true)
    if [ "$n" != 1 ]; then
      cat "$work/err" >&2
      fail "$style include, $strategy: the hint appears $n times, expected once: $hint"
    fi
    [ "$(grep -m1 '^kcache' "$work/err")" = "$hint" ] || { cat "$work/err" >&2; fail "the hint is not kcache's first line"; }
    echo "hint once and first: $style, $strategy"
  done
done
# A header of a package the build does not load: Bazel 4 links only the
# loaded packages into the execroot, so the hint comes from the workspace.
mkdir -p devlib
cat > devlib/devmath.cuh <<'CUH'
#pragma once
__device__ inline float twice(float v) { return 2 * v; }
CUH
cat > devlib/BUILD.bazel <<'BUILD'
cc_library(name = "devlib", hdrs = ["devmath.cuh"], visibility = ["//visibility:public"])
BUILD
cat > hint/uses_devlib.cu <<'CU'
#include "devlib/devmath.cuh"
extern "C" __global__ void k(float* p) { *p = twice(*p); }
CU
cat >> hint/BUILD.bazel <<'BUILD'

[cuda_kernel(
    name = "devlib_" + strategy,
    srcs = ["uses_devlib.cu"],
    archs = ["sm_90"],
    ptx = "none",
) for strategy in ["worker", "sandboxed"]]
BUILD
for strategy in worker sandboxed; do
  hint="kcache compile: \"devlib/devmath.cuh\" exists in the workspace but is not an input of //hint:devlib_$strategy: add it to hdrs, or add the cc_library that has it to deps"
  if b build --strategy=KcacheCompile=$strategy "//hint:devlib_$strategy" 2>"$work/err"; then
    fail "an undeclared header of another package built ($strategy)"
  fi
  [ "$(grep -m1 '^kcache' "$work/err")" = "$hint" ] || { cat "$work/err" >&2; fail "devlib hint, $strategy"; }
  [ "$(grep -cF "$hint" "$work/err")" = 1 ] || { cat "$work/err" >&2; fail "devlib hint not once, $strategy"; }
  echo "hint for an unloaded package: $strategy"
done

# --- hits, visible --------------------------------------------------------------
store="$work/store"
mkdir -p "$store"
opt_in=(--action_env=KCACHE_DIR="$store" --sandbox_writable_path="$store")
b build "${opt_in[@]}" //mypkg:saxpy_kernel
b clean
b build "${opt_in[@]}" //mypkg:saxpy_kernel
stats=$(b run "${opt_in[@]}" @kcache//rules:stats -- -s --format json)
echo "stats: $stats"
python3 - "$stats" <<'PY'
import json, sys
c = json.loads(sys.argv[1])["counters"]
assert c.get("nvrtc_invocations") == 3, c   # sm_80, sm_90a, compute_90, once
assert c.get("hits") == 3, c                 # all three again after the clean
PY
# Nothing was built for it: the tool is the actions' own.
b run "${opt_in[@]}" @kcache//rules:stats 2>"$work/err" >/dev/null
if grep -q "Compiling.*kcache_tool_unity" "$work/err"; then fail "stats built the tool again"; fi
if b run @kcache//rules:stats 2>"$work/err"; then fail "stats without a store succeeded"; fi
grep -q "the KcacheCompile actions use no store" "$work/err" || { cat "$work/err" >&2; fail "no-store message"; }

# --- the installed kcache ---------------------------------------------------------
# kcache_dependencies() "auto" took the kcache on PATH (the repository is
# fetched again when PATH changes); a path that does not exist is an error.
b query --output=build @kcache_tool//:kcache >"$work/query"
grep -q 'sh_binary' "$work/query" || { cat "$work/query" >&2; fail "auto did not take the kcache on PATH"; }
took=$(readlink "$(b info output_base 2>/dev/null)/external/kcache_tool/bin/kcache")
[ "$took" = "$prefix/bin/kcache" ] || fail "auto took $took, not the installed $prefix/bin/kcache"
sed -i "s|^kcache_dependencies()|kcache_dependencies(kcache_tool = \"$work/no/such/kcache\")|" WORKSPACE
if b build //mypkg:saxpy_kernel 2>"$work/err"; then fail "a kcache_tool path that does not exist built"; fi
grep -qF "kcache_dependencies(kcache_tool = \"$work/no/such/kcache\"): no such file" "$work/err" ||
  { cat "$work/err" >&2; fail "no message naming the missing kcache_tool"; }
echo PASS
