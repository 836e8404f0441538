// The store's hot paths against the floor they cannot beat: a get-hit against a
// plain open/read/close of the same bytes, timed operation by operation in the
// same loop so that both see the same cache and CPU state. Reported per
// benchmark: p50/p90 of each and the ratio of the p50s. Figures:
// docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "bench/bench_util.h"
#include "cache/format/key.h"
#include "cache/local/store.h"

namespace kcache::cache {
namespace {

using bench::Clock;
using bench::percentile;
using bench::plain_read;
using bench::random_bytes;
using bench::since_ns;
constexpr int kKeys = 32;

Hash128 key_of(int k) { return xxh3_128("bench-" + std::to_string(k)); }

// A store holding kKeys entries of `size` payload bytes, plus plain files of
// the same encoded bytes for the baseline.
struct Populated {
  std::string dir;
  std::vector<std::string> plain_files;
  explicit Populated(size_t size) : dir(bench::make_temp_dir()) {
    auto store = Store::open(dir + "/store");
    for (int k = 0; k < kKeys; ++k) {
      Entry e(key_of(k), TargetKind::cubin, "sm_90", 1000, 1, random_bytes(size, k));
      store->put(e);
      plain_files.push_back(dir + "/plain-" + std::to_string(k));
      write_file_atomically(plain_files.back(), e.encoded());
    }
  }
  ~Populated() { bench::remove_tree(dir); }
};

void BM_ComputeKey(benchmark::State& state) {
  CompileRequest r;
  r.compiler_identity = "nvrtc 13.0 toolkit 13.0";
  r.arch = "sm_90";
  r.options = {"-std=c++17", "-DN=4", "--use_fast_math"};
  r.source_name = "kernel.cu";
  r.source = random_bytes(static_cast<size_t>(state.range(0)), 1);
  r.headers = {{"a.cuh", random_bytes(2000, 2)}, {"b.cuh", random_bytes(2000, 3)}};
  for (auto _ : state) benchmark::DoNotOptimize(compute_key(r));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ComputeKey)->Arg(4 << 10)->Arg(200 << 10);

// Each iteration: one plain read and one get-hit of a different key.
void BM_GetHitVsPlainRead(benchmark::State& state) {
  Populated populated(static_cast<size_t>(state.range(0)));
  auto store = Store::open(populated.dir + "/store");
  std::vector<double> get_ns, read_ns;
  int k = 0;
  for (auto _ : state) {
    const int key = k++ % kKeys;
    auto t0 = Clock::now();
    std::string plain = plain_read(populated.plain_files[static_cast<size_t>(key)]);
    read_ns.push_back(since_ns(t0));
    auto t1 = Clock::now();
    std::optional<Entry> hit = store->get(key_of(key));
    get_ns.push_back(since_ns(t1));
    if (!hit || hit->encoded().size() != plain.size()) state.SkipWithError("wrong hit");
    benchmark::DoNotOptimize(hit->payload().data());
  }
  double get_p50 = percentile(get_ns, 0.5), read_p50 = percentile(read_ns, 0.5);
  state.counters["get_p50_us"] = get_p50 / 1000;
  state.counters["get_p90_us"] = percentile(get_ns, 0.9) / 1000;
  state.counters["read_p50_us"] = read_p50 / 1000;
  state.counters["get_over_read"] = get_p50 / read_p50;
}
BENCHMARK(BM_GetHitVsPlainRead)->Arg(4 << 10)->Arg(200 << 10)->Arg(1 << 20);

void BM_Put(benchmark::State& state) {
  const std::string dir = bench::make_temp_dir();
  {
    auto store = Store::open(dir + "/store");
    std::string payload = random_bytes(static_cast<size_t>(state.range(0)), 9);
    std::vector<double> put_ns;
    int k = 0;
    for (auto _ : state) {
      Entry e(key_of(k++), TargetKind::cubin, "sm_90", 1000, 1, payload);
      auto t0 = Clock::now();
      store->put(e);
      put_ns.push_back(since_ns(t0));
    }
    state.counters["put_p50_us"] = percentile(put_ns, 0.5) / 1000;
    state.counters["put_p90_us"] = percentile(put_ns, 0.9) / 1000;
  }
  bench::remove_tree(dir);
}
BENCHMARK(BM_Put)->Arg(4 << 10)->Arg(200 << 10);

// N processes doing get-hits on one store at once (Bazel's parallel actions).
// Reports throughput over all processes and the median per-get latency.
void BM_GetHitProcesses(benchmark::State& state) {
  const int processes = static_cast<int>(state.range(0));
  constexpr int kGetsPerProcess = 2000;
  Populated populated(200 << 10);
  for (auto _ : state) {
    int pipes[2];
    if (pipe(pipes) != 0) std::abort();
    auto start = Clock::now();
    for (int p = 0; p < processes; ++p) {
      if (fork() == 0) {
        auto store = Store::open(populated.dir + "/store");
        std::vector<double> ns;
        for (int i = 0; i < kGetsPerProcess; ++i) {
          auto t0 = Clock::now();
          std::optional<Entry> hit = store->get(key_of((i + p) % kKeys));
          ns.push_back(since_ns(t0));
          if (!hit) _exit(1);
        }
        double p50 = percentile(ns, 0.5);
        if (write(pipes[1], &p50, sizeof p50) != sizeof p50) _exit(2);
        store.reset();
        _exit(0);
      }
    }
    close(pipes[1]);
    std::vector<double> p50s;
    double v;
    while (read(pipes[0], &v, sizeof v) == sizeof v) p50s.push_back(v);
    close(pipes[0]);
    int failures = 0;
    for (int p = 0; p < processes; ++p) {
      int status;
      wait(&status);
      failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    double seconds = since_ns(start) / 1e9;
    state.SetIterationTime(seconds);
    if (failures) state.SkipWithError("a worker failed");
    state.counters["gets_per_s"] = processes * kGetsPerProcess / seconds;
    state.counters["get_p50_us"] = percentile(p50s, 0.5) / 1000;
  }
}
BENCHMARK(BM_GetHitProcesses)->Arg(1)->Arg(8)->UseManualTime()->Iterations(3);

}  // namespace
}  // namespace kcache::cache

BENCHMARK_MAIN();
