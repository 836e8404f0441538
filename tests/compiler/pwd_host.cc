// A host program of the drop-in libnvrtc that compiles one program with
// -lineinfo under each $PWD it is given, as a program whose shell or
// launcher moved it does: first with the $PWD it started with, then after
// setting $PWD to each argument (each names the same working folder through
// another link). Writes every PTX, in order, to OUT.
//
//   pwd_host OUT [PWD...]
#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

std::string lineinfo_ptx() {
  const char* source = "extern \"C\" __global__ void k(int* p) { *p = 7; }\n";
  nvrtcProgram p;
  if (nvrtcCreateProgram(&p, source, "kern.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    std::exit(3);
  }
  const char* options[] = {"-arch=compute_80", "-lineinfo"};
  if (nvrtcCompileProgram(p, 2, options) != NVRTC_SUCCESS) std::exit(4);
  size_t size = 0;
  nvrtcGetPTXSize(p, &size);
  std::string ptx(size, '\0');
  nvrtcGetPTX(p, &ptx[0]);
  nvrtcDestroyProgram(&p);
  return ptx;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string out = lineinfo_ptx();
  for (int i = 2; i < argc; ++i) {
    ::setenv("PWD", argv[i], 1);
    out += "=====\n" + lineinfo_ptx();
  }
  FILE* f = std::fopen(argv[1], "w");
  if (!f) return 5;
  std::fwrite(out.data(), 1, out.size(), f);
  return std::fclose(f) == 0 ? 0 : 5;
}
