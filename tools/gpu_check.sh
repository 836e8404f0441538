#!/usr/bin/env bash
# The runtime's GPU check in two steps, so the GPU machine (no Bazel, no
# network) needs nothing but what this gathers.
#
#   tools/gpu_check.sh build [DEST]   on the build machine: bazel build -c opt the
#                                     GPU tests, benchmarks and tools, and gather
#                                     them with everything they read into DEST
#                                     (default: <repo>/.gpu-carry-runtime)
#   DEST/gpu_check.sh run [OUT]       on the GPU machine: run them all, keep every
#                                     log, write a summary and the logs to OUT
#                                     (default: $OUT, else DEST/out)
#
# With the session's device tool (it sends /work/main's tree, so gather there;
# /.gpu-carry-*/ is in /work/main/.git/info/exclude):
#   tools/gpu_check.sh build /work/main/.gpu-carry-runtime
#   run(command="bash .gpu-carry-runtime/gpu_check.sh run", carry=[".gpu-carry-runtime"])
#
# `run` prints "N passed, N failed" and exits non-zero if any step failed. GPU
# tests run with KCACHE_EXPECT_GPU=1: on a machine without a usable GPU they
# fail instead of skipping.
set -uo pipefail

TESTS=(image_selection_test no_driver_test fake_driver_test fake_old_driver_test
  gpu_module_test gpu_stream_test)
TOOLS=(runtime_probe occupancy_report)
BENCHES=(runtime_bench runtime_first_launch)

build() {
  local repo dest bin
  repo=$(cd "$(dirname "$0")/.." && pwd)
  dest=${1:-$repo/.gpu-carry-runtime}
  cd "$repo" || exit 1
  local targets=(//runtime //tests/runtime:libfake_cuda.so //tests/runtime:gpu_fixtures)
  for t in "${TESTS[@]}" "${TOOLS[@]}"; do targets+=("//tests/runtime:$t"); done
  for b in "${BENCHES[@]}"; do targets+=("//bench:$b"); done
  # -c opt for the benchmarks' sake; stripped to keep what travels small.
  bazel build -c opt --strip=always "${targets[@]}" || exit 1
  bin=$(bazel info -c opt bazel-bin 2>/dev/null) || exit 1

  rm -rf "$dest"
  mkdir -p "$dest/bin" "$dest/lib" "$dest/py" "$dest/root/tests/runtime"
  for t in "${TESTS[@]}" "${TOOLS[@]}"; do cp "$bin/tests/runtime/$t" "$dest/bin/"; done
  for b in "${BENCHES[@]}"; do cp "$bin/bench/$b" "$dest/bin/"; done
  # What the binaries read, at the runfiles paths they use (run from root/).
  cp "$bin"/tests/runtime/*.kcb "$bin"/tests/runtime/*.cubin "$dest/root/tests/runtime/"
  cp "$bin/tests/runtime/libfake_cuda.so" "$dest/root/tests/runtime/"
  cp tests/runtime/link_deps_test.sh tests/runtime/occupancy_vs_cuda_core.py \
    bench/runtime_first_launch.py tests/runtime/kernels/saxpy.cu "$dest/py/"
  # Shared libraries the GPU machine may lack, under their sonames.
  local lib soname
  for lib in libbenchmark.so libxxhash.so; do
    local path
    path=$(readlink -f "/usr/lib/x86_64-linux-gnu/$lib")
    soname=$(readelf -d "$path" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
    cp "$path" "$dest/lib/$soname"
  done
  cp "$0" "$dest/gpu_check.sh"
  {
    echo "built: $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n), $(git -C "$repo" rev-parse --short HEAD) ($(git -C "$repo" rev-parse --abbrev-ref HEAD))"
    echo "config: bazel build -c opt --strip=always"
    echo
    echo "runtime library (opt, stripped build): $(stat -c %s "$bin/runtime/libruntime.a") bytes libruntime.a, $(stat -c %s "$bin/runtime/libruntime.so") bytes libruntime.so"
    echo "runtime_probe (a binary linking only the runtime, stripped): $(stat -c %s "$bin/tests/runtime/runtime_probe") bytes"
    echo "runtime_probe NEEDED:"
    readelf -d "$bin/tests/runtime/runtime_probe" | grep NEEDED
  } >"$dest/MANIFEST"
  du -sh "$dest"
  echo "gathered into $dest"
}

run() {
  local here out logs passed=0 failed=0
  here=$(cd "$(dirname "$0")" && pwd)
  out=${1:-${OUT:-$here/out}}
  mkdir -p "$out"
  logs=$(mktemp -d)/logs
  mkdir -p "$logs/images"
  export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PYTHONUNBUFFERED=1
  TEST_TMPDIR=$(mktemp -d)
  export TEST_TMPDIR
  cd "$here/root" || exit 1
  local summary="$logs/summary.txt"
  {
    echo "gpu_check run: $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n)"
    cat "$here/MANIFEST"
    echo
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
    echo
  } >"$summary"

  step() {  # step NAME COMMAND...: runs with a time limit, logs to NAME.log
    local name=$1 status
    shift
    echo "=== $name: $*"
    timeout "${STEP_TIMEOUT:-200}" "$@" >"$logs/$name.log" 2>&1
    status=$?
    if [ "$status" -eq 0 ]; then
      passed=$((passed + 1))
      echo "PASS $name" | tee -a "$summary"
    else
      failed=$((failed + 1))
      echo "FAIL $name (exit $status)" | tee -a "$summary"
    fi
    tail -n 25 "$logs/$name.log"
  }

  step runtime_probe "$here/bin/runtime_probe"
  for t in image_selection_test no_driver_test fake_driver_test fake_old_driver_test; do
    step "$t" "$here/bin/$t" --gtest_output="xml:$logs/$t.xml"
  done
  for t in gpu_module_test gpu_stream_test; do
    step "$t" env KCACHE_EXPECT_GPU=1 "$here/bin/$t" --gtest_output="xml:$logs/$t.xml"
  done
  step link_deps bash "$here/py/link_deps_test.sh" "$here/bin/runtime_probe"
  step occupancy_vs_cuda_core python3 "$here/py/occupancy_vs_cuda_core.py" \
    "$here/bin/occupancy_report" "$logs/images"
  step runtime_bench "$here/bin/runtime_bench" --benchmark_repetitions=5 \
    --benchmark_min_time=0.2 --benchmark_out="$logs/runtime_bench.json" \
    --benchmark_out_format=json
  step first_launch python3 "$here/py/runtime_first_launch.py" "$here/bin/runtime_first_launch" \
    "$here/py/saxpy.cu"

  echo "$passed passed, $failed failed" | tee -a "$summary"
  # At most a few files come back from a device run: the summary, the logs
  # people read first, and everything else in one archive.
  cp "$summary" "$out/summary.txt"
  for t in "${TESTS[@]}"; do
    echo "===== $t"
    cat "$logs/$t.log"
  done >"$out/tests.log"
  cp "$logs/runtime_bench.log" "$logs/occupancy_vs_cuda_core.log" "$logs/first_launch.log" "$out/"
  tar -czf "$out/gpu_logs.tar.gz" -C "$(dirname "$logs")" logs
  [ "$failed" -eq 0 ]
}

case "${1:-}" in
  build) shift; build "$@" ;;
  run) shift; run "$@" ;;
  *)
    sed -n '2,20p' "$0"
    exit 2
    ;;
esac
