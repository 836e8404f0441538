// What a `kcache compile` miss costs against NVRTC alone, now that NVRTC reads
// the disk through the serving seal (issue 27, session 9), and what a hit
// costs served against handed.
//
//   bazel run -c opt //bench:served_compile_bench -- ROUNDS KERNEL [KERNEL...]
//
// KERNEL: cub_block, half_cg, cute_gemm (CuTe: KCACHE_CUTLASS_DIR, default
// /opt/kcache-cutlass). Each round, in turn and in one process:
//   nvrtc    NVRTC alone: the source compiled through its C API on this
//            thread, the same name, options and include folders (the toolkit's
//            after the user's, as kcache gives them), its cubin taken
//   served   Compiler::compile, served (what `kcache compile` does), sm_90,
//            NVRTC's cubin (no lean pass), into a store: the lookup (scanner,
//            key, manifest), the sealed NVRTC, the keys of what it read, the
//            store and the lookup record
//   handed   the same with CompileOptions::serve off (the handed namespace)
// Every compile is of a new source (a device variable of its own: new PTX),
// so every kcache compile is a miss. Then hits: the last source compiled
// again, served and handed, HITS times each (a lookup record's hit).
// Prints the median of each and the ratios to NVRTC alone; the first round
// (NVRTC's start) is left out.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cache/storage.h"
#include "compiler/compiler.h"
#include "compiler/toolkit.h"

namespace kcache::compiler {
namespace {

struct Kernel {
  std::string name, file;
  std::vector<std::string> include_dirs;
  std::string std;
  std::vector<std::string> nvrtc_options;
};

std::vector<Kernel> known_kernels() {
  const char* dir = std::getenv("KCACHE_CUTLASS_DIR");
  std::string cutlass = std::string(dir && *dir ? dir : "/opt/kcache-cutlass") +
                        "/cutlass_library/source/include";
  return {{"cub_block", "tests/compiler/kernels/cub_block.cu", {}, "c++17", {}},
          {"half_cg", "tests/compiler/kernels/half_cg.cu", {"tests/compiler/kernels/include"}, "", {}},
          {"cute_gemm", "tests/compiler/kernels/cutlass/cute_gemm.cu", {cutlass}, "c++17",
           {"-default-device"}}};
}

// The source this run writes next to the kernel's (its quoted includes are
// there), removed at exit, a failed run's too.
std::string g_written;
void remove_written() {
  if (!g_written.empty()) std::remove(g_written.c_str());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

using CreateProgram = int (*)(void**, const char*, const char*, int, const char* const*,
                              const char* const*);
using CompileProgram = int (*)(void*, int, const char* const*);
using GetSize = int (*)(void*, size_t*);
using GetBytes = int (*)(void*, char*);
using DestroyProgram = int (*)(void**);

struct NvrtcAlone {
  CreateProgram create;
  CompileProgram compile;
  GetSize cubin_size;
  GetBytes cubin;
  DestroyProgram destroy;
  explicit NvrtcAlone(const std::string& path) {
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!h) std::exit((std::fprintf(stderr, "%s\n", ::dlerror()), 1));
    create = reinterpret_cast<CreateProgram>(::dlsym(h, "nvrtcCreateProgram"));
    compile = reinterpret_cast<CompileProgram>(::dlsym(h, "nvrtcCompileProgram"));
    cubin_size = reinterpret_cast<GetSize>(::dlsym(h, "nvrtcGetCUBINSize"));
    cubin = reinterpret_cast<GetBytes>(::dlsym(h, "nvrtcGetCUBIN"));
    destroy = reinterpret_cast<DestroyProgram>(::dlsym(h, "nvrtcDestroyProgram"));
  }
  // Milliseconds of one compile (to its cubin).
  double run(const std::string& source, const std::string& name,
             const std::vector<std::string>& options) const {
    std::vector<const char*> opts;
    for (const std::string& o : options) opts.push_back(o.c_str());
    auto start = std::chrono::steady_clock::now();
    void* prog = nullptr;
    create(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
    if (compile(prog, static_cast<int>(opts.size()), opts.data()) != 0) {
      std::fprintf(stderr, "NVRTC alone failed on %s\n", name.c_str());
      std::exit(1);
    }
    size_t n = 0;
    cubin_size(prog, &n);
    std::string bytes(n, '\0');
    cubin(prog, &bytes[0]);
    destroy(&prog);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  }
};

double ms_of(Compiler& compiler, const CompileOptions& o, bool want_hit) {
  auto start = std::chrono::steady_clock::now();
  CompileResult r = compiler.compile(o);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if ((r.hits() == 1) != want_hit || !r.targets[0].not_stored.empty()) {
    std::fprintf(stderr, "expected a %s (%s)\n", want_hit ? "hit" : "stored miss",
                 r.targets[0].not_stored.c_str());
    std::exit(1);
  }
  return ms;
}

int run(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: served_compile_bench ROUNDS KERNEL [KERNEL...]\n");
    return 2;
  }
  if (const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY")) {
    if (::chdir(ws) != 0) return 1;
  }
  const int rounds = std::atoi(argv[1]);
  const int hits = 20;
  Toolkit toolkit = find_toolkit("");
  NvrtcAlone alone(toolkit.nvrtc.path);
  char scratch_template[] = "/tmp/kcache_served_bench.XXXXXX";
  const std::string scratch = ::mkdtemp(scratch_template);
  cache::StorageOptions so;
  so.local_dir = scratch + "/store";
  cache::Storage storage(so);
  Compiler compiler(toolkit, &storage);
  const std::string run_id = std::to_string(::getpid());
  for (int k = 2; k < argc; ++k) {
    const std::vector<Kernel> all = known_kernels();
    auto it = std::find_if(all.begin(), all.end(),
                           [&](const Kernel& c) { return c.name == argv[k]; });
    if (it == all.end()) return (std::fprintf(stderr, "unknown kernel %s\n", argv[k]), 2);
    std::ifstream in(it->file);
    const std::string original((std::istreambuf_iterator<char>(in)), {});
    // The new source lives next to the original (its quoted includes).
    const std::string folder = it->file.substr(0, it->file.rfind('/'));
    const std::string path = folder + "/kcache_served_bench_" + run_id + ".cu";
    g_written = path;
    static const bool registered = std::atexit(remove_written) == 0;
    (void)registered;
    std::vector<std::string> nvrtc_options = {"-arch=sm_90"};
    if (!it->std.empty()) nvrtc_options.push_back("-std=" + it->std);
    nvrtc_options.insert(nvrtc_options.end(), it->nvrtc_options.begin(), it->nvrtc_options.end());
    for (const std::string& d : it->include_dirs) nvrtc_options.push_back("-I" + d);
    for (const std::string& d : toolkit.include_dirs) nvrtc_options.push_back("-I" + d);
    CompileOptions o;
    o.source_path = path;
    o.archs = {"sm_90"};
    o.include_dirs = it->include_dirs;
    o.std = it->std;
    o.nvrtc_options = it->nvrtc_options;
    o.lean = false;
    std::map<std::string, std::vector<double>> ms;
    std::string source;
    std::vector<std::string> modes = {"nvrtc", "served", "handed"};
    for (int round = 0; round <= rounds; ++round) {
      std::rotate(modes.begin(), modes.begin() + 1, modes.end());  // each goes first in turn
      for (const std::string& mode : modes) {
        source = original + "\n__device__ int kcache_bench_" + run_id + "_" +
                 std::to_string(round) + "_" + mode + ";\n";
        std::ofstream(path, std::ios::trunc) << source;
        double t;
        if (mode == "nvrtc") {
          t = alone.run(source, path, nvrtc_options);
        } else {
          o.serve = mode == "served";
          t = ms_of(compiler, o, false);
        }
        if (round > 0) ms[mode].push_back(t);
      }
    }
    // Hits: the last source, looked up again (its lookup record).
    for (const char* mode : {"served", "handed"}) {
      o.serve = std::string(mode) == "served";
      source = original + "\n__device__ int kcache_bench_" + run_id + "_hits_" + mode + ";\n";
      std::ofstream(path, std::ios::trunc) << source;
      ms_of(compiler, o, false);
      ::sleep(3);  // a lookup record keeps only stamps older than two seconds
      ms_of(compiler, o, true);
      for (int i = 0; i < hits; ++i) ms[std::string("hit ") + mode].push_back(ms_of(compiler, o, true));
    }
    std::remove(path.c_str());
    const double base = median(ms["nvrtc"]);
    std::printf("%s (%d rounds): NVRTC alone %.1f ms; served miss %.1f ms (%.3fx); handed miss "
                "%.1f ms (%.3fx); hit served %.3f ms, handed %.3f ms\n",
                it->name.c_str(), rounds, base, median(ms["served"]), median(ms["served"]) / base,
                median(ms["handed"]), median(ms["handed"]) / base, median(ms["hit served"]),
                median(ms["hit handed"]));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace kcache::compiler

int main(int argc, char** argv) { return kcache::compiler::run(argc, argv); }
