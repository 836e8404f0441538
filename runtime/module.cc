#include "runtime/module.h"

#include <cstdint>
#include <mutex>
#include <map>

#include "bundle/embedded.h"
#include "common/error.h"
#include "common/file_system.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/launch_config.h"
#include "runtime/log.h"
#include "runtime/occupancy.h"

namespace kcache::runtime {

struct Module::State {
  std::string name;
  bundle::ImageKind kind = bundle::ImageKind::cubin;
  std::string arch;
  Match match = Match::exact_cubin;
  CUcontext context = nullptr;
  CUlibrary library = nullptr;  // one of these two is set
  CUmodule module = nullptr;
  std::vector<std::pair<std::string, std::string>> lowered_names;
  // Names and parameters Functions point to: a node-based map keeps their
  // addresses stable.
  mutable std::mutex names_mutex;
  mutable std::map<std::string, KernelParams, std::less<>> names;
};

namespace {

// Room for the driver JIT's error log when PTX does not compile.
constexpr size_t kJitLogSize = 8192;

DeviceArch current_device_arch() {
  current_context();
  const Driver& d = driver();
  CUdevice device = 0;
  check(d.cuCtxGetDevice(&device), "cuCtxGetDevice", "the current context");
  DeviceArch arch;
  check(d.cuDeviceGetAttribute(&arch.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
        "cuDeviceGetAttribute", "the current device");
  check(d.cuDeviceGetAttribute(&arch.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
        "cuDeviceGetAttribute", "the current device");
  return arch;
}

std::vector<std::pair<std::string, std::string>> copy_lowered_names(const bundle::Bundle& b) {
  std::vector<std::pair<std::string, std::string>> names;
  names.reserve(b.lowered_names.size());
  for (const bundle::LoweredName& n : b.lowered_names) {
    names.emplace_back(n.name_expression, n.lowered_name);
  }
  return names;
}

// The driver's description of a kernel's parameters: cuFuncGetParamInfo
// answers CUDA_ERROR_INVALID_VALUE for the first index past the last. Unknown
// where the driver predates it or does not answer (then launches go unchecked).
KernelParams read_params(const Driver& d, CUfunction function) {
  KernelParams out;
  if (!d.cuFuncGetParamInfo) return out;
  // A kernel's parameters fit in 32,764 bytes (CUDA 12.1+), so at most that many.
  constexpr size_t kMaxParams = 32764;
  for (size_t i = 0; i < kMaxParams; ++i) {
    KernelParams::Param p;
    CUresult r = d.cuFuncGetParamInfo(function, i, &p.offset, &p.size);
    if (r == CUDA_ERROR_INVALID_VALUE) break;
    if (r != CUDA_SUCCESS) return KernelParams{};
    out.params.push_back(p);
  }
  out.known = true;
  return out;
}

}  // namespace

Module::Module(std::unique_ptr<State> state) : state_(std::move(state)) {}
Module::Module(Module&&) noexcept = default;
Module& Module::operator=(Module&& other) noexcept {
  if (this != &other) {
    Module old(std::move(*this));
    state_ = std::move(other.state_);
  }
  return *this;
}

Module::~Module() {
  if (!state_) return;
  const Driver& d = driver();  // loaded: this module exists
  if (state_->library) {
    detail::log_failure(d.cuLibraryUnload(state_->library), "cuLibraryUnload", state_->name);
  } else if (state_->module) {
    detail::log_failure(d.cuModuleUnload(state_->module), "cuModuleUnload", state_->name);
  }
}

Module Module::load(const bundle::Bundle& bundle, const std::string& what) {
  Selection selection = select_image(bundle, current_device_arch(), what);
  const bundle::Image& image = bundle.images[selection.index];
  Module m = load_image(image.kind, image.arch, image.data, what, copy_lowered_names(bundle));
  m.state_->match = selection.match;
  return m;
}

Module Module::load_bytes(std::string_view bytes, const std::string& what) {
  bundle::Bundle bundle = bundle::parse(bytes, what);  // before any driver call
  return load(bundle, what);
}

Module Module::load_file(const std::string& path) {
  std::optional<std::string> bytes = read_file(path);
  if (!bytes) {
    throw IoError("cannot load kernel bundle " + path +
                  ": no such file (check the path, or the data dependency that should ship it)");
  }
  return load_bytes(*bytes, path);
}

Module Module::load_embedded(std::string_view symbol) {
  const bundle::EmbeddedBundle* embedded = bundle::find_embedded(symbol);
  if (!embedded) {
    std::string known;
    for (const bundle::EmbeddedBundle& b : bundle::embedded_bundles()) {
      known += known.empty() ? "" : ", ";
      known += b.symbol;
    }
    throw NotFound("no embedded bundle " + std::string(symbol) + " in this binary (it has " +
                   (known.empty() ? std::string("none") : known) +
                   "): link the cuda_kernel target that defines it");
  }
  std::string what = "embedded bundle " + std::string(embedded->symbol);
  return load_bytes(std::string_view(reinterpret_cast<const char*>(embedded->data), embedded->size),
                    what);
}

Module Module::load_image(bundle::ImageKind kind, std::string_view arch, std::string_view data,
                          const std::string& what,
                          std::vector<std::pair<std::string, std::string>> lowered_names) {
  const Driver& d = driver();
  auto state = std::make_unique<State>();
  state->name = what;
  state->kind = kind;
  state->arch = std::string(arch);
  state->lowered_names = std::move(lowered_names);
  state->context = current_context();

  // The driver reads PTX up to its NUL and a cubin from a pointer it may
  // expect aligned. Bundle views are both; anything else is copied once.
  std::string copy;
  const void* image = data.data();
  bool terminated_and_aligned = false;
  if (kind == bundle::ImageKind::cubin) {
    terminated_and_aligned =
        reinterpret_cast<uintptr_t>(data.data()) % bundle::kImageAlignment == 0;
  }
  if (!terminated_and_aligned) {
    copy.reserve(data.size() + bundle::kImageAlignment);
    copy.assign(data.data(), data.size());
    image = copy.c_str();  // NUL-terminated; std::string's buffer is 16-aligned on glibc
  }

  char log[kJitLogSize] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof(log)))};
  CUresult r;
  const char* call;
  if (d.has_library_api()) {
    call = "cuLibraryLoadData";
    r = d.cuLibraryLoadData(&state->library, image, options, values, 2, nullptr, nullptr, 0);
  } else {
    call = "cuModuleLoadDataEx";
    r = d.cuModuleLoadDataEx(&state->module, image, 2, options, values);
  }
  if (r != CUDA_SUCCESS) {
    std::string subject =
        std::string(bundle::to_string(kind)) + " " + std::string(arch) + " image of " + what;
    try {
      throw_driver_error(r, call, subject);
    } catch (const DriverError& e) {
      std::string message = e.what();
      if (log[0]) message += "\nJIT log:\n" + std::string(log);
      throw DriverError(message, e.result(), e.result_name());
    }
  }
  return Module(std::move(state));
}

std::string Module::lowered(std::string_view name_expression) const {
  for (const auto& [expression, symbol] : state_->lowered_names) {
    if (expression == name_expression) return symbol;
  }
  return {};
}

Function Module::function(std::string_view name) const {
  const Driver& d = driver();
  std::string symbol = lowered(name);
  if (symbol.empty()) symbol = std::string(name);
  current_context();
  CUfunction function = nullptr;
  CUresult r;
  const char* call;
  if (state_->library) {
    CUkernel kernel = nullptr;
    call = "cuLibraryGetKernel";
    r = d.cuLibraryGetKernel(&kernel, state_->library, symbol.c_str());
    if (r == CUDA_SUCCESS) {
      call = "cuKernelGetFunction";
      r = d.cuKernelGetFunction(&function, kernel);
    }
  } else {
    call = "cuModuleGetFunction";
    r = d.cuModuleGetFunction(&function, state_->module, symbol.c_str());
  }
  if (r == CUDA_ERROR_NOT_FOUND) {
    std::string expressions;
    for (const auto& entry : state_->lowered_names) {
      expressions += expressions.empty() ? "" : ", ";
      expressions += entry.first;
    }
    throw NotFound("no kernel " + std::string(name) +
                   (symbol != name ? " (symbol " + symbol + ")" : std::string()) + " in " +
                   state_->name + " (" + bundle::to_string(state_->kind) + " " + state_->arch +
                   "); its name expressions: " + (expressions.empty() ? "none" : expressions) +
                   ". Kernels are found by extern \"C\" name, mangled symbol, or a name expression "
                   "given when the bundle was compiled");
  }
  if (r != CUDA_SUCCESS) throw_driver_error(r, call, std::string(name) + " in " + state_->name);

  std::lock_guard<std::mutex> lock(state_->names_mutex);
  auto it = state_->names.find(name);
  if (it == state_->names.end()) {
    it = state_->names.emplace(std::string(name), read_params(d, function)).first;
  }
  return Function(function, &it->first, &state_->name, &it->second);
}

const std::string& Module::name() const { return state_->name; }
bundle::ImageKind Module::image_kind() const { return state_->kind; }
const std::string& Module::image_arch() const { return state_->arch; }
Match Module::match() const { return state_->match; }
bool Module::uses_library_api() const { return state_->library != nullptr; }
CUcontext Module::context() const { return state_->context; }

std::string Function::describe() const { return *name_ + " in " + *module_name_; }

namespace detail {

void throw_argument_mismatch(const Function& function, const ArgShape* given, size_t count) {
  const std::vector<KernelParams::Param>& p = function.params().params;
  const std::string what = "launching " + function.describe() + ": ";
  if (p.size() != count) {
    throw InvalidArgument(what + std::to_string(count) + " argument" + (count == 1 ? "" : "s") +
                          " given, the kernel takes " + std::to_string(p.size()) +
                          " (parameter sizes: " + [&] {
                            std::string sizes;
                            for (const auto& q : p) {
                              sizes += (sizes.empty() ? "" : ", ") + std::to_string(q.size);
                            }
                            return sizes.empty() ? std::string("none") : sizes;
                          }() + " bytes)");
  }
  for (size_t i = 0; i < count; ++i) {
    if (p[i].size != given[i].size) {
      throw InvalidArgument(what + "parameter " + std::to_string(i) + " is " +
                            std::to_string(p[i].size) + " bytes, the argument given is " +
                            std::to_string(given[i].size) +
                            " bytes: pass the parameter's exact type (float, not double; "
                            "int, not size_t; a pointer or CUdeviceptr for a pointer)");
    }
    if (p[i].offset % given[i].alignment != 0) {
      throw InvalidArgument(what + "parameter " + std::to_string(i) + " (" +
                            std::to_string(p[i].size) + " bytes at offset " +
                            std::to_string(p[i].offset) + ") cannot hold the argument given, " +
                            std::to_string(given[i].size) + " bytes aligned to " +
                            std::to_string(given[i].alignment) +
                            ": pass the parameter's exact type");
    }
  }
  throw InvalidArgument(what + "the arguments do not match the kernel's parameters");
}

}  // namespace detail

int Function::attribute(CUfunction_attribute attribute) const {
  int value = 0;
  CUresult r = driver().cuFuncGetAttribute(&value, attribute, function_);
  if (r != CUDA_SUCCESS) throw_driver_error(r, "cuFuncGetAttribute", describe());
  return value;
}

void Function::set_attribute(CUfunction_attribute attribute, int value) const {
  CUresult r = driver().cuFuncSetAttribute(function_, attribute, value);
  if (r != CUDA_SUCCESS) throw_driver_error(r, "cuFuncSetAttribute", describe());
}

Occupancy Function::occupancy() const noexcept { return Occupancy(*this); }

void launch_raw(StreamRef stream, const LaunchConfig& config, const Function& function,
                void** args) {
  const Driver& d = driver();
  CUresult r;
  if (config.cluster.x == 0 && !config.cooperative) {
    r = d.cuLaunchKernel(function.handle(), config.grid.x, config.grid.y, config.grid.z,
                         config.block.x, config.block.y, config.block.z, config.shared_memory_bytes,
                         stream.get(), args, nullptr);
    if (r != CUDA_SUCCESS) throw_driver_error(r, "cuLaunchKernel", function.describe());
    return;
  }
  if (!d.cuLaunchKernelEx) {
    throw DriverError("launching " + function.describe() +
                          " with clusters or as a cooperative kernel needs cuLaunchKernelEx "
                          "(CUDA 11.6 driver or newer): update the NVIDIA driver",
                      0, "");
  }
  CUlaunchAttribute attributes[2] = {};
  unsigned count = 0;
  if (config.cluster.x != 0) attributes[count++] = cluster_attribute(config);
  if (config.cooperative) {
    attributes[count].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attributes[count].value.cooperative = 1;
    ++count;
  }
  CUlaunchConfig c = launch_config_of(config, stream.get());
  c.attrs = attributes;
  c.numAttrs = count;
  r = d.cuLaunchKernelEx(&c, function.handle(), args, nullptr);
  if (r != CUDA_SUCCESS) throw_driver_error(r, "cuLaunchKernelEx", function.describe());
}

}  // namespace kcache::runtime
