// The precompiler's speed: a whole `kcache compile` process on a hit against
// the NVRTC compile of the same kernel, in the same run; and N archs compiled
// in parallel threads against one after another.
//
//   bazel run -c opt //bench:compile_bench
//
// Figures and the machine they were taken on: docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cache/storage.h"
#include "common/file_system.h"
#include "common/hash.h"
#include "compiler/image/codegen.h"
#include "compiler/compiler.h"
#include "compiler/image/lean_image.h"
#include "compiler/nvrtc/nvrtc.h"
#include "compiler/toolkit.h"

extern char** environ;

namespace kcache::compiler {
namespace {

struct Kernel {
  const char* name;
  std::vector<std::string> args;  // after `kcache compile`
};

const std::vector<Kernel>& kernels() {
  static const std::vector<Kernel> k = {
      {"saxpy", {"tests/compiler/kernels/saxpy.cu"}},
      {"half_cg", {"tests/compiler/kernels/half_cg.cu", "-I", "tests/compiler/kernels/include"}},
      {"cub_block", {"tests/compiler/kernels/cub_block.cu"}},
      {"scale_template",
       {"tests/compiler/kernels/scale_template.cu", "--name-expression", "scale<float>",
        "--name-expression", "scale<double>"}},
      // The same header, included literally (a scanner-key hit) and through a
      // computed include (a manifest hit: the manifest read and replayed).
      {"saxpy_literal", {"tests/compiler/kernels/saxpy_literal.cu"}},
      {"saxpy_computed", {"tests/compiler/kernels/saxpy_computed.cu", "-D", "VARIANT=double"}},
  };
  return k;
}

// CuTe (issue 19), when the nvidia-cutlass headers are installed
// (tools/install_deps.sh): NVRTC keeps ~2,950 variables a lean image drops.
std::vector<Kernel> cutlass_kernels() {
  const char* dir = std::getenv("KCACHE_CUTLASS_DIR");
  std::string include = std::string(dir && *dir ? dir : "/opt/kcache-cutlass") +
                        "/cutlass_library/source/include";
  if (::access((include + "/cute/tensor.hpp").c_str(), R_OK) != 0) return {};
  return {{"cute_gemm",
           {"tests/compiler/kernels/cutlass/cute_gemm.cu", "-I", include, "--std", "c++17",
            "--nvrtc-opt", "-default-device"}}};
}

const std::vector<Kernel>& all_kernels() {
  static const std::vector<Kernel> all = [] {
    std::vector<Kernel> k = kernels();
    for (Kernel& c : cutlass_kernels()) k.push_back(std::move(c));
    return k;
  }();
  return all;
}

CompileOptions options_for(const Kernel& k, std::vector<std::string> archs) {
  CompileOptions o;
  o.source_path = k.args[0];
  o.archs = std::move(archs);
  for (size_t i = 1; i + 1 < k.args.size(); i += 2) {
    if (k.args[i] == "-I") o.include_dirs.push_back(k.args[i + 1]);
    if (k.args[i] == "--name-expression") o.name_expressions.push_back(k.args[i + 1]);
    if (k.args[i] == "-D") o.defines.push_back(k.args[i + 1]);
    if (k.args[i] == "--std") o.std = k.args[i + 1];
    if (k.args[i] == "--nvrtc-opt") o.nvrtc_options.push_back(k.args[i + 1]);
  }
  return o;
}

std::string scratch() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/kcache_compile_bench.XXXXXX";
    return std::string(::mkdtemp(tmpl));
  }();
  return dir;
}

// Per-iteration seconds of each benchmark, for the ratios printed at the end.
std::map<std::string, double>& seconds_per_iteration() {
  static std::map<std::string, double> m;
  return m;
}

void record(benchmark::State& state, const std::string& name, double total_seconds) {
  if (state.iterations() > 0) {
    seconds_per_iteration()[name] = total_seconds / static_cast<double>(state.iterations());
  }
}

int run_process(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The NVRTC compile of one kernel for sm_90: through the precompiler with no
// store (include resolution and key included, both negligible next to NVRTC),
// NVRTC's own cubin (no lean pass).
void BM_NvrtcCompile(benchmark::State& state, const Kernel* k, const std::string& name) {
  Compiler compiler(find_toolkit(""), nullptr);
  CompileOptions o = options_for(*k, {"sm_90"});
  o.lean = false;
  double total = 0;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(compiler.compile(o));
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  record(state, name, total);
}

// What lean images add to a miss: the lean pass over NVRTC's PTX plus the
// nvJitLink assembly of the lean PTX (lean_image.h), on NVRTC's output for
// sm_90 (computed once, outside the timing, through the sealed compiler with
// --no-lean: the cubin, and the compute_90 PTX, the same text NVRTC gives
// for the cubin's PTX).
void BM_LeanStep(benchmark::State& state, const Kernel* k, const std::string& name) {
  Toolkit toolkit = find_toolkit("");
  Compiler compiler(toolkit, nullptr);
  CompileOptions o = options_for(*k, {"sm_90"});
  o.lean = false;
  CompileResult cubin = compiler.compile(o);
  o.archs.clear();
  o.ptx_arch = "compute_90";
  CompileResult ptx = compiler.compile(o);
  LeanInput lean{cache::TargetKind::cubin,
                 "sm_90",
                 std::string(cubin.targets[0].entry->payload()),
                 std::string(ptx.targets[0].entry->payload()),
                 {},
                 {},
                 toolkit.nvjitlink.path,
                 {}};
  if (!o.std.empty()) lean.options.push_back("-std=" + o.std);
  lean.options.insert(lean.options.end(), o.nvrtc_options.begin(), o.nvrtc_options.end());
  for (const cache::LoweredName& n : cubin.targets[0].entry->lowered_names()) {
    lean.keep.push_back(n.lowered_name);
  }
  double total = 0;
  LeanImage image;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    image = make_lean_image(lean);
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  state.counters["nvrtc_bytes"] = static_cast<double>(lean.nvrtc_image.size());
  state.counters["lean_bytes"] = static_cast<double>(image.image.size());
  state.counters["vars_removed"] = image.variables_removed;
  record(state, name, total);
}

// A whole `kcache compile` process on a hit: start, flags, toolkit identity,
// includes, keys, store lookups, bundle written, exit.
void BM_HitProcess(benchmark::State& state, const Kernel* k, const std::string& name) {
  std::string store = scratch() + "/store";
  std::string out = scratch() + "/" + k->name + ".kcb";
  std::vector<std::string> argv = {"cli/kcache", "--dir", store, "compile"};
  argv.insert(argv.end(), k->args.begin(), k->args.end());
  for (const char* a : {"--arch", "sm_90", "-o"}) argv.push_back(a);
  argv.push_back(out);
  if (run_process(argv) != 0) {  // warms the store; a compile error shows here
    state.SkipWithError("kcache compile failed");
    return;
  }
  // Other builds share this machine: a process start may wait for a core.
  // The median says what a hit costs; the mean and p90 say what it may cost.
  std::vector<double> samples;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    if (run_process(argv) != 0) state.SkipWithError("kcache compile failed");
    samples.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(samples.begin(), samples.end());
  if (samples.empty()) return;
  double p50 = samples[samples.size() / 2], p90 = samples[samples.size() * 9 / 10];
  state.counters["p50_ms"] = p50 * 1e3;
  state.counters["p90_ms"] = p90 * 1e3;
  seconds_per_iteration()[name] = p50;
}

// The same hit in-process: what the process adds on top is exec + flags.
void BM_HitInProcess(benchmark::State& state, const Kernel* k, const std::string& name) {
  cache::StorageOptions so;
  so.local_dir = scratch() + "/store";
  cache::Storage storage(so);
  Compiler compiler(find_toolkit(""), &storage);
  CompileOptions o = options_for(*k, {"sm_90"});
  compiler.compile(o);
  double total = 0;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    CompileResult r = compiler.compile(o);
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r.hits() != 1) state.SkipWithError("not a hit");
  }
  record(state, name, total);
}

std::vector<std::string> worker_command() {
  char buf[4096];
  return {std::string(::getcwd(buf, sizeof buf)) + "/cli/kcache", "__nvrtc-worker"};
}

enum class Mode { serial, threads, processes };

// N archs of the fp16 + cooperative groups kernel, no store: one after
// another (-j 1); in N threads of this process only; in N threads of which
// all but one hand their compile to a worker process (what kcache does).
void BM_Archs(benchmark::State& state, Mode mode, const std::string& base) {
  static const std::vector<std::string> all = {"sm_80", "sm_86", "sm_89", "sm_90"};
  int n = static_cast<int>(state.range(0));
  Compiler compiler(find_toolkit(""), nullptr, mode == Mode::serial ? 1 : n,
                    mode == Mode::processes ? worker_command() : std::vector<std::string>{});
  CompileOptions o = options_for(kernels()[1], {all.begin(), all.begin() + n});
  // Best of the runs: the one least disturbed by other builds on the machine.
  double best = 1e9;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(compiler.compile(o));
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.counters["archs"] = n;
  state.counters["best_ms"] = best * 1e3;
  seconds_per_iteration()[base + "/" + std::to_string(n)] = best;
}

// Generating the embedding C++ for a bundle of `range(0)` MiB (cubin-like
// bytes: mostly zeros and binary).
void BM_GenerateSource(benchmark::State& state) {
  std::string bytes(static_cast<size_t>(state.range(0)) << 20, '\0');
  for (size_t i = 0; i < bytes.size(); i += 3) bytes[i] = static_cast<char>(i * 2654435761u >> 24);
  EmbedInfo info;
  info.symbol = "bench::bundle";
  info.source_name = "bench.cu";
  for (auto _ : state) benchmark::DoNotOptimize(generate_source(bytes, info));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes.size()));
}

// What a hit pays for the compiler identity: finding the toolkit, reading
// CUDA_VERSION and CCCL_VERSION, fingerprinting libnvrtc and its builtins.
void BM_FindToolkit(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(find_toolkit("").identity());
}

// The alternative toolkit.h rejects: hashing all of libnvrtc (109 MB) on
// every run, page cache warm.
void BM_HashWholeNvrtc(benchmark::State& state) {
  std::string path = find_toolkit("").nvrtc.path;
  for (auto _ : state) {
    Hasher128 h;
    h.update(*read_file(path));
    benchmark::DoNotOptimize(h.digest());
  }
}

void register_all() {
  benchmark::RegisterBenchmark("BM_FindToolkit", BM_FindToolkit)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_HashWholeNvrtc", BM_HashWholeNvrtc)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_GenerateSource", BM_GenerateSource)
      ->Arg(1)
      ->Arg(16)
      ->Unit(benchmark::kMillisecond);
  for (const Kernel& k : all_kernels()) {
    std::string name = k.name;
    std::string nvrtc = "BM_NvrtcCompile/" + name, hit = "BM_HitProcess/" + name,
                in_process = "BM_HitInProcess/" + name;
    benchmark::RegisterBenchmark(
        nvrtc.c_str(), [&k, nvrtc](benchmark::State& s) { BM_NvrtcCompile(s, &k, nvrtc); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(3);
    std::string lean = "BM_LeanStep/" + name;
    benchmark::RegisterBenchmark(lean.c_str(),
                                 [&k, lean](benchmark::State& s) { BM_LeanStep(s, &k, lean); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(10);
    benchmark::RegisterBenchmark(hit.c_str(),
                                 [&k, hit](benchmark::State& s) { BM_HitProcess(s, &k, hit); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(200);
    benchmark::RegisterBenchmark(
        in_process.c_str(),
        [&k, in_process](benchmark::State& s) { BM_HitInProcess(s, &k, in_process); })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime()
        ->Iterations(500);
  }
  for (Mode mode : {Mode::serial, Mode::threads, Mode::processes}) {
    std::string base = mode == Mode::serial    ? "BM_Archs/serial"
                       : mode == Mode::threads ? "BM_Archs/threads"
                                               : "BM_Archs/processes";
    benchmark::RegisterBenchmark(base.c_str(),
                                 [mode, base](benchmark::State& s) { BM_Archs(s, mode, base); })
        ->Arg(1)
        ->Arg(2)
        ->Arg(4)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(3);
  }
}

void print_ratios() {
  auto& s = seconds_per_iteration();
  auto get = [&](const std::string& name) {
    for (const auto& [n, v] : s) {
      if (n.rfind(name, 0) == 0) return v;
    }
    return 0.0;
  };
  std::printf("\nRatios (same run):\n");
  double cub = get("BM_NvrtcCompile/cub_block");
  for (const Kernel& k : kernels()) {
    double nvrtc = get(std::string("BM_NvrtcCompile/") + k.name);
    double hit = get(std::string("BM_HitProcess/") + k.name);
    if (nvrtc > 0 && hit > 0) {
      std::printf(
          "  %-15s NVRTC %8.1f ms, hit process p50 %6.2f ms: hit %6.0fx faster; %6.0fx faster "
          "than the CUB compile\n",
          k.name, nvrtc * 1e3, hit * 1e3, nvrtc / hit, cub / hit);
    }
  }
  for (const Kernel& k : all_kernels()) {
    double nvrtc = get(std::string("BM_NvrtcCompile/") + k.name);
    double lean = get(std::string("BM_LeanStep/") + k.name);
    if (nvrtc > 0 && lean > 0) {
      std::printf("  %-15s lean pass + nvJitLink %7.1f ms = %5.1f%% of NVRTC's %8.1f ms\n", k.name,
                  lean * 1e3, 100 * lean / nvrtc, nvrtc * 1e3);
    }
  }
  for (int n : {1, 2, 4}) {
    double serial = get("BM_Archs/serial/" + std::to_string(n));
    double threads = get("BM_Archs/threads/" + std::to_string(n));
    double processes = get("BM_Archs/processes/" + std::to_string(n));
    if (serial > 0 && threads > 0 && processes > 0) {
      std::printf(
          "  %d archs (best of 3): one after another %.0f ms; threads only %.0f ms (%.2fx); worker "
          "processes %.0f ms (%.2fx)\n",
          n, serial * 1e3, threads * 1e3, serial / threads, processes * 1e3, serial / processes);
    }
  }
}

}  // namespace
}  // namespace kcache::compiler

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  kcache::compiler::register_all();
  benchmark::RunSpecifiedBenchmarks();
  kcache::compiler::print_ratios();
  std::string rm = "rm -rf " + kcache::compiler::scratch();
  return std::system(rm.c_str()) == 0 ? 0 : 1;
}
