#!/usr/bin/env bash
# no_gpu_test.sh EXAMPLE: on a machine without a CUDA driver (simulated by
# pointing KCACHE_LIBCUDA nowhere), an example prints one line saying so and
# exits non-zero, instead of crashing or printing a backtrace.
set -uo pipefail
output=$(KCACHE_LIBCUDA=libkcache-example-no-such-driver.so.1 "$1" 2>&1)
status=$?
echo "$output"
lines=$(printf '%s\n' "$output" | wc -l)
if [ "$status" -eq 0 ] || [ "$lines" -ne 1 ] || ! echo "$output" | grep -q "^no CUDA driver found"; then
  echo "FAIL: expected one line 'no CUDA driver found ...' and a non-zero exit, got exit $status, $lines lines"
  exit 1
fi
echo "PASS"
