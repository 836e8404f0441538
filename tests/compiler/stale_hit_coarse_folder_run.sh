#!/bin/bash
# Runs stale_hit_coarse_folder_test on a file system with whole-second
# timestamps: an ext4 image with 128-byte inodes, loop-mounted in a private
# mount namespace (needs root, or CAP_SYS_ADMIN; nothing is mounted outside
# the namespace). From the workspace root:
#   bazel build //tests/compiler:stale_hit_coarse_folder_test
#   sudo tests/compiler/stale_hit_coarse_folder_run.sh
set -euo pipefail
test_binary=$(readlink -f bazel-bin/tests/compiler/stale_hit_coarse_folder_test)
work=$(mktemp -d /tmp/kcache-coarse-XXXXXX)
truncate -s 64M "$work/fs.img"
mkfs.ext4 -q -I 128 "$work/fs.img" 2>/dev/null
mkdir "$work/mnt"
rc=0
unshare -m --propagation private bash -c '
  mount -o loop "$1/fs.img" "$1/mnt" &&
  KCACHE_TEST_COARSE_DIR="$1/mnt" TEST_TMPDIR="$1/mnt" "$2"; rc=$?
  umount "$1/mnt"; exit $rc' run "$work" "$test_binary" || rc=$?
rm -rf "$work"
exit $rc
