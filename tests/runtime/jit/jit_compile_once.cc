// One JIT compile in a fresh process, as a program would do it: default
// storage settings (here $KCACHE_DIR), an explicit arch, no driver.
//
//   jit_compile_once ARCH [DEFINE...]
//
// Prints "hit=0|1 kind=cubin|ptx arch=sm_90 nvrtc_loaded=0|1"; exit 1 on error.
#include <cstdio>
#include <fstream>
#include <string>

#include "common/error.h"
#include "runtime/jit/jit.h"
#include "tests/runtime/jit/test_kernels.h"

namespace {

// Whether libnvrtc is mapped into this process.
bool nvrtc_loaded() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("libnvrtc") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kcache::runtime::jit;
  if (argc < 2) {
    std::fprintf(stderr, "usage: jit_compile_once ARCH [DEFINE...]\n");
    return 2;
  }
  try {
    Options options;
    options.arch = argv[1];
    Jit jit(options);
    Source source;
    source.name = "jit_test/scale.cu";
    source.text = testing::kScaleSource;
    for (int i = 2; i < argc; ++i) source.defines.push_back(argv[i]);
    source.name_expressions = {"scale<float>"};
    Compiled c = jit.compile(source);
    std::printf("hit=%d kind=%s arch=%s nvrtc_loaded=%d\n", c.hit ? 1 : 0,
                kcache::cache::to_string(c.entry.kind()), c.entry.arch().c_str(),
                nvrtc_loaded() ? 1 : 0);
    return 0;
  } catch (const kcache::Error& e) {
    std::fprintf(stderr, "jit_compile_once: %s\n", e.what());
    return 1;
  }
}
