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

#include "cache/remote/reapi_plugin.h"
#include "cache/remote/remote.h"
#include "common/environment.h"
#include "common/error.h"
#include "common/paths.h"

namespace kcache::cache {
namespace {

constexpr const char* kLibrary = "libkcache_reapi.so";
constexpr const char* kRunfilesPath = "kcache/cache/remote/reapi/libkcache_reapi.so";

// Where the library may be, in order: $KCACHE_REAPI_LIBRARY; next to the
// binary or library holding this code (an installed kcache, libkcache_jit.so);
// Bazel's runfiles and bazel-bin layout (tests, `bazel run`).
std::vector<std::string> candidates() {
  std::vector<std::string> out;
  if (const char* library = env::value(env::Var::kcache_reapi_library)) out.push_back(library);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&make_reapi_backend), &info) && info.dli_fname) {
    out.push_back(parent_folder(info.dli_fname) + "/" + kLibrary);
  }
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    const std::string self(exe, static_cast<size_t>(n));
    const std::string folder = parent_folder(self), above = parent_folder(folder);
    out.push_back(folder + "/" + kLibrary);
    out.push_back(above + "/lib/kcache/" + kLibrary);  // bazel run //:install
    out.push_back(self + ".runfiles/" + kRunfilesPath);
    out.push_back(above + "/cache/remote/reapi/" + kLibrary);  // bazel-bin/cli/kcache
  }
  for (env::Var var : {env::Var::runfiles_dir, env::Var::test_srcdir}) {
    if (const char* dir = env::value(var)) {
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
  // The cuda_kernel rules run //cli:kcache_tool by default, which is built
  // without the plugin so that a first build does not compile gRPC.
  throw IoError(std::string("grpc:// remotes need the gRPC plugin ") + kLibrary +
                ", which is installed next to the kcache binary; not found in:" + tried +
                "\nTo get it: in Bazel builds run the full tool, "
                "--@kcache//rules:kcache_tool=@kcache//cli:kcache (its runfiles hold the plugin); "
                "elsewhere build it (bazel build @kcache//cache/remote/reapi:libkcache_reapi.so) and set "
                "KCACHE_REAPI_LIBRARY to its path, or use an http:// remote");
}

// Loads the library and opens the channel on first use, not when Storage is
// built: a process with a grpc:// remote configured whose lookups all hit the
// local store never loads gRPC.
class LazyReapiBackend : public RemoteBackend {
 public:
  explicit LazyReapiBackend(RemoteOptions options) : options_(std::move(options)) {}
  std::optional<std::string> get(const Hash128& key) override { return real().get(key); }
  bool exists(const Hash128& key) override { return real().exists(key); }
  void put(const Hash128& key, std::string_view object) override { real().put(key, object); }
  bool remove(const Hash128& key) override { return real().remove(key); }
  std::string url_of(const Hash128& key) const override {
    return options_.url + " (kcache key " + key.hex() + ")";
  }

 private:
  RemoteBackend& real() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!backend_) backend_.reset(load()(options_));
    return *backend_;
  }

  RemoteOptions options_;
  std::mutex mutex_;
  std::unique_ptr<RemoteBackend> backend_;
};

}  // namespace

void check_reapi_options(const RemoteOptions& options) {
  const bool tls = options.url.rfind("grpcs://", 0) == 0;
  if (!tls && options.url.rfind("grpc://", 0) != 0) {
    throw InvalidArgument("\"" + options.url + "\" is not a grpc:// or grpcs:// URL");
  }
  std::string target = options.url.substr(tls ? 8 : 7);
  while (!target.empty() && target.back() == '/') target.pop_back();
  if (target.empty() || target.find('/') != std::string::npos) {
    throw InvalidArgument("the remote URL \"" + options.url +
                          "\" must be grpc://host:port or grpcs://host:port (the REAPI instance "
                          "name is a separate setting: remote_instance_name)");
  }
  if (!tls && (!options.tls_ca_file.empty() || !options.tls_client_cert_file.empty() ||
               !options.tls_client_key_file.empty())) {
    throw InvalidArgument("TLS settings are given but the remote URL " + options.url +
                          " is grpc:// (plain text); use grpcs://");
  }
  if (options.tls_client_cert_file.empty() != options.tls_client_key_file.empty()) {
    throw InvalidArgument(
        "a TLS client certificate needs both remote_tls_client_cert_file and "
        "remote_tls_client_key_file");
  }
  if (!options.basic_auth_file.empty()) {
    throw InvalidArgument(
        "basic auth is for http:// remotes; for grpc:// use a bearer token file "
        "(remote_token_file) or a headers file (remote_headers_file)");
  }
}

std::unique_ptr<RemoteBackend> make_reapi_backend(const RemoteOptions& options) {
  check_reapi_options(options);
  return std::make_unique<LazyReapiBackend>(options);
}

}  // namespace kcache::cache
