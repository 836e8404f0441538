// Occupancy queries for a kernel, with cuda.core's names
// (cuda.core.Kernel.occupancy), each one driver call.
//
// Occupancy is a view of a Function (a copy of its three pointers): valid
// while the Function's Module lives. Errors throw
// DriverError naming the kernel and the query.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <cuda.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "runtime/module.h"

namespace kcache::runtime {

struct MaxPotentialBlockSize {
  int min_grid_size = 0;   // blocks needed to reach the maximum occupancy
  int max_block_size = 0;  // the block size that reaches it
};

class Occupancy {
 public:
  // Blocks of `block_size` threads that fit on one multiprocessor at once.
  int max_active_blocks_per_multiprocessor(int block_size, size_t dynamic_shared_memory_size) const;

  // The block size with the highest occupancy, and the grid that fills the GPU
  // with it. block_size_limit 0 means the kernel's and the device's limit.
  MaxPotentialBlockSize max_potential_block_size(size_t dynamic_shared_memory_needed,
                                                 int block_size_limit) const;

  // The same where the dynamic shared memory depends on the block size:
  // `smem_for_block_size(int block_size) -> size_t`, any callable (a lambda
  // with captures too). The driver calls it on this thread during the call;
  // an exception it throws is rethrown here.
  template <typename F, typename = std::enable_if_t<std::is_invocable_r_v<size_t, F&, int>>>
  MaxPotentialBlockSize max_potential_block_size(F&& smem_for_block_size,
                                                 int block_size_limit) const {
    using Callable = std::remove_reference_t<F>;
    if constexpr (std::is_convertible_v<Callable, CUoccupancyB2DSize>) {
      return with_function_pointer(static_cast<CUoccupancyB2DSize>(smem_for_block_size),
                                   block_size_limit);
    } else {
      auto call = [](void* callable, int block_size) -> size_t {
        return (*static_cast<Callable*>(callable))(block_size);
      };
      return with_callable(call, &smem_for_block_size, block_size_limit);
    }
  }

  // Dynamic shared memory each block can have when `num_blocks_per_multiprocessor`
  // blocks of `block_size` threads share a multiprocessor.
  size_t available_dynamic_shared_memory_per_block(int num_blocks_per_multiprocessor,
                                                   int block_size) const;

  // The largest cluster size (blocks) this kernel can launch with under
  // `config` (its cluster field is ignored). Needs a 9.0+ GPU and driver 11.7+.
  int max_potential_cluster_size(const LaunchConfig& config) const;
  int max_potential_cluster_size(const LaunchConfig& config, StreamRef stream) const;

  // How many clusters of config.cluster blocks can be resident at once.
  int max_active_clusters(const LaunchConfig& config) const;
  int max_active_clusters(const LaunchConfig& config, StreamRef stream) const;

 private:
  friend class Function;
  explicit Occupancy(const Function& function) noexcept : function_(function) {}

  MaxPotentialBlockSize with_function_pointer(CUoccupancyB2DSize smem, int limit) const;
  MaxPotentialBlockSize with_callable(size_t (*call)(void*, int), void* callable, int limit) const;
  int cluster_query(bool max_active, const LaunchConfig& config, CUstream stream) const;

  Function function_;  // a copy: three pointers
};

}  // namespace kcache::runtime
