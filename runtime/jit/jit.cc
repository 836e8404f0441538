#include "runtime/jit/jit.h"

#include <algorithm>
#include <utility>

#include "bundle/embedded.h"
#include "cache/config.h"
#include "common/error.h"
#include "common/paths.h"
#include "compiler/nvrtc/nvrtc.h"
#include "compiler/served_keys.h"
#include "runtime/device.h"
#include "runtime/image_selection.h"

namespace kcache::runtime::jit {
namespace {

bundle::ImageKind image_kind(cache::TargetKind kind) {
  return kind == cache::TargetKind::ptx ? bundle::ImageKind::ptx : bundle::ImageKind::cubin;
}

std::string source_name(const Source& source) {
  return source.name.empty() ? source.path : source.name;
}

// The arch to compile for: Options::arch, else the current device's.
Arch target_arch(const std::string& configured) {
  if (configured.empty()) {
    DeviceArch d = Device::current().arch();
    return Arch{false, d.major, d.minor, '\0'};
  }
  std::optional<Arch> a = parse_arch(configured);
  if (!a) {
    throw InvalidArgument("JIT arch \"" + configured +
                          "\" is not an arch name: give a real arch such as sm_90 (a cubin) or a "
                          "virtual one such as compute_90 (PTX), or none for the current device's");
  }
  return *a;
}

int arch_number(const Arch& a) { return a.major * 10 + a.minor; }

// The last part of a path.
std::string file_part(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// `path` absolute, from this process's folder where it is relative.
std::string absolute(const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  return compiler::compile_folder("") + "/" + path;
}

// Where NVRTC compiles the source and what it names it (jit.h says the rule):
// NVRTC searches quoted includes next to the program's name, taken from its
// working folder, so the two are chosen to put that folder where the file is.
void place(const Source& source, compiler::CompileOptions* o) {
  const std::string name = source_name(source);
  if (source.path.empty()) return;  // text only: the name from this process's folder
  const std::string folder = parent_folder(absolute(source.path));
  const std::string name_folder = has_folder(name) ? parent_folder(name) : "";
  const bool name_ends_path = !name_folder.empty() && name.front() != '/' &&
                              folder.size() > name_folder.size() &&
                              folder.compare(folder.size() - name_folder.size(),
                                             name_folder.size(), name_folder) == 0 &&
                              folder[folder.size() - name_folder.size() - 1] == '/';
  if (name_ends_path) {
    o->working_folder = folder.substr(0, folder.size() - name_folder.size() - 1);
    o->source_name = name;
  } else {
    o->working_folder = folder;
    o->source_name = file_part(name);
  }
}

}  // namespace

Jit::Jit(Options options) : options_(std::move(options)) {
  storage_ = std::make_unique<cache::Storage>(
      options_.storage ? *options_.storage : cache::storage_options_or_local_only());
  compiler_ = std::make_unique<compiler::Compiler>(compiler::find_toolkit(options_.cuda_path),
                                                   storage_.get());
}

Jit::~Jit() = default;

Compiled Jit::compile_target(const Source& source, const std::string& cubin_arch,
                             const std::string& ptx_arch) {
  compiler::CompileOptions o;
  o.source_path = source.path;
  o.source_name = source_name(source);
  place(source, &o);
  if (!source.text.empty()) o.source_text = source.text;
  if (!cubin_arch.empty()) o.archs = {cubin_arch};
  o.ptx_arch = ptx_arch;
  // Relative to this process's folder, as the caller wrote them, wherever NVRTC works.
  for (const std::string& d : source.include_dirs) o.include_dirs.push_back(absolute(d));
  o.defines = source.defines;
  o.std = source.std;
  for (const std::string& n : source.nvrtc_options) {
    // An -U keeps its place after the defines (compiler.h: CompileOptions::macros).
    if (n.size() > 2 && n.compare(0, 2, "-U") == 0) {
      o.macros.push_back(n);
    } else if (n.size() > 17 && n.compare(0, 17, "--undefine-macro=") == 0) {
      o.macros.push_back("-U" + n.substr(17));
    } else {
      o.nvrtc_options.push_back(n);
    }
  }
  o.name_expressions = source.name_expressions;
  o.lean = options_.lean;
  compiler::CompileResult r = compiler_->compile(o);
  compiler::TargetResult& t = r.targets.front();
  return Compiled{std::move(*t.entry), t.hit, false, std::move(r.warnings)};
}

Compiled Jit::compile(const Source& source) {
  Arch a = target_arch(options_.arch);
  std::string suffix = a.suffix ? std::string(1, a.suffix) : "";
  if (a.is_virtual)
    return compile_target(source, "", "compute_" + std::to_string(arch_number(a)) + suffix);

  std::string cubin = "sm_" + std::to_string(arch_number(a)) + suffix;
  bool known_unsupported;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    known_unsupported = no_cubin_.count(cubin) > 0;
  }
  if (!known_unsupported) {
    try {
      return compile_target(source, cubin, "");
    } catch (const InvalidArgument&) {
      // The precompiler refuses an arch its NVRTC does not list; anything
      // else (a bad define, a bad option) is the caller's to see.
      std::vector<int> supported = compiler::Nvrtc::open(toolkit().nvrtc.path).supported_archs();
      if (supported.empty() ||
          std::find(supported.begin(), supported.end(), arch_number(a)) != supported.end()) {
        throw;
      }
      std::lock_guard<std::mutex> lock(mutex_);
      no_cubin_.insert(cubin);
    }
  }
  // A GPU newer than this NVRTC: PTX for the highest arch it knows below the
  // device's, which the driver compiles for the device.
  std::vector<int> supported = compiler::Nvrtc::open(toolkit().nvrtc.path).supported_archs();
  int best = 0;
  for (int s : supported) {
    if (s <= arch_number(a)) best = std::max(best, s);
  }
  if (best == 0) {
    throw InvalidArgument("cannot JIT for " + cubin + ": NVRTC (" + toolkit().nvrtc.path +
                          ") supports no arch at or below it; use a toolkit that supports " +
                          cubin);
  }
  Compiled c = compile_target(source, "", "compute_" + std::to_string(best));
  c.ptx_fallback = true;
  return c;
}

Module Jit::load(const Source& source) {
  Compiled c = compile(source);
  const cache::Entry& e = c.entry;
  std::vector<std::pair<std::string, std::string>> names;
  for (const cache::LoweredName& n : e.lowered_names()) {
    names.emplace_back(n.name_expression, n.lowered_name);
  }
  return Module::load_image(
      image_kind(e.kind()), e.arch(), e.payload(),
      source_name(source) + " (JIT " + e.arch() + ", " + (c.hit ? "store hit" : "compiled") + ")",
      std::move(names));
}

Jit& default_jit() {
  // A constructor that throws leaves the static uninitialized: the next call
  // tries again (the toolkit may have been installed since).
  static Jit jit;
  return jit;
}

Module load_or_compile(const bundle::Bundle& bundle, const std::string& what,
                       const Source& fallback, Jit* jit) {
  if (find_image(bundle, Device::current().arch())) return Module::load(bundle, what);
  return (jit ? *jit : default_jit()).load(fallback);
}

Module load_embedded_or_compile(std::string_view symbol, const Source& fallback, Jit* jit) {
  const bundle::EmbeddedBundle* e = bundle::find_embedded(symbol);
  if (!e) return Module::load_embedded(symbol);  // throws NotFound listing what there is
  std::string what = "embedded bundle " + std::string(symbol);
  bundle::Bundle b =
      bundle::parse(std::string_view(reinterpret_cast<const char*>(e->data), e->size), what);
  return load_or_compile(b, what, fallback, jit);
}

}  // namespace kcache::runtime::jit
