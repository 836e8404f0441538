#!/usr/bin/env bash
# A new user's first hour, as issue 21 tried it: a workspace made of the
# README's snippets exactly (each fenced block after a `<!-- readme-test: FILE -->`
# line is FILE), built with its own Bazel server and run; then the hint for
# headers a kernel includes but does not declare, in every include style,
# sandboxed and in the persistent worker; then `bazel run @kcache//rules:stats`
# showing the store the actions used.
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

# No kcache on PATH here: "auto" builds the tool from source.
if command -v kcache >/dev/null; then fail "a kcache on PATH would make this test use it"; fi
b build //mypkg:app
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
    hint="\"$spelling\" exists at hint/x.cuh but is not among this action's inputs: add it to the cuda_kernel's hdrs (or deps)"
    if b build --strategy=KcacheCompile=$strategy "//hint:${style}_$strategy" 2>"$work/err"; then
      fail "an undeclared include ($style) built with $strategy"
    fi
    n=$(grep -cF "$hint" "$work/err" || true)
    if [ "$n" != 1 ]; then
      cat "$work/err" >&2
      fail "$style include, $strategy: the hint appears $n times, expected once: $hint"
    fi
    echo "hint once: $style, $strategy"
  done
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

# --- an installed kcache --------------------------------------------------------
# kcache_dependencies() "auto" takes the kcache on PATH (the repository is
# fetched again when PATH changes); a path that does not exist is an error.
tool=$(ls bazel-out/*-exec-*/bin/external/kcache/cli/kcache_tool | head -1)
mkdir -p "$work/installed"
cp "$tool" "$work/installed/kcache"
PATH="$work/installed:$PATH" b query --output=build @kcache_tool//:kcache >"$work/query"
grep -q 'sh_binary' "$work/query" || { cat "$work/query" >&2; fail "auto did not take the kcache on PATH"; }
PATH="$work/installed:$PATH" b build --disk_cache= //mypkg:saxpy_kernel 2>"$work/err"
grep -q "kcache_tool_unity" "$work/err" && fail "the tool was built although kcache is installed"
sed -i "s|^kcache_dependencies()|kcache_dependencies(kcache_tool = \"$work/no/such/kcache\")|" WORKSPACE
if b build //mypkg:saxpy_kernel 2>"$work/err"; then fail "a kcache_tool path that does not exist built"; fi
grep -qF "kcache_dependencies(kcache_tool = \"$work/no/such/kcache\"): no such file" "$work/err" ||
  { cat "$work/err" >&2; fail "no message naming the missing kcache_tool"; }
echo PASS
