// scan_includes (compiler/includes.h) on arbitrary text: never crashes, what
// it returns is taken from the text, and a group under `#if 0` appended after
// the text is never followed, whatever state the text leaves the scanner in.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "compiler/includes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto ds = kcache::compiler::scan_includes(text);
  int lines = 1;
  for (char c : text) lines += c == '\n';
  int last = 1;
  for (const auto& d : ds) {
    if (d.name.empty() || d.name.find('\n') != std::string::npos ||
        text.find(d.name) == std::string::npos || d.line < last || d.line > lines) {
      std::abort();
    }
    last = d.line;
  }
  // Two newlines: a backslash or a line comment at the text's end joins only
  // the first. An unterminated comment or raw string swallows the suffix; an
  // unterminated dead group keeps it dead; either way nothing new is found.
  auto more = kcache::compiler::scan_includes(
      text +
      "\n\n#if 0\n#include \"kcache_fuzz_dead.h\"\n#if __has_include(<kcache_fuzz_dead>)\n"
      "#endif\n#endif\n");
  if (more.size() != ds.size()) std::abort();
  for (size_t i = 0; i < ds.size(); ++i) {
    if (more[i].name != ds[i].name || more[i].line != ds[i].line ||
        more[i].angled != ds[i].angled || more[i].probe != ds[i].probe) {
      std::abort();
    }
  }
  return 0;
}
