#include "runtime/occupancy.h"

#include <exception>

#include "common/error.h"
#include "runtime/driver.h"
#include "runtime/launch_config.h"

namespace kcache::runtime {
namespace {

// CUoccupancyB2DSize carries no user pointer, so a callable with state reaches
// the driver's callback through the calling thread (the driver calls it
// synchronously, on this thread, during cuOccupancyMaxPotentialBlockSize).
struct CallableSlot {
  size_t (*call)(void*, int) = nullptr;
  void* callable = nullptr;
  std::exception_ptr error;
};
thread_local CallableSlot* t_slot = nullptr;

size_t call_through_slot(int block_size) {
  CallableSlot* slot = t_slot;
  if (slot->error) return 0;
  try {
    return slot->call(slot->callable, block_size);
  } catch (...) {
    // Unwinding through the driver's C frames is undefined: keep it for later.
    slot->error = std::current_exception();
    return 0;
  }
}

}  // namespace

int Occupancy::max_active_blocks_per_multiprocessor(int block_size,
                                                    size_t dynamic_shared_memory_size) const {
  int blocks = 0;
  CUresult r = driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(
      &blocks, function_.handle(), block_size, dynamic_shared_memory_size);
  if (r != CUDA_SUCCESS) {
    throw_driver_error(r, "cuOccupancyMaxActiveBlocksPerMultiprocessor", function_.describe());
  }
  return blocks;
}

MaxPotentialBlockSize Occupancy::max_potential_block_size(size_t dynamic_shared_memory_needed,
                                                          int block_size_limit) const {
  MaxPotentialBlockSize result;
  CUresult r = driver().cuOccupancyMaxPotentialBlockSize(
      &result.min_grid_size, &result.max_block_size, function_.handle(), nullptr,
      dynamic_shared_memory_needed, block_size_limit);
  if (r != CUDA_SUCCESS) {
    throw_driver_error(r, "cuOccupancyMaxPotentialBlockSize", function_.describe());
  }
  return result;
}

MaxPotentialBlockSize Occupancy::with_function_pointer(CUoccupancyB2DSize smem, int limit) const {
  MaxPotentialBlockSize result;
  CUresult r = driver().cuOccupancyMaxPotentialBlockSize(
      &result.min_grid_size, &result.max_block_size, function_.handle(), smem, 0, limit);
  if (r != CUDA_SUCCESS) {
    throw_driver_error(r, "cuOccupancyMaxPotentialBlockSize", function_.describe());
  }
  return result;
}

MaxPotentialBlockSize Occupancy::with_callable(size_t (*call)(void*, int), void* callable,
                                               int limit) const {
  CallableSlot slot;
  slot.call = call;
  slot.callable = callable;
  CallableSlot* previous = t_slot;  // a callable may itself ask for occupancy
  t_slot = &slot;
  MaxPotentialBlockSize result;
  CUresult r =
      driver().cuOccupancyMaxPotentialBlockSize(&result.min_grid_size, &result.max_block_size,
                                                function_.handle(), call_through_slot, 0, limit);
  t_slot = previous;
  if (slot.error) std::rethrow_exception(slot.error);
  if (r != CUDA_SUCCESS) {
    throw_driver_error(r, "cuOccupancyMaxPotentialBlockSize", function_.describe());
  }
  return result;
}

size_t Occupancy::available_dynamic_shared_memory_per_block(int num_blocks_per_multiprocessor,
                                                            int block_size) const {
  size_t bytes = 0;
  CUresult r = driver().cuOccupancyAvailableDynamicSMemPerBlock(
      &bytes, function_.handle(), num_blocks_per_multiprocessor, block_size);
  if (r != CUDA_SUCCESS) {
    throw_driver_error(r, "cuOccupancyAvailableDynamicSMemPerBlock", function_.describe());
  }
  return bytes;
}

int Occupancy::cluster_query(bool max_active, const LaunchConfig& config, CUstream stream) const {
  const Driver& d = driver();
  const char* call =
      max_active ? "cuOccupancyMaxActiveClusters" : "cuOccupancyMaxPotentialClusterSize";
  auto fn = max_active ? d.cuOccupancyMaxActiveClusters : d.cuOccupancyMaxPotentialClusterSize;
  if (!fn) {
    throw DriverError(std::string(call) +
                          " is not in this CUDA driver (it needs 11.7 or newer): "
                          "update the NVIDIA driver to ask " +
                          function_.describe() + " about clusters",
                      0, "");
  }
  CUlaunchAttribute attribute = {};
  CUlaunchConfig c = launch_config_of(config, stream);
  if (config.cluster.x != 0) {
    attribute = cluster_attribute(config);
    c.attrs = &attribute;
    c.numAttrs = 1;
  }
  int value = 0;
  CUresult r = fn(&value, function_.handle(), &c);
  if (r != CUDA_SUCCESS) throw_driver_error(r, call, function_.describe());
  return value;
}

int Occupancy::max_potential_cluster_size(const LaunchConfig& config) const {
  return cluster_query(false, config, nullptr);
}
int Occupancy::max_potential_cluster_size(const LaunchConfig& config, StreamRef stream) const {
  return cluster_query(false, config, stream.get());
}
int Occupancy::max_active_clusters(const LaunchConfig& config) const {
  return cluster_query(true, config, nullptr);
}
int Occupancy::max_active_clusters(const LaunchConfig& config, StreamRef stream) const {
  return cluster_query(true, config, stream.get());
}

}  // namespace kcache::runtime
