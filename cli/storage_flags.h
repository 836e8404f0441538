// The storage flags every verb that touches the cache shares (--remote,
// --remote-layout, ...), and the one way verbs turn them into storage
// settings: flags, then the environment, then kcache.conf (cache/config.h).
//
// A verb that uses the cache does, where it creates its subcommand:
//   add_storage_flags(*verb, dispatch.global);
// and when it runs:
//   cache::Storage storage(storage_options_for(global));
#pragma once

#include "cache/config.h"
#include "cache/storage.h"
#include "cli/command.h"

namespace CLI {
class App;
}

namespace kcache::cli {

// Adds the storage flags (the remote tier's, --sloppiness, --umask) to
// `verb`; their values land in `global.storage_flags` (one subcommand runs
// per invocation).
void add_storage_flags(CLI::App& verb, GlobalOptions& global);

// Resolves --dir, the verb's storage flags, the environment and the config
// file. Throws InvalidArgument for a bad setting (exit code 2).
cache::StorageConfig storage_config(const GlobalOptions& global);
cache::StorageOptions storage_options_for(const GlobalOptions& global);

}  // namespace kcache::cli
