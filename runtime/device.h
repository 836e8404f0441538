// Devices and the context a thread works in.
//
// kcache works in each device's primary context (the one the CUDA runtime API,
// CuPy and cuda.core share), so modules and streams made here interoperate
// with theirs. A primary context, once retained, stays retained until the
// process exits: releasing it would destroy every module and stream made in it
// under the feet of whoever still holds them.
//
// Thread safety: all functions are safe from any thread; "current" is per
// thread, as in the driver.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <cuda.h>

#include <string>

#include "runtime/image_selection.h"

namespace kcache::runtime {

class Device {
 public:
  // Device `ordinal` (0-based, as CUDA_VISIBLE_DEVICES numbers them). Throws
  // DriverError without a driver, NotFound for an ordinal the driver does not
  // have (naming how many there are).
  explicit Device(int ordinal = 0);

  // The number of devices; 0 if the driver is there but sees none. Throws
  // DriverError without a driver.
  static int count();

  // The device of the calling thread's current context (see current_context).
  static Device current();

  int ordinal() const noexcept { return ordinal_; }
  CUdevice handle() const noexcept { return device_; }
  std::string name() const;
  int attribute(CUdevice_attribute attribute) const;
  // Compute capability, for image selection.
  DeviceArch arch() const;
  int multiprocessor_count() const;

  // Retains the device's primary context (once per process) and makes it the
  // calling thread's current context. Returns it.
  CUcontext set_current() const;
  // The primary context, retained on first use; does not change the current one.
  CUcontext primary_context() const;

 private:
  int ordinal_;
  CUdevice device_;
};

// The calling thread's current context. If it has none, device 0's primary
// context is made current first, as the CUDA runtime API does on first use.
CUcontext current_context();

}  // namespace kcache::runtime
