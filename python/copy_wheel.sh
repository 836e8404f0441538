#!/usr/bin/env bash
# `bazel run //:wheel -- DIR`: copies the wheel //python:wheel wrote into DIR
# (relative to where `bazel run` was typed) and says how to install it.
set -euo pipefail
if [ $# -ne 2 ] || [ -z "$2" ] || [ "${2#-}" != "$2" ]; then
  echo "usage: bazel run //:wheel -- DIR   (e.g. dist)" >&2
  exit 2
fi
folder=$1 dir=$2
case $dir in
  /*) ;;
  *) dir="${BUILD_WORKING_DIRECTORY:-$PWD}/$dir" ;;
esac
wheels=("$folder"/kcache-*.whl)
if [ ${#wheels[@]} -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
  echo "bazel run //:wheel: expected one kcache-*.whl in $folder, found: ${wheels[*]}" >&2
  exit 1
fi
mkdir -p "$dir"
name=$(basename "${wheels[0]}")
cp "${wheels[0]}" "$dir/$name.tmp.$$"
chmod 0644 "$dir/$name.tmp.$$"
mv -f "$dir/$name.tmp.$$" "$dir/$name"
echo "Wrote $dir/$name"
echo "Install it (offline) into a virtual environment or your user site:"
echo "  pip install $dir/$name"
