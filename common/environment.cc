#include "common/environment.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "common/error.h"

namespace kcache::env {
namespace {

// The list docs/CLI.md's "Environment" table documents, row for row.
constexpr std::array<Variable, kVariableCount> kVariables = {{
    {Var::kcache_dir, "KCACHE_DIR", "the store's folder (after --dir)",
     "cache/config.cc, cache/local/store.cc"},
    {Var::kcache_config, "KCACHE_CONFIG", "a config file to read (it must exist)",
     "cache/config.cc"},
    {Var::kcache_remote, "KCACHE_REMOTE", "the remote tier's URL, or off", "cache/config.cc"},
    {Var::kcache_remote_layout, "KCACHE_REMOTE_LAYOUT", "flat or bazel", "cache/config.cc"},
    {Var::kcache_remote_read_only, "KCACHE_REMOTE_READ_ONLY", "never write to the remote",
     "cache/config.cc"},
    {Var::kcache_remote_timeout, "KCACHE_REMOTE_TIMEOUT", "a remote request's time limit",
     "cache/config.cc"},
    {Var::kcache_remote_connect_timeout, "KCACHE_REMOTE_CONNECT_TIMEOUT",
     "a remote connection's time limit", "cache/config.cc"},
    {Var::kcache_remote_retries, "KCACHE_REMOTE_RETRIES", "retries of a failed remote request",
     "cache/config.cc"},
    {Var::kcache_remote_token_file, "KCACHE_REMOTE_TOKEN_FILE", "a bearer token's file",
     "cache/config.cc"},
    {Var::kcache_remote_basic_auth_file, "KCACHE_REMOTE_BASIC_AUTH_FILE",
     "a user:password file for basic authentication", "cache/config.cc"},
    {Var::kcache_remote_hmac_key_file, "KCACHE_REMOTE_HMAC_KEY_FILE",
     "the key that signs remote entries", "cache/config.cc"},
    {Var::kcache_remote_instance_name, "KCACHE_REMOTE_INSTANCE_NAME",
     "a grpc:// remote's instance name", "cache/config.cc"},
    {Var::kcache_remote_tls_ca_file, "KCACHE_REMOTE_TLS_CA_FILE",
     "the certificate authorities a grpcs:// remote is checked against", "cache/config.cc"},
    {Var::kcache_remote_tls_client_cert_file, "KCACHE_REMOTE_TLS_CLIENT_CERT_FILE",
     "a grpcs:// client certificate", "cache/config.cc"},
    {Var::kcache_remote_tls_client_key_file, "KCACHE_REMOTE_TLS_CLIENT_KEY_FILE",
     "that certificate's key", "cache/config.cc"},
    {Var::kcache_remote_headers_file, "KCACHE_REMOTE_HEADERS_FILE",
     "extra headers for every remote request", "cache/config.cc"},
    {Var::kcache_sloppiness, "KCACHE_SLOPPINESS", "time_macros: store __TIME__ results",
     "cache/config.cc"},
    {Var::kcache_umask, "KCACHE_UMASK", "what new store folders and files leave out",
     "cache/config.cc"},
    {Var::kcache_quiet, "KCACHE_QUIET", "1: no store or drop-in messages",
     "cache/local/store.cc, cli/run_command.cc, nvrtc_shim/shim.cc"},
    {Var::kcache_reapi_library, "KCACHE_REAPI_LIBRARY", "the gRPC plugin to open",
     "cache/remote/reapi_loader.cc"},
    {Var::kcache_nvrtc_shim_dir, "KCACHE_NVRTC_SHIM_DIR", "the folder of the drop-in libnvrtc",
     "cli/run_command.cc"},
    {Var::kcache_shim_stats, "KCACHE_SHIM_STATS", "a file the drop-in writes a line to per compile",
     "cli/run_command.cc, nvrtc_shim/shim.cc"},
    {Var::kcache_shim_lean, "KCACHE_SHIM_LEAN", "1: the drop-in answers lean CUBINs",
     "nvrtc_shim/shim.cc"},
    {Var::kcache_real_nvrtc, "KCACHE_REAL_NVRTC", "the real libnvrtc the drop-in forwards to",
     "nvrtc_shim/shim.cc"},
    {Var::kcache_exe, "KCACHE_EXE", "the kcache the drop-in starts its compile processes with",
     "nvrtc_shim/shim.cc (kcache run sets it)"},
    {Var::kcache_libcuda, "KCACHE_LIBCUDA", "the driver library to open", "runtime/driver.cc"},
    {Var::kcache_seal, "KCACHE_SEAL", "off: compile unsealed, store nothing",
     "compiler/seal/kernel_setup.cc"},
    {Var::kcache_snapshot_reuse, "KCACHE_SNAPSHOT_REUSE",
     "off: the seal copies every file it serves", "compiler/seal/snapshots.cc"},
    {Var::kcache_lookup_records, "KCACHE_LOOKUP_RECORDS", "off: no lookup records",
     "compiler/compiler_records.cc"},
    {Var::kcache_debug_probes, "KCACHE_DEBUG_PROBES", "set: say why a compile's probes fail",
     "compiler/compiler_misses.cc, compiler/compiler_store.cc, compiler/seal/probes_hold.cc"},
    {Var::kcache_debug_name_check, "KCACHE_DEBUG_NAME_CHECK",
     "set: say why a drop-in program's name check failed", "compiler/compiler_name_check.cc"},
    {Var::xdg_cache_home, "XDG_CACHE_HOME", "the default store is $XDG_CACHE_HOME/kcache",
     "cache/config.cc, cache/local/store.cc"},
    {Var::home, "HOME", "the default store is ~/.cache/kcache; NVRTC's driver cache is beneath it",
     "cache/config.cc, cache/local/store.cc, compiler/compiler_records.cc, compiler/seal/probes_nvrtc_own.cc"},
    {Var::tmpdir, "TMPDIR", "where scratch folders, the seal's folder and PCH work files go",
     "cli/run_command.cc, cli/worker_command.cc, compiler/compiler.cc, compiler/nvrtc/pch.cc, "
     "compiler/seal/seal.cc"},
    {Var::pwd, "PWD", "the working folder's spelling, which NVRTC writes into line tables",
     "compiler/nvrtc/nvrtc.cc, compiler/served_keys.cc"},
    {Var::cuda_path, "CUDA_PATH", "the CUDA toolkit (after --cuda-path)", "compiler/toolkit.cc"},
    {Var::cuda_cache_path, "CUDA_CACHE_PATH", "the driver's cache, which NVRTC may touch",
     "compiler/compiler_records.cc, compiler/seal/probes_nvrtc_own.cc"},
    {Var::build_working_directory, "BUILD_WORKING_DIRECTORY",
     "under bazel run: the folder relative paths are meant from", "cli/main.cc"},
    {Var::runfiles_dir, "RUNFILES_DIR", "Bazel's runfiles, where the gRPC plugin may be",
     "cache/remote/reapi_loader.cc"},
    {Var::test_srcdir, "TEST_SRCDIR", "a Bazel test's runfiles, where the gRPC plugin may be",
     "cache/remote/reapi_loader.cc"},
    {Var::ld_library_path, "LD_LIBRARY_PATH", "kcache run puts the drop-in's folder first",
     "cli/run_command.cc"},
    {Var::ld_preload, "LD_PRELOAD", "kcache run preloads the drop-in", "cli/run_command.cc"},
}};

constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < kVariables.size(); ++i) {
    if (static_cast<std::size_t>(kVariables[i].var) != i) return false;
  }
  return true;
}
static_assert(in_enum_order(), "kVariables must list every Var once, in the enum's order");

}  // namespace

const std::array<Variable, kVariableCount>& variables() { return kVariables; }

const char* name(Var v) { return kVariables[static_cast<std::size_t>(v)].name; }

const char* read(Var v) { return std::getenv(name(v)); }

const char* read(const char* variable_name) {
  for (const Variable& v : kVariables) {
    if (std::strcmp(v.name, variable_name) == 0) return std::getenv(v.name);
  }
  throw InvalidArgument(std::string("kcache reads the environment variable ") + variable_name +
                        ", which common/environment.cc does not list: add it there and to "
                        "docs/CLI.md's environment table");
}

const char* value(Var v) {
  const char* text = read(v);
  return text && *text ? text : nullptr;
}

bool enabled(Var v) {
  const char* text = value(v);
  return text && std::strcmp(text, "0") != 0;
}

}  // namespace kcache::env
