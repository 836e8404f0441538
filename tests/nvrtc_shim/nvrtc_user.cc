// A program that compiles CUDA at run time through NVRTC's C API the way
// real programs do, written without kcache in mind: the drop-in libnvrtc's
// test runs it with and without the shim and compares what it wrote.
//
//   nvrtc_user OUT_DIR INCLUDE_DIR
//
// Built twice: linked against libnvrtc.so.13 (found by the loader), and with
// NVRTC_USER_DLOPEN, opening "libnvrtc.so.13" by soname as CuPy and
// cuda-python do. Writes, per program, every answer it got: result codes,
// PTX, CUBIN, the log and the lowered names.
#include <nvrtc.h>

#include <dirent.h>
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifdef NVRTC_USER_DLOPEN
#include <dlfcn.h>
#endif

namespace {

struct Api {
#define NVRTC_USER_FUNCTIONS(X)                                                                \
  X(nvrtcCreateProgram)                                                                        \
  X(nvrtcDestroyProgram)                                                                       \
  X(nvrtcCompileProgram)                                                                       \
  X(nvrtcGetPTXSize) X(nvrtcGetPTX) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcGetLTOIRSize) \
      X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcAddNameExpression)                \
          X(nvrtcGetLoweredName) X(nvrtcVersion)
#define NVRTC_USER_MEMBER(name) decltype(&::name) name = nullptr;
  NVRTC_USER_FUNCTIONS(NVRTC_USER_MEMBER)
#undef NVRTC_USER_MEMBER
};

Api load() {
  Api api;
#ifdef NVRTC_USER_DLOPEN
  void* h = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "nvrtc_user: %s\n", dlerror());
    std::exit(2);
  }
#define NVRTC_USER_LOAD(name) api.name = reinterpret_cast<decltype(&::name)>(dlsym(h, #name));
#else
#define NVRTC_USER_LOAD(name) api.name = &::name;
#endif
  NVRTC_USER_FUNCTIONS(NVRTC_USER_LOAD)
#undef NVRTC_USER_LOAD
  return api;
}

const Api& nvrtc() {
  static Api api = load();
  return api;
}

std::string out_dir;

void write(const std::string& name, const std::string& bytes) {
  std::ofstream(out_dir + "/" + name, std::ios::binary) << bytes;
}

// Compiles one program and writes every answer under `tag`.
void compile(const std::string& tag, const std::string& source, const char* name,
             const std::vector<std::pair<std::string, std::string>>& headers,
             const std::vector<std::string>& options, const std::vector<std::string>& exprs) {
  const Api& api = nvrtc();
  std::vector<const char*> texts, names, opts;
  for (const auto& h : headers) {
    names.push_back(h.first.c_str());
    texts.push_back(h.second.c_str());
  }
  std::vector<std::string> all = options;
  // The test's way to add an option to every compile.
  if (const char* extra = std::getenv("NVRTC_USER_EXTRA_OPTION")) all.push_back(extra);
  // The test's way to give -I's folder as the next argument, NVRTC's other
  // spelling: NVRTC_USER_SPLIT_INCLUDE names the option ("-I", "--include-path").
  if (const char* split = std::getenv("NVRTC_USER_SPLIT_INCLUDE")) {
    std::vector<std::string> spelled;
    for (const std::string& o : all) {
      if (o.compare(0, 2, "-I") == 0 && o.size() > 2) {
        spelled.push_back(split);
        spelled.push_back(o.substr(2));
      } else {
        spelled.push_back(o);
      }
    }
    all = spelled;
  }
  for (const std::string& o : all) opts.push_back(o.c_str());
  std::ostringstream codes;
  nvrtcProgram prog = nullptr;
  codes << "create "
        << api.nvrtcCreateProgram(&prog, source.c_str(), name, static_cast<int>(texts.size()),
                                  texts.data(), names.data())
        << "\n";
  for (const std::string& e : exprs) {
    codes << "name " << api.nvrtcAddNameExpression(prog, e.c_str()) << "\n";
  }
  codes << "compile " << api.nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data())
        << "\n";
  size_t size = 0;
  nvrtcResult r = api.nvrtcGetProgramLogSize(prog, &size);
  codes << "log " << r << " " << size << "\n";
  if (r == NVRTC_SUCCESS) {
    std::string log(size, '\0');
    codes << "log_bytes " << api.nvrtcGetProgramLog(prog, &log[0]) << "\n";
    write(tag + ".log", log);
  }
  r = api.nvrtcGetPTXSize(prog, &size);
  codes << "ptx " << r << " " << (r == NVRTC_SUCCESS ? size : 0) << "\n";
  if (r == NVRTC_SUCCESS && size) {
    std::string ptx(size, '\0');
    codes << "ptx_bytes " << api.nvrtcGetPTX(prog, &ptx[0]) << "\n";
    write(tag + ".ptx", ptx);
  }
  r = api.nvrtcGetCUBINSize(prog, &size);
  codes << "cubin " << r << " " << (r == NVRTC_SUCCESS ? size : 0) << "\n";
  if (r == NVRTC_SUCCESS && size) {
    std::string cubin(size, '\0');
    codes << "cubin_bytes " << api.nvrtcGetCUBIN(prog, &cubin[0]) << "\n";
    write(tag + ".cubin", cubin);
  }
  r = api.nvrtcGetLTOIRSize(prog, &size);
  codes << "ltoir " << r << " " << (r == NVRTC_SUCCESS ? size : 0) << "\n";
  for (const std::string& e : exprs) {
    const char* lowered = nullptr;
    r = api.nvrtcGetLoweredName(prog, e.c_str(), &lowered);
    codes << "lowered " << e << " " << r << " " << (lowered ? lowered : "-") << "\n";
  }
  const char* none = nullptr;
  codes << "lowered_unknown " << api.nvrtcGetLoweredName(prog, "no_such<int>", &none) << "\n";
  codes << "destroy " << api.nvrtcDestroyProgram(&prog) << "\n";
  write(tag + ".codes", codes.str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: nvrtc_user OUT_DIR INCLUDE_DIR\n");
    return 2;
  }
  out_dir = argv[1];
  const std::string include = std::string("-I") + argv[2];

  // One real kernel instead (the test's CUTLASS GEMM): NVRTC_USER_FILE names
  // its source, which is also its program name, and NVRTC_USER_OPTIONS its
  // options, one per line. Its answers are written under "file".
  if (const char* file = std::getenv("NVRTC_USER_FILE")) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream source;
    source << in.rdbuf();
    std::vector<std::string> options;
    std::istringstream lines(std::getenv("NVRTC_USER_OPTIONS") ? std::getenv("NVRTC_USER_OPTIONS")
                                                               : "");
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) options.push_back(line);
    }
    compile("file", source.str(), file, {}, options, {});
    return 0;
  }

  // A template kernel instantiated through name expressions, with a header
  // in memory and one from an -I folder, as a cubin.
  const std::string scale =
      "#include \"params.h\"\n"
      "#include \"disk_util.h\"\n"
      "template <typename T>\n"
      "__global__ void scale(T* x, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) x[i] = twice(x[i]) * kFactor;\n"
      "}\n";
  const std::vector<std::pair<std::string, std::string>> params = {
      {"params.h", "#pragma once\nconstexpr int kFactor = 3;\n"}};
  compile("scale_cubin", scale, "scale.cu", params, {"-arch=sm_80", include, "-std=c++17"},
          {"scale<float>", "scale<double>"});
  // The same as PTX for a virtual arch (no CUBIN: NVRTC says so).
  compile("scale_ptx", scale, "scale.cu", params,
          {"--gpu-architecture=compute_80", include, "-DUNUSED=1"}, {"scale<int>"});
  // A source NVRTC rejects: the log is the answer.
  compile("broken", "__global__ void broken() { undeclared_call(); }\n", nullptr, {},
          {"-arch=sm_80"}, {});
  // A warning in the log of a compile that succeeds.
  compile("warns", "__global__ void warns() { int unused = 1; }\n", "warns.cu", {},
          {"-arch=sm_90", "--fmad=false"}, {});
  // libcu++ (its folder named by the test): CCCL variables the lean pass cuts.
  if (const char* toolkit_include = std::getenv("NVRTC_USER_TOOLKIT_INCLUDE")) {
    const std::string dir = toolkit_include;
    compile(
        "limits",
        "#include <cuda/std/limits>\n"
        "__global__ void limits(float* x) { x[0] = cuda::std::numeric_limits<float>::max(); }\n",
        "limits.cu", {}, {"-arch=sm_90", "-I" + dir + "/cccl", "-I" + dir, "-std=c++17"}, {});
  }
  // Several threads at once, each its own program.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, include] {
      std::string source = "#include \"disk_util.h\"\n__global__ void k" + std::to_string(t) +
                           "(float* x) { x[0] = twice(x[0]) + " + std::to_string(t) + "; }\n";
      compile("thread" + std::to_string(t), source, ("k" + std::to_string(t) + ".cu").c_str(), {},
              {"-arch=sm_75", include}, {});
    });
  }
  for (std::thread& th : threads) th.join();
  // A fork() after compiling: the child and the parent each compile again
  // (the child must not talk to the parent's compile processes).
  if (std::getenv("NVRTC_USER_FORK")) {
    auto forked_source = [](const char* who) {
      return std::string("__global__ void ") + who + "(int* p) { p[0] = " +
             std::to_string(std::strlen(who)) + "; }\n";
    };
    pid_t child = ::fork();
    if (child == 0) {
      compile("forked_child", forked_source("child_kernel"), "child.cu", {}, {"-arch=sm_80"}, {});
      ::_exit(0);
    }
    compile("forked_parent", forked_source("parent_kernel"), "parent.cu", {}, {"-arch=sm_80"}, {});
    int status = 0;
    if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "nvrtc_user: the forked child failed\n");
      return 1;
    }
  }
  // For the test: what the compiles left in this process's state, which must
  // be what it was before (kept apart from the answers).
  if (const char* state_out = std::getenv("NVRTC_USER_HOST_STATE")) {
    std::ofstream state(state_out);
    // Every thread's privileges and filters: no no_new_privs, no seccomp.
    if (DIR* tasks = ::opendir("/proc/self/task")) {
      while (dirent* e = ::readdir(tasks)) {
        if (e->d_name[0] == '.') continue;
        std::ifstream status(std::string("/proc/self/task/") + e->d_name + "/status");
        std::string line;
        while (std::getline(status, line)) {
          if (line.rfind("NoNewPrivs:", 0) == 0 || line.rfind("Seccomp:", 0) == 0) {
            state << "thread " << line << "\n";
          }
        }
      }
      ::closedir(tasks);
    }
    char cwd[PATH_MAX];
    state << "cwd " << (::getcwd(cwd, sizeof cwd) ? cwd : "?") << "\n";
    const char* tmpdir = std::getenv("TMPDIR");
    state << "TMPDIR " << (tmpdir ? tmpdir : "(unset)") << "\n";
  }
  // For the test: which libnvrtc files this process mapped (kept apart from
  // the answers, which must not depend on it).
  if (const char* maps_out = std::getenv("NVRTC_USER_MAPS")) {
    std::ifstream maps("/proc/self/maps");
    std::string line, mapped;
    while (std::getline(maps, line)) {
      size_t at = line.find('/');
      if (line.find("libnvrtc") != std::string::npos && at != std::string::npos &&
          mapped.find(line.substr(at)) == std::string::npos) {
        mapped += line.substr(at) + "\n";
      }
    }
    std::ofstream(maps_out) << mapped;
  }
  return 0;
}
