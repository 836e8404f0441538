// `kcache bundle FILE.kcb [--extract DIR]`: what a kernel bundle holds, and
// its images as files (for cuobjdump, cuda.core or a driver call by hand).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "bundle/bundle.h"
#include "cli/command.h"
#include "cli/compile_flags.h"
#include "cli/units.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/lean_record.h"
#include "common/safe_path.h"

namespace kcache::cli {
namespace {

struct BundleArgs {
  std::string path;
  std::string extract_dir;
};

// DIR/sm_90.cubin, DIR/compute_90.ptx. The parser already holds archs to the
// arch grammar; the path is still built only from a checked plain name, so no
// bundle can make --extract write outside DIR.
std::string image_path(const std::string& dir, const bundle::Image& image) {
  return join_plain_name(
      dir, std::string(image.arch) + (image.kind == bundle::ImageKind::ptx ? ".ptx" : ".cubin"),
      "bundle image file name");
}

int inspect_bundle(const GlobalOptions& global, const BundleArgs& args) {
  std::optional<std::string> bytes = read_file(args.path);
  if (!bytes) throw NotFound("bundle " + args.path + " does not exist");
  bundle::Bundle b = bundle::parse(*bytes, args.path);
  // Read from its PTX image: no bundle field (and no format change) for them.
  const compiler::KernelList kernels = bundle_kernels(b);
  if (!args.extract_dir.empty()) {
    std::vector<std::string> paths;  // all checked before the first write
    for (const bundle::Image& image : b.images)
      paths.push_back(image_path(args.extract_dir, image));
    FileSystem::real().create_directories(args.extract_dir, 0755);
    // Each file is written beside its path and renamed over it: a symlink
    // already at the path is replaced, never written through.
    for (size_t i = 0; i < b.images.size(); ++i) write_file_atomically(paths[i], b.images[i].data);
  }
  if (global.format == "json") {
    nlohmann::json images = nlohmann::json::array();
    for (const bundle::Image& image : b.images) {
      images.push_back({{"kind", bundle::to_string(image.kind)},
                        {"arch", std::string(image.arch)},
                        {"key", std::string(image.key)},
                        {"size", image.data.size()},
                        {"lean",
                         {{"state", state_name(image.lean)},
                          {"bytes_removed", image.lean.bytes_removed},
                          {"variables_removed", image.lean.variables_removed}}}});
    }
    nlohmann::json names = nlohmann::json::object();
    for (const bundle::LoweredName& n : b.lowered_names) {
      names[std::string(n.name_expression)] = std::string(n.lowered_name);
    }
    nlohmann::json out{{"format_version", b.format_version},
                       {"source_name", std::string(b.source_name)},
                       {"compiler", std::string(b.compiler_identity)},
                       {"images", images},
                       {"lowered_names", names}};
    if (kernels.known) {
      nlohmann::json list = nlohmann::json::array();
      for (const compiler::KernelInfo& k : kernels.kernels) {
        nlohmann::json sizes = nlohmann::json::array();
        for (const compiler::PtxParam& p : k.params) sizes.push_back(p.size);
        nlohmann::json kernel{{"name", k.symbol}, {"param_sizes", sizes}};
        if (!k.name_expression.empty()) kernel["name_expression"] = k.name_expression;
        list.push_back(kernel);
      }
      out["kernels"] = list;
    } else {
      out["kernels"] = nullptr;
      out["kernels_unknown"] = kernels.why;
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("Bundle:   %s (format %u)\nSource:   %.*s\nCompiler: %.*s\n", args.path.c_str(),
              b.format_version, static_cast<int>(b.source_name.size()), b.source_name.data(),
              static_cast<int>(b.compiler_identity.size()), b.compiler_identity.data());
  for (const bundle::Image& image : b.images) {
    std::printf(
        "  %-5s  %-12.*s %10s  key %.*s  lean: %s%s\n", bundle::to_string(image.kind),
        static_cast<int>(image.arch.size()), image.arch.data(),
        format_size(image.data.size()).c_str(), static_cast<int>(image.key.size()),
        image.key.data(), describe(image.lean).c_str(),
        args.extract_dir.empty() ? "" : ("  -> " + image_path(args.extract_dir, image)).c_str());
  }
  if (!kernels.known) std::printf("Kernels:  not listed: %s\n", kernels.why.c_str());
  for (const compiler::KernelInfo& k : kernels.kernels) {
    std::string sizes;
    for (const compiler::PtxParam& p : k.params) sizes += (sizes.empty() ? "" : ", ") + std::to_string(p.size);
    std::printf("  kernel %s, parameter sizes [%s]%s\n", k.symbol.c_str(), sizes.c_str(),
                k.name_expression.empty() ? "" : ("  = " + k.name_expression).c_str());
  }
  for (const bundle::LoweredName& n : b.lowered_names) {
    std::printf("  %.*s = %.*s\n", static_cast<int>(n.name_expression.size()),
                n.name_expression.data(), static_cast<int>(n.lowered_name.size()),
                n.lowered_name.data());
  }
  return kExitOk;
}

}  // namespace

void add_bundle_command(CLI::App& app, Dispatch& dispatch) {
  auto args = std::make_shared<BundleArgs>();
  CLI::App* cmd =
      app.add_subcommand("bundle", "Show what a kernel bundle (.kcb) holds; verify its checksums");
  cmd->add_option("FILE", args->path, "The bundle, as written by `kcache compile -o`")->required();
  cmd->add_option("--extract", args->extract_dir,
                  "Also write each image to DIR as <arch>.cubin or <arch>.ptx");
  cmd->fallthrough();  // --format json may also come after the verb
  cmd->callback([args, &dispatch] {
    dispatch.verb = "bundle";
    dispatch.action = [args, &dispatch] { return inspect_bundle(dispatch.global, *args); };
  });
}

}  // namespace kcache::cli
