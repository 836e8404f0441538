#!/bin/bash
# Runs stale_hit_overlay_mapping_test in an overlay whose upper layer is a
# tmpfs, mounted in a mount namespace of its own (needs root, or
# CAP_SYS_ADMIN; nothing is mounted outside it). From the workspace root:
#   bazel build //tests/compiler:stale_hit_overlay_mapping_test
#   sudo tests/compiler/stale_hit_overlay_mapping_run.sh
set -euo pipefail
test_binary=$(readlink -f bazel-bin/tests/compiler/stale_hit_overlay_mapping_test)
work=$(mktemp -d /tmp/kcache-overlay-XXXXXX)
mkdir "$work/lower" "$work/upper" "$work/merged" "$work/tmp"
rc=0
unshare -m --propagation private bash -c '
  mount -t tmpfs tmpfs "$1/upper" && mkdir "$1/upper/data" "$1/upper/work" &&
  mount -t overlay overlay \
    -o "lowerdir=$1/lower,upperdir=$1/upper/data,workdir=$1/upper/work" "$1/merged" &&
  KCACHE_TEST_OVERLAY_DIR="$1/merged" TEST_TMPDIR="$1/tmp" "$2"' \
  run "$work" "$test_binary" || rc=$?
rm -rf "$work"
exit $rc
