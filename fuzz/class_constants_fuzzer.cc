// Fuzzes ClassConstants (compiler/image/class_constants.h), which reads the
// program's text (any bytes a header may hold) to decide which PTX variables
// are class constants the lean pass may remove. Input: text, then after the
// first NUL byte, mangled names one per line. Beyond "no crash, no sanitizer
// report", checks its contract on every input:
//   - it is a pure function of its text: two readings decide alike;
//   - it is conservative: a name whose class is also spelled a namespace in
//     the text (`namespace S {}` appended) is never a class constant, and with
//     no text nothing is.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "compiler/image/class_constants.h"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "class_constants_fuzzer: broken promise: %s\n", what);
    std::abort();
  }
}

// The class name of `_ZN...<len>S<len>vE` (the second-to-last source name), or "".
std::string class_of(const std::string& mangled) {
  if (mangled.size() < 5 || mangled.compare(0, 3, "_ZN") != 0 || mangled.back() != 'E') return "";
  std::vector<std::string> names;
  size_t at = 3;
  while (at < mangled.size() - 1) {
    size_t len = 0, digits = 0;
    while (at < mangled.size() && mangled[at] >= '0' && mangled[at] <= '9' && digits < 6) {
      len = len * 10 + static_cast<size_t>(mangled[at++] - '0');
      ++digits;
    }
    if (digits == 0 || len == 0 || at + len > mangled.size() - 1) return "";
    names.push_back(mangled.substr(at, len));
    at += len;
  }
  return names.size() >= 2 ? names[names.size() - 2] : "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string text = input.substr(0, nul);
  std::vector<std::string> names;
  if (nul != std::string::npos) {
    size_t at = nul + 1;
    while (at <= input.size() && names.size() < 64) {
      size_t end = input.find('\n', at);
      if (end == std::string::npos) end = input.size();
      names.push_back(input.substr(at, end - at));
      at = end + 1;
    }
  }
  const kcache::compiler::ClassConstants once({text}, {}), again({text}, {});
  const kcache::compiler::ClassConstants none;
  for (const std::string& name : names) {
    const bool decided = once.is_class_constant(name);
    check(decided == again.is_class_constant(name), "two readings of one text decide alike");
    check(!none.is_class_constant(name), "with no text nothing is a class constant");
    const std::string cls = class_of(name);
    if (decided && !cls.empty()) {
      const kcache::compiler::ClassConstants spelled({text, "\nnamespace " + cls + " {}\n"}, {});
      check(!spelled.is_class_constant(name), "a class also spelled a namespace is kept");
    }
  }
  return 0;
}
