// Fuzzes host_reach (compiler/image/mangled_name.h), which reads the variable names
// in NVRTC's PTX. Beyond "no crash, no sanitizer report", checks on every input:
//   - the answer is deterministic;
//   - an understood mangled name is a whole name: with one more "E" it is not
//     understood (nothing past the name is silently ignored);
//   - against the toolchain's own demangler (abi::__cxa_demangle): a mangled
//     name answered by_name demangles, with no template argument list and no
//     anonymous namespace in it; one answered "template instance" that
//     demangles has a template argument list in it. The first is the promise
//     the lean pass's soundness rests on the other way round: a name the
//     parser calls removable must not be one a host could spell.
#include <cxxabi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "compiler/image/mangled_name.h"

namespace {

void check(bool ok, const char* what, const std::string& name) {
  if (!ok) {
    std::fprintf(stderr, "mangled_name_fuzzer: broken promise: %s: %s\n", what, name.c_str());
    std::abort();
  }
}

// The toolchain's demangling of `name`, or empty when it refuses it.
std::string demangle(const std::string& name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string s = status == 0 && out ? out : "";
  std::free(out);
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // the bound itself is a unit test; keep the demangler fast
  std::string name(reinterpret_cast<const char*>(data), size);
  using kcache::compiler::HostReach;
  kcache::compiler::NameReach r = kcache::compiler::host_reach(name);
  kcache::compiler::NameReach again = kcache::compiler::host_reach(name);
  check(r.reach == again.reach && std::strcmp(r.why, again.why) == 0, "not deterministic", name);

  bool mangled = name.compare(0, 2, "_Z") == 0;
  if (!mangled || r.reach == HostReach::not_understood) return 0;
  check(kcache::compiler::host_reach(name + "E").reach == HostReach::not_understood,
        "a name with a trailing E is understood", name);
  if (name.find('\0') != std::string::npos) return 0;
  std::string plain = demangle(name);
  if (r.reach == HostReach::by_name) {
    check(!plain.empty(), "by_name, but the demangler refuses it", name);
    check(plain.find('<') == std::string::npos, "by_name, but a template instance", name);
    check(plain.find("(anonymous namespace)") == std::string::npos,
          "by_name, but in an anonymous namespace", name);
  } else if (std::strcmp(r.why, "template instance") == 0 && !plain.empty()) {
    check(plain.find('<') != std::string::npos, "a template instance without template arguments",
          name);
  }
  return 0;
}
