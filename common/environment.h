// The environment variables kcache reads: one list (name, meaning, reader)
// and the one way to read them. Nothing else in kcache calls getenv
// (tests/common/environment_test checks it, and that docs/CLI.md's
// "Environment" table documents every variable listed here).
//
// Settings are read here and passed down as values: cache/config.h resolves
// the store's settings through this, and the rest read the few variables
// that belong to a process rather than to the store (the working folder,
// the temporary folder, the drop-in's own switches).
//
// Reading is what getenv costs: an index into a constant table and one
// getenv call, no allocation and no lock, so the drop-in (nvrtc_shim/),
// which runs inside a host program, reads through it as cheaply and as
// safely as it called getenv itself. Like getenv, it is not safe against a
// concurrent setenv of the same variable.
#pragma once

#include <array>
#include <cstddef>

#include "common/cxx17.h"  // first: says so in one line below C++17

namespace kcache::env {

// In docs/CLI.md's order; common/environment.cc holds each one's name and
// meaning.
enum class Var : int {
  // The store and its settings (cache/config.h).
  kcache_dir,
  kcache_config,
  kcache_remote,
  kcache_remote_layout,
  kcache_remote_read_only,
  kcache_remote_timeout,
  kcache_remote_connect_timeout,
  kcache_remote_retries,
  kcache_remote_token_file,
  kcache_remote_basic_auth_file,
  kcache_remote_hmac_key_file,
  kcache_remote_instance_name,
  kcache_remote_tls_ca_file,
  kcache_remote_tls_client_cert_file,
  kcache_remote_tls_client_key_file,
  kcache_remote_headers_file,
  kcache_sloppiness,
  kcache_umask,
  kcache_quiet,
  kcache_reapi_library,
  // The drop-in and `kcache run`.
  kcache_nvrtc_shim_dir,
  kcache_shim_stats,
  kcache_shim_lean,
  kcache_real_nvrtc,
  kcache_exe,
  // The runtime.
  kcache_libcuda,
  // Switches for diagnosis and measurement.
  kcache_seal,
  kcache_snapshot_reuse,
  kcache_lookup_records,
  kcache_debug_probes,
  kcache_debug_name_check,
  // Set by others.
  xdg_cache_home,
  home,
  tmpdir,
  pwd,
  cuda_path,
  cuda_cache_path,
  build_working_directory,
  runfiles_dir,
  test_srcdir,
  ld_library_path,
  ld_preload,
  count_,  // not a variable: the number of them
};

struct Variable {
  Var var;
  const char* name;     // "KCACHE_DIR"
  const char* meaning;  // one line, as docs/CLI.md says it
  const char* read_by;  // the files that read it
};

inline constexpr std::size_t kVariableCount = static_cast<std::size_t>(Var::count_);

// Every variable, indexed by Var. Constant-initialized: no code runs at load.
const std::array<Variable, kVariableCount>& variables();

// `v`'s name ("KCACHE_DIR").
const char* name(Var v);

// `v`'s value as set (possibly ""), or nullptr where it is unset. The text
// belongs to the environment: copy it before a setenv of the same name.
const char* read(Var v);

// The same by name, for names computed from a setting's key
// (cache::env_var_for). Throws InvalidArgument for a name not on the list:
// a variable kcache reads must be listed (and documented).
const char* read(const char* name);

// `v`'s value, or nullptr where it is unset or empty (most settings treat
// an empty variable as unset).
const char* value(Var v);

// Whether `v` is set to something other than "" and "0" (KCACHE_QUIET=1).
bool enabled(Var v);

}  // namespace kcache::env
