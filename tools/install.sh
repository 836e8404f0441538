#!/usr/bin/env bash
# `bazel run //:install -- PREFIX`: installs the kcache built here as
#   PREFIX/bin/kcache
#   PREFIX/lib/kcache/libnvrtc.so.13       the drop-in `kcache run` preloads
#   PREFIX/lib/kcache/libkcache_reapi.so   the grpc:// remote, opened on demand
# the layout the binary looks for (cli/run_command.cc, cache/remote/reapi_loader.cc),
# so keep them together. With PREFIX/bin on PATH, kcache_dependencies()
# ("auto") runs this kcache in every workspace instead of building one
# (docs/BAZEL_RULES.md, "The tool").
#
# The BUILD target passes the three built files first (their runfiles paths),
# built -c opt whatever the command line's -c (python/release.bzl): every hit
# is a kcache process, 0.71-0.74x the CPU time of a fastbuild one.
# PREFIX is the user's argument, relative to where `bazel run` was typed.
set -euo pipefail
if [ $# -ne 4 ] || [ -z "$4" ] || [ "${4#-}" != "$4" ]; then
  echo "usage: bazel run //:install -- PREFIX   (e.g. ~/.local or /opt/kcache)" >&2
  exit 2
fi
kcache=$1 shim=$2 reapi=$3 prefix=$4
case $prefix in
  /*) ;;
  *) prefix="${BUILD_WORKING_DIRECTORY:-$PWD}/$prefix" ;;
esac
mkdir -p "$prefix/bin" "$prefix/lib/kcache"
# Each file is copied beside its place and renamed over it: a running kcache
# or a program with the drop-in loaded keeps its old file.
put() {  # source, destination, mode
  cp "$1" "$2.tmp.$$"
  chmod "$3" "$2.tmp.$$"
  mv -f "$2.tmp.$$" "$2"
}
put "$kcache" "$prefix/bin/kcache" 0755
put "$shim" "$prefix/lib/kcache/libnvrtc.so.13" 0644
put "$reapi" "$prefix/lib/kcache/libkcache_reapi.so" 0644
echo "Installed kcache in $prefix:"
echo "  $prefix/bin/kcache"
echo "  $prefix/lib/kcache/libnvrtc.so.13 (the drop-in for kcache run)"
echo "  $prefix/lib/kcache/libkcache_reapi.so (grpc:// remotes)"
case ":$PATH:" in
  *":$prefix/bin:"*) echo "$prefix/bin is on PATH: Bazel workspaces now use this kcache." ;;
  *)
    echo "Put it on PATH (and in your shell's profile), then Bazel workspaces use it too:"
    echo "  export PATH=\"$prefix/bin:\$PATH\""
    ;;
esac
