// Modules of the bundles linked into this binary, loaded once per context.
//
// Generated code registers each embedded bundle under a symbol
// (bundle/embedded.h); embedded_module(symbol) loads it into the calling
// thread's current context on first use and returns the same Module after
// that. load_all() loads every linked bundle up front, launching nothing, so a
// service can pay its start-up cost before taking traffic (Warp's
// load_module).
//
// Ownership: the registry owns its modules for the life of the process and
// never unloads them (at exit the driver frees them; unloading from a static
// destructor would race the driver's own shutdown). References it returns stay
// valid until exit.
//
// Thread safety: all functions may be called from any thread. Two threads
// asking for the same module at once load it once; different modules load in
// parallel. A load that throws is not remembered: the next call tries again.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <cstddef>
#include <string_view>

#include "runtime/module.h"

namespace kcache::runtime {

// The module for the embedded bundle `symbol` in the current context.
// Throws as Module::load_embedded does.
const Module& embedded_module(std::string_view symbol);

// Initializes the driver and the current context, loads every embedded bundle
// into it (skipping those already loaded there) and returns how many bundles
// the binary has. Throws the first
// failure, naming its bundle, after which the others may or may not be loaded.
size_t load_all();

// How many modules the registry has loaded so far, over all contexts (for
// tests and diagnostics).
size_t loaded_module_count();

}  // namespace kcache::runtime
