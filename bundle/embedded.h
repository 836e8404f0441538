// Bundles compiled into a binary. The C++ that `kcache compile --cc-out`
// generates defines the bundle's bytes and registers them here during static
// initialization, so the runtime can find every linked bundle (load_all) with
// no CUDA or runtime dependency in the generated code itself.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <cstddef>
#include <string_view>
#include <vector>

namespace kcache::bundle {

struct EmbeddedBundle {
  const char* symbol;         // the stable C++ symbol the bytes are defined under
  const unsigned char* data;  // aligned to kImageAlignment; static storage
  size_t size;
};

// Called from generated code at static-initialization time; returns true so it
// can initialize a namespace-scope bool. Thread-safe; never throws.
bool register_embedded(const EmbeddedBundle& bundle) noexcept;

// Every bundle registered so far, in registration order (after static
// initialization this is every bundle linked into the binary).
std::vector<EmbeddedBundle> embedded_bundles();

// The bundle registered under `symbol`, or nullptr.
const EmbeddedBundle* find_embedded(std::string_view symbol);

}  // namespace kcache::bundle
