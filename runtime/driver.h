// Access to the CUDA driver without linking it.
//
// libcuda.so.1 is opened with dlopen and every entry point is taken with
// cuGetProcAddress at the ABI version of the cudaTypedefs.h typedef we call it
// through (so cuMemAlloc is cuMemAlloc_v2, cuStreamDestroy is
// cuStreamDestroy_v2, and a newer driver never hands us a function whose
// signature changed). A binary that links the runtime therefore starts on a
// machine without a GPU and fails only when it first needs the driver, with a
// DriverError (result 0) that says no CUDA driver was found.
//
// Thread safety: driver() is safe to call from any thread; the table it returns
// is immutable after loading.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <cuda.h>
#include <cudaTypedefs.h>

#include <memory>
#include <string>
#include <string_view>

namespace kcache::runtime {

// The library opened when $KCACHE_LIBCUDA is not set.
constexpr const char* kDefaultDriverLibrary = "libcuda.so.1";

// One table of driver entry points. Members named after the driver function
// they hold; those marked optional are nullptr when the driver predates them.
struct Driver {
  std::string library;     // what was passed to dlopen
  int version = 0;         // cuDriverGetVersion: 13000 for CUDA 13.0
  void* handle = nullptr;  // the dlopen handle; never closed (see open_driver)

  PFN_cuGetErrorName_v6000 cuGetErrorName = nullptr;
  PFN_cuGetErrorString_v6000 cuGetErrorString = nullptr;
  PFN_cuDriverGetVersion_v2020 cuDriverGetVersion = nullptr;

  PFN_cuDeviceGet_v2000 cuDeviceGet = nullptr;
  PFN_cuDeviceGetCount_v2000 cuDeviceGetCount = nullptr;
  PFN_cuDeviceGetName_v2000 cuDeviceGetName = nullptr;
  PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain = nullptr;
  PFN_cuDevicePrimaryCtxRelease_v11000 cuDevicePrimaryCtxRelease = nullptr;
  PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent = nullptr;
  PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent = nullptr;
  PFN_cuCtxGetDevice_v2000 cuCtxGetDevice = nullptr;
  PFN_cuCtxSynchronize_v2000 cuCtxSynchronize = nullptr;
  PFN_cuCtxGetStreamPriorityRange_v5050 cuCtxGetStreamPriorityRange = nullptr;

  PFN_cuModuleLoadData_v2000 cuModuleLoadData = nullptr;
  PFN_cuModuleLoadDataEx_v2010 cuModuleLoadDataEx = nullptr;
  PFN_cuModuleUnload_v2000 cuModuleUnload = nullptr;
  PFN_cuModuleGetFunction_v2000 cuModuleGetFunction = nullptr;
  PFN_cuLibraryLoadData_v12000 cuLibraryLoadData = nullptr;      // optional (12.0)
  PFN_cuLibraryUnload_v12000 cuLibraryUnload = nullptr;          // optional (12.0)
  PFN_cuLibraryGetKernel_v12000 cuLibraryGetKernel = nullptr;    // optional (12.0)
  PFN_cuKernelGetFunction_v12000 cuKernelGetFunction = nullptr;  // optional (12.0)
  PFN_cuFuncGetAttribute_v2020 cuFuncGetAttribute = nullptr;
  PFN_cuFuncSetAttribute_v9000 cuFuncSetAttribute = nullptr;
  PFN_cuFuncGetParamInfo_v12040 cuFuncGetParamInfo = nullptr;  // optional (12.4): checked launches

  PFN_cuLaunchKernel_v4000 cuLaunchKernel = nullptr;
  PFN_cuLaunchKernelEx_v11060 cuLaunchKernelEx = nullptr;  // optional (11.6)

  PFN_cuStreamCreate_v2000 cuStreamCreate = nullptr;
  PFN_cuStreamCreateWithPriority_v5050 cuStreamCreateWithPriority = nullptr;
  PFN_cuStreamDestroy_v4000 cuStreamDestroy = nullptr;
  PFN_cuStreamQuery_v2000 cuStreamQuery = nullptr;
  PFN_cuStreamSynchronize_v2000 cuStreamSynchronize = nullptr;
  PFN_cuStreamWaitEvent_v3020 cuStreamWaitEvent = nullptr;
  PFN_cuStreamGetPriority_v5050 cuStreamGetPriority = nullptr;
  PFN_cuStreamGetFlags_v5050 cuStreamGetFlags = nullptr;

  PFN_cuEventCreate_v2000 cuEventCreate = nullptr;
  PFN_cuEventDestroy_v4000 cuEventDestroy = nullptr;
  PFN_cuEventRecord_v2000 cuEventRecord = nullptr;
  PFN_cuEventQuery_v2000 cuEventQuery = nullptr;
  PFN_cuEventSynchronize_v2000 cuEventSynchronize = nullptr;
  // 12.8's cuEventElapsedTime_v2 where the driver has it, else the original
  // (same signature).
  PFN_cuEventElapsedTime_v12080 cuEventElapsedTime = nullptr;

  PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050
      cuOccupancyMaxActiveBlocksPerMultiprocessor = nullptr;
  PFN_cuOccupancyMaxPotentialBlockSize_v6050 cuOccupancyMaxPotentialBlockSize = nullptr;
  PFN_cuOccupancyAvailableDynamicSMemPerBlock_v10020 cuOccupancyAvailableDynamicSMemPerBlock =
      nullptr;
  PFN_cuOccupancyMaxPotentialClusterSize_v11070 cuOccupancyMaxPotentialClusterSize =
      nullptr;                                                                     // optional
  PFN_cuOccupancyMaxActiveClusters_v11070 cuOccupancyMaxActiveClusters = nullptr;  // optional

  // Memory, for tests, benchmarks and callers that have no other allocator.
  PFN_cuMemAlloc_v3020 cuMemAlloc = nullptr;
  PFN_cuMemFree_v3020 cuMemFree = nullptr;
  PFN_cuMemcpyHtoD_v3020 cuMemcpyHtoD = nullptr;
  PFN_cuMemcpyDtoH_v3020 cuMemcpyDtoH = nullptr;
  PFN_cuMemsetD8_v3020 cuMemsetD8 = nullptr;

  // True when cuLibraryLoadData and friends are there (driver 12.0+).
  bool has_library_api() const noexcept {
    return cuLibraryLoadData && cuLibraryUnload && cuLibraryGetKernel && cuKernelGetFunction;
  }
};

// Opens `library` (a file name for dlopen's search, or a path), calls
// cuInit(0) and fills a table. The dlopen handle is never closed: function
// pointers into it may be held anywhere, and drivers do not support unloading.
//
// Throws DriverError:
// - result 0, "no CUDA driver found ...": the library cannot be opened (no
//   NVIDIA driver installed, or not on the loader's path);
// - result 0, "... too old ...": it lacks cuGetProcAddress (driver < CUDA 11.3)
//   or a required entry point;
// - cuInit's result (e.g. CUDA_ERROR_NO_DEVICE) when the driver is there but
//   cannot initialize.
// Tests use this directly (a library name that does not exist gives the
// no-driver error on any machine); everything else uses driver().
std::unique_ptr<Driver> open_driver(const std::string& library);

// The process-wide driver, opened on first use from $KCACHE_LIBCUDA (a name or
// path, for unusual installs and for tests) or else libcuda.so.1. A failure is
// thrown to every caller until a later call succeeds (each call retries).
const Driver& driver();

// "CUDA_ERROR_INVALID_VALUE", or "CUresult 12345" for a value the driver does
// not name. Never throws; works without a driver (names then come from a
// built-in table of the common results).
std::string result_name(CUresult result);

// Throws DriverError{result, result_name} with the message
// "<call> failed on <subject>: <NAME> (<driver's description>)[. <hint>]".
[[noreturn]] void throw_driver_error(CUresult result, std::string_view call,
                                     std::string_view subject);

// The check every wrapper does: nothing on CUDA_SUCCESS.
inline void check(CUresult result, const char* call, std::string_view subject) {
  if (__builtin_expect(result != CUDA_SUCCESS, 0)) throw_driver_error(result, call, subject);
}

}  // namespace kcache::runtime
