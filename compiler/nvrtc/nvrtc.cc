#include "compiler/nvrtc/nvrtc.h"

#include <algorithm>
#include <dlfcn.h>
#include <nvrtc.h>
#include <time.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <climits>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "common/environment.h"
#include "common/error.h"
#include "common/paths.h"
#include "compiler/nvrtc/reads_alone.h"
#include "compiler/seal/seal.h"

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

// Only program compiles (NvrtcInput::program) ask for these; an NVRTC too old
// to have one answers as if the output had not been requested.
#define KCACHE_NVRTC_OPTIONAL_FUNCTIONS(X) \
  X(nvrtcGetLTOIRSize)                     \
  X(nvrtcGetLTOIR)                         \
  X(nvrtcGetOptiXIRSize)                   \
  X(nvrtcGetOptiXIR)

struct Nvrtc::Api {
#define KCACHE_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  KCACHE_NVRTC_FUNCTIONS(KCACHE_NVRTC_MEMBER)
  KCACHE_NVRTC_OPTIONAL_FUNCTIONS(KCACHE_NVRTC_MEMBER)
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

// Files NVRTC opens by itself, outside any include: the time zone (__DATE__,
// __TIME__) and iconv's character-set modules.
constexpr const char* kNvrtcSystemFiles[] = {"/etc/localtime", "/usr/share/zoneinfo",
                                             "/usr/lib/x86_64-linux-gnu/gconv"};

// What the sealed NVRTC may read: the folders it is given with -I (only the
// toolkit's: user -I are refused), its own libraries, and the system files
// it opens by itself (time zone, character sets). Nothing of the user's.
SealPolicy nvrtc_policy(const std::string& library, const NvrtcInput& input) {
  SealPolicy p;
  std::vector<std::string> include_dirs;
  for (const std::string& o : input.options) {
    if (o.compare(0, 2, "-I") == 0 && o.size() > 2) include_dirs.push_back(o.substr(2));
  }
  // Serving: NVRTC's -I folders are the program's, and every file beneath
  // them is served (and hashed), never read by NVRTC itself.
  if (input.serve_disk) {
    p.serve = true;
    p.working_dir = input.working_dir;
    p.hidden_folders = driver_cache_folders();
  } else {
    p.readable = with_link_targets(include_dirs);
  }
  size_t slash = library.rfind('/');
  if (slash != std::string::npos) p.readable.push_back(library.substr(0, slash));
  for (const char* system : kNvrtcSystemFiles) p.readable.push_back(system);
  // Folders by their real names too: the supervisor serves a name beneath
  // them that leads elsewhere (seal.cc, leads_to_own), judged by where it
  // leads. (Not a file's: /etc/localtime leads into the zone folder, and a
  // link to anything else is served.)
  for (size_t i = 0, n = p.readable.size(); i < n; ++i) {
    char real[PATH_MAX];
    struct stat st;
    if (::stat(p.readable[i].c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
        ::realpath(p.readable[i].c_str(), real) && p.readable[i] != real) {
      p.readable.push_back(real);
    }
  }
  p.writable = input.writable_dirs;
  p.one_cpu = std::none_of(input.options.begin(), input.options.end(), [](const std::string& o) {
    return o.find("split-compile") != std::string::npos;
  });
  return p;
}

// Replaces every `from` in `text` with `to`.
void replace_all(std::string& text, const std::string& from, const std::string& to) {
  if (from == to || from.empty()) return;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

// What a program compile answers every nvrtcGet* call with
// (NvrtcInput::program), asked the way a program asks: the size, then the bytes.
NvrtcOutput program_answers(const Nvrtc::Api& api, nvrtcProgram prog, nvrtcResult result,
                            NvrtcOutput out, const NvrtcInput& input) {
  cache::ProgramRecord record;
  record.compile_result = static_cast<uint32_t>(result);
  record.log = std::move(out.log);
  auto take = [&](cache::ProgramOutput kind, nvrtcResult (*size_of)(nvrtcProgram, size_t*),
                  nvrtcResult (*get)(nvrtcProgram, char*)) {
    cache::ProgramRecord::Output& o = record.output(kind);
    if (!size_of || !get) {
      o.size_result = NVRTC_ERROR_INVALID_PROGRAM;
      return;
    }
    size_t size = 0;
    o.size_result = static_cast<uint32_t>(size_of(prog, &size));
    if (o.size_result != NVRTC_SUCCESS) return;
    o.bytes.resize(size);
    if (size && get(prog, &o.bytes[0]) != NVRTC_SUCCESS) {
      throw Error(ErrorKind::compile_failed,
                  "NVRTC gave a size but no bytes for an output of " + input.source_name);
    }
  };
  take(cache::ProgramOutput::ptx, api.nvrtcGetPTXSize, api.nvrtcGetPTX);
  take(cache::ProgramOutput::cubin, api.nvrtcGetCUBINSize, api.nvrtcGetCUBIN);
  take(cache::ProgramOutput::ltoir, api.nvrtcGetLTOIRSize, api.nvrtcGetLTOIR);
  take(cache::ProgramOutput::optixir, api.nvrtcGetOptiXIRSize, api.nvrtcGetOptiXIR);
  if (result == NVRTC_SUCCESS) {
    for (const std::string& e : input.name_expressions) {
      const char* lowered = nullptr;
      if (api.nvrtcGetLoweredName(prog, e.c_str(), &lowered) != NVRTC_SUCCESS || !lowered) {
        throw Error(ErrorKind::compile_failed,
                    "NVRTC lowered no name for " + e + " in " + input.source_name);
      }
      out.lowered_names.push_back({e, lowered});
    }
  }
  out.program = std::move(record);
  return out;
}

}  // namespace

std::string sealed_source_name(const std::string& name) {
  return !name.empty() && name.front() == '/' ? kSealedSourceRoot + name : name;
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
#define KCACHE_NVRTC_RESOLVE_OPTIONAL(name) \
  api->name = reinterpret_cast<decltype(&::name)>(::dlsym(handle, #name));
  KCACHE_NVRTC_OPTIONAL_FUNCTIONS(KCACHE_NVRTC_RESOLVE_OPTIONAL)
#undef KCACHE_NVRTC_RESOLVE_OPTIONAL
  api_ = api;  // never freed, like the library
  loaded_path_ = load;
  // NVRTC opens its builtins library at the first compile, which the seal
  // would allow (it is next to NVRTC), but loading it here keeps a compile's
  // probes to what the source asks for. Best effort: a missing one is
  // reported by the compile itself.
  int major = 0, minor = 0;
  api->nvrtcVersion(&major, &minor);
  const std::string folder = parent_folder(load);
  ::dlopen((folder + "/libnvrtc-builtins.so." + std::to_string(major) + "." + std::to_string(minor))
               .c_str(),
           RTLD_NOW | RTLD_GLOBAL);
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
  // NVRTC runs on a thread of its own that carries the seal (seal.h): the
  // Landlock domain and the working directory stay away from the rest of
  // the process.
  NvrtcOutput out;
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t started = static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  std::optional<CompileError> failed;
  SealResult seal = run_sealed(nvrtc_policy(loaded_path_, input), [&] {
    try {
      out = compile_here(input);
    } catch (const CompileError& e) {
      failed = e;
    }
  });
  out.sealed = seal.sealed;
  out.unsealed_why = std::move(seal.why);
  if (!seal.refused.empty()) {
    // NVRTC's own answer would depend on what it is (a FIFO blocks, a device
    // never ends): the real NVRTC answers it.
    throw IoError("NVRTC opened " + seal.refused +
                  "; kcache serves NVRTC only regular files of at most 64 MiB");
  }
  out.served = std::move(seal.served);
  out.relative_names = std::move(seal.relative_names);
  out.absolute_names = std::move(seal.absolute_names);
  out.hidden = std::move(seal.hidden);
  // The folders NVRTC may write (its PCH folder, where TMPDIR points) hold
  // its own work files: never an include, never keyed, never handed.
  std::vector<std::string> own_dirs;
  for (const std::string& d : input.writable_dirs) {
    char real[PATH_MAX];
    if (d.empty()) continue;
    own_dirs.push_back(d);
    if (::realpath(d.c_str(), real)) own_dirs.push_back(real);
  }
  // NVRTC looks at the working folder of the process it runs in ($PWD): a
  // folder, never an include. Told apart here, in that process, so what
  // another process's environment says never decides what is keyed.
  char cwd[PATH_MAX];
  const char* pwd = env::read(env::Var::pwd);
  const std::string here = ::getcwd(cwd, sizeof cwd) ? cwd : "";
  // Only while it is a folder: $PWD can name anything (a header a computed
  // __has_include also names), and what is left out here must be no file
  // whatever the environment.
  auto folder = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  };
  // Serving: the working folder asked for is looked at the same way, and a
  // file served is listed in `served` with its bytes' hash.
  std::string asked_cwd;
  if (input.serve_disk) {
    char real[PATH_MAX];
    if (::realpath(input.working_dir.empty() ? "." : input.working_dir.c_str(), real)) {
      asked_cwd = real;
    }
  }
  std::set<std::string> served;
  for (const ServedFile& f : out.served) served.insert(f.path);
  for (std::string& p : seal.probes) {
    if (served.count(p)) continue;
    bool own = ((p == here || (pwd && p == pwd) || (!asked_cwd.empty() && p == asked_cwd)) &&
                folder(p)) ||
               std::any_of(own_dirs.begin(), own_dirs.end(), [&](const std::string& d) {
                 return p == d || p.rfind(d + "/", 0) == 0;
               });
    if (!own) out.probes.push_back(std::move(p));
  }
  out.started_ns = started;
  if (failed) {
    // Served, with the files NVRTC read: the Bazel worker names an
    // undeclared one (compiler.cc, undeclared_files) instead of its errors.
    for (const ServedFile& f : out.served) out.probes.push_back(f.path);
    failed->set_probes(std::move(out.probes), started);
    throw *failed;
  }
  return out;
}

NvrtcOutput Nvrtc::compile_here(const NvrtcInput& input) const {
  const Api& api = *api_;
  const std::string handed_name =
      input.serve_disk ? input.source_name : sealed_source_name(input.source_name);
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
  nvrtcResult result;
  {
    NvrtcReadsAlone unlocked;  // its headers read without glibc's lock (stdio_unlocked.h)
    result = api.nvrtcCompileProgram(prog.get(), static_cast<int>(options.size()), options.data());
  }
  NvrtcOutput out;
  out.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  size_t log_size = 0;
  if (api.nvrtcGetProgramLogSize(prog.get(), &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    if (api.nvrtcGetProgramLog(prog.get(), &out.log[0]) != NVRTC_SUCCESS) out.log.clear();
    // Only the terminating NUL NVRTC counts: where ptxas wrote to the log
    // its text carries a NUL of its own, and NVRTC's log size counts both.
    if (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();
    replace_all(out.log, handed_name, input.source_name);
  }
  if (input.program) return program_answers(api, prog.get(), result, std::move(out), input);
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
