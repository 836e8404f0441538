#include "compiler/nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "common/error.h"

namespace kcache::compiler {

// Every NVRTC entry point kcache calls; all exist since CUDA 11.2.
#define KCACHE_NVRTC_FUNCTIONS(X) \
  X(nvrtcGetErrorString)          \
  X(nvrtcVersion)                 \
  X(nvrtcGetNumSupportedArchs)    \
  X(nvrtcGetSupportedArchs)       \
  X(nvrtcCreateProgram)           \
  X(nvrtcDestroyProgram)          \
  X(nvrtcCompileProgram)          \
  X(nvrtcGetPTXSize)              \
  X(nvrtcGetPTX)                  \
  X(nvrtcGetCUBINSize)            \
  X(nvrtcGetCUBIN)                \
  X(nvrtcGetProgramLogSize)       \
  X(nvrtcGetProgramLog)           \
  X(nvrtcAddNameExpression)       \
  X(nvrtcGetLoweredName)

struct Nvrtc::Api {
#define KCACHE_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  KCACHE_NVRTC_FUNCTIONS(KCACHE_NVRTC_MEMBER)
#undef KCACHE_NVRTC_MEMBER
};

namespace {

// Loaded libraries live until the process exits: NVRTC is never dlclose-d
// (its static destructors are not meant to run early).
std::mutex& libraries_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, std::unique_ptr<Nvrtc>>& libraries() {
  static auto* m = new std::map<std::string, std::unique_ptr<Nvrtc>>;
  return *m;
}

// Destroys the program on every path out of compile().
class Program {
 public:
  Program(const Nvrtc::Api& api) : api_(api) {}
  ~Program() {
    if (prog_) api_.nvrtcDestroyProgram(&prog_);
  }
  nvrtcProgram* out() { return &prog_; }
  nvrtcProgram get() const { return prog_; }

 private:
  const Nvrtc::Api& api_;
  nvrtcProgram prog_ = nullptr;
};

// Deep enough that no real spelling climbs out of it with "../": each ".."
// from a deleted folder leads to its (deleted) parent, where nothing exists.
constexpr int kSealDepth = 32;

// Gives the calling thread a working directory of its own: the innermost of a
// chain of freshly made folders, all deleted again. Returns false (leaving
// the working directory alone) where that cannot be done.
bool seal_this_thread() {
  if (::unshare(CLONE_FS) != 0) return false;
  const char* tmp = ::getenv("TMPDIR");
  std::string root = std::string(tmp && *tmp ? tmp : "/tmp") + "/kcache-seal-XXXXXX";
  if (!::mkdtemp(&root[0])) return false;
  std::vector<std::string> made{root};
  bool ok = true;
  for (int i = 0; i < kSealDepth && ok; ++i) {
    std::string next = made.back() + "/d";
    ok = ::mkdir(next.c_str(), 0700) == 0;
    if (ok) made.push_back(next);
  }
  ok = ok && ::chdir(made.back().c_str()) == 0;
  for (auto it = made.rbegin(); it != made.rend(); ++it) ::rmdir(it->c_str());
  return ok;
}

// Replaces every `from` in `text` with `to`.
void replace_all(std::string& text, const std::string& from, const std::string& to) {
  if (from == to || from.empty()) return;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

}  // namespace

std::string sealed_source_name(const std::string& name) {
  return !name.empty() && name.front() == '/' ? "/kcache-sealed" + name : name;
}

Nvrtc::Nvrtc(std::string path) : path_(std::move(path)) {
  // Absolute: NVRTC finds its builtins library next to its own path, later,
  // on the sealed thread where a relative path resolves to nothing.
  char real[PATH_MAX];
  std::string load = ::realpath(path_.c_str(), real) ? std::string(real) : path_;
  void* handle = ::dlopen(load.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    throw NotFound("cannot load NVRTC from " + path_ + ": " + (why ? why : "unknown error") +
                   "; check the CUDA toolkit install (--cuda-path or $CUDA_PATH)");
  }
  auto* api = new Api;
#define KCACHE_NVRTC_RESOLVE(name)                                                              \
  api->name = reinterpret_cast<decltype(&::name)>(::dlsym(handle, #name));                      \
  if (!api->name) {                                                                             \
    delete api;                                                                                 \
    throw NotFound("NVRTC at " + path_ + " has no " #name "; kcache needs CUDA 11.2 or newer"); \
  }
  KCACHE_NVRTC_FUNCTIONS(KCACHE_NVRTC_RESOLVE)
#undef KCACHE_NVRTC_RESOLVE
  api_ = api;  // never freed, like the library
}

const Nvrtc& Nvrtc::open(const std::string& path) {
  std::lock_guard<std::mutex> lock(libraries_mutex());
  std::unique_ptr<Nvrtc>& slot = libraries()[path];
  if (!slot) slot.reset(new Nvrtc(path));
  return *slot;
}

std::pair<int, int> Nvrtc::version() const {
  int major = 0, minor = 0;
  api_->nvrtcVersion(&major, &minor);
  return {major, minor};
}

std::vector<int> Nvrtc::supported_archs() const {
  int n = 0;
  if (api_->nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return {};
  std::vector<int> archs(static_cast<size_t>(n));
  if (api_->nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return {};
  return archs;
}

NvrtcOutput Nvrtc::compile(const NvrtcInput& input) const {
  // NVRTC runs on the calling thread; a thread of its own keeps the sealed
  // working directory away from the rest of the process.
  NvrtcOutput out;
  std::exception_ptr error;
  std::thread sealed([&] {
    try {
      bool ok = seal_this_thread();
      out = compile_here(input);
      out.sealed = ok;
    } catch (...) {
      error = std::current_exception();
    }
  });
  sealed.join();
  if (error) std::rethrow_exception(error);
  return out;
}

NvrtcOutput Nvrtc::compile_here(const NvrtcInput& input) const {
  const Api& api = *api_;
  const std::string handed_name = sealed_source_name(input.source_name);
  auto check = [&](nvrtcResult r, const char* call) {
    if (r != NVRTC_SUCCESS) {
      throw Error(ErrorKind::compile_failed, std::string(call) + " failed on " + input.source_name +
                                                 ": " + api.nvrtcGetErrorString(r));
    }
  };
  std::vector<const char*> header_texts, header_names;
  for (const NvrtcHeader& h : input.headers) {
    header_texts.push_back(h.content.c_str());
    header_names.push_back(h.name.c_str());
  }
  Program prog(api);
  check(api.nvrtcCreateProgram(prog.out(), input.source.c_str(), handed_name.c_str(),
                               static_cast<int>(header_texts.size()), header_texts.data(),
                               header_names.data()),
        "nvrtcCreateProgram");
  for (const std::string& e : input.name_expressions) {
    check(api.nvrtcAddNameExpression(prog.get(), e.c_str()), "nvrtcAddNameExpression");
  }
  std::vector<const char*> options;
  for (const std::string& o : input.options) options.push_back(o.c_str());

  auto start = std::chrono::steady_clock::now();
  nvrtcResult result =
      api.nvrtcCompileProgram(prog.get(), static_cast<int>(options.size()), options.data());
  NvrtcOutput out;
  out.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  size_t log_size = 0;
  if (api.nvrtcGetProgramLogSize(prog.get(), &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    if (api.nvrtcGetProgramLog(prog.get(), &out.log[0]) != NVRTC_SUCCESS) out.log.clear();
    while (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();
    replace_all(out.log, handed_name, input.source_name);
  }
  if (result == NVRTC_ERROR_COMPILATION) {
    throw CompileError("NVRTC could not compile " + input.source_name, out.log, input.options);
  }
  if (result != NVRTC_SUCCESS) {
    // NVRTC_ERROR_INVALID_OPTION and friends: the log usually says which.
    throw CompileError(
        "NVRTC failed on " + input.source_name + ": " + api.nvrtcGetErrorString(result), out.log,
        input.options);
  }
  auto get_ptx = [&] {
    size_t size = 0;
    check(api.nvrtcGetPTXSize(prog.get(), &size), "nvrtcGetPTXSize");
    std::string ptx(size, '\0');
    if (size) check(api.nvrtcGetPTX(prog.get(), &ptx[0]), "nvrtcGetPTX");
    // The size counts PTX's terminating NUL; the bundle adds its own.
    while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
    return ptx;
  };
  size_t size = 0;
  if (input.want_cubin) {
    check(api.nvrtcGetCUBINSize(prog.get(), &size), "nvrtcGetCUBINSize");
    out.image.resize(size);
    if (size) check(api.nvrtcGetCUBIN(prog.get(), &out.image[0]), "nvrtcGetCUBIN");
  } else {
    out.image = get_ptx();
  }
  if (input.want_cubin && input.want_ptx) out.ptx = get_ptx();
  for (const std::string& e : input.name_expressions) {
    const char* lowered = nullptr;
    check(api.nvrtcGetLoweredName(prog.get(), e.c_str(), &lowered), "nvrtcGetLoweredName");
    out.lowered_names.push_back({e, lowered ? lowered : ""});
  }
  return out;
}

}  // namespace kcache::compiler
