#include "runtime/device.h"

#include <mutex>
#include <unordered_map>

#include "common/error.h"
#include "runtime/driver.h"

namespace kcache::runtime {
namespace {

std::string device_subject(int ordinal) { return "device " + std::to_string(ordinal); }

}  // namespace

Device::Device(int ordinal) : ordinal_(ordinal), device_(0) {
  const Driver& d = driver();
  int n = 0;
  check(d.cuDeviceGetCount(&n), "cuDeviceGetCount", "the driver");
  if (ordinal < 0 || ordinal >= n) {
    throw NotFound("no CUDA device " + std::to_string(ordinal) + ": the driver sees " +
                   std::to_string(n) +
                   " device(s) (numbered from 0; CUDA_VISIBLE_DEVICES limits which)");
  }
  check(d.cuDeviceGet(&device_, ordinal), "cuDeviceGet", device_subject(ordinal));
}

int Device::count() {
  int n = 0;
  check(driver().cuDeviceGetCount(&n), "cuDeviceGetCount", "the driver");
  return n;
}

Device Device::current() {
  current_context();
  CUdevice device = 0;
  check(driver().cuCtxGetDevice(&device), "cuCtxGetDevice", "the current context");
  // CUdevice values are ordinals in every driver so far; Device checks it.
  return Device(static_cast<int>(device));
}

std::string Device::name() const {
  char buffer[256] = {};
  check(driver().cuDeviceGetName(buffer, sizeof(buffer) - 1, device_), "cuDeviceGetName",
        device_subject(ordinal_));
  return buffer;
}

int Device::attribute(CUdevice_attribute attribute) const {
  int value = 0;
  check(driver().cuDeviceGetAttribute(&value, attribute, device_), "cuDeviceGetAttribute",
        device_subject(ordinal_));
  return value;
}

DeviceArch Device::arch() const {
  DeviceArch arch;
  arch.major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  arch.minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  return arch;
}

int Device::multiprocessor_count() const {
  return attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
}

CUcontext Device::primary_context() const {
  // One retain per device per process; never released (see the header).
  static std::mutex mutex;
  static std::unordered_map<int, CUcontext> retained;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = retained.find(ordinal_);
  if (it != retained.end()) return it->second;
  CUcontext context = nullptr;
  check(driver().cuDevicePrimaryCtxRetain(&context, device_), "cuDevicePrimaryCtxRetain",
        device_subject(ordinal_));
  retained.emplace(ordinal_, context);
  return context;
}

CUcontext Device::set_current() const {
  CUcontext context = primary_context();
  check(driver().cuCtxSetCurrent(context), "cuCtxSetCurrent", device_subject(ordinal_));
  return context;
}

CUcontext current_context() {
  CUcontext context = nullptr;
  check(driver().cuCtxGetCurrent(&context), "cuCtxGetCurrent", "the calling thread");
  if (context) return context;
  return Device(0).set_current();
}

}  // namespace kcache::runtime
