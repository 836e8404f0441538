#!/usr/bin/env bash
# A binary linking the runtime must not need libcuda, NVRTC or SQLite at load
# time (readelf's NEEDED entries), and must start without a driver and say so.
set -uo pipefail
binary="$1"
needed=$(readelf -d "$binary" | grep NEEDED)
echo "NEEDED entries of $binary:"
echo "$needed"
if echo "$needed" | grep -Ei 'libcuda|libnvrtc|libsqlite|libcudart'; then
  echo "FAIL: the runtime pulls in a CUDA, NVRTC or SQLite library at link time"
  exit 1
fi
output=$(KCACHE_LIBCUDA=libkcache-test-no-such-driver.so.1 "$binary")
status=$?
echo "$output"
if [ "$status" -ne 2 ] || ! echo "$output" | grep -q "no CUDA driver found"; then
  echo "FAIL: expected exit 2 and 'no CUDA driver found', got exit $status"
  exit 1
fi
echo "PASS"
