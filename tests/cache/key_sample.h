// A compile request with every field set, shared by the key tests and the
// key-printing helper binary (for the two-process test).
#pragma once

#include "cache/format/key.h"

namespace kcache::cache::testing {

inline CompileRequest sample_request() {
  CompileRequest r;
  r.compiler_identity = "nvrtc 13.0 toolkit 13.0";
  r.target = TargetKind::cubin;
  r.arch = "sm_90";
  r.options = {"-std=c++17", "-DN=4"};
  r.source_name = "saxpy.cu";
  r.source = "extern \"C\" __global__ void saxpy() {}";
  r.headers = {{"util.cuh", "#pragma once\n"}};
  r.name_expressions = {"scale<float>"};
  return r;
}

}  // namespace kcache::cache::testing
