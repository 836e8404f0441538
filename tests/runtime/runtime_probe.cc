// Prints what the runtime finds: the driver and each device, or the error it
// gets. Exit status 0 with a GPU, 2 without a driver, 1 on other errors.
#include <cstdio>

#include "common/error.h"
#include "runtime/device.h"
#include "runtime/driver.h"

int main() {
  using namespace kcache::runtime;
  try {
    const Driver& d = driver();
    std::printf("driver: %s, CUDA %d.%d, cuLibraryLoadData: %s\n", d.library.c_str(),
                d.version / 1000, d.version % 1000 / 10, d.has_library_api() ? "yes" : "no");
    int n = Device::count();
    for (int i = 0; i < n; ++i) {
      Device device(i);
      std::printf("device %d: %s, %s, %d multiprocessors\n", i, device.name().c_str(),
                  device.arch().name().c_str(), device.multiprocessor_count());
    }
    return 0;
  } catch (const kcache::DriverError& e) {
    std::printf("%s\n", e.what());
    return e.result() == 0 ? 2 : 1;
  } catch (const kcache::Error& e) {
    std::printf("%s\n", e.what());
    return 1;
  }
}
