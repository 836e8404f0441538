// Test-only: wraps images that nvcc made into a .kcb (bundle::serialize), and
// optionally into C++ that embeds it the way generated code does
// (bundle/embedded.h). Stands in for `kcache compile` until that lands; the
// fixtures in tests/runtime/BUILD.bazel then switch to it.
//
//   make_test_bundle --out X.kcb [--cc-out X.cc --symbol NAME] --source-name saxpy.cu
//                    --image cubin:sm_90:path ... [--name-expression "scale<float>" ...]
//
// Name expressions are matched to the mangled .entry names of the PTX images by
// demangling them ("void scale<float>(float*, float, int)" -> "scale<float>"),
// which is what NVRTC's name-expression lowering reports.
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bundle/bundle.h"

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "make_test_bundle: cannot read " << path << "\n";
    std::exit(1);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string without_spaces(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c != ' ') out += c;
  }
  return out;
}

// "void scale<float>(float*, float, int)" -> "scale<float>"
std::string name_expression_of(const std::string& demangled) {
  std::string s = demangled;
  if (s.rfind("void ", 0) == 0) s = s.substr(5);
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    if (s[i] == '>') --depth;
    if (s[i] == '(' && depth == 0) return s.substr(0, i);
  }
  return s;
}

std::vector<std::string> entries_of(const std::string& ptx) {
  std::vector<std::string> names;
  const std::string marker = ".entry ";
  for (size_t at = ptx.find(marker); at != std::string::npos; at = ptx.find(marker, at + 1)) {
    size_t start = at + marker.size();
    size_t end = ptx.find('(', start);
    names.push_back(ptx.substr(start, end - start));
  }
  return names;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out, cc_out, symbol, source_name = "kernel.cu";
  std::vector<std::string> image_specs, name_expressions;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--out")
      out = value;
    else if (flag == "--cc-out")
      cc_out = value;
    else if (flag == "--symbol")
      symbol = value;
    else if (flag == "--source-name")
      source_name = value;
    else if (flag == "--image")
      image_specs.push_back(value);
    else if (flag == "--name-expression")
      name_expressions.push_back(value);
    else {
      std::cerr << "make_test_bundle: unknown flag " << flag << "\n";
      return 1;
    }
  }
  if (out.empty() || (!cc_out.empty() && symbol.empty())) {
    std::cerr << "make_test_bundle: need --out (and --symbol with --cc-out)\n";
    return 1;
  }

  // Storage the bundle's views point into.
  std::vector<std::string> archs, datas;
  std::vector<kcache::bundle::ImageKind> kinds;
  for (const std::string& spec : image_specs) {
    size_t a = spec.find(':'), b = spec.find(':', a + 1);
    std::string kind = spec.substr(0, a);
    if (a == std::string::npos || b == std::string::npos || (kind != "cubin" && kind != "ptx")) {
      std::cerr << "make_test_bundle: --image wants cubin|ptx:ARCH:PATH, got " << spec << "\n";
      return 1;
    }
    kinds.push_back(kind == "ptx" ? kcache::bundle::ImageKind::ptx
                                  : kcache::bundle::ImageKind::cubin);
    archs.push_back(spec.substr(a + 1, b - a - 1));
    datas.push_back(read(spec.substr(b + 1)));
  }

  kcache::bundle::Bundle bundle;
  bundle.source_name = source_name;
  bundle.compiler_identity = "nvcc (tests/runtime/make_test_bundle)";
  for (size_t i = 0; i < kinds.size(); ++i) {
    bundle.images.push_back({kinds[i], archs[i], "", datas[i]});
  }

  std::vector<std::string> lowered_storage;
  std::set<std::string> mangled;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i] != kcache::bundle::ImageKind::ptx) continue;
    for (const std::string& m : entries_of(datas[i])) mangled.insert(m);
  }
  lowered_storage.reserve(name_expressions.size());
  for (const std::string& expression : name_expressions) {
    std::string found;
    for (const std::string& m : mangled) {
      int status = 0;
      char* demangled = abi::__cxa_demangle(m.c_str(), nullptr, nullptr, &status);
      if (status != 0) continue;
      std::string candidate = name_expression_of(demangled);
      std::free(demangled);
      if (without_spaces(candidate) == without_spaces(expression)) found = m;
    }
    if (found.empty()) {
      std::cerr << "make_test_bundle: no PTX entry matches name expression " << expression << "\n";
      return 1;
    }
    lowered_storage.push_back(found);
    bundle.lowered_names.push_back({expression, lowered_storage.back()});
  }

  std::string bytes = kcache::bundle::serialize(bundle);
  std::ofstream(out, std::ios::binary) << bytes;

  if (!cc_out.empty()) {
    std::ofstream cc(cc_out);
    cc << "// Generated by tests/runtime/make_test_bundle from " << source_name << ".\n"
       << "#include \"bundle/embedded.h\"\n\nnamespace {\n\n"
       << "alignas(16) const unsigned char kBytes[] = {";
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (i % 20 == 0) cc << "\n   ";
      cc << " " << static_cast<unsigned>(static_cast<unsigned char>(bytes[i])) << ",";
    }
    cc << "\n};\n\n"
       << "[[maybe_unused]] const bool kRegistered = kcache::bundle::register_embedded({\""
       << symbol << "\", kBytes, sizeof(kBytes)});\n\n}  // namespace\n";
  }
  return 0;
}
