#!/bin/bash
# Runs stale_hit_bind_mount_test in a mount namespace of its own (needs root,
# or CAP_SYS_ADMIN; its bind mount is seen nowhere else). From the
# workspace root:
#   bazel build //tests/compiler:stale_hit_bind_mount_test
#   sudo tests/compiler/stale_hit_bind_mount_run.sh
set -euo pipefail
test_binary=$(readlink -f bazel-bin/tests/compiler/stale_hit_bind_mount_test)
work=$(mktemp -d /tmp/kcache-bind-XXXXXX)
rc=0
KCACHE_TEST_PRIVATE_MOUNTS=1 TEST_TMPDIR="$work" \
  unshare -m --propagation private "$test_binary" || rc=$?
rm -rf "$work"
exit $rc
