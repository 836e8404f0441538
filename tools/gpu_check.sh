#!/usr/bin/env bash
# The runtime's GPU check in two steps, so the GPU machine (no Bazel, no
# network) needs nothing but what this gathers.
#
#   tools/gpu_check.sh build [DEST]   on the build machine: bazel build -c opt the
#                                     GPU tests, examples, benchmarks and tools,
#                                     and gather them with everything they read
#                                     into DEST (default: <repo>/.gpu-carry-runtime)
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
# fail instead of skipping. The GPU machine needs the CUDA toolkit in
# /usr/local/cuda (NVRTC and its headers) for the kcache_jit steps.
set -uo pipefail

# Test binaries, by package (each runs from root/, the runfiles layout).
TESTS=(tests/runtime/image_selection_test tests/runtime/no_driver_test
  tests/runtime/fake_driver_test tests/runtime/fake_old_driver_test
  tests/runtime/store_loader_test tests/runtime/jit/jit_test
  tests/runtime/gpu_module_test tests/runtime/gpu_stream_test
  tests/runtime/gpu_store_loader_test tests/runtime/jit/gpu_jit_test)
TOOLS=(tests/runtime/runtime_probe tests/runtime/store_loader_probe tests/runtime/jit_probe
  tests/runtime/occupancy_report tests/runtime/jit/jit_compile_once)
EXAMPLES=(examples/saxpy/saxpy examples/cub_reduce/cub_reduce)
BENCHES=(bench/runtime_bench bench/runtime_jit_bench bench/runtime_first_launch
  bench/runtime_first_launch_jit bench/runtime_first_launch_cub)

build() {
  local repo dest bin
  repo=$(cd "$(dirname "$0")/.." && pwd)
  dest=${1:-$repo/.gpu-carry-runtime}
  cd "$repo" || exit 1
  local targets=(//runtime //runtime:store_loader //runtime/jit //tests/runtime:libfake_cuda.so
    //tests/runtime:gpu_fixtures //tests/runtime:fixture_images //cli:kcache)
  for t in "${TESTS[@]}" "${TOOLS[@]}" "${EXAMPLES[@]}" "${BENCHES[@]}"; do
    targets+=("//${t%/*}:${t##*/}")
  done
  # -c opt for the benchmarks' sake; stripped to keep what travels small.
  bazel build -c opt --strip=always "${targets[@]}" || exit 1
  bin=$(bazel info -c opt bazel-bin 2>/dev/null) || exit 1

  rm -rf "$dest"
  mkdir -p "$dest/bin" "$dest/lib" "$dest/py" "$dest/root/tests/runtime/jit" \
    "$dest/root/tests/runtime/kernels"
  for t in "${TESTS[@]}" "${TOOLS[@]}" "${EXAMPLES[@]}" "${BENCHES[@]}"; do
    cp "$bin/$t" "$dest/bin/"
  done
  # What the binaries read, at the runfiles paths they use (run from root/).
  cp "$bin"/tests/runtime/*.kcb "$bin/tests/runtime/libfake_cuda.so" "$dest/root/tests/runtime/"
  cp -r "$bin"/tests/runtime/*_images "$dest/root/tests/runtime/"
  cp "$bin/tests/runtime/jit/jit_compile_once" "$dest/root/tests/runtime/jit/"
  cp tests/runtime/kernels/saxpy.cu "$dest/root/tests/runtime/kernels/"
  cp tests/runtime/link_deps_test.sh tests/runtime/occupancy_vs_cuda_core.py \
    bench/runtime_first_launch.py bench/runtime_cubin_load.py tests/runtime/kernels/saxpy.cu \
    bench/runtime_first_launch_cub.py bench/kernels/first_launch_cub.cu "$dest/py/"
  # The CUB fixture's cubin as nvcc makes it, to compare the driver's load
  # time with the cubin NVRTC makes of the same source (bench/runtime_cubin_load.py).
  local nvcc=${CUDA_PATH:-/usr/local/cuda}/bin/nvcc
  if [ -x "$nvcc" ]; then
    "$nvcc" -std=c++17 -cubin -arch=sm_90 -o "$dest/py/cub_block.nvcc.sm_90.cubin" \
      tests/runtime/kernels/cub_block.cu || exit 1
    "$nvcc" -std=c++17 -cubin -arch=sm_90 -o "$dest/py/first_launch_cub.nvcc.sm_90.cubin" \
      bench/kernels/first_launch_cub.cu || exit 1
  fi
  # The CUB fixture through kcache twice: lean images (the default) and
  # NVRTC's own (--no-lean), cubin and PTX, for the load-time comparison.
  local variant flag
  for variant in lean nvrtc; do
    flag=()
    [ "$variant" = nvrtc ] && flag=(--no-lean)
    "$bin/cli/kcache" compile tests/runtime/kernels/cub_block.cu --arch sm_90 --ptx compute_90 \
      --std c++17 --no-store "${flag[@]}" -o "$dest/py/cub_block.$variant.kcb" || exit 1
    "$bin/cli/kcache" bundle "$dest/py/cub_block.$variant.kcb" \
      --extract "$dest/py/cub_block.$variant" >/dev/null || exit 1
  done
  # The first-launch CUB kernel (bench/runtime_first_launch_cub.py), lean and
  # --no-lean, and NVRTC's own cubin of it for cuda.core to load.
  for variant in lean nvrtc; do
    flag=()
    [ "$variant" = nvrtc ] && flag=(--no-lean)
    "$bin/cli/kcache" compile bench/kernels/first_launch_cub.cu --arch sm_90 --ptx none \
      --std c++17 --no-store "${flag[@]}" -o "$dest/py/first_launch_cub.$variant.kcb" || exit 1
    "$bin/cli/kcache" bundle "$dest/py/first_launch_cub.$variant.kcb" \
      --extract "$dest/py/first_launch_cub.$variant" >/dev/null || exit 1
  done
  # Shared libraries the GPU machine may lack, under their sonames.
  local lib soname
  for lib in libbenchmark.so libxxhash.so libsqlite3.so; do
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
    echo "optional: $(stat -c %s "$bin/runtime/libstore_loader.a") bytes libstore_loader.a, $(stat -c %s "$bin/runtime/jit/libjit.a") bytes libjit.a"
    local probe
    for probe in runtime_probe store_loader_probe jit_probe; do
      echo "$probe (stripped): $(stat -c %s "$bin/tests/runtime/$probe") bytes; NEEDED:"
      readelf -d "$bin/tests/runtime/$probe" | grep NEEDED
    done
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
  mkdir -p "$logs"
  export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PYTHONUNBUFFERED=1
  TEST_TMPDIR=$(mktemp -d)
  export TEST_TMPDIR
  # Nothing lands in ~/.cache/kcache; no config or remote from the machine.
  KCACHE_DIR=$(mktemp -d)
  export KCACHE_DIR KCACHE_REMOTE=off
  unset KCACHE_CONFIG
  cd "$here/root" || exit 1
  local summary="$logs/summary.txt"
  {
    echo "gpu_check run: $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n)"
    cat "$here/MANIFEST"
    echo
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
    ls -l /usr/local/cuda/lib64/libnvrtc.so* 2>&1 | head -3
    echo
  } >"$summary"

  step() {  # step NAME COMMAND...: runs with a time limit, logs to NAME.log
    local name=$1 status start
    shift
    echo "=== $name: $*"
    start=$(date +%s%N)
    timeout "${STEP_TIMEOUT:-200}" "$@" >"$logs/$name.log" 2>&1
    status=$?
    local took=$((($(date +%s%N) - start) / 1000000))
    took="$((took / 1000)).$(printf %03d $((took % 1000)))"
    if [ "$status" -eq 0 ]; then
      passed=$((passed + 1))
      echo "PASS $name (${took}s)" | tee -a "$summary"
    else
      failed=$((failed + 1))
      echo "FAIL $name (exit $status, ${took}s)" | tee -a "$summary"
    fi
    tail -n 25 "$logs/$name.log"
  }

  step runtime_probe "$here/bin/runtime_probe"
  local t name
  for t in "${TESTS[@]}"; do
    name=${t##*/}
    # The driver's JIT cache on, as users have it: served NVRTC is answered
    # "no such file" there (seal.h, SealPolicy::hidden_folders), so a driver
    # that writes it between a JIT compile and its reload (the first PTX it
    # JITs on a fresh machine) loses gpu_jit_test no store hit. docs/KEYS.md.
    step "$name" env KCACHE_EXPECT_GPU=1 "$here/bin/$name" \
    --gtest_output="xml:$logs/$name.xml"
  done
  step link_deps bash "$here/py/link_deps_test.sh" "$here/bin/runtime_probe"
  step link_deps_store_loader bash "$here/py/link_deps_test.sh" "$here/bin/store_loader_probe" \
    "libcurl|libcrypto"
  step link_deps_jit bash "$here/py/link_deps_test.sh" "$here/bin/jit_probe" "libcurl|libcrypto"
  step example_saxpy "$here/bin/saxpy"
  step example_cub_reduce "$here/bin/cub_reduce"
  step occupancy_vs_cuda_core python3 "$here/py/occupancy_vs_cuda_core.py" \
    "$here/bin/occupancy_report"
  step runtime_bench "$here/bin/runtime_bench" --benchmark_repetitions=5 \
    --benchmark_min_time=0.2 --benchmark_out="$logs/runtime_bench.json" \
    --benchmark_out_format=json
  step runtime_jit_bench "$here/bin/runtime_jit_bench" --benchmark_repetitions=3 \
    --benchmark_min_time=0.2 --benchmark_out="$logs/runtime_jit_bench.json" \
    --benchmark_out_format=json
  # NVRTC's cubin, the lean cubin, nvcc's; then the PTX images, JIT-compiled
  # by the driver with its cache off (what a PTX-only load costs).
  step cubin_load env CUDA_CACHE_DISABLE=1 python3 "$here/py/runtime_cubin_load.py" \
    _Z17block_sort_reduceIiLi4EEvPKT_PS0_S3_ \
    "$here/py/cub_block.nvrtc/sm_90.cubin" "$here/py/cub_block.lean/sm_90.cubin" \
    tests/runtime/cub_block_images/sm_90.cubin "$here/py/cub_block.nvcc.sm_90.cubin" \
    "$here/py/cub_block.nvrtc/compute_90.ptx" "$here/py/cub_block.lean/compute_90.ptx"
  # The same for issue 10's BlockRadixSort<int,128,4> kernel alone.
  step cubin_load_sort env CUDA_CACHE_DISABLE=1 python3 "$here/py/runtime_cubin_load.py" \
    block_sort "$here/py/first_launch_cub.nvrtc/sm_90.cubin" \
    "$here/py/first_launch_cub.lean/sm_90.cubin" "$here/py/first_launch_cub.nvcc.sm_90.cubin"
  step first_launch python3 "$here/py/runtime_first_launch.py" "$here/bin/runtime_first_launch" \
    "$here/py/saxpy.cu" "$here/bin/runtime_first_launch_jit"

  step first_launch_cub python3 "$here/py/runtime_first_launch_cub.py" \
    "$here/bin/runtime_first_launch_cub" "$here/py/first_launch_cub.lean.kcb" \
    "$here/py/first_launch_cub.nvrtc.kcb" "$here/py/first_launch_cub.nvrtc/sm_90.cubin" \
    "$here/py/first_launch_cub.cu" "${CUDA_PATH:-/usr/local/cuda}/include/cccl"

  echo "$passed passed, $failed failed" | tee -a "$summary"
  # At most a few files come back from a device run: the summary, the logs
  # people read first, and everything else in one archive.
  cp "$summary" "$out/summary.txt"
  for t in runtime_probe "${TESTS[@]}" link_deps link_deps_store_loader link_deps_jit \
    example_saxpy example_cub_reduce; do
    echo "===== ${t##*/}"
    cat "$logs/${t##*/}.log"
  done >"$out/tests.log"
  cp "$logs/runtime_bench.log" "$logs/runtime_jit_bench.log" "$logs/occupancy_vs_cuda_core.log" \
    "$logs/cubin_load.log" "$logs/cubin_load_sort.log" "$logs/first_launch.log" "$logs/first_launch_cub.log" "$out/"
  tar -czf "$out/gpu_logs.tar.gz" -C "$(dirname "$logs")" logs
  [ "$failed" -eq 0 ]
}

case "${1:-}" in
  build) shift; build "$@" ;;
  run) shift; run "$@" ;;
  *)
    sed -n '2,22p' "$0"
    exit 2
    ;;
esac
