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
//   - S is not a namespace name the text spells: after `namespace`, or as
//     the argument of a call to a macro that names a namespace after its
//     parameter (libcu++'s `_LIBCUDACXX_BEGIN_NAMESPACE_CPO(__swap)`), to a
//     fixpoint through macros that pass it on;
//   - S cannot be a namespace name macros compute (`namespace CAT(a, b)`,
//     `#define NS A##B`, libcu++'s `__` ## 4): such a name is pasted from
//     tokens of those macros' bodies and their calls' arguments, so S must
//     not be one of them nor a concatenation of them (and numbers);
//   - blocks under `#ifdef X` where X is defined nowhere (and not a reserved
//     name NVRTC could predefine) are not read.
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
  ClassConstants() : off_why_("no program text") {}  // decides nothing
  // `texts`: the source and every file NVRTC read; `options`: NVRTC's (their
  // -D definitions count as #define lines).
  ClassConstants(const std::vector<std::string>& texts, const std::vector<std::string>& options);

  // True only when `mangled` (`_ZN` source names `E`, at least two) names a
  // constant static data member of a class, by the rules above.
  bool is_class_constant(std::string_view mangled) const;

  // Why nothing is decided (no text), when so; empty otherwise.
  const std::string& off_why() const { return off_why_; }
  // Why some namespace's name is computed by macros, when so (for tests).
  const std::string& computed_why() const { return computed_why_; }

 private:
  struct Macro {
    bool function_like = false;
    bool pastes = false;
    std::vector<std::string> params;
    std::set<std::string> words;  // identifiers of its body
    std::string body;
    std::set<size_t> namespace_params;  // parameters it names a namespace after
    bool names_computed = false;        // `namespace x ## y`, `namespace F(...)`
  };
  // Per (class name, member): declarations seen as constant static, and otherwise.
  struct Declared {
    int constant = 0, other = 0;
  };
  std::string read(std::string_view stripped, const std::set<std::string>& defined);
  void read_define(std::string_view line);
  void resolve_namespace_macros();
  // A call at `open` (the `(` after a macro naming namespaces after its
  // parameters): its arguments become namespace names, or, where one is a
  // parameter of `caller`, `caller` names namespaces after it; true when that
  // made anything new.
  template <class Tokens>
  bool read_namespace_call(const Macro& m, const Tokens& t, size_t open, Macro* caller);
  void read_code(std::string_view code);
  template <class Tokens>
  void read_class_body(const Tokens& t, size_t open, const std::string& cls);
  void find_computed_names(const std::vector<std::string>& code);
  bool maybe_computed(const std::string& name) const;

  std::string off_why_;
  std::string computed_why_;
  std::set<std::string> made_from_;  // tokens a computed namespace name may be pasted from
  std::set<std::string> namespace_names_;  // identifiers after `namespace`
  std::set<std::string> macro_words_;      // every identifier of every #define
  std::map<std::string, Macro> macros_;
  std::map<std::pair<std::string, std::string>, Declared> declared_;
};

}  // namespace kcache::compiler
