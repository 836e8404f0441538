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
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0
echo "kcache: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
