// Modules: the image of a bundle that suits the current GPU, loaded into the
// driver, and the kernels in it.
//
// A Module is loaded from a parsed bundle, raw .kcb bytes, a .kcb file, an
// embedded bundle, or one raw image (cubin or PTX bytes, for callers such as a
// store or a JIT that pick the image themselves). Loading picks the image with
// select_image() for the current context's device, then hands it to
// cuLibraryLoadData where the driver has it (CUDA 12.0+), else to
// cuModuleLoadDataEx. The driver copies the image: the bytes need not outlive
// the call. PTX is JIT-compiled by the driver; a JIT failure carries the JIT's
// log in the error message.
//
// Ownership: Module owns the loaded library/module and unloads it in its
// destructor (which never throws; a failure is logged). Functions are views,
// valid while their Module lives. For modules loaded once and kept for the
// life of the process, see registry.h.
//
// Errors: a damaged bundle throws CorruptError (before the driver is touched,
// so it is reported the same with or without a GPU); no suitable image throws
// NotFound listing the bundle's images; driver failures throw DriverError
// naming the bundle or kernel. No driver: DriverError "no CUDA driver found".
//
// Thread safety: a Module may be used from several threads at once (lookups
// and launches are const and the driver is thread-safe).
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <cuda.h>

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "bundle/bundle.h"
#include "runtime/image_selection.h"
#include "runtime/stream.h"

namespace kcache::runtime {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr Dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) noexcept  // NOLINT: implicit
      : x(x_), y(y_), z(z_) {}
};

struct LaunchConfig {
  Dim3 grid;                         // in blocks (as in <<<grid, block>>>), clusters or not
  Dim3 block;                        // threads per block
  unsigned shared_memory_bytes = 0;  // dynamic shared memory per block
  Dim3 cluster{0, 0, 0};             // blocks per cluster; x == 0 means no clusters
  bool cooperative = false;          // grid-wide sync (cooperative_groups::this_grid().sync())
};

class Occupancy;

// A kernel's parameters as the driver describes them (cuFuncGetParamInfo,
// CUDA 12.4+), read once per kernel when it is looked up. `known` is false on
// older drivers: launches are then not checked.
struct KernelParams {
  struct Param {
    size_t offset = 0;  // in the kernel's parameter buffer
    size_t size = 0;
  };
  bool known = false;
  std::vector<Param> params;
};

// The size and alignment of one argument given to launch().
struct ArgShape {
  size_t size;
  size_t alignment;
};

// A kernel in a loaded module, in the context it was looked up in. Four
// pointers, trivially copyable; valid while its Module lives.
class Function {
 public:
  CUfunction handle() const noexcept { return function_; }
  // As asked for: a name expression ("scale<float>") or a symbol ("saxpy").
  const std::string& name() const noexcept { return *name_; }
  // "saxpy in saxpy.kcb", for messages.
  std::string describe() const;

  int attribute(CUfunction_attribute attribute) const;
  void set_attribute(CUfunction_attribute attribute, int value) const;

  // Occupancy queries with cuda.core's names; see occupancy.h.
  Occupancy occupancy() const noexcept;

  // Its parameters (known only where the driver has cuFuncGetParamInfo).
  const KernelParams& params() const noexcept { return *params_; }

 private:
  friend class Module;
  Function(CUfunction function, const std::string* name, const std::string* module_name,
           const KernelParams* params) noexcept
      : function_(function), name_(name), module_name_(module_name), params_(params) {}

  CUfunction function_;
  // All owned by the Module (stable across its moves), so copies stay cheap.
  const std::string* name_;
  const std::string* module_name_;
  const KernelParams* params_;
};

// A kernel named through the header cuda_kernel generates
// (<symbol>_kernels::saxpy, compiler/image/codegen.h): Module::function returns
// one, and launch() checks its arguments at compile time, each mismatch a
// static_assert naming the parameter by index and PTX name: their count, each
// one's size, and each one's kind where the parameter's PTX type rules it out
// (an integer, enum or pointer for a .f32/.f64 parameter, a floating-point
// number for a .u32/.s32/.u64 one: so an int and a float swapped do not
// compile). Nothing the PTX cannot tell is refused: int and unsigned (both
// .u32), a pointer and a 64-bit integer such as CUdeviceptr (both .u64), or
// any value of a struct's size (a .b8 array). A Function otherwise.
template <typename Entry>
class Kernel : public Function {
 public:
  explicit Kernel(const Function& function) : Function(function) {}
};

class Module {
 public:
  // Picks the image of `bundle` for the current context's device and loads it.
  // `what` names the bundle in errors (a path, "embedded bundle <symbol>").
  static Module load(const bundle::Bundle& bundle, const std::string& what);
  // Parses (verifying every checksum) and loads .kcb bytes.
  static Module load_bytes(std::string_view bytes, const std::string& what = "bundle bytes");
  // Reads, parses and loads a .kcb file. IoError if it cannot be read.
  static Module load_file(const std::string& path);
  // A new module from the bundle registered under `symbol` (bundle/embedded.h);
  // NotFound if none is. Most callers want embedded_module() (registry.h),
  // which loads each embedded bundle once.
  static Module load_embedded(std::string_view symbol);
  // One image, already chosen by the caller (a store hit, a JIT result).
  // `data` is a cubin ELF or PTX text (NUL-terminated or not). `lowered_names`
  // maps name expressions to symbols, as in a bundle.
  static Module load_image(bundle::ImageKind kind, std::string_view arch, std::string_view data,
                           const std::string& what,
                           std::vector<std::pair<std::string, std::string>> lowered_names = {});

  Module(Module&&) noexcept;
  Module& operator=(Module&&) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module();

  // The kernel `name`: a name expression the bundle was compiled with
  // ("scale<float>"), looked up through its lowered-name map, else a symbol
  // as it appears in the image (an extern "C" name or a mangled one). The
  // returned Function belongs to the calling thread's current context.
  // NotFound (naming the kernel, the module and the name expressions it
  // knows) if there is no such kernel.
  Function function(std::string_view name) const;
  // The kernel a generated header declares (see Kernel).
  template <typename Entry, typename = typename Entry::kcache_entry_point>
  Kernel<Entry> function(const Entry&) const {
    return Kernel<Entry>(function(std::string_view(Entry::name())));
  }

  // The mangled symbol for a name expression, or an empty string.
  std::string lowered(std::string_view name_expression) const;

  const std::string& name() const;  // `what` as given to load
  bundle::ImageKind image_kind() const;
  const std::string& image_arch() const;  // "sm_90", "compute_90"
  Match match() const;                    // how the image was chosen (exact_cubin for load_image)
  bool uses_library_api() const;          // cuLibraryLoadData rather than cuModuleLoadData
  CUcontext context() const;              // current when it was loaded

 private:
  struct State;
  explicit Module(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Launches `function` with `args` (each trivially copyable and of the exact
// type the kernel parameter has: pass CUdeviceptr or T* for pointers, float
// not double for a float). Uses cuLaunchKernelEx when the config asks for
// clusters or a cooperative launch. Throws DriverError naming the kernel.
//
// Checked: where the driver describes the kernel's parameters
// (cuFuncGetParamInfo, CUDA 12.4+), the number of arguments and each one's
// size must match them, and each argument's alignment must divide its
// parameter's offset; otherwise InvalidArgument names the kernel, the
// parameter and both sizes, and nothing is launched. The parameters are read
// when the kernel is looked up, so a check costs a few compares.
// launch_raw is not checked: it cannot know what `args` point to.
void launch_raw(StreamRef stream, const LaunchConfig& config, const Function& function,
                void** args);

namespace detail {
[[noreturn]] void throw_argument_mismatch(const Function& function, const ArgShape* given,
                                          size_t count);

inline void check_arguments(const Function& function, const ArgShape* given, size_t count) {
  const KernelParams& p = function.params();
  if (!p.known) return;
  bool ok = p.params.size() == count;
  for (size_t i = 0; ok && i < count; ++i) {
    ok = p.params[i].size == given[i].size && p.params[i].offset % given[i].alignment == 0;
  }
  if (__builtin_expect(!ok, 0)) throw_argument_mismatch(function, given, count);
}
}  // namespace detail

template <typename... Args>
void launch(StreamRef stream, const LaunchConfig& config, const Function& function,
            const Args&... args) {
  static_assert((std::is_trivially_copyable_v<Args> && ...),
                "kernel arguments are copied byte for byte: pass trivially copyable values");
  static constexpr ArgShape shapes[] = {{sizeof(Args), alignof(Args)}..., {0, 1}};
  detail::check_arguments(function, shapes, sizeof...(Args));
  void* pointers[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
  launch_raw(stream, config, function, pointers);
}

// A kernel of a generated header: its arguments' count, sizes and kinds
// checked at compile time first (the generated static_asserts, see Kernel),
// then as any launch.
template <typename Entry, typename... Args>
void launch(StreamRef stream, const LaunchConfig& config, const Kernel<Entry>& kernel,
            const Args&... args) {
  static_assert(Entry::template check<Args...>());
  launch(stream, config, static_cast<const Function&>(kernel), args...);
}

}  // namespace kcache::runtime
