#!/usr/bin/env bash
# A `kcache compile` hit is mostly process start: kcache must not load
# libstdc++, SQLite or xxHash as shared libraries (the loader's symbol lookups
# for libstdc++.so's relocations alone cost ~1.5 ms a process; they are linked
# in, cli/BUILD.bazel). And with libstdc++ linked in, an exception the gRPC
# plugin (which uses the shared libstdc++) throws must still reach kcache's
# handler: a `remote check` of a grpc:// remote that refuses connections
# reports the failure instead of aborting (as it does with a second unwinder,
# -static-libgcc).
set -uo pipefail
binary="$1"
plugin="$2"
needed=$(readelf -d "$binary" | grep NEEDED)
echo "NEEDED entries of $binary:"
echo "$needed"
if echo "$needed" | grep -E 'libstdc\+\+|libsqlite3|libxxhash'; then
  echo "FAIL: kcache loads the shared library above at every start; link it in (cli/BUILD.bazel)"
  exit 1
fi
# Nothing of the linked-in libstdc++ is exported: the plugin's references to
# it must bind to its own shared copy, not to pieces of kcache's. (An inline
# function or variable kcache's own objects instantiate is WEAK or UNIQUE,
# one definition wherever it binds: an unoptimized build exports a few.)
std_exports=$(readelf --dyn-syms -W "$binary" | awk '$7 != "UND" && $5 == "GLOBAL" {print $8}' |
  grep -E '^_Z(N|NK|T[VIS]N?)?St' | head -5)
if [ -n "$std_exports" ]; then
  echo "FAIL: kcache exports libstdc++ symbols (-Wl,--exclude-libs,ALL), e.g.:"
  echo "$std_exports"
  exit 1
fi
out=$(KCACHE_REAPI_LIBRARY="$plugin" KCACHE_REMOTE_RETRIES=0 KCACHE_REMOTE_CONNECT_TIMEOUT=1 \
  "$binary" --dir "$TEST_TMPDIR/store" remote check --remote grpc://127.0.0.1:1 2>&1)
rc=$?
echo "$out"
if [ "$rc" -ne 1 ] || ! echo "$out" | grep -q "Verdict: *FAILED"; then
  echo "FAIL: kcache remote check of a refusing grpc:// remote exited $rc (want 1 and a verdict)"
  exit 1
fi
echo "PASS"
