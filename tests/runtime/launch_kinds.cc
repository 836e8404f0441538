// Host code launching scale_n(int n, float scale, float* data) through the
// header cuda_kernel generates. As written it compiles; with
// KCACHE_SWAP_INT_AND_FLOAT the int and the float change places, which the
// sizes alone allow and the generated kind checks must refuse
// (//tests/runtime:launch_swapped_int_float_test).
#include "runtime/module.h"
#include "tests/runtime/scale_n.h"

namespace rt = kcache::runtime;

void scale(const rt::Module& module, rt::StreamRef stream, CUdeviceptr data, int n, float by) {
  rt::Kernel kernel = module.function(kcache_tests_runtime_scale_n_kernels::scale_n);
  rt::LaunchConfig config;
  config.grid = (n + 255) / 256;
  config.block = 256;
#ifdef KCACHE_SWAP_INT_AND_FLOAT
  rt::launch(stream, config, kernel, by, n, data);
#else
  rt::launch(stream, config, kernel, n, by, data);
#endif
}
