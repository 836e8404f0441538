// Adversarial cases for the drop-in libnvrtc (drop_in_attack_test.cc runs
// each with the real NVRTC and with the shim, a miss then a hit, and compares
// every answer):
//
//   nvrtc_attack OUT_DIR CASE
//   nvrtc_attack OUT_DIR --steps FILE
//
// The second form (option_differential_test.cc) compiles one program per
// step of FILE: a line "@@ NAME" starts a step, each following line is one
// option of its list, as written. Step NAME writes NAME.codes, NAME.<what>.
//
// $ATTACK_DIR is a scratch folder the test made (headers, files NVRTC may
// write); $ATTACK_CWD, when set, is the working folder the case runs in.
// Writes OUT_DIR/CASE.codes (every result code and size, in order) and the
// bytes of every output as OUT_DIR/CASE.<what>.
#include <nvrtc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string out_dir, case_name, scratch;
std::ostringstream codes;
int outputs = 0;
// Only the cases about PCH ask for its status (every compile answers it
// differently through the shim: PchHeapSizeRequiredAfterCompile).
bool pch_queries = false;

void write(const std::string& what, const std::string& bytes) {
  std::ofstream(out_dir + "/" + case_name + "." + what, std::ios::binary) << bytes;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

using SizeFn = nvrtcResult (*)(nvrtcProgram, size_t*);
using BytesFn = nvrtcResult (*)(nvrtcProgram, char*);

void output(nvrtcProgram prog, const char* what, SizeFn size_fn, BytesFn bytes_fn) {
  size_t size = 12345;
  nvrtcResult r = size_fn(prog, &size);
  codes << what << " " << r << " " << (r == NVRTC_SUCCESS ? size : 0) << "\n";
  if (r == NVRTC_SUCCESS && size) {
    std::string bytes(size, '\0');
    codes << what << "_bytes " << bytes_fn(prog, &bytes[0]) << "\n";
    write(std::to_string(outputs++) + "." + what, bytes);
  }
}

// Every answer a compiled program gives.
void answers(nvrtcProgram prog, const std::vector<std::string>& exprs,
             const std::vector<std::string>& lookups = {}) {
  size_t size = 0;
  nvrtcResult r = nvrtcGetProgramLogSize(prog, &size);
  codes << "log " << r << " " << size << "\n";
  if (r == NVRTC_SUCCESS) {
    std::string log(size, '\0');
    codes << "log_bytes " << nvrtcGetProgramLog(prog, &log[0]) << "\n";
    write(std::to_string(outputs++) + ".log", log);
  }
  output(prog, "ptx", nvrtcGetPTXSize, nvrtcGetPTX);
  output(prog, "cubin", nvrtcGetCUBINSize, nvrtcGetCUBIN);
  output(prog, "ltoir", nvrtcGetLTOIRSize, nvrtcGetLTOIR);
  output(prog, "optixir", nvrtcGetOptiXIRSize, nvrtcGetOptiXIR);
  std::vector<std::string> all = exprs;
  all.insert(all.end(), lookups.begin(), lookups.end());
  for (const std::string& e : all) {
    const char* lowered = nullptr;
    r = nvrtcGetLoweredName(prog, e.c_str(), &lowered);
    codes << "lowered [" << e << "] " << r << " " << (lowered ? lowered : "-") << "\n";
  }
  if (pch_queries) {
    codes << "pch_status " << nvrtcGetPCHCreateStatus(prog) << "\n";
    size_t heap = 777;
    r = nvrtcGetPCHHeapSizeRequired(prog, &heap);
    codes << "pch_heap_required " << r << " " << (r == NVRTC_SUCCESS ? heap : 0) << "\n";
  }
}

const char* kSource =
    "template <typename T> __global__ void k(T* x) { x[0] = x[0] * 2; }\n"
    "__global__ void plain(float* x) { x[0] += 1.0f; }\n";

struct Case {
  std::string source = kSource;
  const char* name = "attack.cu";
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::string> options = {"-arch=sm_90"};
  std::vector<std::string> exprs = {"k<float>"};
  std::vector<std::string> lookups;       // lowered names asked for, never added
  std::vector<std::string> files;         // files NVRTC may write: do they exist after?
  bool null_name = false;
};

void compile(Case c) {
  std::vector<const char*> texts, names, opts;
  for (const auto& h : c.headers) {
    names.push_back(h.first.c_str());
    texts.push_back(h.second.c_str());
  }
  for (const std::string& o : c.options) opts.push_back(o.c_str());
  nvrtcProgram prog = nullptr;
  codes << "create "
        << nvrtcCreateProgram(&prog, c.source.c_str(), c.null_name ? nullptr : c.name,
                              static_cast<int>(texts.size()), texts.data(), names.data())
        << "\n";
  for (const std::string& e : c.exprs) {
    codes << "name [" << e << "] " << nvrtcAddNameExpression(prog, e.c_str()) << "\n";
  }
  codes << "compile " << nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data())
        << "\n";
  answers(prog, c.exprs, c.lookups);
  for (const std::string& f : c.files) {
    codes << "file " << f.substr(f.rfind('/') + 1) << " " << (exists(f) ? "written" : "absent")
          << "\n";
  }
  codes << "destroy " << nvrtcDestroyProgram(&prog) << "\n";
}

Case with_options(std::vector<std::string> options) {
  Case c;
  c.options = std::move(options);
  return c;
}

std::map<std::string, std::function<void()>> cases() {
  const std::string s = scratch;
  std::map<std::string, std::function<void()>> m;
  // ---- 1. Options.
  m["DlinkTimeOptLongSpelling"] = [] { compile(with_options({"-arch=sm_90", "--dlink-time-opt"})); };
  m["DlinkTimeOptLongSpellingAbsoluteName"] = [s] {
    Case c = with_options({"-arch=sm_90", "--dlink-time-opt"});
    static std::string name = s + "/lto_abs.cu";
    c.name = name.c_str();
    compile(c);
  };
  m["DltoShortSpelling"] = [] { compile(with_options({"-arch=sm_90", "-dlto"})); };
  m["GenOptLto"] = [] { compile(with_options({"-arch=sm_90", "-gen-opt-lto"})); };
  m["GenOptLtoLong"] = [] { compile(with_options({"-arch=sm_90", "--gen-opt-lto"})); };
  m["DltoWithGenOptLto"] = [] {
    compile(with_options({"-arch=sm_90", "--dlink-time-opt", "--gen-opt-lto"}));
  };
  m["ComputeArchPtxOnly"] = [] { compile(with_options({"-arch=compute_90"})); };
  m["RdcTrue"] = [] { compile(with_options({"-arch=sm_90", "-rdc=true"})); };
  m["DeviceC"] = [] { compile(with_options({"-arch=sm_90", "-dc"})); };
  m["DeviceW"] = [] { compile(with_options({"-arch=sm_90", "-dw"})); };
  m["DeviceDebugG"] = [] { compile(with_options({"-arch=sm_90", "-G"})); };
  m["LineInfo"] = [] { compile(with_options({"-arch=sm_90", "-lineinfo"})); };
  m["UseFastMath"] = [] { compile(with_options({"-arch=sm_90", "--use_fast_math"})); };
  m["UseFastMathTwice"] = [] {
    compile(with_options({"-arch=sm_90", "--use_fast_math", "-use_fast_math"}));
  };
  m["StdCxx20"] = [] { compile(with_options({"-arch=sm_90", "-std=c++20"})); };
  m["DefaultDevice"] = [] {
    Case c = with_options({"-arch=sm_90", "-default-device"});
    c.source += "int helper(int x) { return x + 1; }\n";
    compile(c);
  };
  m["Ewp"] = [] { compile(with_options({"-arch=sm_90", "-ewp"})); };
  m["XptxasVerbose"] = [] { compile(with_options({"-arch=sm_90", "-Xptxas=-v"})); };
  m["XptxasSeparate"] = [] { compile(with_options({"-arch=sm_90", "-Xptxas", "-v"})); };
  m["PtxasOptionsSeparateLooksLikeDefine"] = [] {
    compile(with_options({"-arch=sm_90", "--ptxas-options", "-DX"}));
  };
  m["XptxasSeparateBeforeInclude"] = [s] {
    compile(with_options({"-arch=sm_90", "-Xptxas", "-I" + s}));
  };
  m["TimeFile"] = [s] {
    Case c = with_options({"-arch=sm_90", "-time=" + s + "/time.csv"});
    c.files = {s + "/time.csv"};
    compile(c);
  };
  m["DeviceTimeTrace"] = [s] {
    // NVRTC writes FILE.json (and a later compile fails on one left over).
    Case c = with_options({"-arch=sm_90", "--fdevice-time-trace=" + s + "/trace.json"});
    c.files = {s + "/trace.json", s + "/trace.json.json"};
    compile(c);
  };
  m["SplitCompile"] = [] { compile(with_options({"-arch=sm_90", "-split-compile=2"})); };
  m["Minimal"] = [] {
    Case c = with_options({"-arch=sm_90", "--minimal"});
    compile(c);
  };
  m["SyntaxOnly"] = [] { compile(with_options({"-arch=sm_90", "-fdevice-syntax-only"})); };
  m["OfastCompileMax"] = [] { compile(with_options({"-arch=sm_90", "-Ofc=max"})); };
  m["NoSourceInclude"] = [s] {
    // A header next to the program's (absolute) name: NVRTC searches there
    // unless -no-source-include.
    Case c = with_options({"-arch=sm_90", "-no-source-include", "-DHAVE_IT=1"});
    static std::string name = s + "/src/nsi.cu";
    c.name = name.c_str();
    c.source = std::string("#if __has_include(\"beside.h\")\n#include \"beside.h\"\n#else\n"
                           "#define BESIDE 0\n#endif\n__global__ void b(int* p) { p[0] = BESIDE; }\n");
    compile(c);
  };
  m["PchHeapSizeRequiredAfterCompile"] = [] {
    pch_queries = true;
    compile(with_options({"-arch=sm_90"}));
  };
  m["PchAuto"] = [] {
    pch_queries = true;
    compile(with_options({"-arch=sm_90", "-pch"})); };
  m["InstantiateTemplatesInPchAlone"] = [] {
    compile(with_options({"-arch=sm_90", "--instantiate-templates-in-pch=true"}));
  };
  m["CreatePch"] = [s] {
    pch_queries = true;
    Case c = with_options({"-arch=sm_90", "--create-pch=" + s + "/mine.pch"});
    c.files = {s + "/mine.pch"};
    compile(c);
  };
  m["IncludeFolderMissing"] = [] {
    compile(with_options({"-arch=sm_90", "-I/nonexistent/kcache/attack"}));
  };
  m["ArchTwiceSameValue"] = [] {
    compile(with_options({"-arch=sm_90", "--gpu-architecture=sm_90"}));
  };
  m["FmadLastWins"] = [] { compile(with_options({"-arch=sm_90", "--fmad=false", "-fmad=true"})); };
  m["OptInfoInline"] = [] {
    Case c = with_options({"-arch=sm_90", "-opt-info=inline"});
    c.source = "__device__ int f(int x) { return x * 3; }\n"
               "__global__ void g(int* p) { p[0] = f(p[1]); }\n";
    c.exprs = {};
    compile(c);
  };
  m["DisplayErrorNumberWarning"] = [] {
    Case c = with_options({"-arch=sm_90", "-err-no"});
    c.source = "__global__ void w() { int unused = 1; }\n";
    c.exprs = {};
    compile(c);
  };
  m["UnknownOption"] = [] { compile(with_options({"-arch=sm_90", "--no-such-option"})); };
  m["NoArch"] = [] { compile(with_options({})); };
  // ---- 2. Name expressions.
  m["NamesOverloadsAndTemplates"] = [] {
    Case c;
    c.source = "__device__ int f(int x) { return x; }\n"
               "__device__ float f(float x) { return x; }\n"
               "template <typename T, int N> __global__ void t(T* x) { x[0] = f(x[0]) + N; }\n"
               "namespace ns { __device__ int var = 3; template <class T> __global__ void u(T*) {} }\n";
    c.exprs = {"t<int, 3>", "t<float,4>", "&ns::var", "ns::u<double>", "(int(*)(int))f"};
    c.lookups = {"t<int,3>", "t<float, 4>", "ns::var", "&ns::var "};
    compile(c);
  };
  m["NamesReversedOrder"] = [] {
    Case c;
    c.exprs = {"plain", "k<double>", "k<float>"};
    compile(c);
  };
  m["NameTwice"] = [] {
    Case c;
    c.exprs = {"k<float>", "k<float>"};
    compile(c);
  };
  m["NameThatDoesNotExist"] = [] {
    Case c;
    c.exprs = {"k<float>", "missing_kernel<int>"};
    compile(c);
  };
  m["NameNotAddedLookedUp"] = [] {
    Case c;
    c.exprs = {"k<float>"};
    c.lookups = {"k<double>", "plain", ""};
    compile(c);
  };
  m["NameAfterCompileAndNullLowered"] = [] {
    nvrtcProgram prog = nullptr;
    codes << "create " << nvrtcCreateProgram(&prog, kSource, "n.cu", 0, nullptr, nullptr) << "\n";
    codes << "name " << nvrtcAddNameExpression(prog, "k<float>") << "\n";
    const char* opts[] = {"-arch=sm_90"};
    codes << "compile " << nvrtcCompileProgram(prog, 1, opts) << "\n";
    codes << "name_after " << nvrtcAddNameExpression(prog, "k<int>") << "\n";
    codes << "lowered_null_out " << nvrtcGetLoweredName(prog, "k<float>", nullptr) << "\n";
    const char* l = nullptr;
    codes << "lowered_null_expr " << nvrtcGetLoweredName(prog, nullptr, &l) << "\n";
    codes << "name_null " << nvrtcAddNameExpression(prog, nullptr) << "\n";
    answers(prog, {"k<float>", "k<int>"});
    codes << "destroy " << nvrtcDestroyProgram(&prog) << "\n";
  };
  m["LoweredNamesOfAFailedCompile"] = [] {
    Case c;
    c.source = std::string(kSource) + "__global__ void bad() { nope(); }\n";
    c.exprs = {"k<float>"};
    compile(c);
  };
  // ---- 3. In-memory headers.
  m["HeaderSameNameTwiceDifferentContent"] = [] {
    Case c;
    c.source = "#include \"dup.h\"\n__global__ void h(int* p) { p[0] = DUP; }\n";
    c.headers = {{"dup.h", "#define DUP 1\n"}, {"dup.h", "#define DUP 2\n"}};
    c.exprs = {};
    compile(c);
  };
  m["HeaderShadowsDiskHeader"] = [s] {
    Case c = with_options({"-arch=sm_90", "-I" + s + "/inc"});
    c.source = "#include \"shadow.h\"\n__global__ void h(int* p) { p[0] = SHADOW; }\n";
    c.headers = {{"shadow.h", "#define SHADOW 1\n"}};
    c.exprs = {};
    compile(c);
  };
  m["HeaderNamedWithDotDot"] = [s] {
    Case c = with_options({"-arch=sm_90", "-I" + s + "/inc"});
    c.source = "#include \"../up.h\"\n__global__ void h(int* p) { p[0] = UP; }\n";
    c.headers = {{"../up.h", "#define UP 7\n"}};
    c.exprs = {};
    compile(c);
  };
  m["HeaderAbsoluteNameShadowsDisk"] = [s] {
    static std::string abs = s + "/inc/shadow.h";
    Case c;
    c.source = "#include \"" + abs + "\"\n__global__ void h(int* p) { p[0] = SHADOW; }\n";
    c.headers = {{abs, "#define SHADOW 5\n"}};
    c.exprs = {};
    compile(c);
  };
  m["HeaderEmptyName"] = [] {
    Case c;
    c.headers = {{"", "#define EMPTY 1\n"}};
    compile(c);
  };
  m["HeaderNeverIncluded"] = [] {
    Case c;
    c.headers = {{"never.h", "#error never included\n"}};
    compile(c);
  };
  m["HeaderNullName"] = [] {
    nvrtcProgram prog = nullptr;
    const char* texts[] = {"#define N 1\n"};
    const char* names[] = {nullptr};
    nvrtcResult r = nvrtcCreateProgram(&prog, kSource, "hn.cu", 1, texts, names);
    codes << "create " << r << "\n";
    if (r != NVRTC_SUCCESS) return;
    const char* opts[] = {"-arch=sm_90"};
    codes << "compile " << nvrtcCompileProgram(prog, 1, opts) << "\n";
    answers(prog, {});
    codes << "destroy " << nvrtcDestroyProgram(&prog) << "\n";
  };
  // ---- 4. Errors and API misuse.
  m["CompileErrorNullName"] = [] {
    Case c;
    c.null_name = true;
    c.source = "__global__ void broken() { undeclared_call(); }\n";
    c.exprs = {};
    compile(c);
  };
  m["CompileErrorEmptyName"] = [] {
    Case c;
    c.name = "";
    c.source = "__global__ void broken() { undeclared_call(); }\n";
    c.exprs = {};
    compile(c);
  };
  m["CompileErrorNullNameUncachedOption"] = [] {
    Case c = with_options({"-arch=sm_90", "-G"});
    c.null_name = true;
    c.source = "__global__ void broken() { undeclared_call(); }\n";
    c.exprs = {};
    compile(c);
  };
  m["WarningNullNameUncachedOption"] = [] {
    Case c = with_options({"-arch=sm_90", "-lineinfo"});
    c.null_name = true;
    c.source = "__global__ void w() { int unused = 1; }\n";
    c.exprs = {};
    compile(c);
  };
  m["WarningWithFolderName"] = [s] {
    Case c;
    static std::string name = s + "/dir/warn.cu";
    c.name = name.c_str();
    c.source = "__global__ void w() { int unused = 1; }\n";
    c.exprs = {};
    compile(c);
  };
  m["ErrorInHeaderWithFolderName"] = [s] {
    Case c;
    static std::string name = s + "/dir/herr.cu";
    c.name = name.c_str();
    c.source = "#include \"bad.h\"\n__global__ void w() {}\n";
    c.headers = {{"bad.h", "int x = undeclared_in_header;\n"}};
    c.exprs = {};
    compile(c);
  };
  m["MisuseBeforeCompile"] = [] {
    nvrtcProgram prog = nullptr;
    codes << "create " << nvrtcCreateProgram(&prog, kSource, "m.cu", 0, nullptr, nullptr) << "\n";
    size_t size = 99;
    codes << "ptx_size_before " << nvrtcGetPTXSize(prog, &size) << " " << size << "\n";
    codes << "cubin_size_before " << nvrtcGetCUBINSize(prog, &size) << "\n";
    codes << "log_size_before " << nvrtcGetProgramLogSize(prog, &size) << " " << size << "\n";
    const char* l = nullptr;
    codes << "lowered_before " << nvrtcGetLoweredName(prog, "k<float>", &l) << "\n";
    codes << "pch_status_before " << nvrtcGetPCHCreateStatus(prog) << "\n";
    const char* opts[] = {"-arch=sm_90"};
    codes << "compile " << nvrtcCompileProgram(prog, 1, opts) << "\n";
    answers(prog, {});
    codes << "destroy " << nvrtcDestroyProgram(&prog) << "\n";
    codes << "destroy_again " << nvrtcDestroyProgram(&prog) << "\n";
  };
  m["PchQueriesBeforeCompile"] = [] {
    pch_queries = true;
    nvrtcProgram prog = nullptr;
    codes << "create " << nvrtcCreateProgram(&prog, kSource, "p.cu", 0, nullptr, nullptr) << "\n";
    codes << "pch_status_before " << nvrtcGetPCHCreateStatus(prog) << "\n";
    size_t heap = 5;
    codes << "pch_heap_before " << nvrtcGetPCHHeapSizeRequired(prog, &heap) << " " << heap << "\n";
    const char* opts[] = {"-arch=sm_90"};
    codes << "compile " << nvrtcCompileProgram(prog, 1, opts) << "\n";
    answers(prog, {});
    codes << "destroy " << nvrtcDestroyProgram(&prog) << "\n";
  };
  m["NullPointersAfterCompile"] = [] {
    nvrtcProgram prog = nullptr;
    codes << "create " << nvrtcCreateProgram(&prog, kSource, "np.cu", 0, nullptr, nullptr) << "\n";
    const char* opts[] = {"-arch=sm_90"};
    codes << "compile " << nvrtcCompileProgram(prog, 1, opts) << "\n";
    codes << "log_size_null " << nvrtcGetProgramLogSize(prog, nullptr) << "\n";
    codes << "log_null " << nvrtcGetProgramLog(prog, nullptr) << "\n";
    codes << "ptx_size_null " << nvrtcGetPTXSize(prog, nullptr) << "\n";
    codes << "ptx_null " << nvrtcGetPTX(prog, nullptr) << "\n";
    codes << "cubin_size_null " << nvrtcGetCUBINSize(prog, nullptr) << "\n";
    codes << "ltoir_null " << nvrtcGetLTOIR(prog, nullptr) << "\n";
    codes << "pch_heap_null " << nvrtcGetPCHHeapSizeRequired(prog, nullptr) << "\n";
    codes << "destroy " << nvrtcDestroyProgram(&prog) << "\n";
  };
  m["CompileTwice"] = [] {
    nvrtcProgram prog = nullptr;
    codes << "create " << nvrtcCreateProgram(&prog, kSource, "twice.cu", 0, nullptr, nullptr)
          << "\n";
    codes << "name " << nvrtcAddNameExpression(prog, "k<float>") << "\n";
    const char* opts[] = {"-arch=sm_90"};
    codes << "compile " << nvrtcCompileProgram(prog, 1, opts) << "\n";
    const char* opts2[] = {"-arch=sm_80"};
    codes << "compile_again " << nvrtcCompileProgram(prog, 1, opts2) << "\n";
    answers(prog, {"k<float>"});
    codes << "destroy " << nvrtcDestroyProgram(&prog) << "\n";
  };
  m["FailedCompileOutputs"] = [] {
    Case c;
    c.source = "__global__ void broken() { undeclared_call(); }\n";
    compile(c);
  };
  m["LogSizeOfWarningsOnHit"] = [] {
    Case c = with_options({"-arch=sm_90", "-Xptxas=-warn-spills", "-Wreorder"});
    c.source = "struct S { int a; int b; __device__ S() : b(1), a(2) {} };\n"
               "__global__ void w(int* p) { S s; int unused; p[0] = s.a; }\n";
    c.exprs = {};
    compile(c);
  };
  return m;
}

// A source whose answer depends on the options: macros (X, Y, HDR from a
// header found through -I, or not), the target, the language standard,
// floating-point options, a warning (177) and a template for a lowered name.
const char* kOptionSource =
    "#if __has_include(\"optdiff.h\")\n"
    "#include \"optdiff.h\"\n"
    "#endif\n"
    "#ifndef HDR\n#define HDR 0\n#endif\n"
    "template <typename T> __global__ void t(T* x) { x[0] = x[0] * 2; }\n"
    "__global__ void k(int* p, float* f) {\n"
    "  int unused = 1;\n"
    "#ifdef X\n  p[0] = X;\n#endif\n"
    "#ifdef Y\n  p[1] = Y;\n#endif\n"
    "  p[2] = HDR;\n"
    "  p[3] = (int)__cplusplus;\n"
    "#ifdef __CUDA_ARCH__\n  p[4] = __CUDA_ARCH__;\n#endif\n"
    "  f[0] = f[1] / f[2] + sqrtf(f[3]) * f[4] + f[5];\n"
    "}\n";

int run_steps(const std::string& file) {
  std::ifstream in(file);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", file.c_str());
    return 2;
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> steps;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("@@ ", 0) == 0) {
      steps.push_back({line.substr(3), {}});
    } else if (!steps.empty()) {
      steps.back().second.push_back(line);
    }
  }
  for (const auto& [name, options] : steps) {
    case_name = name;
    outputs = 0;
    codes.str("");
    Case c = with_options(options);
    c.source = kOptionSource;
    c.name = "optdiff.cu";
    c.exprs = {"t<float>", "k"};
    compile(c);
    write("codes", codes.str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && !(argc == 4 && std::string(argv[2]) == "--steps")) {
    std::fprintf(stderr, "usage: nvrtc_attack OUT_DIR CASE\n");
    return 2;
  }
  out_dir = argv[1];
  case_name = argv[2];
  const char* dir = std::getenv("ATTACK_DIR");
  scratch = dir ? dir : "/tmp";
  if (const char* cwd = std::getenv("ATTACK_CWD"); cwd && *cwd && ::chdir(cwd) != 0) {
    std::perror("chdir");
    return 2;
  }
  if (case_name == "--steps") {
    if (argc != 4) {
      std::fprintf(stderr, "usage: nvrtc_attack OUT_DIR --steps FILE\n");
      return 2;
    }
    return run_steps(argv[3]);
  }
  auto all = cases();
  if (case_name == "--list") {
    for (const auto& [name, fn] : all) std::printf("%s\n", name.c_str());
    return 0;
  }
  auto it = all.find(case_name);
  if (it == all.end()) {
    std::fprintf(stderr, "no case %s\n", case_name.c_str());
    return 2;
  }
  it->second();
  write("codes", codes.str());
  return 0;
}
