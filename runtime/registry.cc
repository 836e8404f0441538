#include "runtime/registry.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "bundle/embedded.h"
#include "runtime/device.h"

namespace kcache::runtime {
namespace {

struct Slot {
  std::once_flag once;
  std::optional<Module> module;
};

class Registry {
 public:
  const Module& get(std::string_view symbol) {
    CUcontext context = current_context();
    Slot* slot;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto key = std::make_pair(context, std::string(symbol));
      auto it = slots_.find(key);
      if (it == slots_.end()) it = slots_.emplace(std::move(key), std::make_unique<Slot>()).first;
      slot = it->second.get();
    }
    // Outside the lock, so other modules load meanwhile; call_once makes a
    // second caller for this one wait, and lets a later call retry if the
    // load throws.
    std::call_once(slot->once, [&] {
      slot->module.emplace(Module::load_embedded(symbol));
      std::lock_guard<std::mutex> lock(mutex_);
      ++loaded_;
    });
    return *slot->module;
  }

  size_t loaded() {
    std::lock_guard<std::mutex> lock(mutex_);
    return loaded_;
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<CUcontext, std::string>, std::unique_ptr<Slot>> slots_;
  size_t loaded_ = 0;
};

Registry& registry() {
  // Never destroyed: see the header on why modules are not unloaded at exit.
  static Registry* r = new Registry();
  return *r;
}

}  // namespace

const Module& embedded_module(std::string_view symbol) {
  // A name no linked cuda_kernel defines is a mistake on any machine: report
  // it (NotFound, listing what is linked) before asking for a driver.
  if (!bundle::find_embedded(symbol)) Module::load_embedded(symbol);
  return registry().get(symbol);
}

size_t load_all() {
  current_context();  // the driver and context are start-up cost too, bundles or not
  std::vector<bundle::EmbeddedBundle> bundles = bundle::embedded_bundles();
  for (const bundle::EmbeddedBundle& b : bundles) registry().get(b.symbol);
  return bundles.size();
}

size_t loaded_module_count() { return registry().loaded(); }

}  // namespace kcache::runtime
