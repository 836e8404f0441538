// Prints kcache's occupancy figures for every fixture kernel as JSON lines,
// each naming the file `kcache bundle --extract` wrote for the image kcache
// loaded on this GPU (tests/runtime/<name>_images/<arch>.cubin|ptx), so
// occupancy_vs_cuda_core.py can ask cuda.core the same questions about the
// same bytes.
//
//   occupancy_report    (run from the runfiles root, as tests are)
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bundle/bundle.h"
#include "common/error.h"
#include "common/file_system.h"
#include "runtime/device.h"
#include "runtime/module.h"
#include "runtime/occupancy.h"

namespace {

using namespace kcache::runtime;

struct Kernels {
  const char* fixture;  // tests/runtime/<fixture>.kcb
  std::vector<const char*> names;
};

const std::vector<Kernels> kKernels = {
    {"saxpy", {"saxpy", "spin"}},
    {"half_cg", {"half_dot"}},
    {"templated", {"scale<float>", "scale<int>", "scale<double>"}},
    {"cub_block",
     {"block_sort_reduce<int, 4>", "block_sort_reduce<int, 16>",
      "block_sort_reduce<unsigned int, 4>", "block_sort_reduce<unsigned int, 16>",
      "block_sort_reduce<float, 4>", "block_sort_reduce<float, 16>", "block_sort_reduce<double, 4>",
      "block_sort_reduce<double, 16>"}},
};

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

std::string to_json(const std::string& s) { return s; }
template <typename T>
std::string to_json(T value) {
  return std::to_string(value);
}

// The query's answer as JSON, or "error: <CUresult name>" when the driver
// refuses it (cuda.core should refuse the same question).
template <typename F>
std::string answer(F&& query) {
  try {
    return to_json(query());
  } catch (const kcache::DriverError& e) {
    return quoted("error: " + e.result_name());
  }
}

}  // namespace

int main(int argc, char**) {
  if (argc != 1) {
    std::fprintf(stderr, "usage: occupancy_report (from the runfiles root)\n");
    return 2;
  }
  try {
    Device device(0);
    device.set_current();
    for (const Kernels& k : kKernels) {
      std::string kcb = std::string("tests/runtime/") + k.fixture + ".kcb";
      std::string bytes = kcache::read_file(kcb).value();
      kcache::bundle::Bundle b = kcache::bundle::parse(bytes, kcb);
      Selection s = select_image(b, device.arch(), kcb);
      const kcache::bundle::Image& image = b.images[s.index];
      std::string image_path = std::string("tests/runtime/") + k.fixture + "_images/" +
                               std::string(image.arch) +
                               (image.kind == kcache::bundle::ImageKind::ptx ? ".ptx" : ".cubin");
      std::optional<std::string> extracted = kcache::read_file(image_path);
      if (!extracted || *extracted != image.data) {
        throw kcache::NotFound(image_path + (extracted ? " differs from" : " is missing for") +
                               " the image kcache loads from " + kcb +
                               " (tests/runtime:fixture_images extracts them)");
      }
      Module m = Module::load(b, kcb);
      for (const char* name : k.names) {
        Function f = m.function(name);
        Occupancy o = f.occupancy();
        std::string symbol = m.lowered(name).empty() ? name : m.lowered(name);
        std::string line =
            "{\"kcb\": " + quoted(kcb) + ", \"image\": " + quoted(image_path) +
            ", \"name\": " + quoted(name) + ", \"symbol\": " + quoted(symbol) +
            ", \"max_threads_per_block\": " +
            std::to_string(f.attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)) +
            ", \"num_regs\": " + std::to_string(f.attribute(CU_FUNC_ATTRIBUTE_NUM_REGS));
        line += ", \"max_active_blocks_per_multiprocessor\": [";
        bool first = true;
        for (int block : {32, 128, 256, 1024}) {
          for (size_t smem : {size_t{0}, size_t{4096}, size_t{40000}}) {
            line += (first ? "" : ", ") + std::string("[") + std::to_string(block) + ", " +
                    std::to_string(smem) + ", " +
                    answer([&] { return o.max_active_blocks_per_multiprocessor(block, smem); }) +
                    "]";
            first = false;
          }
        }
        line += "], \"max_potential_block_size\": [";
        first = true;
        for (auto [smem, limit] : {std::pair<size_t, int>{0, 0}, {1024, 256}, {16384, 0}}) {
          line +=
              (first ? "" : ", ") + std::string("[") + std::to_string(smem) + ", " +
              std::to_string(limit) + ", " + answer([&, smem = smem, limit = limit] {
                MaxPotentialBlockSize p = o.max_potential_block_size(smem, limit);
                return std::to_string(p.min_grid_size) + ", " + std::to_string(p.max_block_size);
              }) +
              "]";
          first = false;
        }
        line += "], \"available_dynamic_shared_memory_per_block\": [";
        first = true;
        for (auto [blocks, block] : {std::pair<int, int>{1, 128}, {2, 256}, {4, 256}}) {
          line += (first ? "" : ", ") + std::string("[") + std::to_string(blocks) + ", " +
                  std::to_string(block) + ", " + answer([&, blocks = blocks, block = block] {
                    return o.available_dynamic_shared_memory_per_block(blocks, block);
                  }) +
                  "]";
          first = false;
        }
        line += "]";
        if (device.arch().major >= 9) {
          // grid 32 blocks = 16 clusters of 2: the same launch whether a
          // reader counts the grid in blocks (the driver) or clusters.
          LaunchConfig config;
          config.grid = 32;
          config.block = 128;
          line += ", \"max_potential_cluster_size\": [32, 128, " +
                  answer([&] { return o.max_potential_cluster_size(config); }) + "]";
          config.cluster = {2, 1, 1};
          line += ", \"max_active_clusters\": [32, 128, 2, " +
                  answer([&] { return o.max_active_clusters(config); }) + "]";
        }
        std::printf("%s}\n", line.c_str());
      }
    }
  } catch (const kcache::Error& e) {
    std::fprintf(stderr, "occupancy_report: %s\n", e.what());
    return 1;
  }
  return 0;
}
