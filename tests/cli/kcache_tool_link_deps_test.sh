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
echo "PASS"
