#include "cli/storage_flags.h"

#include <CLI/CLI.hpp>

namespace kcache::cli {
namespace {

struct FlagSpec {
  const char* flag;
  const char* key;  // cache/config.h's file key
  const char* help;
  const char* group = "Remote cache";  // where --help lists it
};

constexpr FlagSpec kValueFlags[] = {
    {"--remote", "remote",
     "Remote cache URL: http(s)://host[:port]/prefix, grpc(s)://host:port (Remote "
     "Execution API), or `off` (env KCACHE_REMOTE)"},
    {"--remote-layout", "remote_layout",
     "flat: <url>/<key>; bazel: <url>/ac/<64 hex> for bazel-remote (env KCACHE_REMOTE_LAYOUT)"},
    {"--remote-timeout", "remote_timeout",
     "Most one remote operation may take, retries included: 500ms, 10s (default 10s)"},
    {"--remote-connect-timeout", "remote_connect_timeout",
     "Most a connection may take to open (default 1s)"},
    {"--remote-retries", "remote_retries",
     "Extra attempts after a 5xx or failed connection (default 2)"},
    {"--remote-token-file", "remote_token_file",
     "File holding a bearer token for the remote (never pass secrets as flags)"},
    {"--remote-basic-auth-file", "remote_basic_auth_file",
     "File holding one line user:password for the remote"},
    {"--remote-hmac-key-file", "remote_hmac_key_file",
     "File holding the HMAC-SHA256 key: uploads are signed, unsigned or badly signed entries "
     "are rejected"},
    {"--remote-instance-name", "remote_instance_name",
     "grpc:// remotes: the REAPI instance name (default: the server's default instance)"},
    {"--remote-tls-ca-file", "remote_tls_ca_file",
     "grpcs:// remotes: PEM file of the CA certificates to trust (default: the system's)"},
    {"--remote-tls-client-cert-file", "remote_tls_client_cert_file",
     "grpcs:// remotes: PEM client certificate, for servers that require mTLS"},
    {"--remote-tls-client-key-file", "remote_tls_client_key_file",
     "grpcs:// remotes: PEM key of the client certificate"},
    {"--remote-headers-file", "remote_headers_file",
     "grpc:// remotes: file of `name: value` lines sent with every call (e.g. "
     "x-buildbuddy-api-key)"},
    {"--sloppiness", "sloppiness",
     "time_macros: cache compiles that use __TIME__/__TIMESTAMP__ and do not key __DATE__, as "
     "ccache's sloppiness=time_macros (env KCACHE_SLOPPINESS)"},
    {"--umask", "umask",
     "Octal permission bits the store's new folders and files leave out, e.g. 002 for a store a "
     "group shares (env KCACHE_UMASK; default: those of the store folder)",
     "Local store"},
};

}  // namespace

void add_storage_flags(CLI::App& verb, GlobalOptions& global) {
  for (const FlagSpec& spec : kValueFlags) {
    const std::string key = spec.key;
    verb.add_option_function<std::string>(
            spec.flag,
            [&global, key](const std::string& value) { global.storage_flags[key] = value; },
            spec.help)
        ->group(spec.group);
  }
  verb.add_flag_function(
          "--remote-read-only,!--remote-read-write",
          [&global](int64_t count) {
            global.storage_flags["remote_read_only"] = count > 0 ? "true" : "false";
          },
          "Use the remote but never write to it, e.g. for pull requests (env "
          "KCACHE_REMOTE_READ_ONLY=1); --remote-read-write overrides the environment")
      ->group("Remote cache");
}

cache::StorageConfig storage_config(const GlobalOptions& global) {
  std::map<std::string, std::string> flags = global.storage_flags;
  if (!global.dir.empty()) flags["dir"] = global.dir;
  return cache::resolve_storage_config(flags);
}

cache::StorageOptions storage_options_for(const GlobalOptions& global) {
  return storage_config(global).options;
}

}  // namespace kcache::cli
