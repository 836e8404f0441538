#include "cli/storage_flags.h"

#include <CLI/CLI.hpp>

namespace kcache::cli {
namespace {

struct FlagSpec {
  const char* flag;
  const char* key;  // cache/config.h's file key
  const char* help;
};

constexpr FlagSpec kValueFlags[] = {
    {"--remote", "remote",
     "Remote cache URL, http(s)://host[:port]/prefix, or `off` (env KCACHE_REMOTE)"},
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
};

}  // namespace

void add_storage_flags(CLI::App& verb, GlobalOptions& global) {
  for (const FlagSpec& spec : kValueFlags) {
    const std::string key = spec.key;
    verb.add_option_function<std::string>(
            spec.flag,
            [&global, key](const std::string& value) { global.storage_flags[key] = value; },
            spec.help)
        ->group("Remote cache");
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
