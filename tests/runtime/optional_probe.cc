// A binary linking one of the runtime's optional targets (built twice:
// KCACHE_PROBE_STORE_LOADER, KCACHE_PROBE_JIT), for link_deps_test: it must
// start without libcuda, NVRTC, libcurl or libcrypto and report the missing
// driver before touching anything else. Exit status as runtime_probe's: 0
// with a GPU, 2 without a driver, 1 on other errors.
#include <cstdio>

#include "bundle/bundle.h"
#include "common/error.h"
#include "common/hash.h"

#ifdef KCACHE_PROBE_STORE_LOADER
#include "cache/storage.h"
#include "runtime/store_loader.h"
#endif
#ifdef KCACHE_PROBE_JIT
#include "runtime/jit/jit.h"
#endif

int main() {
  using namespace kcache::runtime;
  try {
#ifdef KCACHE_PROBE_STORE_LOADER
    kcache::cache::Storage storage({});  // $KCACHE_DIR, else the default store
    load_from_store(storage, {kcache::xxh3_128("probe")}, "probe");
#endif
#ifdef KCACHE_PROBE_JIT
    // The device is asked first: no toolkit is looked for, no store opened.
    jit::Source source;
    source.name = "probe.cu";
    jit::load_or_compile(kcache::bundle::Bundle{}, "probe", source);
#endif
    return 0;
  } catch (const kcache::DriverError& e) {
    std::printf("%s\n", e.what());
    return e.result() == 0 ? 2 : 1;
  } catch (const kcache::Error& e) {
    std::printf("%s\n", e.what());
    return 1;
  }
}
