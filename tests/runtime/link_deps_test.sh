#!/usr/bin/env bash
# link_deps_test.sh BINARY [FORBIDDEN]
# A binary linking the runtime must not need libcuda or NVRTC at load time
# (readelf's NEEDED entries; FORBIDDEN, an extended regex, says what else may
# not appear: by default SQLite, which only the optional targets link), and
# must start without a driver and say so.
set -uo pipefail
binary="$1"
forbidden="libcuda|libcudart|libnvrtc|${2:-libsqlite}"
needed=$(readelf -d "$binary" | grep NEEDED)
echo "NEEDED entries of $binary:"
echo "$needed"
if echo "$needed" | grep -Ei "$forbidden"; then
  echo "FAIL: $binary needs one of ($forbidden) at load time"
  exit 1
fi
store=$(mktemp -d)
output=$(KCACHE_LIBCUDA=libkcache-test-no-such-driver.so.1 KCACHE_DIR="$store" "$binary")
status=$?
rm -rf "$store"
echo "$output"
if [ "$status" -ne 2 ] || ! echo "$output" | grep -q "no CUDA driver found"; then
  echo "FAIL: expected exit 2 and 'no CUDA driver found', got exit $status"
  exit 1
fi
echo "PASS"
