#!/usr/bin/env bash
# Every `kcache compile` hit pays for the libraries kcache loads at start: the
# binary must not need libcurl, libcrypto or NVRTC at load time (they are
# opened with dlopen when a remote or a compile needs them; gRPC and protobuf
# live in libkcache_reapi.so, opened only for grpc:// remotes). Each of libcurl's
# ~30 dependencies costs start-up time: +2.8 ms in all, against a 5 ms budget.
set -uo pipefail
binary="$1"
needed=$(readelf -d "$binary" | grep NEEDED)
echo "NEEDED entries of $binary:"
echo "$needed"
if echo "$needed" | grep -Ei 'libcurl|libcrypto|libssl|libnvrtc|libcuda|libgrpc|libprotobuf|libabsl'; then
  echo "FAIL: kcache links a library it should open with dlopen"
  exit 1
fi
# NVRTC's getc binds to kcache's own (compiler/nvrtc/stdio_unlocked.h): the
# binary exports it, or every compile pays glibc's lock per character again.
exported=$(readelf --dyn-syms -W "$binary" | awk '$4 == "FUNC" && $7 != "UND" {print $8}')
for symbol in getc fgetc _IO_getc; do
  if ! echo "$exported" | grep -qx "$symbol"; then
    echo "FAIL: $binary does not export $symbol (cli/nvrtc_stdio.lds)"
    exit 1
  fi
done
echo "PASS"
