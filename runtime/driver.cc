#include "runtime/driver.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>

#include "common/environment.h"
#include "common/error.h"

namespace kcache::runtime {
namespace {

// Set once the process-wide driver has loaded, so result_name can ask it for
// names without recursing into driver() (which may be what is failing).
std::atomic<const Driver*> g_process_driver{nullptr};

// Names for the results a user is most likely to meet, for when no driver is
// loaded to ask (and for tests on machines without one).
const char* builtin_result_name(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS:
      return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE:
      return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_DEINITIALIZED:
      return "CUDA_ERROR_DEINITIALIZED";
    case CUDA_ERROR_NO_DEVICE:
      return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE:
      return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE:
      return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT:
      return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
      return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case CUDA_ERROR_INVALID_PTX:
      return "CUDA_ERROR_INVALID_PTX";
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case CUDA_ERROR_INVALID_HANDLE:
      return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND:
      return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY:
      return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
      return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case CUDA_ERROR_LAUNCH_FAILED:
      return "CUDA_ERROR_LAUNCH_FAILED";
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
      return "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE";
    case CUDA_ERROR_NOT_SUPPORTED:
      return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case CUDA_ERROR_STUB_LIBRARY:
      return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_UNKNOWN:
      return "CUDA_ERROR_UNKNOWN";
    default:
      return nullptr;
  }
}

// What to do about the results whose cause is not obvious from the name.
const char* hint_for(CUresult result) {
  switch (result) {
    case CUDA_ERROR_NO_DEVICE:
      return "the driver sees no CUDA GPU: check nvidia-smi and CUDA_VISIBLE_DEVICES";
    case CUDA_ERROR_STUB_LIBRARY:
      return "this libcuda is the CUDA toolkit's stub (lib/stubs/libcuda.so, for linking only), not "
             "a driver: install the NVIDIA driver, and take the stubs folder out of "
             "LD_LIBRARY_PATH (or KCACHE_LIBCUDA)";
    case CUDA_ERROR_INVALID_CONTEXT:
      return "no usable CUDA context is current on this thread: call Device::set_current() first";
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
      return "the image has no code for this GPU: rebuild the bundle for its arch or with a PTX "
             "target";
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return "the PTX was made by a newer CUDA toolkit than this driver supports: update the "
             "NVIDIA driver or ship a cubin for this GPU";
    case CUDA_ERROR_NOT_FOUND:
      return "no such symbol in the module: use the extern \"C\" name, the mangled name, or a "
             "name expression the bundle was compiled with";
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
      return "too many threads, registers or too much shared memory for this launch: size it "
             "with occupancy()";
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
      return "a cooperative grid must fit on the GPU at once: at most "
             "max_active_blocks_per_multiprocessor x multiprocessor count blocks";
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
      return "a kernel faulted and the context is no longer usable; run under compute-sanitizer "
             "to find the access";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return "the loaded libcuda does not match the kernel driver: reinstall the NVIDIA driver "
             "or reboot after an update";
    default:
      return nullptr;
  }
}

[[noreturn]] void throw_no_driver(const std::string& library, const std::string& why) {
  throw DriverError("no CUDA driver found: could not load " + library + " (" + why +
                        "). Install the NVIDIA driver (it provides libcuda.so.1) or run on a "
                        "machine with an NVIDIA GPU; if the driver is installed outside the "
                        "loader's path, set KCACHE_LIBCUDA to the library's full path",
                    0, "");
}

std::string cuda_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

class Resolver {
 public:
  Resolver(Driver& d, PFN_cuGetProcAddress_v12000 v2, PFN_cuGetProcAddress_v11030 v1)
      : d_(d), v2_(v2), v1_(v1) {}

  // Fills `slot` with `name` at ABI `version` (the suffix of its PFN typedef).
  template <typename Fn>
  void required(Fn& slot, const char* name, int version) {
    slot = reinterpret_cast<Fn>(lookup(name, version));
    if (!slot) {
      throw DriverError("the CUDA driver " + d_.library + " (CUDA " +
                            cuda_version_string(d_.version) + ") lacks " + name + " as of CUDA " +
                            cuda_version_string(version) +
                            ", which kcache needs: update the NVIDIA driver",
                        0, "");
    }
  }

  template <typename Fn>
  void optional(Fn& slot, const char* name, int version) {
    slot = reinterpret_cast<Fn>(lookup(name, version));
  }

 private:
  void* lookup(const char* name, int version) {
    // Asking for a version above the driver's is an error, not a miss.
    if (version > d_.version) return nullptr;
    void* fn = nullptr;
    // Legacy default-stream semantics whatever macros the caller compiled with:
    // we always pass explicit streams.
    const cuuint64_t flags = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    if (v2_) {
      CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      if (v2_(name, &fn, version, flags, &status) != CUDA_SUCCESS ||
          status != CU_GET_PROC_ADDRESS_SUCCESS) {
        return nullptr;
      }
    } else if (v1_(name, &fn, version, flags) != CUDA_SUCCESS) {
      return nullptr;
    }
    return fn;
  }

  Driver& d_;
  PFN_cuGetProcAddress_v12000 v2_;
  PFN_cuGetProcAddress_v11030 v1_;
};

}  // namespace

std::unique_ptr<Driver> open_driver(const std::string& library) {
  auto d = std::make_unique<Driver>();
  d->library = library;
  d->handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!d->handle) {
    const char* why = dlerror();
    throw_no_driver(library, why ? why : "dlopen failed");
  }

  // These few are plain exports in every driver since long before
  // cuGetProcAddress, and are needed before it can be used.
  auto get_proc_v2 =
      reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(d->handle, "cuGetProcAddress_v2"));
  auto get_proc_v1 =
      reinterpret_cast<PFN_cuGetProcAddress_v11030>(dlsym(d->handle, "cuGetProcAddress"));
  auto get_version =
      reinterpret_cast<PFN_cuDriverGetVersion_v2020>(dlsym(d->handle, "cuDriverGetVersion"));
  auto init = reinterpret_cast<PFN_cuInit_v2000>(dlsym(d->handle, "cuInit"));
  d->cuGetErrorName =
      reinterpret_cast<PFN_cuGetErrorName_v6000>(dlsym(d->handle, "cuGetErrorName"));
  d->cuGetErrorString =
      reinterpret_cast<PFN_cuGetErrorString_v6000>(dlsym(d->handle, "cuGetErrorString"));
  if (!init || !get_version || !d->cuGetErrorName || !d->cuGetErrorString) {
    throw_no_driver(library, "it does not export cuInit: not a CUDA driver library");
  }
  if (!get_proc_v2 && !get_proc_v1) {
    throw DriverError("the CUDA driver " + library +
                          " is too old: it lacks cuGetProcAddress (CUDA 11.3). Update the NVIDIA "
                          "driver",
                      0, "");
  }
  if (get_version(&d->version) != CUDA_SUCCESS) d->version = 0;

  CUresult init_result = init(0);
  if (init_result != CUDA_SUCCESS) {
    const char* name = nullptr;
    const char* text = nullptr;
    d->cuGetErrorName(init_result, &name);
    d->cuGetErrorString(init_result, &text);
    std::string message = "cuInit failed on " + library + " (CUDA " +
                          cuda_version_string(d->version) +
                          "): " + (name ? name : result_name(init_result)) +
                          (text ? " (" + std::string(text) + ")" : std::string());
    if (const char* hint = hint_for(init_result)) message += ". " + std::string(hint);
    throw DriverError(message, static_cast<int>(init_result),
                      name ? name : result_name(init_result));
  }

  Resolver r(*d, get_proc_v2, get_proc_v1);
  r.required(d->cuDriverGetVersion, "cuDriverGetVersion", 2020);
  r.required(d->cuDeviceGet, "cuDeviceGet", 2000);
  r.required(d->cuDeviceGetCount, "cuDeviceGetCount", 2000);
  r.required(d->cuDeviceGetName, "cuDeviceGetName", 2000);
  r.required(d->cuDeviceGetAttribute, "cuDeviceGetAttribute", 2000);
  r.required(d->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000);
  r.required(d->cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", 11000);
  r.required(d->cuCtxGetCurrent, "cuCtxGetCurrent", 4000);
  r.required(d->cuCtxSetCurrent, "cuCtxSetCurrent", 4000);
  r.required(d->cuCtxGetDevice, "cuCtxGetDevice", 2000);
  r.required(d->cuCtxSynchronize, "cuCtxSynchronize", 2000);
  r.required(d->cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange", 5050);

  r.required(d->cuModuleLoadData, "cuModuleLoadData", 2000);
  r.required(d->cuModuleLoadDataEx, "cuModuleLoadDataEx", 2010);
  r.required(d->cuModuleUnload, "cuModuleUnload", 2000);
  r.required(d->cuModuleGetFunction, "cuModuleGetFunction", 2000);
  r.optional(d->cuLibraryLoadData, "cuLibraryLoadData", 12000);
  r.optional(d->cuLibraryUnload, "cuLibraryUnload", 12000);
  r.optional(d->cuLibraryGetKernel, "cuLibraryGetKernel", 12000);
  r.optional(d->cuKernelGetFunction, "cuKernelGetFunction", 12000);
  r.required(d->cuFuncGetAttribute, "cuFuncGetAttribute", 2020);
  r.required(d->cuFuncSetAttribute, "cuFuncSetAttribute", 9000);

  r.required(d->cuLaunchKernel, "cuLaunchKernel", 4000);
  r.optional(d->cuLaunchKernelEx, "cuLaunchKernelEx", 11060);
  r.optional(d->cuFuncGetParamInfo, "cuFuncGetParamInfo", 12040);

  r.required(d->cuStreamCreate, "cuStreamCreate", 2000);
  r.required(d->cuStreamCreateWithPriority, "cuStreamCreateWithPriority", 5050);
  r.required(d->cuStreamDestroy, "cuStreamDestroy", 4000);
  r.required(d->cuStreamQuery, "cuStreamQuery", 2000);
  r.required(d->cuStreamSynchronize, "cuStreamSynchronize", 2000);
  r.required(d->cuStreamWaitEvent, "cuStreamWaitEvent", 3020);
  r.required(d->cuStreamGetPriority, "cuStreamGetPriority", 5050);
  r.required(d->cuStreamGetFlags, "cuStreamGetFlags", 5050);

  r.required(d->cuEventCreate, "cuEventCreate", 2000);
  r.required(d->cuEventDestroy, "cuEventDestroy", 4000);
  r.required(d->cuEventRecord, "cuEventRecord", 2000);
  r.required(d->cuEventQuery, "cuEventQuery", 2000);
  r.required(d->cuEventSynchronize, "cuEventSynchronize", 2000);
  r.optional(d->cuEventElapsedTime, "cuEventElapsedTime", 12080);
  if (!d->cuEventElapsedTime) r.required(d->cuEventElapsedTime, "cuEventElapsedTime", 2000);

  r.required(d->cuOccupancyMaxActiveBlocksPerMultiprocessor,
             "cuOccupancyMaxActiveBlocksPerMultiprocessor", 6050);
  r.required(d->cuOccupancyMaxPotentialBlockSize, "cuOccupancyMaxPotentialBlockSize", 6050);
  r.required(d->cuOccupancyAvailableDynamicSMemPerBlock, "cuOccupancyAvailableDynamicSMemPerBlock",
             10020);
  r.optional(d->cuOccupancyMaxPotentialClusterSize, "cuOccupancyMaxPotentialClusterSize", 11070);
  r.optional(d->cuOccupancyMaxActiveClusters, "cuOccupancyMaxActiveClusters", 11070);

  r.required(d->cuMemAlloc, "cuMemAlloc", 3020);
  r.required(d->cuMemFree, "cuMemFree", 3020);
  r.required(d->cuMemcpyHtoD, "cuMemcpyHtoD", 3020);
  r.required(d->cuMemcpyDtoH, "cuMemcpyDtoH", 3020);
  r.required(d->cuMemsetD8, "cuMemsetD8", 3020);
  return d;
}

const Driver& driver() {
  // A throwing initializer leaves the static uninitialized, so the next call
  // tries again (a driver installed meanwhile, or a changed $KCACHE_LIBCUDA).
  static const Driver* const d = [] {
    const char* library = env::value(env::Var::kcache_libcuda);
    const Driver* loaded = open_driver(library ? library : kDefaultDriverLibrary).release();
    g_process_driver.store(loaded, std::memory_order_release);
    return loaded;
  }();
  return *d;
}

std::string result_name(CUresult result) {
  if (const Driver* d = g_process_driver.load(std::memory_order_acquire)) {
    const char* name = nullptr;
    if (d->cuGetErrorName(result, &name) == CUDA_SUCCESS && name) return name;
  }
  if (const char* name = builtin_result_name(result)) return name;
  return "CUresult " + std::to_string(static_cast<int>(result));
}

void throw_driver_error(CUresult result, std::string_view call, std::string_view subject) {
  std::string name = result_name(result);
  std::string message = std::string(call) + " failed";
  if (!subject.empty()) message += " on " + std::string(subject);
  message += ": " + name;
  if (const Driver* d = g_process_driver.load(std::memory_order_acquire)) {
    const char* text = nullptr;
    if (d->cuGetErrorString(result, &text) == CUDA_SUCCESS && text) {
      message += " (" + std::string(text) + ")";
    }
  }
  if (const char* hint = hint_for(result)) message += ". " + std::string(hint);
  throw DriverError(message, static_cast<int>(result), name);
}

}  // namespace kcache::runtime
