#!/usr/bin/env bash
# Installs the Debian packages kcache builds and tests with (idempotent; only
# missing packages are installed). Used by .ci/run and the README.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap bazel-rules-java bazel-skylib     # Bazel 4.2.3, offline (see ../shared/BAZEL-OFFLINE.md)
  libsqlite3-dev libxxhash-dev                      # the store
  googletest libgtest-dev libbenchmark-dev          # tests, benchmarks
  libcli11-dev nlohmann-json3-dev                   # the CLI
  libcurl4-openssl-dev libssl-dev                   # the remote tier
  nginx-light                                       # the remote tier's tests start one
  libgrpc++-dev libprotobuf-dev                     # grpc:// remotes (cache/remote/reapi/)
  protobuf-compiler protobuf-compiler-grpc          #   their .proto files are compiled at build time
  python3-venv                                      # BuildGrid, the REAPI server the tests start
  openssl                                           # the grpcs:// tests make their certificates
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if ((${#missing[@]})); then
  echo "kcache: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# BuildGrid (PyPI) in a venv: a real Remote Execution API server for the
# grpc:// remote's tests (tests/testing/buildgrid_server.h looks here).
BUILDGRID_VENV=${KCACHE_BUILDGRID_VENV:-/opt/kcache-buildgrid}
if [ ! -x "$BUILDGRID_VENV/bin/bgd" ]; then
  echo "kcache: installing BuildGrid into $BUILDGRID_VENV"
  $SUDO python3 -m venv "$BUILDGRID_VENV"
  $SUDO "$BUILDGRID_VENV/bin/pip" install -q "buildgrid==0.4.4"
fi

# CUTLASS 4.x and CuTe headers (the `nvidia-cutlass` wheel from PyPI; the
# headers sit under cutlass_library/source/include): the heaviest code people
# JIT-compile with NVRTC, compiled through kcache by
# tests/compiler/image/cutlass_lean_test (which skips, saying so, without them).
# Only the headers are used, so no dependencies and no venv.
CUTLASS_DIR=${KCACHE_CUTLASS_DIR:-/opt/kcache-cutlass}
if [ ! -f "$CUTLASS_DIR/cutlass_library/source/include/cute/tensor.hpp" ]; then
  echo "kcache: installing the nvidia-cutlass headers into $CUTLASS_DIR"
  $SUDO python3 -m pip install -q --no-deps --target "$CUTLASS_DIR" "nvidia-cutlass==4.2.0.0"
fi

# CuPy (cupy-cuda13x, PyPI) in a venv: tests/nvrtc_shim/cupy_default_mode_test
# runs CuPy's own compile code through the drop-in (no GPU needed to compile).
CUPY_VENV=${KCACHE_CUPY_VENV:-/opt/kcache-cupy}
if [ ! -x "$CUPY_VENV/bin/python3" ] || ! "$CUPY_VENV/bin/python3" -c 'import cupy' 2>/dev/null; then
  echo "kcache: installing CuPy into $CUPY_VENV"
  $SUDO python3 -m venv "$CUPY_VENV"
  $SUDO "$CUPY_VENV/bin/pip" install -q "cupy-cuda13x==14.2.0"
fi
