// Storage settings (the store folder and the remote tier), resolved in one
// place and the same way for the CLI, the precompiler inside Bazel actions and
// the runtime JIT.
//
// Each setting is taken from the first of:
//   1. a flag (the CLI passes them in; see cli/storage_flags.h)
//   2. the environment (in Bazel actions: pass them with --action_env=NAME)
//   3. the config file: $KCACHE_CONFIG if set (it must exist), else
//      <store dir>/kcache.conf if that exists
//   4. the default
//
//   file key                flag                        environment
//   dir (*)                 --dir                       KCACHE_DIR
//   remote                  --remote URL|off            KCACHE_REMOTE
//   remote_layout           --remote-layout flat|bazel  KCACHE_REMOTE_LAYOUT
//   remote_read_only        --remote-read-only          KCACHE_REMOTE_READ_ONLY
//   remote_timeout          --remote-timeout 10s        KCACHE_REMOTE_TIMEOUT
//   remote_connect_timeout  --remote-connect-timeout 1s KCACHE_REMOTE_CONNECT_TIMEOUT
//   remote_retries          --remote-retries 2          KCACHE_REMOTE_RETRIES
//   remote_token_file       --remote-token-file F       KCACHE_REMOTE_TOKEN_FILE
//   remote_basic_auth_file  --remote-basic-auth-file F  KCACHE_REMOTE_BASIC_AUTH_FILE
//   remote_hmac_key_file    --remote-hmac-key-file F    KCACHE_REMOTE_HMAC_KEY_FILE
//   grpc:// and grpcs:// remotes only (the Remote Execution API):
//   remote_instance_name    --remote-instance-name N    KCACHE_REMOTE_INSTANCE_NAME
//   remote_tls_ca_file      --remote-tls-ca-file F      KCACHE_REMOTE_TLS_CA_FILE
//   remote_tls_client_cert_file --remote-tls-client-cert-file F  KCACHE_REMOTE_TLS_CLIENT_CERT_FILE
//   remote_tls_client_key_file  --remote-tls-client-key-file F   KCACHE_REMOTE_TLS_CLIENT_KEY_FILE
//   remote_headers_file     --remote-headers-file F     KCACHE_REMOTE_HEADERS_FILE
//   sloppiness              --sloppiness time_macros    KCACHE_SLOPPINESS
//     (ccache's: `time_macros` stores and looks up compiles that use __TIME__
//     or __TIMESTAMP__ and leaves __DATE__ unkeyed; compiler/time_macros.h)
//   umask                   --umask 002                 KCACHE_UMASK
//     (ccache's: permission bits new store folders and files leave out, e.g.
//     002 for a store a group shares; unset, they follow the store folder's
//     own mode and group: cache/local/store.h, StoreOptions::umask)
//
//   (*) only in $KCACHE_CONFIG: a file inside the store cannot move the store.
//
// Config file grammar:
//
//   file    ::= line*
//   line    ::= ws* (setting | "#" any* | "") "\n"
//   setting ::= key ws* "=" ws* value ws*       (value: the rest of the line, trimmed)
//
// An unknown key is an error (a typo must not silently do nothing). Relative
// paths in the file are relative to the file's folder; from flags and the
// environment, to the working directory. Booleans: true/false, yes/no, on/off,
// 1/0. Durations: "500ms", "10s", "1.5s", "2m"; a bare number is seconds. An
// empty environment variable counts as unset; `remote = off` (or
// KCACHE_REMOTE=off, --remote off) turns the remote tier off whatever a lower
// layer says.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "cache/storage.h"

namespace kcache::cache {

struct StorageConfig {
  StorageOptions options;
  std::string config_file;  // the file that was read, or empty if none was
  // Where each setting that was given came from: "--remote", "$KCACHE_REMOTE",
  // "/ci/kcache.conf:3". Settings left at their default are absent.
  std::map<std::string, std::string> origins;
};

// Looks up an environment variable; nullptr if unset. Default: env::read
// (common/environment.h). Tests pass a map.
using GetEnv = std::function<const char*(const char*)>;

// `flags` maps file keys ("remote_layout") to values given on the command
// line. Secret files are not read here (Storage reads them when it opens the
// remote, so a missing token degrades to "no remote" rather than a failed
// build). Throws InvalidArgument naming the setting, the bad value and where
// it came from; IoError if $KCACHE_CONFIG names a file that cannot be read.
StorageConfig resolve_storage_config(const std::map<std::string, std::string>& flags = {},
                                     const GetEnv& read_env = nullptr);

// For code that must never fail because of cache settings (the runtime JIT,
// a library inside someone else's program): resolve_storage_config() without
// flags, or, if a setting is bad, the default local store without a remote
// and the reason passed to `warn` (default: stderr).
StorageOptions storage_options_or_local_only(
    const std::function<void(const std::string&)>& warn = nullptr,
    const GetEnv& read_env = nullptr);

// The environment variable for a file key ("remote" -> "KCACHE_REMOTE").
std::string env_var_for(const std::string& key);

}  // namespace kcache::cache
