#include "compiler/image/class_constants.h"

#include <algorithm>
#include <cctype>

namespace kcache::compiler {
namespace {

bool text_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool text_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The text without comments and without the contents of string and character
// literals (each left as `""`), newlines kept so directives stay lines. A
// `'` right after a digit or letter is a digit separator (1'000), unless it
// follows a lone literal prefix (L'a', u8'a').
std::string text_strip(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i < s.size() && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '\n') out += "\\\n", ++i;
        ++i;
      }
      continue;
    }
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      size_t end = s.find("*/", i + 2);
      end = end == std::string_view::npos ? s.size() : end + 2;
      out += ' ';
      for (size_t j = i; j < end; ++j) out += s[j] == '\n' ? "\n" : "";
      i = end;
      continue;
    }
    bool quote = c == '"' || c == '\'';
    if (c == '\'' && i > 0 && text_ident(s[i - 1])) {
      size_t w = i;
      while (w > 0 && text_ident(s[w - 1])) --w;
      std::string_view prefix = s.substr(w, i - w);
      quote = prefix == "L" || prefix == "u" || prefix == "U" || prefix == "u8";
    }
    if (!quote) {
      out += c;
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < s.size() && s[j] != c && s[j] != '\n') j += s[j] == '\\' ? 2 : 1;
    out += "\"\"";
    i = std::min(s.size(), j + 1);
  }
  return out;
}

struct TextToken {
  std::string_view text;
  bool ident;
};

std::vector<TextToken> text_tokens(std::string_view s) {
  std::vector<TextToken> out;
  for (size_t i = 0; i < s.size();) {
    char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (text_ident_start(c)) {
      size_t j = i + 1;
      while (j < s.size() && text_ident(s[j])) ++j;
      out.push_back({s.substr(i, j - i), true});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i + 1;
      while (j < s.size() && (text_ident(s[j]) || s[j] == '.')) ++j;
      out.push_back({s.substr(i, j - i), false});
      i = j;
    } else {
      size_t n = (c == ':' || c == '#') && i + 1 < s.size() && s[i + 1] == c ? 2 : 1;
      out.push_back({s.substr(i, n), false});
      i += n;
    }
  }
  return out;
}

bool is_word(const std::vector<TextToken>& t, size_t i, std::string_view w) {
  return i < t.size() && t[i].text == w;
}

// The index after a balanced (...) or [...] group starting at `i`.
size_t skip_text_group(const std::vector<TextToken>& t, size_t i) {
  int depth = 0;
  for (; i < t.size(); ++i) {
    std::string_view w = t[i].text;
    if (w == "(" || w == "[") ++depth;
    if ((w == ")" || w == "]") && --depth == 0) return i + 1;
  }
  return i;
}

// The names after `namespace` at `i` (`a::inline b`, C++17's `a::b::c`);
// `end`: the index after them.
std::vector<std::string> text_namespace_names(const std::vector<TextToken>& t, size_t i,
                                         size_t* end = nullptr) {
  std::vector<std::string> out;
  for (++i; i < t.size(); ++i) {
    if (t[i].text == "inline" || t[i].text == "::") continue;
    if (!t[i].ident) break;
    out.emplace_back(t[i].text);
    if (!is_word(t, i + 1, "::")) {
      ++i;
      break;
    }
  }
  if (end) *end = i;
  return out;
}

// The `{` of a class head whose name is at `name`, or 0 where it is not one
// (an elaborated type, a template parameter, a specialization `S<...>`).
size_t text_class_body(const std::vector<TextToken>& t, size_t name) {
  size_t i = name + 1;
  if (is_word(t, i, "final")) ++i;
  if (is_word(t, i, "{")) return i;
  if (!is_word(t, i, ":")) return 0;
  for (int parens = 0; i < t.size(); ++i) {
    std::string_view w = t[i].text;
    if (w == "(") ++parens;
    if (w == ")") --parens;
    if (parens == 0 && (w == ";" || w == "}" || w == "=")) return 0;
    if (parens == 0 && w == "{") return i;
  }
  return 0;
}

// Calls `f(word, rest)` for every line of the stripped text `s`: for a
// directive (a line starting with `#`, with its continuations) its word
// ("define", "ifdef", ...) and what follows it, for code "" and the line.
template <class F>
void for_each_text_line(std::string_view s, F f) {
  size_t i = 0;
  while (i < s.size()) {
    size_t end = i;
    while (end < s.size() && s[end] != '\n') end += s[end] == '\\' ? 2 : 1;
    end = std::min(end, s.size());
    std::string_view line(s.data() + i, end - i);
    size_t first = line.find_first_not_of(" \t\r\f\v");
    if (first != std::string_view::npos && line[first] == '#') {
      size_t d = std::min(line.size(), line.find_first_not_of(" \t", first + 1));
      size_t w = d;
      while (w < line.size() && text_ident(line[w])) ++w;
      f(line.substr(d, w - d), line.substr(w));
    } else {
      f(std::string_view(), line);
    }
    i = end + 1;
  }
}

// The macro a conditional tests for definition (`#ifdef X`, `#if defined(X)`,
// `#if defined X`), or "" for any other condition.
std::string_view text_tested_name(std::string_view word, std::string_view rest) {
  std::vector<TextToken> t = text_tokens(rest);
  if (word == "ifdef" && t.size() == 1 && t[0].ident) return t[0].text;
  if (word != "if" || t.empty() || t[0].text != "defined") return "";
  if (t.size() == 2 && t[1].ident) return t[1].text;
  if (t.size() == 4 && t[1].text == "(" && t[2].ident && t[3].text == ")") return t[2].text;
  return "";
}

bool text_reserved(std::string_view name) {
  return name.size() > 1 && name[0] == '_' &&
         (name[1] == '_' || std::isupper(static_cast<unsigned char>(name[1])));
}

}  // namespace

ClassConstants::ClassConstants(const std::vector<std::string>& texts,
                               const std::vector<std::string>& options) {
  for (const std::string& o : options) {
    for (const char* prefix : {"-D", "--define-macro="}) {
      std::string_view p(prefix);
      if (o.compare(0, p.size(), p) != 0 || o.size() == p.size()) continue;
      std::string def = o.substr(p.size());
      size_t eq = def.find('=');
      if (eq != std::string::npos) def[eq] = ' ';
      read_define(def);
    }
  }
  std::set<std::string> defined;
  for (const auto& [name, macro] : macros_) defined.insert(name);
  std::vector<std::string> code;
  for (const std::string& text : texts) code.push_back(text_strip(text));
  for (const std::string& c : code) {
    for_each_text_line(c, [&](std::string_view word, std::string_view rest) {
      if (word != "define") return;
      size_t n = rest.find_first_not_of(" \t\\\n");
      size_t e = n;
      while (e < rest.size() && text_ident(rest[e])) ++e;
      if (n < e) defined.emplace(rest.substr(n, e - n));
    });
  }
  for (std::string& c : code) c = read(c, defined);
  resolve_namespace_macros();
  for (const std::string& c : code) read_code(c);
  if (texts.empty()) off_why_ = "no program text";
  find_computed_names(code);
}

// Reads the #defines of `s` (stripped) and returns its code. A block under
// `#ifdef X` where X is defined nowhere (no #define in any text, no -D, and
// not a reserved name NVRTC could predefine) is surely not compiled, so it is
// skipped (CUTLASS's `#ifdef CUTLASS_NAMESPACE`, which pastes its namespace
// name); every other block counts as compiled.
std::string ClassConstants::read(std::string_view s, const std::set<std::string>& defined) {
  std::string code;
  code.reserve(s.size());
  std::vector<bool> skipping;  // per open conditional: its current block is surely not compiled
  auto active = [&] { return std::find(skipping.begin(), skipping.end(), true) == skipping.end(); };
  for_each_text_line(s, [&](std::string_view word, std::string_view rest) {
    if (word == "if" || word == "ifdef" || word == "ifndef") {
      std::string_view x = text_tested_name(word, rest);
      skipping.push_back(!x.empty() && !text_reserved(x) && !defined.count(std::string(x)));
    } else if ((word == "elif" || word == "else") && !skipping.empty()) {
      skipping.back() = false;
    } else if (word == "endif" && !skipping.empty()) {
      skipping.pop_back();
    } else if (word == "define" && active()) {
      read_define(rest);
    } else if (word.empty() && rest.data() != nullptr && active()) {
      code.append(rest);
    }
    code += '\n';
  });
  return code;
}

// `NAME body` or `NAME(params) body`, continuations included.
void ClassConstants::read_define(std::string_view line) {
  size_t n = line.find_first_not_of(" \t\\\n");
  if (n == std::string_view::npos || !text_ident_start(line[n])) return;
  size_t e = n;
  while (e < line.size() && text_ident(line[e])) ++e;
  std::string name(line.substr(n, e - n));
  Macro& m = macros_[name];
  m.function_like = m.function_like || (e < line.size() && line[e] == '(');
  std::vector<TextToken> body = text_tokens(line.substr(e));
  macro_words_.insert(name);
  m.params.clear();
  size_t from = 0;
  if (m.function_like) {
    from = skip_text_group(body, 0);
    for (size_t i = 0; i < from; ++i) {
      if (body[i].ident) m.params.emplace_back(body[i].text);
    }
  }
  if (from < body.size()) {
    m.body = std::string(line.substr(static_cast<size_t>(body[from].text.data() - line.data())));
  }
  for (size_t i = from; i < body.size(); ++i) {
    if (body[i].text == "##") m.pastes = true;
    if (!body[i].ident) continue;
    m.words.emplace(body[i].text);
    macro_words_.emplace(body[i].text);
    if (body[i].text != "namespace") continue;
    size_t after = 0;
    std::vector<std::string> names = text_namespace_names(body, i, &after);
    m.names_computed = m.names_computed || is_word(body, after, "##") || is_word(body, after, "(");
    for (const std::string& ns : names) {
      namespace_names_.insert(ns);
      auto p = std::find(m.params.begin(), m.params.end(), ns);
      if (p != m.params.end()) m.namespace_params.insert(static_cast<size_t>(p - m.params.begin()));
    }
  }
}

template <class Tokens>
bool ClassConstants::read_namespace_call(const Macro& m, const Tokens& t, size_t open,
                                         Macro* caller) {
  std::vector<std::vector<std::string_view>> args(1);
  int depth = 0;
  for (size_t i = open; i < t.size(); ++i) {
    std::string_view w = t[i].text;
    if (w == "(" || w == "[" || w == "{") ++depth;
    if (w == ")" || w == "]" || w == "}") --depth;
    if (depth == 0) break;
    if (depth == 1 && w == ",") {
      args.emplace_back();
    } else if (i > open) {
      args.back().push_back(w);
    }
  }
  bool changed = false;
  for (size_t k : m.namespace_params) {
    if (k >= args.size() || args[k].size() != 1 || !text_ident_start(args[k][0][0])) {
      if (computed_why_.empty()) computed_why_ = "a namespace is named after a macro argument";
      for (std::string_view w : args[k]) made_from_.emplace(w);
      continue;
    }
    std::string arg(args[k][0]);
    auto p = caller ? std::find(caller->params.begin(), caller->params.end(), arg)
                    : std::vector<std::string>::iterator();
    if (caller && p != caller->params.end()) {
      changed |= caller->namespace_params.insert(static_cast<size_t>(p - caller->params.begin())).second;
    } else {
      changed |= namespace_names_.insert(arg).second;
    }
  }
  return changed;
}

// Macros that call a namespace-naming macro with their own parameter name
// namespaces after it too, to a fixpoint.
void ClassConstants::resolve_namespace_macros() {
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& [name, caller] : macros_) {
      std::vector<TextToken> body = text_tokens(caller.body);
      for (size_t i = 0; i + 1 < body.size(); ++i) {
        auto callee = macros_.find(std::string(body[i].text));
        if (callee == macros_.end() || callee->second.namespace_params.empty() ||
            body[i + 1].text != "(") {
          continue;
        }
        changed |= read_namespace_call(callee->second, body, i + 1, &caller);
      }
    }
  }
}

void ClassConstants::read_code(std::string_view code) {
  std::vector<TextToken> t = text_tokens(code);
  for (size_t i = 0; i < t.size(); ++i) {
    std::string_view w = t[i].text;
    if (t[i].ident && is_word(t, i + 1, "(")) {
      auto m = macros_.find(std::string(w));
      if (m != macros_.end() && !m->second.namespace_params.empty()) {
        read_namespace_call(m->second, t, i + 1, nullptr);
      }
    }
    if (w == "namespace") {
      for (std::string& ns : text_namespace_names(t, i)) namespace_names_.insert(std::move(ns));
      continue;
    }
    if (w != "struct" && w != "class" && w != "union") continue;
    if (i > 0 && t[i - 1].text == "enum") continue;
    size_t name = i + 1;
    // Attributes and alignment before the name: alignas(16), [[...]], a macro(...).
    while (name < t.size() && (t[name].text == "[" || is_word(t, name + 1, "("))) {
      name = skip_text_group(t, t[name].text == "[" ? name : name + 1);
    }
    if (name >= t.size() || !t[name].ident) continue;
    size_t open = text_class_body(t, name);
    if (open == 0) continue;
    read_class_body(t, open, std::string(t[name].text));
  }
}

// A class body from its `{` at `open`: each declaration at its own level
// (braces 1, parentheses 0) counts for every name it declares, as a constant
// static member or otherwise.
template <class Tokens>
void ClassConstants::read_class_body(const Tokens& t, size_t open, const std::string& cls) {
  int braces = 0, parens = 0;
  std::vector<size_t> statement;
  auto finish = [&]() {
    bool is_static = false, is_const = false, skip = false;
    for (size_t k : statement) {
      std::string_view s = t[k].text;
      skip = skip || s == "typedef" || s == "using" || s == "friend" || s == "template";
      is_static = is_static || s == "static";
      is_const = is_const || s == "const" || s == "constexpr";
      if (skip || !t[k].ident || k + 1 >= t.size()) continue;
      std::string_view next = t[k + 1].text;
      if (next != "=" && next != ";" && next != "," && next != "[" && next != "{") continue;
      Declared& d = declared_[{cls, std::string(s)}];
      (is_static && is_const ? d.constant : d.other) += 1;
    }
    statement.clear();
  };
  for (size_t k = open; k < t.size(); ++k) {
    std::string_view s = t[k].text;
    if (s == "{") ++braces;
    if (s == "(") ++parens;
    if (s == ")") --parens;
    if (s == "}" && --braces <= 1) {
      finish();
      if (braces == 0) break;
      continue;
    }
    if (braces != 1 || s == "{") continue;
    if (s == ";" && parens == 0) {
      statement.push_back(k);
      finish();
    } else if (parens == 0) {
      statement.push_back(k);
    }
  }
}

// Namespaces whose names the text does not spell: named through a macro that
// takes arguments or pastes (`namespace CAT(a, b)`, libcu++'s
// `_LIBCUDACXX_CONCAT(__, 4)`). Such a name is made of tokens of those macros'
// bodies and of the arguments of their calls (or numbers: a predefined
// macro's value), so those tokens are kept as what it may be made from.
void ClassConstants::find_computed_names(const std::vector<std::string>& code) {
  std::vector<std::string> work;
  for (const std::string& ns : namespace_names_) {
    if (macros_.count(ns)) work.push_back(ns);
  }
  for (const auto& [name, m] : macros_) {
    if (m.names_computed || !m.namespace_params.empty()) work.push_back(name);
  }
  std::set<std::string> reached;
  while (!work.empty()) {
    std::string name = std::move(work.back());
    work.pop_back();
    if (!reached.insert(name).second) continue;
    const Macro& m = macros_.at(name);
    if ((m.function_like && m.namespace_params.empty()) || m.pastes || m.names_computed) {
      if (computed_why_.empty()) computed_why_ = "a namespace is named through the macro " + name;
    }
    for (const std::string& w : m.words) {
      made_from_.insert(w);
      if (!reached.count(w) && macros_.count(w)) work.push_back(w);
    }
  }
  if (computed_why_.empty()) return;
  auto calls = [&](const std::vector<TextToken>& t) {
    for (size_t i = 0; i + 1 < t.size(); ++i) {
      if (!t[i].ident || t[i + 1].text != "(" || !reached.count(std::string(t[i].text))) continue;
      for (size_t k = i + 2, end = skip_text_group(t, i + 1); k < end; ++k) {
        made_from_.emplace(t[k].text);
      }
    }
  };
  for (const std::string& c : code) calls(text_tokens(c));
  for (const auto& [name, m] : macros_) calls(text_tokens(m.body));
}

// Whether `name` could be a computed namespace name: one token it may be
// made from, or two or more pasted (numbers allowed anywhere).
bool ClassConstants::maybe_computed(const std::string& name) const {
  if (computed_why_.empty()) return false;
  std::vector<bool> reach(name.size() + 1, false);
  reach[0] = true;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!reach[i]) continue;
    for (size_t j = i + 1; j <= name.size(); ++j) {
      std::string piece = name.substr(i, j - i);
      bool digits = piece.find_first_not_of("0123456789") == std::string::npos;
      reach[j] = reach[j] || digits || made_from_.count(piece);
    }
  }
  return reach[name.size()];
}

bool ClassConstants::is_class_constant(std::string_view mangled) const {
  if (!off_why_.empty() || mangled.compare(0, 3, "_ZN") != 0 || mangled.back() != 'E') return false;
  std::vector<std::string_view> names;
  size_t i = 3;
  while (i + 1 < mangled.size()) {
    size_t len = 0;
    size_t digits = i;
    while (i < mangled.size() && std::isdigit(static_cast<unsigned char>(mangled[i])) &&
           len < 100000) {
      len = len * 10 + static_cast<size_t>(mangled[i++] - '0');
    }
    if (i == digits || mangled[digits] == '0' || len > mangled.size() - 1 - i) return false;
    names.push_back(mangled.substr(i, len));
    i += len;
  }
  if (i != mangled.size() - 1 || names.size() < 2) return false;
  std::string cls(names[names.size() - 2]), member(names.back());
  for (std::string_view n : names) {
    if (n.empty() || !text_ident_start(n[0])) return false;
  }
  if (namespace_names_.count(cls) || macro_words_.count(cls) || macro_words_.count(member) ||
      maybe_computed(cls)) {
    return false;
  }
  auto it = declared_.find({cls, member});
  return it != declared_.end() && it->second.constant > 0 && it->second.other == 0;
}

}  // namespace kcache::compiler
