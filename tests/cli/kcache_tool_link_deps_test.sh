#!/usr/bin/env bash
# //cli:kcache_tool, the binary cuda_kernel runs, must cost a fresh output base
# only what compiling kernels needs: nothing of gRPC or protobuf in its build
# graph (the REAPI plugin is //cli:kcache's), and the same load-time libraries
# as kcache itself (kcache_link_deps_test.sh).
set -uo pipefail
binary="$1"
graph="$2"
if grep -Ei 'grpc|protobuf|reapi/|//cache/reapi' "$graph"; then
  echo "FAIL: the build graph of //cli:kcache_tool holds gRPC/protobuf targets (above)"
  exit 1
fi
if ! grep -q '//compiler:tool_sources' "$graph"; then
  echo "FAIL: the query output does not look like deps(//cli:kcache_tool):"
  cat "$graph"
  exit 1
fi
"$(dirname "$0")/kcache_link_deps_test.sh" "$binary" || exit 1
# It is a whole kcache: the verbs the rules and `stats` use answer.
for verb in compile bundle; do
  "$binary" "$verb" --help >/dev/null || { echo "FAIL: kcache_tool $verb --help"; exit 1; }
done
"$binary" --dir "$TEST_TMPDIR/store" -s >/dev/null || { echo "FAIL: kcache_tool -s"; exit 1; }
# A grpc:// remote needs the plugin this binary is built without: it says how
# to get it. (A copy, so no plugin beside it or in bazel-bin is found.)
cp "$binary" "$TEST_TMPDIR/kcache_tool"
out=$(unset KCACHE_REAPI_LIBRARY RUNFILES_DIR TEST_SRCDIR
  "$TEST_TMPDIR/kcache_tool" --dir "$TEST_TMPDIR/store" remote check --remote grpc://127.0.0.1:1 2>&1 || true)
echo "$out"
echo "$out" | grep -qF -- "--@kcache//rules:kcache_tool=@kcache//cli:kcache" ||
  { echo "FAIL: a grpc:// remote without the plugin does not say how to get it"; exit 1; }
echo "PASS"
