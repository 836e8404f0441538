// A stand-in for libcuda.so.1, for the runtime's CPU tests: it exports what
// runtime/driver.cc looks for (cuInit, cuDriverGetVersion, cuGetErrorName,
// cuGetErrorString, cuGetProcAddress_v2) and hands out entry points that record
// what they were given and answer what the test set. No GPU is involved.
//
// Tests point the runtime at it with $KCACHE_LIBCUDA and steer it through the
// fake_cuda_* functions (dlsym'd from the same handle). The driver version it
// claims comes from $FAKE_CUDA_VERSION (default 13000), so one test binary can
// play an old driver without cuLibraryLoadData.
#include <cuda.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

std::mutex g_mutex;
int g_version = 0;
int g_major = 9;
int g_minor = 0;
CUresult g_query_result = CUDA_SUCCESS;
std::map<std::string, int> g_requested;  // symbol -> version asked for
std::string g_last_image;
std::string g_last_symbol;
int g_live_modules = 0;
int g_live_libraries = 0;
int g_live_streams = 0;
int g_live_events = 0;
int g_stream_flags_created = -1;
int g_stream_priority_created = 0;

struct Launch {
  unsigned grid[3] = {};
  unsigned block[3] = {};
  unsigned shared = 0;
  CUstream stream = nullptr;
  bool ex = false;
  unsigned cluster[3] = {};
  int cooperative = 0;
  std::vector<unsigned long long> params;  // each read as 8 bytes: tests pass 8-byte args
} g_launch;

std::vector<int> g_b2d_calls;

// What cuFuncGetParamInfo describes for every kernel: (offset, size) pairs, or
// with g_params_known false, CUDA_ERROR_NOT_SUPPORTED (launches unchecked).
bool g_params_known = false;
std::vector<std::pair<size_t, size_t>> g_params;
int g_param_info_calls = 0;  // block sizes the occupancy callback was asked about

// Handles are distinct non-null addresses; nothing is dereferenced.
char g_context_storage;
char g_handle_storage[1 << 12];
size_t g_next_handle = 0;
template <typename T>
T new_handle() {
  return reinterpret_cast<T>(&g_handle_storage[(g_next_handle++) % sizeof(g_handle_storage)]);
}

int version() {
  if (g_version == 0) {
    const char* env = std::getenv("FAKE_CUDA_VERSION");
    g_version = env ? std::atoi(env) : 13000;
  }
  return g_version;
}

// --- entry points handed out by cuGetProcAddress ---------------------------

CUresult not_needed() { return CUDA_ERROR_NOT_SUPPORTED; }

CUresult device_get(CUdevice* device, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult device_get_count(int* count) {
  *count = 1;
  return CUDA_SUCCESS;
}
CUresult device_get_name(char* name, int len, CUdevice) {
  std::strncpy(name, "Fake GPU", static_cast<size_t>(len));
  return CUDA_SUCCESS;
}
CUresult device_get_attribute(int* value, CUdevice_attribute attribute, CUdevice) {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = g_major;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = g_minor;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = 132;
      return CUDA_SUCCESS;
    default:
      *value = 0;
      return CUDA_SUCCESS;
  }
}
CUresult primary_retain(CUcontext* context, CUdevice) {
  *context = reinterpret_cast<CUcontext>(&g_context_storage);
  return CUDA_SUCCESS;
}
thread_local CUcontext t_current = nullptr;
CUresult ctx_get_current(CUcontext* context) {
  *context = t_current;
  return CUDA_SUCCESS;
}
CUresult ctx_set_current(CUcontext context) {
  t_current = context;
  return CUDA_SUCCESS;
}
CUresult ctx_get_device(CUdevice* device) {
  if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult priority_range(int* least, int* greatest) {
  *least = 0;
  *greatest = -5;
  return CUDA_SUCCESS;
}

void record_image(const void* image) {
  const char* p = static_cast<const char*>(image);
  // Tests load either PTX (text) or a fake "cubin" that is text too.
  g_last_image.assign(p, std::strlen(p));
}
CUresult module_load_ex(CUmodule* module, const void* image, unsigned, CUjit_option*, void**) {
  std::lock_guard<std::mutex> lock(g_mutex);
  record_image(image);
  if (g_last_image.find("bad ptx") != std::string::npos) return CUDA_ERROR_INVALID_PTX;
  *module = new_handle<CUmodule>();
  ++g_live_modules;
  return CUDA_SUCCESS;
}
CUresult module_unload(CUmodule) {
  std::lock_guard<std::mutex> lock(g_mutex);
  --g_live_modules;
  return CUDA_SUCCESS;
}
CUresult find_symbol(const char* name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_last_symbol = name;
  // The fake image "contains" every symbol the test image text mentions.
  return g_last_image.find(name) != std::string::npos ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
CUresult module_get_function(CUfunction* function, CUmodule, const char* name) {
  CUresult r = find_symbol(name);
  if (r == CUDA_SUCCESS) *function = new_handle<CUfunction>();
  return r;
}
CUresult library_load(CUlibrary* library, const void* code, CUjit_option*, void** values,
                      unsigned count, CUlibraryOption*, void**, unsigned) {
  std::lock_guard<std::mutex> lock(g_mutex);
  record_image(code);
  if (g_last_image.find("bad ptx") != std::string::npos) {
    // As the driver does: the JIT's complaint lands in the error log buffer.
    if (count >= 2) std::strcpy(static_cast<char*>(values[0]), "ptxas fatal: fake syntax error");
    return CUDA_ERROR_INVALID_PTX;
  }
  *library = new_handle<CUlibrary>();
  ++g_live_libraries;
  return CUDA_SUCCESS;
}
CUresult library_unload(CUlibrary) {
  std::lock_guard<std::mutex> lock(g_mutex);
  --g_live_libraries;
  return CUDA_SUCCESS;
}
CUresult library_get_kernel(CUkernel* kernel, CUlibrary, const char* name) {
  CUresult r = find_symbol(name);
  if (r == CUDA_SUCCESS) *kernel = new_handle<CUkernel>();
  return r;
}
CUresult kernel_get_function(CUfunction* function, CUkernel kernel) {
  if (!t_current) return CUDA_ERROR_INVALID_CONTEXT;
  *function = reinterpret_cast<CUfunction>(kernel);
  return CUDA_SUCCESS;
}
CUresult func_get_attribute(int* value, CUfunction_attribute, CUfunction) {
  *value = 42;
  return CUDA_SUCCESS;
}
CUresult func_set_attribute(CUfunction, CUfunction_attribute, int) { return CUDA_SUCCESS; }
CUresult func_get_param_info(CUfunction, size_t index, size_t* offset, size_t* size) {
  std::lock_guard<std::mutex> lock(g_mutex);
  ++g_param_info_calls;
  if (!g_params_known) return CUDA_ERROR_NOT_SUPPORTED;
  if (index >= g_params.size()) return CUDA_ERROR_INVALID_VALUE;
  *offset = g_params[index].first;
  *size = g_params[index].second;
  return CUDA_SUCCESS;
}

void record_params(void** params) {
  g_launch.params.clear();
  for (int i = 0; params && params[i] && i < 8; ++i) {
    unsigned long long v;
    std::memcpy(&v, params[i], sizeof(v));
    g_launch.params.push_back(v);
  }
}
CUresult launch_kernel(CUfunction, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                       unsigned bz, unsigned shared, CUstream stream, void** params, void**) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_launch = Launch{};
  g_launch.grid[0] = gx, g_launch.grid[1] = gy, g_launch.grid[2] = gz;
  g_launch.block[0] = bx, g_launch.block[1] = by, g_launch.block[2] = bz;
  g_launch.shared = shared;
  g_launch.stream = stream;
  record_params(params);
  return bx * by * bz > 1024 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
CUresult launch_kernel_ex(const CUlaunchConfig* c, CUfunction, void** params, void**) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_launch = Launch{};
  g_launch.grid[0] = c->gridDimX, g_launch.grid[1] = c->gridDimY, g_launch.grid[2] = c->gridDimZ;
  g_launch.block[0] = c->blockDimX, g_launch.block[1] = c->blockDimY;
  g_launch.block[2] = c->blockDimZ;
  g_launch.shared = c->sharedMemBytes;
  g_launch.stream = c->hStream;
  g_launch.ex = true;
  for (unsigned i = 0; i < c->numAttrs; ++i) {
    const CUlaunchAttribute& a = c->attrs[i];
    if (a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      g_launch.cluster[0] = a.value.clusterDim.x;
      g_launch.cluster[1] = a.value.clusterDim.y;
      g_launch.cluster[2] = a.value.clusterDim.z;
    } else if (a.id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) {
      g_launch.cooperative = a.value.cooperative;
    }
  }
  record_params(params);
  return CUDA_SUCCESS;
}

CUresult stream_create_with_priority(CUstream* stream, unsigned flags, int priority) {
  std::lock_guard<std::mutex> lock(g_mutex);
  *stream = new_handle<CUstream>();
  ++g_live_streams;
  g_stream_flags_created = static_cast<int>(flags);
  g_stream_priority_created = priority;
  return CUDA_SUCCESS;
}
CUresult stream_destroy(CUstream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  --g_live_streams;
  return CUDA_SUCCESS;
}
CUresult query(CUstream) { return g_query_result; }
CUresult event_query(CUevent) { return g_query_result; }
CUresult stream_get_priority(CUstream, int* priority) {
  *priority = g_stream_priority_created;
  return CUDA_SUCCESS;
}
CUresult stream_get_flags(CUstream, unsigned* flags) {
  *flags = static_cast<unsigned>(g_stream_flags_created);
  return CUDA_SUCCESS;
}
CUresult ok_stream(CUstream) { return CUDA_SUCCESS; }
CUresult ok_stream_wait(CUstream, CUevent, unsigned) { return CUDA_SUCCESS; }
CUresult event_create(CUevent* event, unsigned) {
  std::lock_guard<std::mutex> lock(g_mutex);
  *event = new_handle<CUevent>();
  ++g_live_events;
  return CUDA_SUCCESS;
}
CUresult event_destroy(CUevent) {
  std::lock_guard<std::mutex> lock(g_mutex);
  --g_live_events;
  return CUDA_SUCCESS;
}
CUresult event_record(CUevent, CUstream) { return CUDA_SUCCESS; }
CUresult event_sync(CUevent) { return CUDA_SUCCESS; }
CUresult elapsed(float* ms, CUevent start, CUevent end) {
  if (start == end) return CUDA_ERROR_INVALID_HANDLE;
  if (g_query_result == CUDA_ERROR_NOT_READY) return CUDA_ERROR_NOT_READY;
  *ms = 1.5f;
  return CUDA_SUCCESS;
}

// Occupancy: simple formulas the tests can recompute.
CUresult max_active_blocks(int* blocks, CUfunction, int block_size, size_t smem) {
  if (block_size <= 0 || block_size > 1024) return CUDA_ERROR_INVALID_VALUE;
  int by_threads = 2048 / block_size;
  int by_smem = smem ? static_cast<int>(228 * 1024 / smem) : by_threads;
  *blocks = by_threads < by_smem ? by_threads : by_smem;
  return CUDA_SUCCESS;
}
CUresult max_potential_block_size(int* min_grid, int* block_size, CUfunction f,
                                  CUoccupancyB2DSize b2d, size_t smem, int limit) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_b2d_calls.clear();
  int best = 0, best_threads = 0;
  int max = limit > 0 && limit < 1024 ? limit : 1024;
  for (int bs = 32; bs <= max; bs += 32) {
    size_t need = smem;
    if (b2d) {
      g_b2d_calls.push_back(bs);
      need = b2d(bs);
    }
    int blocks = 0;
    max_active_blocks(&blocks, f, bs, need);
    if (blocks * bs >= best_threads) best_threads = blocks * bs, best = bs;
  }
  *block_size = best;
  *min_grid = best ? 132 * (best_threads / best) : 0;
  return CUDA_SUCCESS;
}
CUresult available_smem(size_t* bytes, CUfunction, int blocks, int block_size) {
  if (blocks <= 0 || block_size <= 0) return CUDA_ERROR_INVALID_VALUE;
  *bytes = 228 * 1024 / static_cast<size_t>(blocks);
  return CUDA_SUCCESS;
}
unsigned cluster_of(const CUlaunchConfig* c) {
  for (unsigned i = 0; i < c->numAttrs; ++i) {
    if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      return c->attrs[i].value.clusterDim.x * c->attrs[i].value.clusterDim.y *
             c->attrs[i].value.clusterDim.z;
    }
  }
  return 0;
}
CUresult max_potential_cluster_size(int* size, CUfunction, const CUlaunchConfig* c) {
  *size = c->blockDimX * c->blockDimY * c->blockDimZ <= 512 ? 16 : 8;
  return CUDA_SUCCESS;
}
CUresult max_active_clusters(int* clusters, CUfunction, const CUlaunchConfig* c) {
  unsigned cluster = cluster_of(c);
  if (cluster == 0) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  *clusters = static_cast<int>(132 / cluster);
  return CUDA_SUCCESS;
}

struct Entry {
  const char* name;
  int introduced;  // the CUDA version the ABI we hand out appeared in
  void* fn;
};

#define FN(f) reinterpret_cast<void*>(f)
const Entry kEntries[] = {
    {"cuDriverGetVersion", 2020, nullptr},  // filled with the export below
    {"cuDeviceGet", 2000, FN(device_get)},
    {"cuDeviceGetCount", 2000, FN(device_get_count)},
    {"cuDeviceGetName", 2000, FN(device_get_name)},
    {"cuDeviceGetAttribute", 2000, FN(device_get_attribute)},
    {"cuDevicePrimaryCtxRetain", 7000, FN(primary_retain)},
    {"cuDevicePrimaryCtxRelease", 11000, FN(not_needed)},
    {"cuCtxGetCurrent", 4000, FN(ctx_get_current)},
    {"cuCtxSetCurrent", 4000, FN(ctx_set_current)},
    {"cuCtxGetDevice", 2000, FN(ctx_get_device)},
    {"cuCtxSynchronize", 2000, FN(not_needed)},
    {"cuCtxGetStreamPriorityRange", 5050, FN(priority_range)},
    {"cuModuleLoadData", 2000, FN(not_needed)},
    {"cuModuleLoadDataEx", 2010, FN(module_load_ex)},
    {"cuModuleUnload", 2000, FN(module_unload)},
    {"cuModuleGetFunction", 2000, FN(module_get_function)},
    {"cuLibraryLoadData", 12000, FN(library_load)},
    {"cuLibraryUnload", 12000, FN(library_unload)},
    {"cuLibraryGetKernel", 12000, FN(library_get_kernel)},
    {"cuKernelGetFunction", 12000, FN(kernel_get_function)},
    {"cuFuncGetAttribute", 2020, FN(func_get_attribute)},
    {"cuFuncSetAttribute", 9000, FN(func_set_attribute)},
    {"cuFuncGetParamInfo", 12040, FN(func_get_param_info)},
    {"cuLaunchKernel", 4000, FN(launch_kernel)},
    {"cuLaunchKernelEx", 11060, FN(launch_kernel_ex)},
    {"cuStreamCreate", 2000, FN(not_needed)},
    {"cuStreamCreateWithPriority", 5050, FN(stream_create_with_priority)},
    {"cuStreamDestroy", 4000, FN(stream_destroy)},
    {"cuStreamQuery", 2000, FN(query)},
    {"cuStreamSynchronize", 2000, FN(ok_stream)},
    {"cuStreamWaitEvent", 3020, FN(ok_stream_wait)},
    {"cuStreamGetPriority", 5050, FN(stream_get_priority)},
    {"cuStreamGetFlags", 5050, FN(stream_get_flags)},
    {"cuEventCreate", 2000, FN(event_create)},
    {"cuEventDestroy", 4000, FN(event_destroy)},
    {"cuEventRecord", 2000, FN(event_record)},
    {"cuEventQuery", 2000, FN(event_query)},
    {"cuEventSynchronize", 2000, FN(event_sync)},
    {"cuEventElapsedTime", 2000, FN(elapsed)},
    {"cuOccupancyMaxActiveBlocksPerMultiprocessor", 6050, FN(max_active_blocks)},
    {"cuOccupancyMaxPotentialBlockSize", 6050, FN(max_potential_block_size)},
    {"cuOccupancyAvailableDynamicSMemPerBlock", 10020, FN(available_smem)},
    {"cuOccupancyMaxPotentialClusterSize", 11070, FN(max_potential_cluster_size)},
    {"cuOccupancyMaxActiveClusters", 11070, FN(max_active_clusters)},
    {"cuMemAlloc", 3020, FN(not_needed)},
    {"cuMemFree", 3020, FN(not_needed)},
    {"cuMemcpyHtoD", 3020, FN(not_needed)},
    {"cuMemcpyDtoH", 3020, FN(not_needed)},
    {"cuMemsetD8", 3020, FN(not_needed)},
};
#undef FN

}  // namespace

extern "C" {

CUresult cuInit(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

CUresult cuDriverGetVersion(int* driver_version) {
  *driver_version = version();
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** name) {
  switch (error) {
    case CUDA_SUCCESS:
      *name = "CUDA_SUCCESS";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE:
      *name = "CUDA_ERROR_INVALID_VALUE";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_PTX:
      *name = "CUDA_ERROR_INVALID_PTX";
      return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_READY:
      *name = "CUDA_ERROR_NOT_READY";
      return CUDA_SUCCESS;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      *name = "CUDA_ERROR_ILLEGAL_ADDRESS";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_HANDLE:
      *name = "CUDA_ERROR_INVALID_HANDLE";
      return CUDA_SUCCESS;
    default:
      *name = nullptr;
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  *text = error == CUDA_ERROR_ILLEGAL_ADDRESS ? "an illegal memory access was encountered"
                                              : "fake description";
  return CUDA_SUCCESS;
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t,
                             CUdriverProcAddressQueryResult* status) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_requested[symbol] = cuda_version;
  *pfn = nullptr;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (cuda_version > version()) return CUDA_ERROR_INVALID_VALUE;  // as the real one does
  for (const Entry& e : kEntries) {
    if (std::strcmp(e.name, symbol) != 0) continue;
    if (e.introduced > version()) return CUDA_SUCCESS;  // this driver is too old for it
    if (e.introduced > cuda_version) {
      if (status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
      return CUDA_SUCCESS;
    }
    *pfn = e.fn ? e.fn : reinterpret_cast<void*>(&cuDriverGetVersion);
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  return CUDA_SUCCESS;
}

// --- control, for tests -----------------------------------------------------

void fake_cuda_set_query_result(int result) { g_query_result = static_cast<CUresult>(result); }
void fake_cuda_set_capability(int major, int minor) { g_major = major, g_minor = minor; }
int fake_cuda_requested_version(const char* symbol) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_requested.find(symbol);
  return it == g_requested.end() ? -1 : it->second;
}
const char* fake_cuda_last_image() { return g_last_image.c_str(); }
const char* fake_cuda_last_symbol() { return g_last_symbol.c_str(); }
int fake_cuda_live_modules() { return g_live_modules + g_live_libraries; }
int fake_cuda_live_libraries() { return g_live_libraries; }
int fake_cuda_live_streams() { return g_live_streams; }
int fake_cuda_live_events() { return g_live_events; }
int fake_cuda_last_stream_flags() { return g_stream_flags_created; }
// out: grid[3], block[3], shared, ex, cluster[3], cooperative
void fake_cuda_last_launch(unsigned* out) {
  for (int i = 0; i < 3; ++i) out[i] = g_launch.grid[i], out[3 + i] = g_launch.block[i];
  out[6] = g_launch.shared;
  out[7] = g_launch.ex;
  for (int i = 0; i < 3; ++i) out[8 + i] = g_launch.cluster[i];
  out[11] = static_cast<unsigned>(g_launch.cooperative);
}
CUstream fake_cuda_last_launch_stream() { return g_launch.stream; }
int fake_cuda_last_launch_param_count() { return static_cast<int>(g_launch.params.size()); }
unsigned long long fake_cuda_last_launch_param(int i) { return g_launch.params[i]; }
// count < 0: the driver cannot describe parameters; else `count` parameters.
void fake_cuda_set_params(const size_t* offsets, const size_t* sizes, int count) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_params_known = count >= 0;
  g_params.clear();
  for (int i = 0; i < count; ++i) g_params.emplace_back(offsets[i], sizes[i]);
}
int fake_cuda_param_info_calls() { return g_param_info_calls; }
int fake_cuda_b2d_call_count() { return static_cast<int>(g_b2d_calls.size()); }

}  // extern "C"
