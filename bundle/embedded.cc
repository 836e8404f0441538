#include "bundle/embedded.h"

#include <deque>
#include <mutex>

namespace kcache::bundle {
namespace {

// Function-local statics: generated code registers from other translation
// units' static initializers, whose order relative to ours is unspecified.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

// A deque keeps element addresses stable, so find_embedded can return pointers.
std::deque<EmbeddedBundle>& registry() {
  static std::deque<EmbeddedBundle> r;
  return r;
}

}  // namespace

bool register_embedded(const EmbeddedBundle& bundle) noexcept {
  try {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().push_back(bundle);
    return true;
  } catch (...) {
    return false;  // out of memory during static init: the bundle stays unregistered
  }
}

std::vector<EmbeddedBundle> embedded_bundles() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  return {registry().begin(), registry().end()};
}

const EmbeddedBundle* find_embedded(std::string_view symbol) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (const EmbeddedBundle& b : registry()) {
    if (symbol == b.symbol) return &b;
  }
  return nullptr;
}

}  // namespace kcache::bundle
