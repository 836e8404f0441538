// The driver's description of a launch (CUlaunchConfig) made from a
// LaunchConfig (module.h). A launch with clusters or as a cooperative kernel
// (module.cc, launch_raw) and the occupancy queries about clusters
// (occupancy.cc) must describe the same launch to the driver, so both make it
// here. Private to //runtime.
#pragma once

#include <cuda.h>

#include "runtime/module.h"

namespace kcache::runtime {

// `config`'s grid, block and dynamic shared memory, on `stream`; no
// attributes (attrs null, numAttrs 0).
inline CUlaunchConfig launch_config_of(const LaunchConfig& config, CUstream stream) {
  CUlaunchConfig c = {};
  c.gridDimX = config.grid.x;
  c.gridDimY = config.grid.y;
  c.gridDimZ = config.grid.z;
  c.blockDimX = config.block.x;
  c.blockDimY = config.block.y;
  c.blockDimZ = config.block.z;
  c.sharedMemBytes = config.shared_memory_bytes;
  c.hStream = stream;
  return c;
}

// The attribute that launches in clusters of `config.cluster` blocks (for a
// config whose cluster.x is not 0).
inline CUlaunchAttribute cluster_attribute(const LaunchConfig& config) {
  CUlaunchAttribute a = {};
  a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  a.value.clusterDim.x = config.cluster.x;
  a.value.clusterDim.y = config.cluster.y;
  a.value.clusterDim.z = config.cluster.z;
  return a;
}

}  // namespace kcache::runtime
