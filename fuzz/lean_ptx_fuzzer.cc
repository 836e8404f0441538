// Fuzzes lean_ptx (compiler/image/lean_ptx.h), which reads the PTX NVRTC writes.
// Beyond "no crash, no sanitizer report", checks its contract on every input:
//   - unchanged output is the input, byte for byte;
//   - changed output is the input with `bytes_removed` bytes cut out (a
//     subsequence of it), and no removed variable is named anywhere in it
//     outside comments (every referenced symbol was kept);
//   - the pass is a fixpoint: run on its own output it removes nothing more
//     and understands all of it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "compiler/image/lean_ptx.h"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "lean_ptx_fuzzer: broken promise: %s\n", what);
    std::abort();
  }
}

bool subsequence(const std::string& part, const std::string& whole) {
  size_t j = 0;
  for (char c : whole) {
    if (j < part.size() && part[j] == c) ++j;
  }
  return j == part.size();
}

bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$';
}

// `text` without // and /* */ comments (inputs with strings are not checked).
std::string strip_comments(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "//") == 0) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (text.compare(i, 2, "/*") == 0) {
      size_t end = text.find("*/", i + 2);
      i = end == std::string::npos ? text.size() : end + 1;
      out += ' ';
      continue;
    }
    if (i < text.size()) out += text[i];
  }
  return out;
}

bool names(const std::string& text, const std::string& name) {
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    bool before = at > 0 && (word_char(text[at - 1]) || text[at - 1] == '%');
    bool after = at + name.size() < text.size() && word_char(text[at + name.size()]);
    if (!before && !after) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  kcache::compiler::LeanPtx lean = kcache::compiler::lean_ptx(input, {});
  if (!lean.changed) {
    check(lean.ptx == input, "unchanged output differs from the input");
    return 0;
  }
  check(lean.variables_removed > 0 && lean.removed.size() == lean.variables_removed,
        "changed with nothing removed");
  check(lean.ptx.size() + lean.bytes_removed == input.size(), "bytes_removed does not add up");
  check(subsequence(lean.ptx, input), "output is not the input with parts cut out");
  if (input.find('"') == std::string::npos) {
    std::string code = strip_comments(lean.ptx);
    for (const std::string& name : lean.removed) {
      check(!names(code, name), "a removed variable is still referenced");
    }
  }
  kcache::compiler::LeanPtx again = kcache::compiler::lean_ptx(lean.ptx, {});
  check(!again.changed && again.why.empty(), "the lean output is not a fixpoint");
  return 0;
}
