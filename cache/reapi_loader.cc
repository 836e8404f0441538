// make_reapi_backend: finds libkcache_reapi.so and opens it with dlopen, so
// that gRPC, protobuf and their ~40 libraries are loaded only by processes
// that talk to a grpc:// remote (a `kcache compile` hit without one pays
// nothing; tests/cli/kcache_link_deps_test.sh checks that kcache does not
// link them).
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "cache/reapi_plugin.h"
#include "cache/remote.h"
#include "common/error.h"

namespace kcache::cache {
namespace {

constexpr const char* kLibrary = "libkcache_reapi.so";
constexpr const char* kRunfilesPath = "kcache/cache/reapi/libkcache_reapi.so";

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Where the library may be, in order: $KCACHE_REAPI_LIBRARY; next to the
// binary or library holding this code (an installed kcache, libkcache_jit.so);
// Bazel's runfiles and bazel-bin layout (tests, `bazel run`).
std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("KCACHE_REAPI_LIBRARY"); env && *env) out.push_back(env);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&make_reapi_backend), &info) && info.dli_fname) {
    out.push_back(dir_of(info.dli_fname) + "/" + kLibrary);
  }
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    const std::string self(exe, static_cast<size_t>(n));
    out.push_back(dir_of(self) + "/" + kLibrary);
    out.push_back(self + ".runfiles/" + kRunfilesPath);
    out.push_back(dir_of(dir_of(self)) + "/cache/reapi/" + kLibrary);  // bazel-bin/cli/kcache
  }
  for (const char* var : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* dir = std::getenv(var); dir && *dir) {
      out.push_back(std::string(dir) + "/" + kRunfilesPath);
    }
  }
  return out;
}

MakeReapiBackendFn load() {
  static std::mutex mutex;
  static MakeReapiBackendFn factory = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (factory) return factory;
  std::string tried;
  for (const std::string& path : candidates()) {
    if (access(path.c_str(), R_OK) != 0) continue;
    // Never closed: backends and their threads live until exit.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      throw IoError(std::string("cannot load the gRPC remote backend ") + path + ": " + dlerror() +
                    " (install gRPC: tools/install_deps.sh, or apt-get install libgrpc++1.51)");
    }
    factory = reinterpret_cast<MakeReapiBackendFn>(dlsym(handle, kMakeReapiBackendSymbol));
    if (!factory) throw IoError(path + " has no " + kMakeReapiBackendSymbol + " (a wrong file?)");
    return factory;
  }
  for (const std::string& path : candidates()) tried += "\n  " + path;
  throw IoError(std::string("grpc:// remotes need ") + kLibrary +
                ", which is installed next to the kcache binary; not found in:" + tried +
                "\n(set KCACHE_REAPI_LIBRARY to its path)");
}

}  // namespace

std::unique_ptr<RemoteBackend> make_reapi_backend(const RemoteOptions& options) {
  return std::unique_ptr<RemoteBackend>(load()(options));
}

}  // namespace kcache::cache
