#include "compiler/image/mangled_name.h"

#include <cctype>

// The subset of the Itanium C++ ABI's mangling grammar (itanium-cxx-abi.github.io,
// "External Names") that variable names use; the whole name must parse, else
// not_understood:
//
//   variable-name  := "_Z" name                  mangled
//                   | identifier                 unmangled: extern "C", the global namespace
//   name           := nested-name
//                   | "St" unqualified-name [template-args]
//                   | unqualified-name [template-args]
//   nested-name    := "N" component { component } "E"
//   component      := unqualified-name [template-args]
//                   | substitution [template-args]  (not first at the top level, but "St")
//                   | template-param [template-args] (inside template args only)
//   unqualified-name := ["L"] source-name         "L": internal linkage
//                   | "Ut" [number] "_"          unnamed type
//                   | "Ul" type {type} "E" [number] "_"   closure type
//   source-name    := number identifier           number > 0, exactly that many bytes
//   template-args  := "I" template-arg { template-arg } "E"
//   template-arg   := type | "L" literal "E" | "J" { template-arg } "E"
//   literal        := type ["n"] { [0-9a-f] }     integers, bools, floats (hex), nullptr
//   type           := builtin
//                   | ("r" | "V" | "K") type | ("P" | "R" | "O") type | "Dp" type
//                   | "A" [number] "_" type | "Dv" number "_" type | "M" type type
//                   | "F" ["Y"] type { type } ["R" | "O"] "E"
//                   | "u" source-name
//                   | name-as-type
//   name-as-type   := nested-name | "St" unqualified-name [template-args]
//                   | substitution [template-args] | template-param [template-args]
//                   | unqualified-name [template-args]
//   builtin        := one of v w b c a h s t i j l m x y n o f d e g z
//                   | "D" one of d e f h i s u a c n | "DF" number "_"
//   substitution   := "S" [seq-id] "_" | "S" one of t a b s i o d
//   template-param := "T" [seq-id] "_"
//   seq-id         := [0-9A-Z]+
//
// Not understood (the name is kept): local names ("Z"), ABI tags ("B"),
// expressions ("X", "L_Z", "T" + "L" forms), ctor/dtor/operator names, cv- or
// ref-qualified nested names (functions), anything past the bounds.
//
// Only the top-level name decides: a reserved name or internal linkage inside
// a template argument says nothing about the variable's own name.

namespace kcache::compiler {
namespace {

struct Fail {
  const char* why;
};

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  // The top-level name, after "_Z".
  void variable_name() {
    i_ = 2;
    if (eat('N')) {
      if (peek() == 'r' || peek() == 'V' || peek() == 'K' || peek() == 'R' || peek() == 'O') {
        throw Fail{"a qualified nested name (a function)"};
      }
      bool first = true;
      while (!eat('E')) {
        top_component(first);
        first = false;
      }
      if (first) throw Fail{"an empty nested name"};
    } else if (peek() == 'Z') {
      throw Fail{"a local name"};
    } else if (starts("St")) {
      i_ += 2;
      top_component(false);
    } else {
      top_component(true);
    }
    if (i_ != s_.size()) throw Fail{"characters after the name"};
  }

  bool templated = false;
  bool internal = false;
  bool reserved = false;
  bool versioned = false;

 private:
  char peek(size_t ahead = 0) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : '\0'; }
  bool starts(std::string_view w) const { return s_.substr(i_, w.size()) == w; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  void expect(char c) {
    if (!eat(c)) throw Fail{"a malformed mangled name"};
  }

  struct Depth {
    explicit Depth(int& d) : d_(d) {
      if (++d_ > kMaxMangledNesting) throw Fail{"nesting over the bound"};
    }
    ~Depth() { --d_; }
    int& d_;
  };

  size_t number() {
    size_t n = 0, start = i_;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      if (i_ - start >= 6) throw Fail{"a number over the bound"};
      n = n * 10 + static_cast<size_t>(peek() - '0');
      ++i_;
    }
    if (i_ == start) throw Fail{"a malformed mangled name"};
    return n;
  }

  void seq_id_then_underscore() {
    while (std::isdigit(static_cast<unsigned char>(peek())) ||
           std::isupper(static_cast<unsigned char>(peek()))) {
      ++i_;
    }
    expect('_');
  }

  std::string_view source_name() {
    size_t n = number();
    if (n == 0 || n > s_.size() - i_) throw Fail{"a malformed mangled name"};
    std::string_view id = s_.substr(i_, n);
    for (char c : id) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') {
        throw Fail{"an identifier with a character C++ does not allow"};
      }
    }
    i_ += n;
    return id;
  }

  // One component of the top-level name.
  void top_component(bool first) {
    if (peek() == 'S') {
      if (!first || !starts("St")) throw Fail{"a substitution in the variable's own name"};
      i_ += 2;  // std::
    } else if (peek() == 'T') {
      throw Fail{"a template parameter in the variable's own name"};
    } else {
      if (peek() == 'L') internal = true;
      std::string_view id = unqualified_name();
      if (id.empty()) throw Fail{"an unnamed type in the variable's own name"};
      note_component(id);
    }
    if (peek() == 'I') {
      templated = true;
      template_args();
    }
    if (peek() == 'B') throw Fail{"an ABI tag"};
  }

  void note_component(std::string_view id) {
    // Anonymous namespaces: NVRTC's per-file one, GCC's.
    if (id.substr(0, 10) == "_INTERNAL_" || id.substr(0, 10) == "_GLOBAL__N") {
      internal = true;
      return;
    }
    if (id.size() >= 2 && id[0] == '_' &&
        (id[1] == '_' || std::isupper(static_cast<unsigned char>(id[1])))) {
      reserved = true;
    }
    // CCCL's inline ABI namespaces, CUB_<version>_SM_<archs> (cub/util_namespace.cuh;
    // "_NS" or "_NVHPC" may follow), THRUST_ likewise.
    for (std::string_view lib : {std::string_view("CUB_"), std::string_view("THRUST_")}) {
      if (id.substr(0, lib.size()) != lib) continue;
      size_t k = lib.size();
      while (k < id.size() && std::isdigit(static_cast<unsigned char>(id[k]))) ++k;
      if (k > lib.size() && id.substr(k, 4) == "_SM_") versioned = true;
    }
  }

  // Returns the identifier of a source name, empty for an unnamed type.
  std::string_view unqualified_name() {
    eat('L');
    if (starts("Ut")) {
      i_ += 2;
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++i_;
      expect('_');
      return {};
    }
    if (starts("Ul")) {
      Depth d(depth_);
      i_ += 2;
      do {
        type();
      } while (!eat('E'));
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++i_;
      expect('_');
      return {};
    }
    if (!std::isdigit(static_cast<unsigned char>(peek()))) {
      throw Fail{"a name that is no source name (an operator, constructor or special name)"};
    }
    return source_name();
  }

  void template_args() {
    Depth d(depth_);
    expect('I');
    do {
      template_arg();
    } while (!eat('E'));
  }

  void template_arg() {
    Depth d(depth_);
    if (eat('L')) {
      if (peek() == '_' && peek(1) == 'Z') throw Fail{"an entity as a template argument"};
      type();
      eat('n');
      while (std::isdigit(static_cast<unsigned char>(peek())) || (peek() >= 'a' && peek() <= 'f')) {
        ++i_;
      }
      expect('E');
    } else if (eat('J')) {
      while (!eat('E')) template_arg();
    } else if (peek() == 'X') {
      throw Fail{"an expression as a template argument"};
    } else {
      type();
    }
  }

  void type() {
    Depth d(depth_);
    char c = peek();
    if (c == '\0') throw Fail{"a malformed mangled name"};
    if (std::string_view("vwbcahstijlmxynofdegz").find(c) != std::string_view::npos) {
      ++i_;
      return;
    }
    if (c == 'D') {
      char k = peek(1);
      if (std::string_view("defhisuacn").find(k) != std::string_view::npos && k != '\0') {
        i_ += 2;
        return;
      }
      if (k == 'F') {
        i_ += 2;
        number();
        expect('_');
        return;
      }
      if (k == 'p') {
        i_ += 2;
        type();
        return;
      }
      if (k == 'v') {
        i_ += 2;
        number();
        expect('_');
        type();
        return;
      }
      throw Fail{"a type the parser does not know (D...)"};
    }
    switch (c) {
      case 'r':
      case 'V':
      case 'K':
      case 'P':
      case 'R':
      case 'O':
        ++i_;
        type();
        return;
      case 'A':
        ++i_;
        if (std::isdigit(static_cast<unsigned char>(peek()))) number();
        expect('_');
        type();
        return;
      case 'M':
        ++i_;
        type();
        type();
        return;
      case 'F':
        ++i_;
        eat('Y');
        type();  // the return type
        while (!eat('E')) {
          if ((peek() == 'R' || peek() == 'O') && peek(1) == 'E') {
            ++i_;
            continue;
          }
          type();
        }
        return;
      case 'u':
        ++i_;
        source_name();
        return;
      default:
        name_as_type();
    }
  }

  void name_as_type() {
    Depth d(depth_);
    if (eat('N')) {
      do {
        inner_component();
      } while (!eat('E'));
      return;
    }
    if (peek() == 'Z') throw Fail{"a local name"};
    inner_component();
  }

  void inner_component() {
    if (eat('S')) {
      if (std::string_view("tabsiod").find(peek()) != std::string_view::npos && peek() != '\0') {
        ++i_;
        if (s_[i_ - 1] == 't' && std::isdigit(static_cast<unsigned char>(peek()))) source_name();
      } else {
        seq_id_then_underscore();
      }
    } else if (eat('T')) {
      seq_id_then_underscore();
    } else {
      unqualified_name();
    }
    if (peek() == 'I') template_args();
    if (peek() == 'B') throw Fail{"an ABI tag"};
  }

  std::string_view s_;
  size_t i_ = 0;
  int depth_ = 0;
};

bool plain_identifier(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

NameReach host_reach(std::string_view name) {
  if (name.size() > kMaxMangledNameBytes)
    return {HostReach::not_understood, "a name over the bound"};
  if (name.substr(0, 2) != "_Z") {
    if (!plain_identifier(name)) {
      return {HostReach::not_understood, "an unmangled name that is no C++ identifier"};
    }
    if (name.size() >= 2 && name[0] == '_' &&
        (name[1] == '_' || std::isupper(static_cast<unsigned char>(name[1])))) {
      return {HostReach::lowered_name_only, "reserved name"};
    }
    return {HostReach::by_name, "unmangled"};
  }
  Parser p(name);
  try {
    p.variable_name();
  } catch (const Fail& f) {
    return {HostReach::not_understood, f.why};
  }
  if (p.templated) return {HostReach::lowered_name_only, "template instance"};
  if (p.internal) return {HostReach::lowered_name_only, "internal linkage"};
  if (p.reserved) return {HostReach::lowered_name_only, "reserved name"};
  if (p.versioned) return {HostReach::lowered_name_only, "versioned library namespace"};
  return {HostReach::by_name, "external linkage"};
}

}  // namespace kcache::compiler
