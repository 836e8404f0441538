// The drop-in libnvrtc: NVRTC's C API over kcache's cache (see README.md in
// this folder and compiler/program.h). Every function a program calls lands
// here; compiles go through the cache, everything else (and every compile
// kcache cannot make exact) goes to the real library, found by
// $KCACHE_REAL_NVRTC or next to the toolkit kcache detects.
//
// Never worse than NVRTC: any trouble (store, unknown option, a kcache error)
// compiles with the real NVRTC and says so once per kind of trouble on
// stderr ($KCACHE_QUIET=1 silences it). Thread-safe like NVRTC: separate
// programs from any number of threads at once, one program from one thread.
//
// Nothing is loaded before the first call: a process that links NVRTC and
// hits the cache never dlopens the real library for its compiles.
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <nvrtc.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <pthread.h>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/environment.h"
#include "common/error.h"
#include "compiler/nvrtc/nvrtc_pool.h"
#include "compiler/program_api.h"
#include "compiler/program_protocol.h"
#include "compiler/toolkit.h"

namespace kcache::nvrtc_shim {
namespace {

// Every lock of this library that a thread may hold while the host forks
// is taken by the fork's prepare handler (fork_safety below) and released
// in both processes, so a forked child never waits on a lock that a thread
// it does not have holds (a compile was under way in the parent: the child's
// own first compile hung for good). In the order they nest.
std::mutex compiler_mutex;  // cache_pool()'s making
std::mutex said_mutex;      // say()'s

// Says `line` on stderr once per `reason` (default: the line itself) in
// this process, whichever threads meet it.
void say(const std::string& line, const std::string& reason = "") {
  if (env::enabled(env::Var::kcache_quiet)) return;
  static std::set<std::string> said;  // once per kind of trouble
  std::lock_guard<std::mutex> lock(said_mutex);
  if (said.size() > 64 || !said.insert(reason.empty() ? line : reason).second) return;
  std::fprintf(stderr, "kcache nvrtc: %s\n", line.c_str());
}

// $KCACHE_SHIM_STATS names a file that gets one line per compile, its
// fields separated by " | ": what happened ("hit", "miss": the sealed NVRTC
// compiled it for the cache, "real": the real NVRTC did, uncached), the
// program's name, for a miss why it missed, then fields each labelled by
// its first words:
//   hit | NAME | saved N ms of NVRTC | took X ms | started at S s | key K [| SHARED]
//   miss | NAME | REASON | NVRTC took N ms | took X ms | started at S s | key K
//        [| not stored: WHY] [| SHARED]
//   real | NAME [| not cached: WHY]
// "saved": what NVRTC took when the hit was stored; "took": the compile
// call's wall time here; "started at": CLOCK_MONOTONIC (one clock for every
// process), so that `kcache run` can tell calls that overlapped. SHARED is
// "any-name: one entry for every program folder" or "name-dependent: kept
// under its own name". Tests and benchmarks count NVRTC compiles by it
// ("^hit "); `kcache run` sums it up (cli/run_command.cc reads these
// fields: keep the two in step).
void record_stat(const char* what, const std::string& name,
                 const std::vector<std::string>& fields = {}) {
  const char* path = env::value(env::Var::kcache_shim_stats);
  if (!path) return;
  int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  // One line per compile, whatever a name or reason holds.
  auto field = [](std::string text) {
    std::replace(text.begin(), text.end(), '\n', ' ');
    return text;
  };
  std::string line = std::string(what) + " | " + field(name);
  for (const std::string& f : fields) {
    if (!f.empty()) line += " | " + field(f);
  }
  line += "\n";
  ssize_t ignored = ::write(fd, line.data(), line.size());  // one append: lines never mix
  (void)ignored;
  ::close(fd);
}

// The stats lines' numbers: CLOCK_MONOTONIC in seconds, and one value in a format.
double monotonic_s() {
  struct timespec t;
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}
std::string fixed(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

// ---- The real library -------------------------------------------------------

#define KCACHE_SHIM_FUNCTIONS(X) \
  X(nvrtcGetErrorString)         \
  X(nvrtcVersion)                \
  X(nvrtcGetNumSupportedArchs)   \
  X(nvrtcGetSupportedArchs)      \
  X(nvrtcCreateProgram)          \
  X(nvrtcDestroyProgram)         \
  X(nvrtcCompileProgram)         \
  X(nvrtcGetPTXSize)             \
  X(nvrtcGetPTX)                 \
  X(nvrtcGetCUBINSize)           \
  X(nvrtcGetCUBIN)               \
  X(nvrtcGetLTOIRSize)           \
  X(nvrtcGetLTOIR)               \
  X(nvrtcGetOptiXIRSize)         \
  X(nvrtcGetOptiXIR)             \
  X(nvrtcGetProgramLogSize)      \
  X(nvrtcGetProgramLog)          \
  X(nvrtcAddNameExpression)      \
  X(nvrtcGetLoweredName)         \
  X(nvrtcGetPCHHeapSize)         \
  X(nvrtcSetPCHHeapSize)         \
  X(nvrtcGetPCHCreateStatus)     \
  X(nvrtcGetPCHHeapSizeRequired) \
  X(nvrtcSetFlowCallback)

struct Real {
#define KCACHE_SHIM_MEMBER(name) decltype(&::name) name = nullptr;
  KCACHE_SHIM_FUNCTIONS(KCACHE_SHIM_MEMBER)
#undef KCACHE_SHIM_MEMBER
  void* cpex = nullptr;  // __nvrtcCPEx, NVRTC-internal: forwarded, never called here
  std::string path;
  std::string error;  // why it could not be loaded
};

std::string real_path_of(const std::string& path) {
  char real[PATH_MAX];
  return ::realpath(path.c_str(), real) ? std::string(real) : path;
}

// This library's own file, so the real one is never this one.
std::string own_path() {
  Dl_info info;
  if (::dladdr(reinterpret_cast<void*>(&own_path), &info) && info.dli_fname) {
    return real_path_of(info.dli_fname);
  }
  return "";
}

// Where the real library is (not loaded: the cache identifies it by its
// file), or why there is none.
struct RealPath {
  std::string path;
  std::string error;
};

const RealPath& real_path() {
  static const RealPath* r = [] {
    auto* out = new RealPath;
    const char* real = env::value(env::Var::kcache_real_nvrtc);
    try {
      out->path = real ? real : compiler::find_toolkit("").nvrtc.path;
    } catch (const std::exception& e) {
      out->error = std::string(e.what()) + "; set KCACHE_REAL_NVRTC to the real libnvrtc.so";
      return out;
    }
    if (real_path_of(out->path) == own_path()) {
      out->error = out->path +
                   " is kcache's drop-in libnvrtc itself; set KCACHE_REAL_NVRTC to "
                   "the toolkit's libnvrtc.so";
    }
    return out;
  }();
  return *r;
}

// The real library, loaded at the first call that needs it.
const Real& real() {
  static Real* r = [] {
    auto* out = new Real;  // never freed, like the library
    out->path = real_path().path;
    out->error = real_path().error;
    if (!out->error.empty()) return out;
    std::string load = real_path_of(out->path);
    void* handle = ::dlopen(load.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      out->error = "cannot load the real NVRTC " + load + ": " + (why ? why : "?") +
                   "; set KCACHE_REAL_NVRTC to the toolkit's libnvrtc.so";
      return out;
    }
#define KCACHE_SHIM_RESOLVE(name) \
  out->name = reinterpret_cast<decltype(&::name)>(::dlsym(handle, #name));
    KCACHE_SHIM_FUNCTIONS(KCACHE_SHIM_RESOLVE)
#undef KCACHE_SHIM_RESOLVE
    out->cpex = ::dlsym(handle, "__nvrtcCPEx");
    return out;
  }();
  if (!r->error.empty()) say(r->error);
  return *r;
}

// Calls the real `name` if it has one, else answers NVRTC_ERROR_INTERNAL_ERROR.
#define KCACHE_REAL(name, ...) (real().name ? real().name(__VA_ARGS__) : NVRTC_ERROR_INTERNAL_ERROR)

// ---- The cache ------------------------------------------------------------

// The kcache binary that runs the compile processes: $KCACHE_EXE (kcache run
// sets it), else beside this library as installed (PREFIX/lib/kcache ->
// PREFIX/bin/kcache) or as Bazel builds it (bazel-bin/nvrtc_shim ->
// bazel-bin/cli/kcache). Empty, with `looked` saying where, if none.
std::string kcache_exe(std::string* looked) {
  auto usable = [&](const std::string& path) {
    *looked += (looked->empty() ? "" : ", ") + path;
    return ::access(path.c_str(), X_OK) == 0;
  };
  if (const char* exe = env::value(env::Var::kcache_exe)) {
    return usable(exe) ? std::string(exe) : std::string();
  }
  Dl_info info;
  if (!::dladdr(reinterpret_cast<void*>(&kcache_exe), &info) || !info.dli_fname) return "";
  std::vector<std::string> folders;
  for (const std::string& lib : {std::string(info.dli_fname), real_path_of(info.dli_fname)}) {
    size_t slash = lib.rfind('/');
    std::string folder = slash == std::string::npos ? "." : lib.substr(0, slash);
    if (std::find(folders.begin(), folders.end(), folder) == folders.end()) {
      folders.push_back(folder);
    }
  }
  for (const std::string& folder : folders) {
    for (const char* relative : {"/../../bin/kcache", "/../cli/kcache", "/kcache"}) {
      if (usable(folder + relative)) return real_path_of(folder + relative);
    }
  }
  return "";
}

// The compile processes (made at the first compile) and their binary.
compiler::NvrtcPool* compile_pool = nullptr;
std::string compile_exe;
// Compile processes that end (or stop) without answering this many times
// in a row (a kcache binary that cannot run here) are not started again.
constexpr int kMaxCompileProcessDeaths = 3;

// The pool every program compiles through; null (with the reason said once)
// where kcache cannot work here.
//
// This process holds no store: no SQLite, no blob, no remote, no exit
// handler (compiler/program_service.h says why). Every compile, hit or
// miss, is answered by kcache's compile processes (`kcache __nvrtc-worker`,
// started as posix_spawn starts a child and adopted by init: never the
// program's children), which hold the store, the seal and NVRTC. This
// process keeps only its socket and pipe to each, close-on-exec and
// checked by their identity before each use (NvrtcPool).
compiler::NvrtcPool* make_compile_pool() {
  const RealPath& r = real_path();
  if (!r.error.empty()) {
    say(r.error);
    return nullptr;
  }
  std::string looked;
  std::string exe = kcache_exe(&looked);
  if (exe.empty()) {
    say("compiles are not cached: kcache's compile process was not found (looked for " +
        looked + "); run the program with `kcache run --`, or set KCACHE_EXE to the kcache binary");
    return nullptr;
  }
  try {
    // Never freed: a program's exit must not wait for its compile
    // processes, which end when their input closes with this process.
    auto* pool = new compiler::NvrtcPool({exe, "__nvrtc-worker"}, "");
    compile_exe = exe;
    return pool;
  } catch (const std::exception& e) {
    say(std::string("compiles are not cached: ") + e.what());
    return nullptr;
  }
}

// Made under compiler_mutex, not as a function's static: a host that forks
// while another thread makes it would leave its child waiting on the
// static's guard for good.
compiler::NvrtcPool* cache_pool() {
  static bool tried = false;  // made, or said why not
  std::lock_guard<std::mutex> lock(compiler_mutex);
  if (!tried) {
    tried = true;
    compile_pool = make_compile_pool();
  }
  return compile_pool;
}

// ---- Programs ---------------------------------------------------------------

// What a program handle points to. Until it is compiled it only records; a
// compile answered by the cache keeps the record; anything else (a compile
// kcache cannot make exact, a flow callback, a call before compiling) hands
// the program to a real NVRTC program, `real`, which then answers everything.
struct Program {
  compiler::ProgramSource source;
  bool compiled = false;
  cache::ProgramRecord record;
  std::vector<cache::LoweredName> lowered_names;
  nvrtcProgram real = nullptr;
  int (*flow_callback)(void*, void*) = nullptr;
  void* flow_payload = nullptr;
};

Program* from(nvrtcProgram p) { return reinterpret_cast<Program*>(p); }

// A real NVRTC program of `source`, in `*out`.
nvrtcResult create_real(const compiler::ProgramSource& source, nvrtcProgram* out) {
  std::vector<const char*> texts, names;
  for (const cache::Header& h : source.headers) {
    texts.push_back(h.content.c_str());
    names.push_back(h.include_name.c_str());
  }
  nvrtcResult r = KCACHE_REAL(nvrtcCreateProgram, out, source.source.c_str(), source.name.c_str(),
                              static_cast<int>(texts.size()), texts.data(), names.data());
  if (r != NVRTC_SUCCESS) return r;
  for (const std::string& e : source.name_expressions) {
    r = KCACHE_REAL(nvrtcAddNameExpression, *out, e.c_str());
    if (r != NVRTC_SUCCESS) return r;
  }
  return r;
}

// Makes the real NVRTC program that answers for `p` from now on.
nvrtcResult make_real(Program* p) {
  if (p->real) return NVRTC_SUCCESS;
  nvrtcResult r = create_real(p->source, &p->real);
  if (r == NVRTC_SUCCESS && p->flow_callback) {
    r = KCACHE_REAL(nvrtcSetFlowCallback, p->real, p->flow_callback, p->flow_payload);
  }
  return r;
}

const std::string& display_name(const Program* p) {
  static const std::string default_name = compiler::kDefaultProgramName;
  return p->source.name.empty() ? default_name : p->source.name;
}

// The real NVRTC compiles `p`, which it answers for from now on.
nvrtcResult run_real(Program* p, int n, const char* const* options) {
  nvrtcResult r = make_real(p);
  if (r != NVRTC_SUCCESS) return r;
  p->compiled = true;
  return KCACHE_REAL(nvrtcCompileProgram, p->real, n, options);
}

// `said_as`: the reason `why` is said once under (default: its words).
nvrtcResult compile_real(Program* p, int n, const char* const* options, const std::string& why,
                         const std::string& said_as = "") {
  if (!why.empty()) say("compiled without the cache: " + why, said_as);
  record_stat("real", display_name(p), {why.empty() ? "" : "not cached: " + why});
  return run_real(p, n, options);
}


// The host's fork(): every lock above taken first, in the order they nest,
// and released in both processes (see compiler_mutex). Registered when the
// library loads; a fork then waits for at most the making of the pool or a
// child's start.
void lock_for_fork() {
  compiler_mutex.lock();
  if (compile_pool) compile_pool->lock_for_fork();
  said_mutex.lock();
}
void unlock_after_fork(bool child) {
  said_mutex.unlock();
  if (compile_pool) compile_pool->unlock_after_fork(child);
  compiler_mutex.unlock();
}
const bool fork_safety =
    ::pthread_atfork(lock_for_fork, [] { unlock_after_fork(false); }, [] { unlock_after_fork(true); }) == 0;

// This process's working folder, absolute, or empty (deleted, too long).
std::string working_folder() {
  char cwd[PATH_MAX];
  return ::getcwd(cwd, sizeof cwd) ? std::string(cwd) : std::string();
}

// Says once per reason in this process, whatever thread meets it, that
// kcache's compile process did not answer (`e`) and the real NVRTC does.
void say_unanswered(const std::exception& e) {
  if (dynamic_cast<const compiler::CompileProcessStopped*>(&e) != nullptr) {
    say(std::string("compiled without the cache: ") + e.what() +
            "; the real NVRTC answers, and a new compile process starts for the next compile",
        "stopped");
  } else {
    say("compiled without the cache: kcache's compile process (" + compile_exe +
            ") ended without answering; the real NVRTC answers, and after " +
            std::to_string(kMaxCompileProcessDeaths) +
            " in a row every compile (a new compile process starts for the next one)",
        "ended");
  }
}

// The real NVRTC's answer after kcache's compile process did not answer.
nvrtcResult compile_unanswered(Program* p, int n, const char* const* options,
                               const std::exception& e) {
  say_unanswered(e);
  return compile_real(p, n, options, "");
}

// Gives up a compile process that said nothing within its bound (`how`):
// killed, and the real NVRTC answers (`answered`: it already did, here), said
// once per process.
nvrtcResult compile_wedged(Program* p, int n, const char* const* options,
                           compiler::NvrtcPool::Call& call, const std::string& how,
                           std::optional<nvrtcResult> answered) {
  const pid_t pid = call.give_up();
  say("compiled without the cache: kcache's compile process (pid " + std::to_string(pid) + ") " +
          how + "; it was given up as wedged, the real NVRTC answers, and a new compile process "
          "starts for the next compile",
      "wedged");
  if (!answered) return compile_real(p, n, options, "");
  record_stat("real", display_name(p));
  return *answered;
}

// The real NVRTC's compile of a program on a thread of its own, on a
// program of its own: past the floor of a miss it times NVRTC alone (the
// compile process's bound) while this thread keeps waiting for the compile
// process, whose answer, when it comes, is used at once; the compile here
// then ends unused. Shared with its thread, which may outlive the wait
// (the program it compiles is its own, never the caller's).
class AloneCompile {
 public:
  static std::shared_ptr<AloneCompile> start(const compiler::ProgramSource& source,
                                             const char* const* options, int n) {
    auto self = std::make_shared<AloneCompile>();
    std::vector<std::string> given(options, options + n);
    std::thread([self, source, given] { self->run(source, given); }).detach();
    return self;
  }
  bool finished() {
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_;
  }
  int ms() {
    std::lock_guard<std::mutex> lock(mutex_);
    return ms_;
  }
  // Its program answers for `p` from now on; returns its result.
  nvrtcResult wait_and_adopt(Program* p) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return finished_; });
    if (p->real) KCACHE_REAL(nvrtcDestroyProgram, &p->real);
    p->real = std::exchange(program_, nullptr);
    p->compiled = true;
    return result_;
  }
  // Not needed: its program is destroyed once compiled.
  void abandon() {
    std::lock_guard<std::mutex> lock(mutex_);
    abandoned_ = true;
    if (finished_ && program_) KCACHE_REAL(nvrtcDestroyProgram, &program_);
  }

 private:
  void run(const compiler::ProgramSource& source, const std::vector<std::string>& given) {
    const double started_s = monotonic_s();
    nvrtcProgram program = nullptr;
    nvrtcResult r = create_real(source, &program);
    if (r == NVRTC_SUCCESS) {
      std::vector<const char*> options;
      for (const std::string& o : given) options.push_back(o.c_str());
      r = KCACHE_REAL(nvrtcCompileProgram, program, static_cast<int>(options.size()),
                      options.data());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
    result_ = r;
    ms_ = static_cast<int>((monotonic_s() - started_s) * 1000);
    program_ = program;
    if (abandoned_ && program_) KCACHE_REAL(nvrtcDestroyProgram, &program_);
    done_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable done_;
  bool finished_ = false, abandoned_ = false;
  nvrtcProgram program_ = nullptr;
  nvrtcResult result_ = NVRTC_ERROR_INTERNAL_ERROR;
  int ms_ = 0;
};

// How often the wait past a miss's floor looks whether NVRTC alone is done.
constexpr int kAloneCheckMs = 100;

// The compile process's answer to `call` within its bounds
// (compiler/program_protocol.h), or nothing where the real NVRTC answered
// `p` instead (its result in `*result`).
std::optional<std::string> await_answer(Program* p, int n, const char* const* options,
                                        compiler::NvrtcPool::Call& call, nvrtcResult* result) {
  std::optional<std::string> frame = call.next(compiler::kLookupBoundMs);
  if (!frame) {
    *result = compile_wedged(p, n, options, call,
                             "looked nothing up within " +
                                 std::to_string(compiler::kLookupBoundMs / 1000) + " s",
                             std::nullopt);
    return std::nullopt;
  }
  if (!compiler::is_program_progress(*frame)) return frame;  // a hit, or an error
  if ((frame = call.next(compiler::kNvrtcFloorMs))) return frame;
  // A long miss: NVRTC alone, timed here, bounds the compile process.
  auto alone = AloneCompile::start(p->source, options, n);
  for (;;) {
    try {
      frame = call.next(kAloneCheckMs);
    } catch (const std::exception& e) {
      say_unanswered(e);
      *result = alone->wait_and_adopt(p);
      record_stat("real", display_name(p));
      return std::nullopt;
    }
    if (frame) {
      alone->abandon();  // the compile process's answer stands
      return frame;
    }
    if (alone->finished()) break;
  }
  const int alone_ms = alone->ms();
  const int extra_ms = std::max(compiler::kNvrtcMinExtraMs, compiler::kNvrtcMultiple * alone_ms);
  try {
    frame = call.next(extra_ms);
  } catch (const std::exception& e) {
    say_unanswered(e);
    *result = alone->wait_and_adopt(p);
    record_stat("real", display_name(p));
    return std::nullopt;
  }
  if (frame) {
    alone->abandon();
    return frame;
  }
  *result = compile_wedged(p, n, options, call,
                           "had not answered " + std::to_string(extra_ms / 1000) +
                               " s after NVRTC alone compiled the program here in " +
                               std::to_string(alone_ms) + " ms",
                           alone->wait_and_adopt(p));
  return std::nullopt;
}

// One compile through kcache's compile processes (program_service.h).
nvrtcResult compile_cached(Program* p, int n, const char* const* options,
                           const std::vector<std::string>& given, bool lean) {
  compiler::ProgramRequest request;
  request.program = p->source;
  request.options = given;
  request.lean = lean;
  request.nvrtc_path = real_path().path;
  request.working_dir = working_folder();
  if (const char* pwd = env::read(env::Var::pwd)) request.pwd = pwd;
  if (request.working_dir.empty()) {
    return compile_real(p, n, options, "the working folder has no name (deleted?)");
  }
  compiler::ProgramAnswer answer;
  const double started_s = monotonic_s();
  try {
    std::unique_ptr<compiler::NvrtcPool::Call> call =
        compile_pool->call(compiler::encode_program_request(request));
    nvrtcResult answered = NVRTC_SUCCESS;
    std::optional<std::string> frame = await_answer(p, n, options, *call, &answered);
    if (!frame) return answered;
    call->done();
    answer = compiler::decode_program_answer(*frame);
  } catch (const compiler::CompileProcessStopped& e) {
    return compile_unanswered(p, n, options, e);
  } catch (const std::exception& e) {
    if (compile_pool->deaths_in_a_row() == 0) return compile_real(p, n, options, e.what());
    return compile_unanswered(p, n, options, e);
  }
  for (const std::string& notice : answer.notices) say(notice);
  // Where the compile processes cannot seal NVRTC nothing is stored: said
  // once, one line for every compile it concerns (a failed one then goes to
  // the real NVRTC under the same reason); a hit still is one.
  if (!answer.unsealed.empty() && !(answer.result && answer.result->hit)) {
    say("compiles are not cached: " + answer.unsealed, "unsealed");
  }
  if (!answer.result) {
    return compile_real(p, n, options, answer.error, answer.unsealed.empty() ? "" : "unsealed");
  }
  compiler::ProgramResult& result = *answer.result;
  p->record = std::move(result.record);
  p->lowered_names = std::move(result.lowered_names);
  p->compiled = true;
  const double took_ms = (monotonic_s() - started_s) * 1000;
  const std::string nvrtc_ms = std::to_string(result.compile_ms) + " ms";
  record_stat(result.hit ? "hit" : "miss", display_name(p),
              {result.hit ? "" : result.miss_reason,
               result.hit ? "saved " + nvrtc_ms + " of NVRTC" : "NVRTC took " + nvrtc_ms,
               fixed("took %.1f ms", took_ms), fixed("started at %.6f s", started_s),
               "key " + result.key.hex(),
               result.not_stored.empty() ? "" : "not stored: " + result.not_stored,
               result.any_name         ? "any-name: one entry for every program folder"
               : result.name_dependent ? "name-dependent: kept under its own name"
                                       : ""});
  return static_cast<nvrtcResult>(p->record.compile_result);
}

nvrtcResult compile(Program* p, int n, const char* const* options) {
  if (p->real || p->compiled || n < 0 || (n > 0 && !options)) {
    return compile_real(p, n, options, "");  // NVRTC's own answer to an unusual call
  }
  if (p->flow_callback) return compile_real(p, n, options, "a flow callback is set");
  std::vector<std::string> given;
  for (int i = 0; i < n; ++i) {
    if (!options[i]) return compile_real(p, n, options, "");
    given.emplace_back(options[i]);
  }
  // Mapped here too, so that an option kcache cannot make exact costs no
  // round trip (the compile process maps them again, for its key).
  compiler::MappedProgramOptions mapped = compiler::map_program_options(given);
  if (!mapped.unsupported.empty()) return compile_real(p, n, options, mapped.unsupported);
  if (!cache_pool()) return compile_real(p, n, options, "");  // the reason was said once
  if (compile_pool->deaths_in_a_row() >= kMaxCompileProcessDeaths) {
    return compile_real(p, n, options, "");  // said once (compile_unanswered)
  }
  // Lean CUBINs only when asked: a lean one lacks the internal variables its
  // kernels do not reference, which a program may still look up by name.
  const char* lean = env::read(env::Var::kcache_shim_lean);
  return compile_cached(p, n, options, given, lean && std::strcmp(lean, "1") == 0);
}

// The answer of one recorded output (PTX, CUBIN, ...).
// `forward` names the real function, looked up only when the real NVRTC
// answers: a hit never loads it.
using SizeFunction = nvrtcResult (*Real::*)(nvrtcProgram, size_t*);
using BytesFunction = nvrtcResult (*Real::*)(nvrtcProgram, char*);

nvrtcResult output_size(nvrtcProgram prog, cache::ProgramOutput kind, size_t* size,
                        SizeFunction forward) {
  Program* p = from(prog);
  if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
  if (!p->compiled && !p->real) {
    nvrtcResult r = make_real(p);
    if (r != NVRTC_SUCCESS) return r;
  }
  if (p->real) {
    auto f = real().*forward;
    return f ? f(p->real, size) : NVRTC_ERROR_INTERNAL_ERROR;
  }
  if (!size) return NVRTC_ERROR_INVALID_INPUT;
  const cache::ProgramRecord::Output& o = p->record.output(kind);
  if (o.size_result == NVRTC_SUCCESS) *size = o.bytes.size();
  return static_cast<nvrtcResult>(o.size_result);
}

nvrtcResult output_bytes(nvrtcProgram prog, cache::ProgramOutput kind, char* out,
                         BytesFunction forward) {
  Program* p = from(prog);
  if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
  if (!p->compiled && !p->real) {
    nvrtcResult r = make_real(p);
    if (r != NVRTC_SUCCESS) return r;
  }
  if (p->real) {
    auto f = real().*forward;
    return f ? f(p->real, out) : NVRTC_ERROR_INTERNAL_ERROR;
  }
  if (!out) return NVRTC_ERROR_INVALID_INPUT;
  const cache::ProgramRecord::Output& o = p->record.output(kind);
  if (o.size_result != NVRTC_SUCCESS) return static_cast<nvrtcResult>(o.size_result);
  std::memcpy(out, o.bytes.data(), o.bytes.size());
  return NVRTC_SUCCESS;
}

}  // namespace
}  // namespace kcache::nvrtc_shim

using kcache::nvrtc_shim::from;
using kcache::nvrtc_shim::Program;
using kcache::nvrtc_shim::real;
namespace shim = kcache::nvrtc_shim;
namespace cache = kcache::cache;

extern "C" {

const char* nvrtcGetErrorString(nvrtcResult result) {
  if (real().nvrtcGetErrorString) return real().nvrtcGetErrorString(result);
  return "NVRTC_ERROR unknown";
}

nvrtcResult nvrtcVersion(int* major, int* minor) { return KCACHE_REAL(nvrtcVersion, major, minor); }

nvrtcResult nvrtcGetNumSupportedArchs(int* n) { return KCACHE_REAL(nvrtcGetNumSupportedArchs, n); }

nvrtcResult nvrtcGetSupportedArchs(int* archs) {
  return KCACHE_REAL(nvrtcGetSupportedArchs, archs);
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram* prog, const char* src, const char* name,
                               int num_headers, const char* const* headers,
                               const char* const* include_names) {
  bool plain = prog && src && num_headers >= 0 && (num_headers == 0 || (headers && include_names));
  for (int i = 0; plain && i < num_headers; ++i) plain = headers[i] && include_names[i];
  // Two headers of one name: NVRTC 13 refuses the program (measured).
  for (int i = 0; plain && i < num_headers; ++i) {
    for (int j = 0; plain && j < i; ++j) plain = std::strcmp(include_names[i], include_names[j]) != 0;
  }
  if (!plain) {
    // NVRTC's own answer to an unusual call (and its program, if it makes one).
    nvrtcProgram r = nullptr;
    nvrtcResult result = KCACHE_REAL(nvrtcCreateProgram, prog ? &r : nullptr, src, name,
                                     num_headers, headers, include_names);
    if (result != NVRTC_SUCCESS || !prog) return result;
    auto* p = new (std::nothrow) Program;
    if (!p) return NVRTC_ERROR_OUT_OF_MEMORY;
    p->real = r;
    p->compiled = true;
    *prog = reinterpret_cast<nvrtcProgram>(p);
    return NVRTC_SUCCESS;
  }
  try {
    auto p = std::make_unique<Program>();
    p->source.source = src;
    p->source.name = name ? name : "";
    for (int i = 0; i < num_headers; ++i) {
      p->source.headers.push_back({include_names[i], headers[i]});
    }
    *prog = reinterpret_cast<nvrtcProgram>(p.release());
    return NVRTC_SUCCESS;
  } catch (const std::bad_alloc&) {
    return NVRTC_ERROR_OUT_OF_MEMORY;
  }
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram* prog) {
  if (!prog || !*prog) return NVRTC_ERROR_INVALID_PROGRAM;
  Program* p = from(*prog);
  nvrtcResult r = NVRTC_SUCCESS;
  if (p->real) r = KCACHE_REAL(nvrtcDestroyProgram, &p->real);
  delete p;
  *prog = nullptr;
  return r;
}

nvrtcResult nvrtcAddNameExpression(nvrtcProgram prog, const char* const name_expression) {
  Program* p = from(prog);
  if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
  if (p->real) return KCACHE_REAL(nvrtcAddNameExpression, p->real, name_expression);
  // NVRTC 13's answers (measured): NULL is invalid input before and after
  // compiling; after compiling any other name is refused. Answered here, so
  // that the compiled program keeps its answers.
  if (!name_expression) return NVRTC_ERROR_INVALID_INPUT;
  if (p->compiled) return NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION;
  if (!*name_expression) {
    nvrtcResult r = shim::make_real(p);  // NVRTC's own answer, and its compile
    return r != NVRTC_SUCCESS ? r : KCACHE_REAL(nvrtcAddNameExpression, p->real, name_expression);
  }
  try {
    p->source.name_expressions.emplace_back(name_expression);
  } catch (const std::bad_alloc&) {
    return NVRTC_ERROR_OUT_OF_MEMORY;
  }
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int num_options, const char* const* options) {
  Program* p = from(prog);
  if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
  return shim::compile(p, num_options, options);
}

nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t* size) {
  return shim::output_size(prog, cache::ProgramOutput::ptx, size, &shim::Real::nvrtcGetPTXSize);
}
nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char* ptx) {
  return shim::output_bytes(prog, cache::ProgramOutput::ptx, ptx, &shim::Real::nvrtcGetPTX);
}
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t* size) {
  return shim::output_size(prog, cache::ProgramOutput::cubin, size, &shim::Real::nvrtcGetCUBINSize);
}
nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char* cubin) {
  return shim::output_bytes(prog, cache::ProgramOutput::cubin, cubin, &shim::Real::nvrtcGetCUBIN);
}
nvrtcResult nvrtcGetLTOIRSize(nvrtcProgram prog, size_t* size) {
  return shim::output_size(prog, cache::ProgramOutput::ltoir, size, &shim::Real::nvrtcGetLTOIRSize);
}
nvrtcResult nvrtcGetLTOIR(nvrtcProgram prog, char* ltoir) {
  return shim::output_bytes(prog, cache::ProgramOutput::ltoir, ltoir, &shim::Real::nvrtcGetLTOIR);
}
nvrtcResult nvrtcGetOptiXIRSize(nvrtcProgram prog, size_t* size) {
  return shim::output_size(prog, cache::ProgramOutput::optixir, size,
                           &shim::Real::nvrtcGetOptiXIRSize);
}
nvrtcResult nvrtcGetOptiXIR(nvrtcProgram prog, char* optixir) {
  return shim::output_bytes(prog, cache::ProgramOutput::optixir, optixir,
                            &shim::Real::nvrtcGetOptiXIR);
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t* size) {
  Program* p = from(prog);
  if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
  if (!p->compiled && !p->real && shim::make_real(p) != NVRTC_SUCCESS) {
    return NVRTC_ERROR_INVALID_PROGRAM;
  }
  if (p->real) return KCACHE_REAL(nvrtcGetProgramLogSize, p->real, size);
  if (!size) return NVRTC_ERROR_INVALID_INPUT;
  *size = p->record.log.size() + 1;  // NVRTC counts the terminating NUL
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char* log) {
  Program* p = from(prog);
  if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
  if (!p->compiled && !p->real && shim::make_real(p) != NVRTC_SUCCESS) {
    return NVRTC_ERROR_INVALID_PROGRAM;
  }
  if (p->real) return KCACHE_REAL(nvrtcGetProgramLog, p->real, log);
  if (!log) return NVRTC_ERROR_INVALID_INPUT;
  std::memcpy(log, p->record.log.c_str(), p->record.log.size() + 1);
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetLoweredName(nvrtcProgram prog, const char* const name_expression,
                                const char** lowered_name) {
  Program* p = from(prog);
  if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
  if (!p->compiled && !p->real && shim::make_real(p) != NVRTC_SUCCESS) {
    return NVRTC_ERROR_INVALID_PROGRAM;
  }
  if (p->real) return KCACHE_REAL(nvrtcGetLoweredName, p->real, name_expression, lowered_name);
  if (!name_expression || !lowered_name) return NVRTC_ERROR_INVALID_INPUT;
  if (p->record.compile_result != NVRTC_SUCCESS) {
    return NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION;
  }
  for (const cache::LoweredName& n : p->lowered_names) {
    if (n.name_expression == name_expression) {
      *lowered_name = n.lowered_name.c_str();  // lives as long as the program
      return NVRTC_SUCCESS;
    }
  }
  return NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID;
}

nvrtcResult nvrtcGetPCHHeapSize(size_t* ret) { return KCACHE_REAL(nvrtcGetPCHHeapSize, ret); }

nvrtcResult nvrtcSetPCHHeapSize(size_t size) { return KCACHE_REAL(nvrtcSetPCHHeapSize, size); }

nvrtcResult nvrtcGetPCHCreateStatus(nvrtcProgram prog) {
  Program* p = from(prog);
  if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
  if (p->real) return KCACHE_REAL(nvrtcGetPCHCreateStatus, p->real);
  // PCH options always compile with the real NVRTC (program.h).
  return NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED;
}

nvrtcResult nvrtcGetPCHHeapSizeRequired(nvrtcProgram prog, size_t* size) {
  Program* p = from(prog);
  if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
  if (p->real) return KCACHE_REAL(nvrtcGetPCHHeapSizeRequired, p->real, size);
  // No PCH option compiles through the cache (program.h): NVRTC 13 answers
  // such a program, compiled or not, with 0 bytes (measured).
  if (!size) return NVRTC_ERROR_INVALID_INPUT;
  *size = 0;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcSetFlowCallback(nvrtcProgram prog, int (*callback)(void*, void*), void* payload) {
  Program* p = from(prog);
  if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
  if (p->real) return KCACHE_REAL(nvrtcSetFlowCallback, p->real, callback, payload);
  // A program that may cancel its compile gets the real NVRTC, which calls back.
  p->flow_callback = callback;
  p->flow_payload = payload;
  return NVRTC_SUCCESS;
}

// __nvrtcCPEx (NVRTC-internal, its signature unpublished) is forwarded by a
// stub in cpex_forward.S, which asks this for the real address first.
void* kcache_nvrtc_shim_cpex_target() { return real().cpex; }

}  // extern "C"
