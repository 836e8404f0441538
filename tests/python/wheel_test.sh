#!/usr/bin/env bash
# kcache's wheel as a Python user gets it: installed offline into a fresh venv
# with pip, then `kcache run -- python nvrtc_app.py` (NVRTC through ctypes)
# twice on a new store: the first run's compile is a miss, the second's a
# hit; `python -m kcache run` hits too, and `kcache -s` counts them. The
# installed files find their bundled libraries in the venv, not the system's.
set -euo pipefail

runfiles=${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-kcache}
app=$runfiles/tests/python/nvrtc_app.py
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

wheels=("$runfiles"/python/wheel/kcache-*-py3-none-manylinux_*_x86_64.whl)
[ ${#wheels[@]} -eq 1 ] && [ -f "${wheels[0]}" ] || fail "no single wheel in python/wheel: ${wheels[*]}"
wheel=${wheels[0]}
echo "wheel: $(basename "$wheel")"

# pip writes nothing outside $work and asks no index.
export HOME=$work/home PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INDEX=1
python3 -m venv "$work/venv" || fail "python3 -m venv failed (tools/install_deps.sh installs python3-venv)"
"$work/venv/bin/pip" install --no-index "$wheel" >"$work/pip.out" 2>&1 || {
  cat "$work/pip.out" >&2
  fail "pip could not install $(basename "$wheel")"
}
python=$work/venv/bin/python
package=$("$python" -c 'import kcache, os; print(os.path.dirname(kcache.__file__))')
[ -x "$work/venv/bin/kcache" ] || fail "the wheel installed no kcache console script"
[ -x "$package/bin/kcache" ] || fail "the wheel's kcache binary is not executable after pip install"

# Bundled libraries come from the venv: the rpath works where pip put them.
for file in "$package/bin/kcache" "$package/lib/kcache/libnvrtc.so.13" "$package/lib/kcache/libkcache_reapi.so"; do
  deps=$(ldd "$file")
  if echo "$deps" | grep -q 'not found'; then
    echo "$deps" >&2
    fail "$file needs a library the wheel lacks"
  fi
  for lib in libxxhash.so.0 libsqlite3.so.0 libgrpc++.so.1.51; do
    at=$(echo "$deps" | awk -v lib="$lib" '$1 == lib {print $3}')
    [ -z "$at" ] || [ "$(readlink -f "$at")" = "$(readlink -f "$package/lib/$lib")" ] ||
      fail "$file loads $lib from $at, not the wheel's"
  done
done

export KCACHE_DIR=$work/store KCACHE_REMOTE=off
cd "$work"
run() {  # NAME KCACHE...: `KCACHE... run -- python nvrtc_app.py`, its compiles in NAME.stats
  local name=$1
  shift
  KCACHE_SHIM_STATS="$work/$name.stats" "$@" run -- "$python" "$app" >"$work/$name.out" 2>"$work/$name.err" || {
    cat "$work/$name.err" >&2
    fail "$name: $* run -- python nvrtc_app.py exited $?"
  }
  echo "$name: $(cat "$work/$name.out") | $(tail -n 1 "$work/$name.err")"
  grep -q '^ptx [0-9]* bytes$' "$work/$name.out" || fail "$name: nvrtc_app.py printed $(cat "$work/$name.out")"
}
expect() {  # NAME WORD: NAME's one compile was WORD (hit or miss)
  local got
  got=$(cut -d' ' -f1 "$work/$1.stats" 2>/dev/null | tr '\n' ' ')
  [ "$got" = "$2 " ] || fail "$1: the compile was [$got], expected $2 (stats: $(cat "$work/$1.stats" 2>/dev/null))"
}

run first "$work/venv/bin/kcache"
expect first miss
run second "$work/venv/bin/kcache"
expect second hit
run module "$python" -m kcache
expect module hit

stats=$("$work/venv/bin/kcache" -s --format json)
echo "$stats"
echo "$stats" | "$python" -c '
import json, sys
s = json.load(sys.stdin)
flat = {}
def walk(node, prefix=""):
    if isinstance(node, dict):
        for key, value in node.items():
            walk(value, prefix + key + ".")
    else:
        flat[prefix[:-1]] = node
walk(s)
hits = [v for k, v in flat.items() if k.split(".")[-1] == "hits"]
if not hits or max(hits) < 2:
    sys.exit("kcache -s counts %s hits, expected 2: %s" % (hits, s))
' || fail "kcache -s does not count the two hits"
echo "PASS"
