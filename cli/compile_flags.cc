#include "cli/compile_flags.h"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>

#include "bundle/bundle.h"
#include "cli/storage_flags.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/paths.h"
#include "compiler/image/codegen.h"

namespace kcache::cli {
namespace {

void check_folder_of(const std::string& path, const std::string& flag) {
  if (!has_folder(path)) return;  // the current folder
  const std::string dir = parent_folder(path);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw IoError("output folder " + dir + " does not exist (" + flag + " " + path +
                  "); create it first");
  }
}

std::vector<std::string> arch_list(const compiler::CompileResult& result) {
  std::vector<std::string> archs;
  for (const compiler::TargetResult& t : result.targets) archs.push_back(t.target.arch);
  return archs;
}

}  // namespace

void add_compile_flags(CLI::App& app, CompileFlags& f, bool per_kernel) {
  if (per_kernel) {
    app.add_option("source", f.source,
                   "The kernel source (.cu); its path as given is the name NVRTC reports and "
                   "part of the cache key")
        ->required();
    app.add_option("--source-name", f.source_name,
                   "The name NVRTC compiles the source under, and the key uses, instead of "
                   "the path as given: NVRTC reports it and looks for quoted includes next to "
                   "it, as NVRTC given that program name does");
    app.add_option("--target", f.target,
                   "The Bazel target compiling this source (//pkg:k), named by messages such "
                   "as the hint to declare a header; never part of the key");
  }
  app.add_option("--arch", f.archs, "Real architectures, one cubin each: sm_80,sm_90,sm_90a")
      ->delimiter(',');
  app.add_option("--ptx", f.ptx, "A virtual architecture to emit PTX for: compute_90, or none");
  app.add_option("-I,--include-dir", f.include_dirs,
                 "A folder searched for #include (kcache resolves includes itself)");
  // Each occurrence as it is parsed, so -D and -U keep their order.
  app.add_option_function<std::vector<std::string>>(
         "-D,--define",
         [&f](const std::vector<std::string>& values) {
           for (const std::string& v : values) f.macros.push_back("-D" + v);
         },
         "A macro: NAME or NAME=VALUE (applied in order with -U)")
      ->trigger_on_parse();
  app.add_option_function<std::vector<std::string>>(
         "-U,--undefine",
         [&f](const std::vector<std::string>& values) {
           for (const std::string& v : values) f.macros.push_back("-U" + v);
         },
         "Undefines a macro: NAME (applied in order with -D: -U X -D X=1 defines X)")
      ->trigger_on_parse();
  app.add_option("--std", f.std, "The C++ dialect: c++17, c++20 (default: NVRTC's)");
  app.add_option("--name-expression", f.name_expressions,
                 "A __global__ function or template instance to look up by name: "
                 "'scale<float>' (its mangled name goes into the bundle)");
  app.add_option_function<std::vector<std::string>>(
         "--nvrtc-opt",
         [&f](const std::vector<std::string>& values) {
           for (const std::string& v : values) {
             // -D and -U here keep their place among -D and -U (issue 26),
             // so a rule's nvrtc_opts can order them.
             if (v.size() > 2 && (v.compare(0, 2, "-U") == 0 || v.compare(0, 2, "-D") == 0)) {
               f.macros.push_back(v);
             } else if (v.compare(0, 17, "--undefine-macro=") == 0 && v.size() > 17) {
               f.macros.push_back("-U" + v.substr(17));
             } else if (v.compare(0, 15, "--define-macro=") == 0 && v.size() > 15) {
               f.macros.push_back("-D" + v.substr(15));
             } else {
               f.nvrtc_options.push_back(v);
             }
           }
         },
         "An extra NVRTC option, written --nvrtc-opt=-lineinfo (-D and -U here are "
         "applied in order with -D and -U)")
      ->trigger_on_parse();
  if (!per_kernel) return;
  app.add_flag("--no-lean", f.no_lean,
               "Keep NVRTC's images exactly: no lean pass (which removes the template and "
               "library variables nothing references and no host can name, and assembles the "
               "cubin with nvJitLink)");
  app.add_option("-o,--output", f.output, "Where to write the bundle (.kcb)");
  app.add_option("--cc-out", f.cc_out, "Where to write C++ that embeds the bundle");
  app.add_option("--h-out", f.h_out, "Where to write the header declaring the bundle accessor");
  app.add_option("--symbol", f.symbol,
                 "The C++ name of the accessor --cc-out defines: name or ns::name");
}

void add_setup_flags(CLI::App& app, CompilerSetup& setup) {
  app.add_option("--cuda-path", setup.cuda_path,
                 "The CUDA toolkit (default: $CUDA_PATH, else /usr/local/cuda)");
  app.add_option("-j,--jobs", setup.jobs, "NVRTC compiles at once (default: one per CPU)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--no-store", setup.no_store,
               "Compile without the store: no lookups, nothing stored");
  app.add_flag("--no-default-store", setup.no_default_store,
               "Use a local store only if --dir or $KCACHE_DIR names one, never the default "
               "under $HOME (what build rules pass: the store is opt-in, and quiet when not "
               "chosen); a configured remote is still used");
}

std::unique_ptr<cache::Storage> open_storage(const GlobalOptions& global,
                                             const CompilerSetup& setup) {
  if (setup.no_store) return nullptr;
  // --dir, $KCACHE_DIR, the remote flags and kcache.conf, as every verb reads them.
  cache::StorageConfig config = storage_config(global);
  if (setup.no_default_store && !config.origins.count("dir")) {
    config.options.local_enabled = false;  // no store under $HOME; a remote may still be set
    if (!config.options.remote) return nullptr;
  }
  return std::make_unique<cache::Storage>(config.options);
}
compiler::CompileOptions to_options(const CompileFlags& f) {
  compiler::CompileOptions o;
  o.source_path = f.source;
  o.source_name = f.source_name;
  o.target_label = f.target;
  o.archs = f.archs;
  o.ptx_arch = f.ptx == "none" ? "" : f.ptx;  // as the rule's ptx = "none"
  o.include_dirs = f.include_dirs;
  o.macros = f.macros;
  o.std = f.std;
  o.nvrtc_options = f.nvrtc_options;
  o.name_expressions = f.name_expressions;
  o.lean = !f.no_lean;
  return o;
}

void check_outputs(const CompileFlags& f) {
  if ((!f.cc_out.empty() || !f.h_out.empty()) && f.symbol.empty()) {
    throw InvalidArgument("--cc-out and --h-out need --symbol NAME (the accessor's C++ name)");
  }
  if (!f.symbol.empty()) compiler::check_symbol(f.symbol);
  if (!f.output.empty()) check_folder_of(f.output, "-o");
  if (!f.cc_out.empty()) check_folder_of(f.cc_out, "--cc-out");
  if (!f.h_out.empty()) check_folder_of(f.h_out, "--h-out");
}

namespace {

// Leaves an output with the right bytes alone: on a rebuild with the same
// outputs, comparing costs less than writing and renaming over the old file
// (which makes ext4 write it back at once).
void write_if_changed(const std::string& path, const std::string& data) {
  std::optional<FileInfo> info = FileSystem::real().stat(path);
  if (info && info->size == data.size() && read_file(path) == data) return;
  write_file_atomically(path, data);
}

}  // namespace

compiler::KernelList bundle_kernels(const bundle::Bundle& b) {
  std::string_view ptx;
  for (const bundle::Image& image : b.images) {
    if (image.kind == bundle::ImageKind::ptx) {
      ptx = image.data;
      break;  // every PTX image of a bundle holds the same kernels
    }
  }
  while (!ptx.empty() && ptx.back() == '\0') ptx.remove_suffix(1);
  std::vector<std::pair<std::string, std::string>> lowered;
  for (const bundle::LoweredName& n : b.lowered_names) {
    lowered.emplace_back(std::string(n.name_expression), std::string(n.lowered_name));
  }
  return compiler::kernel_list(ptx, lowered);
}

void write_outputs(const CompileFlags& f, const compiler::CompileResult& result) {
  if (!f.output.empty()) write_if_changed(f.output, result.bundle);
  if (f.cc_out.empty() && f.h_out.empty()) return;
  compiler::EmbedInfo info;
  info.symbol = f.symbol;
  info.source_name = result.source_name;
  info.archs = arch_list(result);
  info.name_expressions = f.name_expressions;
  info.kernels = bundle_kernels(bundle::parse(result.bundle, "the bundle just compiled"));
  if (!f.cc_out.empty()) write_if_changed(f.cc_out, compiler::generate_source(result.bundle, info));
  if (!f.h_out.empty()) write_if_changed(f.h_out, compiler::generate_header(info));
}

std::vector<std::string> worker_command() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};  // no workers: targets compile one after another
  return {std::string(buf, static_cast<size_t>(n)), "__nvrtc-worker"};
}

void print_compile_error(const std::string& verb, const CompileError& e) {
  // No log: the message says it all (an undeclared header, undeclared.h).
  if (e.log().empty()) return;
  std::string log = e.log();
  if (!log.empty() && log.back() != '\n') log += '\n';
  std::fputs(log.c_str(), stderr);
  std::string options;
  for (const std::string& o : e.options()) options += " " + o;
  std::fprintf(stderr, "kcache %s: NVRTC options:%s\n", verb.c_str(), options.c_str());
}

}  // namespace kcache::cli
