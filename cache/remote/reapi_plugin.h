// The one entry point of libkcache_reapi.so, looked up with dlsym by
// cache/remote/reapi_loader.cc. Both sides are built from this tree with the same
// compiler and libstdc++, so C++ types cross the boundary as they are;
// exceptions thrown inside (IoError, InvalidArgument) reach the caller.
#pragma once

#include "cache/remote/remote.h"

namespace kcache::cache {

// Returns a new backend (the caller owns it). Throws like make_reapi_backend.
using MakeReapiBackendFn = RemoteBackend* (*)(const RemoteOptions& options);
constexpr const char* kMakeReapiBackendSymbol = "kcache_make_reapi_backend";

// The settings' shape (URL is grpc[s]://host:port, TLS files only with
// grpcs, cert and key together, no basic auth), checked without loading the
// library. Throws InvalidArgument.
void check_reapi_options(const RemoteOptions& options);

}  // namespace kcache::cache
