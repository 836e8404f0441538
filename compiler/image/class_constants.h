// Which external, non-template variable names in NVRTC's PTX are constant
// static data members of a class, read from the program's text (the source
// and every header NVRTC read): docs/LEAN.md, "lean-v3".
//
// CUDA allows no memory space on a static data member, so for nvcc a class's
// `static int const kRow = 0;` is a host variable whose value device code
// folds in; NVRTC (-default-device) materialises it as a `.global`, often
// without its value. No program declared it `__device__`, so the lean pass
// may remove it when nothing references it. Its mangled name does not tell it
// from a namespace-scope `__device__` variable (`_ZN7cutlass11MatrixCoord4kRowE`
// and `_ZN2ns4knobE` have one form), so the text decides, conservatively:
// `a::S::v` is a class constant only when
//   - some class body `struct|class|union S ... { ... }` declares v at its
//     own level in a declaration with `static` and `const` or `constexpr`,
//     and no class body named S declares v otherwise (so a non-const static
//     member, a real variable under -default-device, stays);
//   - S is never a namespace name: no `namespace S` anywhere (macro bodies
//     included), and neither S nor v appears in any #define (or -D option),
//     so no macro can spell the namespace or the declaration;
//   - no namespace is named through a function-like macro or token pasting
//     (`namespace CAT(a, b)`, `#define NS A##B`): the namespace names are
//     then not all in the text, and nothing is decided at all.
// Anything else (other mangled forms, no text) is answered false: keep.
//
// A pure function of text; bounded by its input.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kcache::compiler {

class ClassConstants {
 public:
  ClassConstants() = default;  // knows no text: decides nothing
  // `texts`: the source and every file NVRTC read; `options`: NVRTC's (their
  // -D definitions count as #define lines).
  ClassConstants(const std::vector<std::string>& texts, const std::vector<std::string>& options);

  // True only when `mangled` (`_ZN` source names `E`, at least two) names a
  // constant static data member of a class, by the rules above.
  bool is_class_constant(std::string_view mangled) const;

  // Why nothing is decided, when so (for notes and tests); empty otherwise.
  const std::string& off_why() const { return off_why_; }

 private:
  struct Macro {
    bool function_like = false;
    bool pastes = false;
    std::vector<std::string> words;  // identifiers of its body
  };
  // Per (class name, member): declarations seen as constant static, and otherwise.
  struct Declared {
    int constant = 0, other = 0;
  };
  void read(std::string_view text);
  void read_define(std::string_view line);
  void read_code(std::string_view code);
  void decide_open();

  bool has_text_ = false;
  std::string off_why_;
  std::set<std::string> namespace_names_;  // identifiers after `namespace`
  std::set<std::string> macro_words_;      // every identifier of every #define
  std::map<std::string, Macro> macros_;
  std::map<std::pair<std::string, std::string>, Declared> declared_;
};

}  // namespace kcache::compiler
