// What honouring an action's declared inputs costs the persistent worker per
// request: decoding the request's input list, building the set of declared
// paths, and the MayRead checks one compile makes (one per user file the
// include scanner or on-demand resolution would read). Figures:
// docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "cli/declared_inputs.h"
#include "cli/work_protocol.h"

namespace kcache::cli {
namespace {

// A KcacheCompile request as Bazel 4 sends it: the params, and `n` inputs
// with hex digests (the source, headers, the kcache tool and NVRTC's
// libraries).
std::string request_body(int n) {
  WorkRequest r;
  r.arguments = {"compile", "kernels/k.cu", "--arch", "sm_80,sm_90", "-I", ".", "-o", "k.kcb"};
  for (int i = 0; i < n; ++i) {
    r.inputs.push_back({"kernels/include/detail/header_" + std::to_string(i) + ".cuh",
                        std::string(64, 'a' + i % 6)});
  }
  r.request_id = 7;
  std::string frame = encode_work_request(r);
  size_t body = 0;
  while (static_cast<uint8_t>(frame[body]) & 0x80) ++body;
  return frame.substr(body + 1);
}

void BM_DecodeRequest(benchmark::State& state) {
  std::string body = request_body(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(decode_work_request(body));
  state.SetLabel(std::to_string(body.size()) + " bytes");
}
BENCHMARK(BM_DecodeRequest)->Arg(10)->Arg(100)->Arg(1000)->Arg(10000);

// Building the set and 100 checks of declared paths, spelled as the scanner
// spells them ("./" from -I ., absolute ones are rarer).
void BM_DeclaredInputsAndChecks(benchmark::State& state) {
  int n = static_cast<int>(state.range(0));
  WorkRequest r = decode_work_request(request_body(n));
  std::vector<std::string> paths;
  for (const WorkInput& in : r.inputs) paths.push_back(in.path);
  std::vector<std::string> asked;
  for (int i = 0; i < 100; ++i) {
    asked.push_back("./kernels/include/detail/header_" + std::to_string(i % n) + ".cuh");
  }
  for (auto _ : state) {
    DeclaredInputs inputs(paths, "/build/execroot/ws");
    compiler::MayRead may_read = inputs.may_read();
    int allowed = 0;
    for (const std::string& p : asked) allowed += may_read(p);
    benchmark::DoNotOptimize(allowed);
  }
}
BENCHMARK(BM_DeclaredInputsAndChecks)->Arg(10)->Arg(100)->Arg(1000)->Arg(10000);

}  // namespace
}  // namespace kcache::cli

BENCHMARK_MAIN();
