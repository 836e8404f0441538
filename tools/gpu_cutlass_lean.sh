#!/usr/bin/env bash
# The CUTLASS 2.x GEMM's load time, lean (lean-v3: without CUTLASS's class
# constants) cubin against nvcc's and NVRTC's, on a GPU, with its results
# checked identical and each load's ratio to nvcc's (the goal: lean/nvcc <= 1);
# and what one unreferenced module variable costs a load, by state space
# (docs/LEAN.md "CUTLASS 2.x"). Two steps, as tools/gpu_check.sh:
#
#   tools/gpu_cutlass_lean.sh build [DEST]  on the build machine: the three
#                                           cubins of cutlass2_gemm.cu (kcache
#                                           lean, kcache --no-lean = NVRTC's,
#                                           nvcc -cubin) and the probe cubins,
#                                           gathered into DEST (default:
#                                           <repo>/.gpu-carry-cutlass)
#   DEST/gpu_cutlass_lean.sh run [OUT]      on the GPU machine: load times
#                                           (bench/runtime_cubin_load.py, two
#                                           orders), results against NumPy and
#                                           between the images
#                                           (bench/runtime_cutlass_lean.py);
#                                           logs and a summary to OUT
#
# With the session's device tool (it sends /work/main's tree, so gather there;
# /.gpu-carry-*/ is in /work/main/.git/info/exclude):
#   tools/gpu_cutlass_lean.sh build /work/main/.gpu-carry-cutlass
#   run(command="bash .gpu-carry-cutlass/gpu_cutlass_lean.sh run", carry=[".gpu-carry-cutlass"])
#
# Needs the CUTLASS headers (tools/install_deps.sh: /opt/kcache-cutlass, or
# $KCACHE_CUTLASS_DIR) and nvcc on the build machine; python3 with
# cuda.bindings, CuPy and NumPy on the GPU machine. $KCACHE names a kcache
# binary to use instead of building //cli:kcache. `run` exits non-zero when a
# step fails or an image's results differ.
set -uo pipefail

build() {
  local repo dest kcache cutlass nvcc src
  repo=$(cd "$(dirname "$0")/.." && pwd)
  dest=${1:-$repo/.gpu-carry-cutlass}
  cd "$repo" || exit 1
  cutlass=${KCACHE_CUTLASS_DIR:-/opt/kcache-cutlass}/cutlass_library/source/include
  [ -f "$cutlass/cutlass/cutlass.h" ] || { echo "no CUTLASS headers at $cutlass: run tools/install_deps.sh"; exit 1; }
  nvcc=${CUDA_PATH:-/usr/local/cuda}/bin/nvcc
  [ -x "$nvcc" ] || { echo "no nvcc at $nvcc"; exit 1; }
  kcache=${KCACHE:-}
  if [ -z "$kcache" ]; then
    bazel build //cli:kcache || exit 1
    kcache=$(bazel info bazel-bin)/cli/kcache
  fi
  rm -rf "$dest"
  mkdir -p "$dest/py" "$dest/cubins" "$dest/probe"
  src=tests/compiler/kernels/cutlass/cutlass2_gemm.cu
  # As tests/compiler/image/cutlass_lean_test.cc compiles it.
  local variant flag
  for variant in lean nvrtc; do
    flag=()
    [ "$variant" = nvrtc ] && flag=(--no-lean)
    "$kcache" compile "$src" --arch sm_90 --ptx compute_90 --std c++17 \
      --nvrtc-opt=-default-device -I "$cutlass" --no-store "${flag[@]}" \
      -o "$dest/cubins/cutlass2_$variant.kcb" || exit 1
    "$kcache" bundle "$dest/cubins/cutlass2_$variant.kcb" --extract "$dest/cubins/$variant" \
      >/dev/null || exit 1
    mv "$dest/cubins/$variant/sm_90.cubin" "$dest/cubins/cutlass2_$variant.cubin"
  done
  unnamed_cubin "$dest/cubins/lean/compute_90.ptx" "$dest/cubins/cutlass2_unnamed.cubin" \
    "$(dirname "$nvcc")/ptxas" || exit 1
  rm -rf "$dest"/cubins/lean "$dest"/cubins/nvrtc "$dest"/cubins/*.kcb
  TMPDIR=$(mktemp -d) "$nvcc" -cubin -arch=sm_90 -std=c++17 -I"$cutlass" "$src" \
    -o "$dest/cubins/cutlass2_nvcc.cubin" || exit 1
  probe_cubins "$dest/probe" "$nvcc" || exit 1
  cp bench/runtime_cubin_load.py bench/runtime_cutlass_lean.py "$dest/py/"
  cp "$0" "$dest/gpu_cutlass_lean.sh"
  {
    echo "built: $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n), $(git -C "$repo" rev-parse --short HEAD) ($(git -C "$repo" rev-parse --abbrev-ref HEAD))"
    echo "kcache: $kcache"
    local c
    for c in "$dest"/cubins/*.cubin; do
      echo "$(basename "$c"): $(stat -c %s "$c") bytes, $(readelf -sW "$c" | grep -c '^ *[0-9]*:') ELF symbols"
    done
  } >"$dest/MANIFEST"
  cat "$dest/MANIFEST"
  echo "gathered into $dest"
}

# For measurement only, never shipped: the lean PTX without any variable
# nothing references (whatever the lean rule says a host can name), assembled
# by ptxas: the floor a lean rule can reach. lean-v3's image should be at it.
unnamed_cubin() {
  local ptx=$1 out=$2 ptxas=$3
  python3 - "$ptx" "$ptx.unnamed" <<'PY' || return 1
import re, sys
text = open(sys.argv[1]).read()
lines = text.split("\n")
def unreferenced(line):
    m = re.match(r"\.global\s.*?([A-Za-z_$][A-Za-z0-9_$]*)\s*(\[[0-9]*\])?\s*(=.*)?;$", line)
    return m and len(re.findall(r"\b" + re.escape(m.group(1)) + r"\b", text)) == 1
kept = [l for l in lines if not unreferenced(l)]
print(f"unnamed: {len(lines) - len(kept)} unreferenced variables removed from the lean PTX")
open(sys.argv[2], "w").write("\n".join(kept))
PY
  "$ptxas" -arch=sm_90 "$ptx.unnamed" -o "$out"
}

# One trivial kernel `probe` and N unreferenced module variables with names
# a host could know (_ZN5probe1vNE), assembled by ptxas: what each variable
# costs the driver's load, for an uninitialised .global (the lean CUTLASS 2.x
# image's ~90 class constants), an initialised .global and a .const.
probe_cubins() {
  local dir=$1 nvcc=$2 ptxas n kind
  ptxas=$(dirname "$nvcc")/ptxas
  for n in 0 100 1000; do
    for kind in global global_init const; do
      [ "$n" = 0 ] && [ "$kind" != global ] && continue
      {
        printf '.version 8.0\n.target sm_90\n.address_size 64\n'
        local i
        for ((i = 0; i < n; ++i)); do
          case $kind in
            global) printf '.global .align 4 .u32 _ZN5probe1v%dE;\n' "$i" ;;
            global_init) printf '.global .align 4 .u32 _ZN5probe1v%dE = %d;\n' "$i" "$((i + 1))" ;;
            const) printf '.const .align 4 .u32 _ZN5probe1v%dE = %d;\n' "$i" "$((i + 1))" ;;
          esac
        done
        printf '.visible .entry probe(.param .u64 p)\n{\n\t.reg .b64 %%rd<2>;\n'
        printf '\tld.param.u64 %%rd1, [p];\n\tcvta.to.global.u64 %%rd1, %%rd1;\n'
        printf '\tst.global.u32 [%%rd1], 1;\n\tret;\n}\n'
      } >"$dir/probe_${kind}_$n.ptx"
      "$ptxas" -arch=sm_90 "$dir/probe_${kind}_$n.ptx" -o "$dir/probe_${kind}_$n.cubin" || return 1
      rm "$dir/probe_${kind}_$n.ptx"
    done
  done
}

run() {
  local here out status=0
  here=$(cd "$(dirname "$0")" && pwd)
  out=${1:-${OUT:-$here/out}}
  mkdir -p "$out"
  export PYTHONUNBUFFERED=1 CUDA_CACHE_DISABLE=1
  local c=$here/cubins
  {
    echo "gpu_cutlass_lean run: $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n)"
    cat "$here/MANIFEST"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
    echo
    echo "## CUTLASS 2.x GEMM load (median of 50), two orders"
    echo "(unnamed: the lean image without every unreferenced variable, for measurement"
    echo "only: the floor; lean-v3 removes CUTLASS's class constants, so lean ~ unnamed)"
    python3 "$here/py/runtime_cubin_load.py" cutlass2_gemm "$c/cutlass2_lean.cubin" \
      "$c/cutlass2_nvcc.cubin" "$c/cutlass2_nvrtc.cubin" "$c/cutlass2_unnamed.cubin" || status=1
    python3 "$here/py/runtime_cubin_load.py" cutlass2_gemm "$c/cutlass2_unnamed.cubin" \
      "$c/cutlass2_nvrtc.cubin" "$c/cutlass2_nvcc.cubin" "$c/cutlass2_lean.cubin" || status=1
    echo
    echo "## CUTLASS 2.x GEMM results (against NumPy and between the images), and"
    echo "## load times interleaved with their ratios to nvcc's (goal: lean <= 1.00x)"
    IMAGES=lean,nvrtc,nvcc,unnamed python3 "$here/py/runtime_cutlass_lean.py" "$c" \
      >"$out/results.log" 2>&1 || status=1
    cat "$out/results.log"
    grep -q "DIFFERENT" "$out/results.log" && { echo "FAIL: an image's results differ"; status=1; }
    [ "$(grep -c "bit-identical" "$out/results.log")" -ge 3 ] ||
      { echo "FAIL: not every image was compared"; status=1; }
    echo
    echo "## One unreferenced variable's load cost, by state space (probe_KIND_N: N variables)"
    python3 "$here/py/runtime_cubin_load.py" probe "$here"/probe/probe_global_0.cubin \
      "$here"/probe/probe_*_100.cubin "$here"/probe/probe_*_1000.cubin || status=1
    echo
    [ "$status" = 0 ] && echo "PASS" || echo "FAIL"
  } 2>&1 | tee "$out/summary.txt"
  grep -q "^PASS$" "$out/summary.txt"
}

case "${1:-}" in
  build) shift; build "$@" ;;
  run) shift; run "$@" ;;
  *)
    sed -n '2,31p' "$0"
    exit 2
    ;;
esac
