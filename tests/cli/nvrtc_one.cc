// A program that compiles one kernel through NVRTC's C API, opening
// "libnvrtc.so.13" by soname as CuPy does, so that `kcache run` puts the
// drop-in in its place:
//
//   nvrtc_one INCLUDE_DIR
//
// The kernel includes "v.h" from INCLUDE_DIR. Exits 0 when NVRTC compiled it.
#include <dlfcn.h>
#include <nvrtc.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: nvrtc_one INCLUDE_DIR\n");
    return 2;
  }
  void* nvrtc = ::dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!nvrtc) {
    std::fprintf(stderr, "nvrtc_one: %s\n", ::dlerror());
    return 2;
  }
  auto create =
      reinterpret_cast<decltype(&nvrtcCreateProgram)>(::dlsym(nvrtc, "nvrtcCreateProgram"));
  auto compile =
      reinterpret_cast<decltype(&nvrtcCompileProgram)>(::dlsym(nvrtc, "nvrtcCompileProgram"));
  auto destroy =
      reinterpret_cast<decltype(&nvrtcDestroyProgram)>(::dlsym(nvrtc, "nvrtcDestroyProgram"));
  if (!create || !compile || !destroy) return 2;
  const char* source = "#include \"v.h\"\nextern \"C\" __global__ void k(int* p) { *p = V; }\n";
  nvrtcProgram program;
  if (create(&program, source, "k.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS) return 1;
  const std::string include = std::string("-I") + argv[1];
  const char* options[] = {"-arch=sm_80", include.c_str()};
  nvrtcResult result = compile(program, 2, options);
  destroy(&program);
  return result == NVRTC_SUCCESS ? 0 : 1;
}
