#!/usr/bin/env bash
# Start-up cost of the grpc:// remote on the hit path: a `kcache compile` hit
# process with no remote, the same hit with a grpc:// remote configured (the
# lookup hits the local store, so libkcache_reapi.so is never opened), and
# what opening libkcache_reapi.so (gRPC, protobuf, abseil, ...) costs a
# process that does use the remote. Prints p50 / p90 in ms over N runs.
#
#   bazel build -c opt //cli:kcache //cache/remote/reapi:libkcache_reapi.so
#   bench/reapi_startup.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200}
kcache=bazel-bin/cli/kcache
lib=bazel-bin/cache/remote/reapi/libkcache_reapi.so
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
kernel=tests/compiler/kernels/saxpy.cu
"$kcache" --dir "$store" compile "$kernel" --arch sm_90 -o "$store/warm.kcb"

# p50 and p90 of N runs of "$@", in ms.
time_runs() {
  local samples=()
  for ((i = 0; i < n; i++)); do
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1
    t1=$(date +%s%N)
    samples+=($(((t1 - t0) / 1000)))
  done
  printf '%s\n' "${samples[@]}" | sort -n |
    awk '{a[NR]=$1} END {printf "p50 %.2f ms, p90 %.2f ms\n", a[int(NR*0.5)]/1000, a[int(NR*0.9)]/1000}'
}

echo -n "hit, no remote:                         "
time_runs "$kcache" --dir "$store" compile "$kernel" --arch sm_90 -o "$store/a.kcb"
echo -n "hit, grpc:// remote configured:         "
KCACHE_REMOTE=grpc://127.0.0.1:9 time_runs "$kcache" --dir "$store" compile "$kernel" --arch sm_90 -o "$store/b.kcb"
echo -n "python3, ctypes only:                   "
time_runs python3 -c "import ctypes"
echo -n "python3, ctypes + dlopen the REAPI lib: "
time_runs python3 -c "import ctypes; ctypes.CDLL('$lib')"
