#include "compiler/image/nvjitlink.h"

#include <dlfcn.h>

#include <map>
#include <memory>
#include <mutex>

#include "common/error.h"

namespace kcache::compiler {
namespace {

// The slice of nvJitLink.h kcache needs (stable since CUDA 12.0), declared
// here so that building kcache needs no nvJitLink header.
using Handle = void*;
using Result = int;           // nvJitLinkResult; 0 is NVJITLINK_SUCCESS
constexpr int kInputPtx = 2;  // NVJITLINK_INPUT_PTX
template <typename F>
using Fn = F*;

}  // namespace

#define KCACHE_NVJITLINK_FUNCTIONS(X)                                        \
  X(nvJitLinkCreate, Result(Handle*, uint32_t, const char**))                \
  X(nvJitLinkDestroy, Result(Handle*))                                       \
  X(nvJitLinkAddData, Result(Handle, int, const void*, size_t, const char*)) \
  X(nvJitLinkComplete, Result(Handle))                                       \
  X(nvJitLinkGetLinkedCubinSize, Result(Handle, size_t*))                    \
  X(nvJitLinkGetLinkedCubin, Result(Handle, void*))                          \
  X(nvJitLinkGetErrorLogSize, Result(Handle, size_t*))                       \
  X(nvJitLinkGetErrorLog, Result(Handle, char*))                             \
  X(nvJitLinkVersion, Result(unsigned*, unsigned*))

struct NvJitLink::Api {
#define KCACHE_NVJITLINK_MEMBER(name, type) Fn<type> name = nullptr;
  KCACHE_NVJITLINK_FUNCTIONS(KCACHE_NVJITLINK_MEMBER)
#undef KCACHE_NVJITLINK_MEMBER
};

namespace {

// Like NVRTC: loaded once, never dlclose-d.
std::mutex& libraries_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, std::unique_ptr<NvJitLink>>& libraries() {
  static auto* m = new std::map<std::string, std::unique_ptr<NvJitLink>>;
  return *m;
}

// Destroys the handle on every path out of ptx_to_cubin().
class Link {
 public:
  explicit Link(const NvJitLink::Api& api) : api_(api) {}
  ~Link() {
    if (handle_) api_.nvJitLinkDestroy(&handle_);
  }
  Handle* out() { return &handle_; }
  Handle get() const { return handle_; }

 private:
  const NvJitLink::Api& api_;
  Handle handle_ = nullptr;
};

}  // namespace

NvJitLink::NvJitLink(std::string path) : path_(std::move(path)) {
  void* handle = ::dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    throw NotFound("cannot load nvJitLink from " + path_ + ": " + (why ? why : "unknown error") +
                   "; check the CUDA toolkit install, or compile with --no-lean");
  }
  auto* api = new Api;
#define KCACHE_NVJITLINK_RESOLVE(name, type)                      \
  api->name = reinterpret_cast<Fn<type>>(::dlsym(handle, #name)); \
  if (!api->name) {                                               \
    delete api;                                                   \
    throw NotFound("nvJitLink at " + path_ +                      \
                   " has no " #name                               \
                   "; lean images need CUDA 12.0 "                \
                   "or newer (or compile with --no-lean)");       \
  }
  KCACHE_NVJITLINK_FUNCTIONS(KCACHE_NVJITLINK_RESOLVE)
#undef KCACHE_NVJITLINK_RESOLVE
  api_ = api;
}

const NvJitLink& NvJitLink::open(const std::string& path) {
  std::lock_guard<std::mutex> lock(libraries_mutex());
  std::unique_ptr<NvJitLink>& slot = libraries()[path];
  if (!slot) slot.reset(new NvJitLink(path));
  return *slot;
}

std::pair<unsigned, unsigned> NvJitLink::version() const {
  unsigned major = 0, minor = 0;
  api_->nvJitLinkVersion(&major, &minor);
  return {major, minor};
}

std::string NvJitLink::ptx_to_cubin(const std::string& ptx,
                                    const std::vector<std::string>& options) const {
  const Api& api = *api_;
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  Link link(api);
  auto fail = [&](const char* call, Result r) {
    std::string log;
    size_t size = 0;
    if (link.get() && api.nvJitLinkGetErrorLogSize(link.get(), &size) == 0 && size > 1) {
      log.resize(size);
      if (api.nvJitLinkGetErrorLog(link.get(), &log[0]) != 0) log.clear();
      while (!log.empty() && log.back() == '\0') log.pop_back();
    }
    return Error(ErrorKind::compile_failed, std::string(call) + " failed (nvJitLink error " +
                                                std::to_string(r) + ")" +
                                                (log.empty() ? "" : ": " + log));
  };
  Result r = api.nvJitLinkCreate(link.out(), static_cast<uint32_t>(argv.size()), argv.data());
  if (r != 0) throw fail("nvJitLinkCreate", r);
  // nvJitLink reads PTX up to its size; the NUL keeps it a C string too.
  r = api.nvJitLinkAddData(link.get(), kInputPtx, ptx.c_str(), ptx.size() + 1, "lean.ptx");
  if (r != 0) throw fail("nvJitLinkAddData", r);
  r = api.nvJitLinkComplete(link.get());
  if (r != 0) throw fail("nvJitLinkComplete", r);
  size_t size = 0;
  r = api.nvJitLinkGetLinkedCubinSize(link.get(), &size);
  if (r != 0) throw fail("nvJitLinkGetLinkedCubinSize", r);
  std::string cubin(size, '\0');
  if (size) {
    r = api.nvJitLinkGetLinkedCubin(link.get(), &cubin[0]);
    if (r != 0) throw fail("nvJitLinkGetLinkedCubin", r);
  }
  return cubin;
}

}  // namespace kcache::compiler
