#!/usr/bin/env bash
# shim_links_no_store_test.sh LIBRARY
# The drop-in libnvrtc lives in someone else's program, which never opens
# the store (the compile processes do): it must neither need SQLite at load
# time (readelf's NEEDED entries) nor carry SQLite's code linked in statically
# (SQLite's file header text, which its code writes into every database).
set -uo pipefail
library="$1"
needed=$(readelf -d "$library" | grep NEEDED)
echo "NEEDED entries of $library:"
echo "$needed"
if echo "$needed" | grep -Ei "sqlite"; then
  echo "FAIL: $library needs SQLite at load time; the host must link no store (only"
  echo "      //compiler:program_api and //compiler:program_protocol, never //compiler:program)"
  exit 1
fi
if grep -aq "SQLite format 3" "$library"; then
  echo "FAIL: $library has SQLite's code linked in; a dependency of //nvrtc_shim reaches the store"
  echo "      (bazel query 'somepath(//nvrtc_shim:libnvrtc.so.13, //cache:store)' shows which)"
  exit 1
fi
echo "PASS"
