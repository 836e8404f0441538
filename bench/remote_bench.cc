// The remote tier against what it saves and what it competes with, in one run:
//   - a remote hit (HTTP GET from nginx on loopback, decode, checksum, key and
//     optionally HMAC check) against a local hit of the same entry and a plain
//     libcurl GET of the same object, timed operation by operation in the same
//     loop;
//   - the full remote-hit path of a build step (local miss, GET, write to the
//     local store);
//   - an upload;
//   - the NVRTC compile of a small kernel (saxpy, sm_90 cubin), which a hit
//     replaces; NVRTC is dlopened from the CUDA toolkit (no GPU needed);
//   - many parallel fetches through one Storage (threads);
//   - the same hits and parallel fetches from a grpc:// remote (the Remote
//     Execution API: GetActionResult + BatchReadBlobs) served by BuildGrid on
//     loopback, timed in the same loop as the HTTP hit from nginx.
// Reported per benchmark: p50/p90 in µs and ratios of p50s. Figures:
// docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>
#include <curl/curl.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>

#include "bench/bench_util.h"
#include "cache/remote/remote.h"
#include "cache/storage.h"
#include "tests/testing/buildgrid_server.h"
#include "tests/testing/http_servers.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tls_certificates.h"

namespace kcache::cache {
namespace {

using Clock = std::chrono::steady_clock;
using kcache::bench::percentile;
using kcache::bench::random_bytes;
using kcache::testing::NginxServer;
using kcache::testing::TempDir;

constexpr const char* kHmacKey = "bench hmac key, 32 bytes long..";

NginxServer* g_nginx = nullptr;
kcache::testing::BuildGridServer* g_buildgrid = nullptr;  // null: not installed
TempDir* g_dir = nullptr;

Entry entry_of(const std::string& name, size_t size) {
  return Entry(xxh3_128(name), TargetKind::cubin, "sm_90", 15, 1,
               random_bytes(size, xxh3_64(name)));
}

double since_us(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

std::string fresh_dir(const std::string& name) {
  static int n = 0;
  return *g_dir / (name + "-" + std::to_string(n++));
}

RemoteOptions remote_options(bool signed_objects) {
  RemoteOptions r;
  r.url = g_nginx->url("/kcache");
  if (signed_objects) {
    r.hmac_key_file = *g_dir / "hmac.key";
    kcache::testing::write_file(r.hmac_key_file, kHmacKey);
  }
  return r;
}

std::unique_ptr<Storage> local_only() {
  StorageOptions o;
  o.local_dir = fresh_dir("local");
  return std::make_unique<Storage>(o);
}

std::unique_ptr<Storage> remote_only(bool signed_objects) {
  StorageOptions o;
  o.local_enabled = false;
  o.remote = remote_options(signed_objects);
  return std::make_unique<Storage>(o);
}

std::unique_ptr<Storage> grpc_only() {
  StorageOptions o;
  o.local_enabled = false;
  RemoteOptions r;
  r.url = g_buildgrid->url();
  o.remote = r;
  return std::make_unique<Storage>(o);
}

void report(benchmark::State& state, const char* name, const std::vector<double>& us) {
  state.counters[std::string(name) + "_p50_us"] = percentile(us, 0.5);
  state.counters[std::string(name) + "_p90_us"] = percentile(us, 0.9);
}

// The floor any HTTP cache pays: a plain libcurl GET of the same bytes on a
// kept-alive connection, nothing checked.
class RawGet {
 public:
  RawGet() : h_(curl_easy_init()) {}
  ~RawGet() { curl_easy_cleanup(h_); }
  size_t get(const std::string& url) {
    body_.clear();
    curl_easy_setopt(h_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h_, CURLOPT_WRITEFUNCTION, &RawGet::on_write);
    curl_easy_setopt(h_, CURLOPT_WRITEDATA, &body_);
    curl_easy_perform(h_);
    return body_.size();
  }

 private:
  static size_t on_write(char* data, size_t size, size_t n, void* user) {
    static_cast<std::string*>(user)->append(data, size * n);
    return size * n;
  }
  CURL* h_;
  std::string body_;
};

// Args: payload bytes, signed (0/1).
void BM_RemoteHitVsLocalHit(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  const bool signed_objects = state.range(1) != 0;
  Entry e = entry_of("hit-" + std::to_string(size), size);
  auto local = local_only();
  local->put(e);
  auto remote = remote_only(signed_objects);
  remote->put(e);
  const std::string url = remote->remote()->backend().url_of(e.key());
  RawGet raw;
  std::vector<double> local_us, remote_us, raw_us;
  for (auto _ : state) {
    Clock::time_point t = Clock::now();
    auto a = local->get(e.key());
    local_us.push_back(since_us(t));
    t = Clock::now();
    auto b = remote->get(e.key());
    remote_us.push_back(since_us(t));
    t = Clock::now();
    size_t got = raw.get(url);
    raw_us.push_back(since_us(t));
    if (!a || !b || got < size) state.SkipWithError("miss");
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
  }
  report(state, "local", local_us);
  report(state, "remote", remote_us);
  report(state, "raw_http_get", raw_us);
  state.counters["remote_over_local"] = percentile(remote_us, 0.5) / percentile(local_us, 0.5);
  state.counters["remote_over_raw_get"] = percentile(remote_us, 0.5) / percentile(raw_us, 0.5);
}
BENCHMARK(BM_RemoteHitVsLocalHit)
    ->ArgNames({"bytes", "signed"})
    ->Args({4 << 10, 0})
    ->Args({200 << 10, 0})
    ->Args({200 << 10, 1})
    ->Args({1 << 20, 0})
    ->Iterations(300)
    ->Unit(benchmark::kMicrosecond);

// What a build step on a new CI machine pays: local miss, GET, verify, write
// into the local store; and the next step's local hit.
void BM_RemoteHitIntoLocalStore(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  Entry e = entry_of("into-" + std::to_string(size), size);
  remote_only(false)->put(e);
  StorageOptions o;
  o.local_dir = fresh_dir("into");
  o.remote = remote_options(false);
  Storage storage(o);
  std::vector<double> first_us, next_us;
  for (auto _ : state) {
    storage.local()->remove(e.key());
    Clock::time_point t = Clock::now();
    auto a = storage.get(e.key());
    first_us.push_back(since_us(t));
    t = Clock::now();
    auto b = storage.get(e.key());
    next_us.push_back(since_us(t));
    if (!a || !b) state.SkipWithError("miss");
  }
  report(state, "remote_then_stored", first_us);
  report(state, "then_local", next_us);
}
BENCHMARK(BM_RemoteHitIntoLocalStore)
    ->ArgName("bytes")
    ->Arg(4 << 10)
    ->Arg(200 << 10)
    ->Iterations(200)
    ->Unit(benchmark::kMicrosecond);

void BM_RemotePut(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  Entry e = entry_of("put-" + std::to_string(size), size);
  auto remote = remote_only(false);
  std::vector<double> us;
  for (auto _ : state) {
    Clock::time_point t = Clock::now();
    remote->put(e);
    us.push_back(since_us(t));
  }
  report(state, "put", us);
  if (!remote->remote_usable()) state.SkipWithError("upload failed");
}
BENCHMARK(BM_RemotePut)
    ->ArgName("bytes")
    ->Arg(4 << 10)
    ->Arg(200 << 10)
    ->Iterations(200)
    ->Unit(benchmark::kMicrosecond);

// Many fetches at once through one Storage (the precompiler's parallel
// per-arch lookups, or a prewarm), 32 entries round robin.
void BM_ParallelRemoteHits(benchmark::State& state) {
  static std::unique_ptr<Storage> shared;
  static std::vector<Hash128> keys;
  const size_t size = static_cast<size_t>(state.range(0));
  if (state.thread_index() == 0) {
    shared = remote_only(false);
    keys.clear();
    for (int k = 0; k < 32; ++k) {
      Entry e = entry_of("par-" + std::to_string(size) + "-" + std::to_string(k), size);
      shared->put(e);
      keys.push_back(e.key());
    }
  }
  // Google Benchmark starts every thread's timed loop together, after setup.
  size_t i = static_cast<size_t>(state.thread_index());
  for (auto _ : state) {
    auto got = shared->get(keys[i++ % keys.size()]);
    if (!got) state.SkipWithError("miss");
    benchmark::DoNotOptimize(got);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size));
}
BENCHMARK(BM_ParallelRemoteHits)
    ->ArgName("bytes")
    ->Arg(4 << 10)
    ->Arg(200 << 10)
    ->ThreadRange(1, 16)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// --- grpc:// (REAPI, BuildGrid) against HTTP (nginx) -----------------------------

// One hit from each tier, alternating in the same loop: GetActionResult +
// BatchReadBlobs + SHA-256 check + entry checks, against GET + entry checks.
// BuildGrid is a Python server and nginx is C: the ratio includes the
// servers' own speed, not only the protocols'.
void BM_GrpcHitVsHttpHit(benchmark::State& state) {
  if (!g_buildgrid) {
    state.SkipWithError("BuildGrid not installed (tools/install_deps.sh)");
    return;
  }
  const size_t size = static_cast<size_t>(state.range(0));
  Entry e = entry_of("grpc-hit-" + std::to_string(size), size);
  auto http = remote_only(false);
  http->put(e);
  auto grpc = grpc_only();
  grpc->put(e);
  std::vector<double> http_us, grpc_us;
  for (auto _ : state) {
    Clock::time_point t = Clock::now();
    auto a = http->get(e.key());
    http_us.push_back(since_us(t));
    t = Clock::now();
    auto b = grpc->get(e.key());
    grpc_us.push_back(since_us(t));
    if (!a || !b) state.SkipWithError("miss");
  }
  report(state, "http", http_us);
  report(state, "grpc", grpc_us);
  state.counters["grpc_over_http"] = percentile(grpc_us, 0.5) / percentile(http_us, 0.5);
}
BENCHMARK(BM_GrpcHitVsHttpHit)
    ->ArgName("bytes")
    ->Arg(4 << 10)
    ->Arg(200 << 10)
    ->Iterations(300)
    ->Unit(benchmark::kMicrosecond);

void BM_GrpcPut(benchmark::State& state) {
  if (!g_buildgrid) {
    state.SkipWithError("BuildGrid not installed (tools/install_deps.sh)");
    return;
  }
  const size_t size = static_cast<size_t>(state.range(0));
  Entry e = entry_of("grpc-put-" + std::to_string(size), size);
  auto grpc = grpc_only();
  std::vector<double> us;
  for (auto _ : state) {
    Clock::time_point t = Clock::now();
    grpc->put(e);  // FindMissingBlobs (present after the first) + UpdateActionResult
    us.push_back(since_us(t));
  }
  report(state, "put", us);
  if (!grpc->remote_usable()) state.SkipWithError("upload failed");
}
BENCHMARK(BM_GrpcPut)
    ->ArgName("bytes")
    ->Arg(4 << 10)
    ->Arg(200 << 10)
    ->Iterations(100)
    ->Unit(benchmark::kMicrosecond);

void BM_ParallelGrpcHits(benchmark::State& state) {
  static std::unique_ptr<Storage> shared;
  static std::vector<Hash128> keys;
  if (!g_buildgrid) {
    state.SkipWithError("BuildGrid not installed (tools/install_deps.sh)");
    return;
  }
  const size_t size = static_cast<size_t>(state.range(0));
  if (state.thread_index() == 0) {
    shared = grpc_only();
    keys.clear();
    for (int k = 0; k < 32; ++k) {
      Entry e = entry_of("gpar-" + std::to_string(size) + "-" + std::to_string(k), size);
      shared->put(e);
      keys.push_back(e.key());
    }
  }
  size_t i = static_cast<size_t>(state.thread_index());
  for (auto _ : state) {
    auto got = shared->get(keys[i++ % keys.size()]);
    if (!got) state.SkipWithError("miss");
    benchmark::DoNotOptimize(got);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size));
}
BENCHMARK(BM_ParallelGrpcHits)
    ->ArgName("bytes")
    ->Arg(4 << 10)
    ->Arg(200 << 10)
    ->ThreadRange(1, 16)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// --- NVRTC, dlopened (C API, stable across versions) ---------------------------

struct Nvrtc {
  using Program = void*;
  int (*create)(Program*, const char*, const char*, int, const char* const*, const char* const*);
  int (*compile)(Program, int, const char* const*);
  int (*cubin_size)(Program, size_t*);
  int (*destroy)(Program*);
  bool ok = false;
  Nvrtc() {
    std::string dir = std::getenv("CUDA_PATH") ? std::getenv("CUDA_PATH") : "/usr/local/cuda";
    void* lib = dlopen((dir + "/lib64/libnvrtc.so.13").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    create = reinterpret_cast<decltype(create)>(dlsym(lib, "nvrtcCreateProgram"));
    compile = reinterpret_cast<decltype(compile)>(dlsym(lib, "nvrtcCompileProgram"));
    cubin_size = reinterpret_cast<decltype(cubin_size)>(dlsym(lib, "nvrtcGetCUBINSize"));
    destroy = reinterpret_cast<decltype(destroy)>(dlsym(lib, "nvrtcDestroyProgram"));
    ok = create && compile && cubin_size && destroy;
  }
};

constexpr const char* kSaxpy = R"(
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
})";

void BM_NvrtcCompileSaxpy(benchmark::State& state) {
  static Nvrtc nvrtc;
  if (!nvrtc.ok) {
    state.SkipWithError("libnvrtc.so.13 not found (set CUDA_PATH)");
    return;
  }
  const char* options[] = {"-arch=sm_90"};
  std::vector<double> us;
  size_t cubin = 0;
  for (auto _ : state) {
    Clock::time_point t = Clock::now();
    Nvrtc::Program p = nullptr;
    if (nvrtc.create(&p, kSaxpy, "saxpy.cu", 0, nullptr, nullptr) != 0 ||
        nvrtc.compile(p, 1, options) != 0 || nvrtc.cubin_size(p, &cubin) != 0) {
      state.SkipWithError("NVRTC failed");
    }
    nvrtc.destroy(&p);
    us.push_back(since_us(t));
  }
  report(state, "compile", us);
  state.counters["cubin_bytes"] = static_cast<double>(cubin);
}
BENCHMARK(BM_NvrtcCompileSaxpy)->Iterations(20)->Unit(benchmark::kMillisecond);

// grpc:// against grpcs:// (EC P-256 certificates from
// tests/testing/tls_certificates.h): two BuildGrids alike but for TLS. "hit": one get on a channel
// already set up, alternating in the same loop. "first": the first get of a new client (a new
// channel: TCP, TLS handshake, GetCapabilities, then the hit), what a build step pays once.
struct TlsPair {
  TempDir certs_dir;
  kcache::testing::TlsCertificates certs;
  std::unique_ptr<kcache::testing::BuildGridServer> tls;
};

TlsPair* g_tls = nullptr;  // null: BuildGrid or openssl not installed

std::unique_ptr<Storage> grpcs_only() {
  StorageOptions o;
  o.local_enabled = false;
  RemoteOptions r;
  r.url = g_tls->tls->url();
  r.tls_ca_file = g_tls->certs.ca_cert;
  o.remote = r;
  return std::make_unique<Storage>(o);
}

void BM_GrpcsVsGrpc(benchmark::State& state) {
  if (!g_buildgrid || !g_tls) {
    state.SkipWithError("BuildGrid or openssl not installed (tools/install_deps.sh)");
    return;
  }
  const bool first = state.range(0) == 1;
  Entry e = entry_of("grpcs-" + std::to_string(state.range(0)), 4 << 10);
  grpc_only()->put(e);
  grpcs_only()->put(e);
  auto plain = grpc_only();
  auto tls = grpcs_only();
  std::vector<double> grpc_us, grpcs_us;
  for (auto _ : state) {
    if (first) {
      plain = grpc_only();
      tls = grpcs_only();
    }
    Clock::time_point t = Clock::now();
    auto a = plain->get(e.key());
    grpc_us.push_back(since_us(t));
    t = Clock::now();
    auto b = tls->get(e.key());
    grpcs_us.push_back(since_us(t));
    if (!a || !b) state.SkipWithError("miss");
  }
  report(state, "grpc", grpc_us);
  report(state, "grpcs", grpcs_us);
  state.counters["grpcs_over_grpc"] = percentile(grpcs_us, 0.5) / percentile(grpc_us, 0.5);
}
BENCHMARK(BM_GrpcsVsGrpc)
    ->ArgName("first")
    ->Arg(0)
    ->Arg(1)
    ->Iterations(100)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kcache::cache

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  kcache::testing::TempDir dir;
  kcache::testing::NginxServer nginx;
  kcache::cache::g_dir = &dir;
  kcache::cache::g_nginx = &nginx;
  std::unique_ptr<kcache::testing::BuildGridServer> buildgrid;
  if (!kcache::testing::BuildGridServer::find_bgd().empty()) {
    buildgrid = std::make_unique<kcache::testing::BuildGridServer>();
    kcache::cache::g_buildgrid = buildgrid.get();
  }
  kcache::cache::TlsPair tls;
  if (buildgrid && !kcache::testing::find_openssl().empty()) {
    tls.certs = kcache::testing::make_tls_certificates(tls.certs_dir.path());
    kcache::testing::BuildGridOptions o;
    o.tls_server_cert = tls.certs.server_cert;
    o.tls_server_key = tls.certs.server_key;
    tls.tls = std::make_unique<kcache::testing::BuildGridServer>(o);
    kcache::cache::g_tls = &tls;
  }
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
