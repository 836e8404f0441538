#!/usr/bin/env bash
# CuPy's own compile code through the drop-in, without a GPU (issue 26): its
# RawKernel-style sources, a kernel with CuPy's headers (CCCL through -I),
# its preprocessing compile, all through `kcache run` in CuPy's default mode
# (a disk cache, each program named by a new temporary folder), each process
# with a new CuPy cache folder so CuPy's own cache never answers. The second
# process must make every compile a kcache hit, under a time limit. The same
# again the way kcache run sets CuPy up by default (its disk cache off).
#
# CuPy comes from PyPI (cupy-cuda13x) in a venv tools/install_deps.sh makes;
# $KCACHE_CUPY_PYTHON names another Python that has it.
set -uo pipefail

python=${KCACHE_CUPY_PYTHON:-/opt/kcache-cupy/bin/python3}
if ! "$python" -c 'import cupy' 2>/dev/null; then
  echo "SKIP: no CuPy at $python (tools/install_deps.sh installs it)"
  exit 0
fi
runfiles=${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-kcache}
kcache=$runfiles/cli/kcache
script=$runfiles/bench/cupy_compile_no_gpu.py
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/cupy.XXXXXX")
export KCACHE_DIR=$work/store KCACHE_REMOTE=off
failed=0

phase() {  # NAME CUPY_CACHE_IN_MEMORY: one fresh process, its stats in NAME.stats
  local name=$1 in_memory=$2
  local env_in_memory=()
  [ -n "$in_memory" ] && env_in_memory=(CUPY_CACHE_IN_MEMORY="$in_memory")
  if ! env "${env_in_memory[@]}" CUPY_CACHE_DIR="$work/cupy_$name" \
    KCACHE_SHIM_STATS="$work/$name.stats" timeout 600 "$kcache" run -- "$python" "$script" 6 \
    >"$work/$name.out" 2>"$work/$name.err"; then
    echo "FAIL $name: exit $?"
    cat "$work/$name.err"
    failed=1
  fi
  echo "$name: $(cat "$work/$name.out") | $(cut -d' ' -f1 "$work/$name.stats" 2>/dev/null | sort | uniq -c | tr '\n' ' ')"
}

expect_all_hits() {  # NAME FIRST: NAME's compiles are FIRST's, every one a hit
  local name=$1 first=$2 n hits
  n=$(wc -l <"$work/$first.stats")
  hits=$(grep -c '^hit ' "$work/$name.stats")
  if [ "$n" -lt 8 ] || [ "$hits" -ne "$n" ] || [ "$(wc -l <"$work/$name.stats")" -ne "$n" ]; then
    echo "FAIL $name: $hits hits of $(wc -l <"$work/$name.stats") compiles; $first made $n"
    cut -c1-200 "$work/$name.stats"
    failed=1
  fi
}

# CuPy's default mode, as a user who preloads the drop-in gets it.
phase default1 0
phase default2 0
expect_all_hits default2 default1
# Program names are CuPy's temporary folders: they differ between the two.
# A stats line's second field (fields are separated by " | ") is the program's name.
names() { awk -F' [|] ' '{print $2}' "$1" | sort; }
if [ "$(names "$work/default1.stats")" = "$(names "$work/default2.stats")" ]; then
  echo "FAIL: the two processes named their programs alike; the test proves nothing"
  failed=1
fi
# kcache run's own setting (CuPy's disk cache off).
phase run1 ""
phase run2 ""
expect_all_hits run2 run1

rm -rf "$work"
[ "$failed" -eq 0 ] && echo "PASS"
exit "$failed"
