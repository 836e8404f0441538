// scan_includes (compiler/includes.h) on arbitrary text: never crashes, what
// it returns is taken from the text (an #include_next's byte range too), and a
// group under `#if 0` appended after the text is never followed, whatever
// state the text leaves the scanner in: with LF or CR LF line ends, with
// trigraphs off or on.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "compiler/includes.h"

namespace {

void check(const std::string& text, const kcache::compiler::ScanOptions& options,
           const char* eol) {
  kcache::compiler::ScannedFile file = kcache::compiler::scan_file(text, options);
  const auto& ds = file.includes;
  int lines = 1;
  for (char c : text) lines += c == '\n';
  int last = 1;
  for (const auto& d : ds) {
    if (d.name.empty() || d.name.find('\n') != std::string::npos ||
        text.find(d.name) == std::string::npos || d.line < last || d.line > lines ||
        d.begin >= d.end || d.end > text.size() ||
        (text[d.end - 1] != '>' && text[d.end - 1] != '"')) {
      std::abort();
    }
    last = d.line;
  }
  for (const std::string& name : file.line_names) {
    if (name.find('\n') != std::string::npos) std::abort();
  }
  // Two line ends: a backslash (or `??/`) or a line comment at the text's end
  // joins only the first. An unterminated comment or raw string swallows the
  // suffix; an unterminated dead group keeps it dead; either way nothing new
  // is found.
  const std::string n = eol;
  auto more = kcache::compiler::scan_includes(
      text + n + n + "#if 0" + n + "#include \"kcache_fuzz_dead.h\"" + n +
          "#if __has_include(<kcache_fuzz_dead>)" + n + "#endif" + n + "#endif" + n,
      options);
  if (more.size() != ds.size()) std::abort();
  for (size_t i = 0; i < ds.size(); ++i) {
    if (more[i].name != ds[i].name || more[i].line != ds[i].line ||
        more[i].angled != ds[i].angled || more[i].probe != ds[i].probe ||
        more[i].next != ds[i].next) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  kcache::compiler::ScanOptions trigraphs;
  trigraphs.trigraphs = true;
  check(text, {}, "\n");
  check(text, {}, "\r\n");
  check(text, trigraphs, "\n");
  return 0;
}
