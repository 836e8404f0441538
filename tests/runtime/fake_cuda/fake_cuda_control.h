// The fake driver's control functions (fake_cuda.cc), for tests that point
// the runtime at it: $KCACHE_LIBCUDA=tests/runtime/libfake_cuda.so.
#pragma once

#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace kcache::runtime::testing {

constexpr const char* kFakeCuda = "tests/runtime/libfake_cuda.so";

struct FakeCuda {
  void (*set_capability)(int, int);
  const char* (*last_image)();
  int (*live_modules)();
};

// Opens the fake (the same handle the runtime gets: dlopen returns it again).
inline FakeCuda& fake_cuda() {
  static FakeCuda f = [] {
    void* h = dlopen(kFakeCuda, RTLD_NOW | RTLD_LOCAL);
    if (!h) throw std::runtime_error(std::string("cannot open the fake driver: ") + dlerror());
    auto bind = [h](auto& slot, const char* name) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(h, name));
      if (!slot) throw std::runtime_error(std::string("fake_cuda lacks ") + name);
    };
    FakeCuda f{};
    bind(f.set_capability, "fake_cuda_set_capability");
    bind(f.last_image, "fake_cuda_last_image");
    bind(f.live_modules, "fake_cuda_live_modules");
    return f;
  }();
  return f;
}

// The image the fake was last handed starts with `prefix` (a payload that is
// not NUL-terminated may be followed by other bytes).
inline bool last_image_starts_with(const std::string& prefix) {
  return std::string(fake_cuda().last_image()).compare(0, prefix.size(), prefix) == 0;
}

}  // namespace kcache::runtime::testing
