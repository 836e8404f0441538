// What a `kcache compile` miss costs against NVRTC alone, now that NVRTC reads
// the disk through the serving seal (issue 27, session 9), and what a hit
// costs.
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
// Every compile is of a new source (a device variable of its own: new PTX),
// so every kcache compile is a miss. Then hits: the last source compiled
// again, HITS times (a lookup record's hit).
// Prints the median of each and the ratios to NVRTC alone; the first round
// (NVRTC's start) is left out.
//
//   served_compile_bench --lockstep P STEPS KERNEL [KERNEL...]
//
// Side by side instead: P processes compile with NVRTC alone and P more with
// served Compiler::compile (each its own store), all at once, in lockstep:
// every process starts its Nth compile together and the next step starts only
// when all have finished. A shared host's speed drifts between steps by more
// than the 5 % asked (issue 27); processes in one step see the same host.
// Prints, per kernel, the median served/NVRTC ratio over steps (each step's
// median served time over its median NVRTC time) and the pooled medians, of
// wall time and of the processes' CPU time (every thread, user and system);
// the first step (NVRTC's start) is left out.
#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/wait.h>
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
#include "common/stamp_trust.h"
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

// A store of this process's own, in a new scratch folder.
cache::StorageOptions scratch_store() {
  char scratch_template[] = "/tmp/kcache_served_bench.XXXXXX";
  cache::StorageOptions so;
  so.local_dir = std::string(::mkdtemp(scratch_template)) + "/store";
  return so;
}

// The kernel named so, its source read, written for a new one next to it.
const Kernel& kernel_named(const std::vector<Kernel>& all, const char* name) {
  auto it = std::find_if(all.begin(), all.end(), [&](const Kernel& c) { return c.name == name; });
  if (it == all.end()) std::exit((std::fprintf(stderr, "unknown kernel %s\n", name), 2));
  return *it;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// NVRTC alone's options for the kernel: kcache's -I (the user's, then the
// toolkit's), -arch, -std, the rest.
std::vector<std::string> alone_options(const Kernel& k, const Toolkit& toolkit) {
  std::vector<std::string> options = {"-arch=sm_90"};
  if (!k.std.empty()) options.push_back("-std=" + k.std);
  options.insert(options.end(), k.nvrtc_options.begin(), k.nvrtc_options.end());
  for (const std::string& d : k.include_dirs) options.push_back("-I" + d);
  for (const std::string& d : toolkit.include_dirs) options.push_back("-I" + d);
  return options;
}

CompileOptions served_options(const Kernel& k, const std::string& path) {
  CompileOptions o;
  o.source_path = path;
  o.archs = {"sm_90"};
  o.include_dirs = k.include_dirs;
  o.std = k.std;
  o.nvrtc_options = k.nvrtc_options;
  o.lean = false;
  return o;
}

// The CPU time of this process so far, every thread's (NVRTC's, the seal's
// supervisor's), user and system: the work a compile costs, which a host's
// noise (other tenants, steal) moves far less than its wall time.
double cpu_ms() {
  struct rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

// One lockstep process: a compile per byte read from `go`, its wall and CPU
// milliseconds written to `done`, until `go` closes.
[[noreturn]] void lockstep_child(const Kernel& k, bool served, int go, int done) {
  Toolkit toolkit = find_toolkit("");
  NvrtcAlone alone(toolkit.nvrtc.path);
  cache::Storage storage(scratch_store());
  Compiler compiler(toolkit, &storage);
  const std::string original = read_all(k.file);
  const std::string id = std::to_string(::getpid());
  const std::string path = k.file.substr(0, k.file.rfind('/')) + "/kcache_served_bench_" + id + ".cu";
  g_written = path;
  std::atexit(remove_written);
  const std::vector<std::string> options = alone_options(k, toolkit);
  const CompileOptions o = served_options(k, path);
  char byte;
  for (int step = 0; ::read(go, &byte, 1) == 1; ++step) {
    const std::string source =
        original + "\n__device__ int kcache_bench_" + id + "_" + std::to_string(step) + ";\n";
    std::ofstream(path, std::ios::trunc) << source;
    const double cpu_before = cpu_ms();
    double ms[2];
    ms[0] = served ? ms_of(compiler, o, false) : alone.run(source, path, options);
    ms[1] = cpu_ms() - cpu_before;
    if (::write(done, ms, sizeof ms) != sizeof ms) std::exit(1);
  }
  std::exit(0);
}

int run_lockstep(int processes, int steps, const std::vector<std::string>& kernels) {
  const std::vector<Kernel> all = known_kernels();
  for (const std::string& name : kernels) {
    const Kernel& k = kernel_named(all, name.c_str());
    struct Child {
      bool served;
      pid_t pid;
      int go, done;
    };
    std::vector<Child> children;
    for (int i = 0; i < 2 * processes; ++i) {
      int go[2], done[2];
      if (::pipe(go) != 0 || ::pipe(done) != 0) return 1;
      const bool served = i % 2 == 1;
      pid_t pid = ::fork();
      if (pid == 0) {
        for (const Child& c : children) ::close(c.go), ::close(c.done);
        ::close(go[1]), ::close(done[0]);
        lockstep_child(k, served, go[0], done[1]);
      }
      ::close(go[0]), ::close(done[1]);
      children.push_back({served, pid, go[1], done[0]});
    }
    // [0] wall, [1] CPU: per-step ratios and every compile's time.
    std::vector<double> ratios[2], nvrtc_all[2], served_all[2];
    for (int step = 0; step <= steps; ++step) {
      for (const Child& c : children) {
        if (::write(c.go, "g", 1) != 1) return 1;
      }
      std::vector<double> nvrtc[2], served[2];
      for (const Child& c : children) {
        double ms[2];
        if (::read(c.done, ms, sizeof ms) != sizeof ms) {
          std::fprintf(stderr, "a %s process failed at step %d\n",
                       c.served ? "served" : "nvrtc", step);
          return 1;
        }
        for (int t = 0; t < 2; ++t) (c.served ? served : nvrtc)[t].push_back(ms[t]);
      }
      if (step == 0) continue;  // NVRTC's start
      for (int t = 0; t < 2; ++t) {
        ratios[t].push_back(median(served[t]) / median(nvrtc[t]));
        nvrtc_all[t].insert(nvrtc_all[t].end(), nvrtc[t].begin(), nvrtc[t].end());
        served_all[t].insert(served_all[t].end(), served[t].begin(), served[t].end());
      }
    }
    for (const Child& c : children) {
      ::close(c.go);
      int status = 0;
      ::waitpid(c.pid, &status, 0);
      ::close(c.done);
    }
    std::printf("%s (%d steps, %d + %d processes):\n", k.name.c_str(), steps, processes,
                processes);
    for (int t = 0; t < 2; ++t) {
      std::vector<double> sorted = ratios[t];
      std::sort(sorted.begin(), sorted.end());
      std::printf("  %s: NVRTC alone %.1f ms, served miss %.1f ms (pooled %.3fx); per step "
                  "served/NVRTC median %.3f, range %.3f-%.3f\n    per step:",
                  t == 0 ? "wall" : "CPU ", median(nvrtc_all[t]), median(served_all[t]),
                  median(served_all[t]) / median(nvrtc_all[t]), median(ratios[t]),
                  sorted.front(), sorted.back());
      for (double r : ratios[t]) std::printf(" %.3f", r);
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  return 0;
}

int run(int argc, char** argv) {
  if (const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY")) {
    if (::chdir(ws) != 0) return 1;
  }
  if (argc >= 5 && std::string(argv[1]) == "--lockstep") {
    return run_lockstep(std::atoi(argv[2]), std::atoi(argv[3]),
                        std::vector<std::string>(argv + 4, argv + argc));
  }
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: served_compile_bench ROUNDS KERNEL [KERNEL...]\n"
                 "       served_compile_bench --lockstep PROCESSES STEPS KERNEL [KERNEL...]\n");
    return 2;
  }
  const int rounds = std::atoi(argv[1]);
  const int hits = 20;
  Toolkit toolkit = find_toolkit("");
  NvrtcAlone alone(toolkit.nvrtc.path);
  cache::Storage storage(scratch_store());
  Compiler compiler(toolkit, &storage);
  const std::string run_id = std::to_string(::getpid());
  for (int k = 2; k < argc; ++k) {
    const std::vector<Kernel> all = known_kernels();
    const Kernel* it = &kernel_named(all, argv[k]);
    const std::string original = read_all(it->file);
    // The new source lives next to the original (its quoted includes).
    const std::string folder = it->file.substr(0, it->file.rfind('/'));
    const std::string path = folder + "/kcache_served_bench_" + run_id + ".cu";
    g_written = path;
    static const bool registered = std::atexit(remove_written) == 0;
    (void)registered;
    const std::vector<std::string> nvrtc_options = alone_options(*it, toolkit);
    CompileOptions o = served_options(*it, path);
    std::map<std::string, std::vector<double>> ms;
    std::string source;
    std::vector<std::string> modes = {"nvrtc", "served"};
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
          t = ms_of(compiler, o, false);
        }
        if (round > 0) ms[mode].push_back(t);
      }
    }
    // Hits: the last source, looked up again (its lookup record).
    for (const char* mode : {"served"}) {
      source = original + "\n__device__ int kcache_bench_" + run_id + "_hits_" + mode + ";\n";
      std::ofstream(path, std::ios::trunc) << source;
      ms_of(compiler, o, false);
      // A lookup record keeps only stamps older than the writeback window
      // (common/stamp_trust.h, ~37 s): measured as a source that old, with a
      // window of two seconds.
      set_writeback_window_for_testing(int64_t{2} * 1000000000);
      ::sleep(3);
      ms_of(compiler, o, true);
      for (int i = 0; i < hits; ++i) ms[std::string("hit ") + mode].push_back(ms_of(compiler, o, true));
    }
    std::remove(path.c_str());
    const double base = median(ms["nvrtc"]);
    std::printf("%s (%d rounds): NVRTC alone %.1f ms; served miss %.1f ms (%.3fx); hit %.3f ms\n",
                it->name.c_str(), rounds, base, median(ms["served"]), median(ms["served"]) / base,
                median(ms["hit served"]));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace kcache::compiler

int main(int argc, char** argv) { return kcache::compiler::run(argc, argv); }
