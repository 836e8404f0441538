#include "compiler/image/class_constants.h"

#include <cctype>

namespace kcache::compiler {
namespace {

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The text without comments and without the contents of string and character
// literals (each left as `""`), newlines kept so directives stay lines. A
// `'` right after a digit or letter is a digit separator (1'000), unless it
// follows a lone literal prefix (L'a', u8'a').
std::string strip(std::string_view s) {
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
    if (c == '\'' && i > 0 && is_ident(s[i - 1])) {
      size_t w = i;
      while (w > 0 && is_ident(s[w - 1])) --w;
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

struct Token {
  std::string_view text;
  bool ident;
};

std::vector<Token> tokens(std::string_view s) {
  std::vector<Token> out;
  for (size_t i = 0; i < s.size();) {
    char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (is_ident_start(c)) {
      size_t j = i + 1;
      while (j < s.size() && is_ident(s[j])) ++j;
      out.push_back({s.substr(i, j - i), true});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i + 1;
      while (j < s.size() && (is_ident(s[j]) || s[j] == '.')) ++j;
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

bool is(const std::vector<Token>& t, size_t i, std::string_view w) {
  return i < t.size() && t[i].text == w;
}

// The index after a balanced (...) or [...] group starting at `i`.
size_t skip_group(const std::vector<Token>& t, size_t i) {
  int depth = 0;
  for (; i < t.size(); ++i) {
    std::string_view w = t[i].text;
    if (w == "(" || w == "[") ++depth;
    if ((w == ")" || w == "]") && --depth == 0) return i + 1;
  }
  return i;
}

// The names after `namespace` at `i` (`a::inline b`, C++17's `a::b::c`).
std::vector<std::string> namespace_names(const std::vector<Token>& t, size_t i) {
  std::vector<std::string> out;
  for (++i; i < t.size(); ++i) {
    if (t[i].text == "inline" || t[i].text == "::") continue;
    if (!t[i].ident) break;
    out.emplace_back(t[i].text);
    if (!is(t, i + 1, "::")) break;
  }
  return out;
}

// The `{` of a class head whose name is at `name`, or 0 where it is not one
// (an elaborated type, a template parameter, a specialization `S<...>`).
size_t class_body(const std::vector<Token>& t, size_t name) {
  size_t i = name + 1;
  if (is(t, i, "final")) ++i;
  if (is(t, i, "{")) return i;
  if (!is(t, i, ":")) return 0;
  for (int parens = 0; i < t.size(); ++i) {
    std::string_view w = t[i].text;
    if (w == "(") ++parens;
    if (w == ")") --parens;
    if (parens == 0 && (w == ";" || w == "}" || w == "=")) return 0;
    if (parens == 0 && w == "{") return i;
  }
  return 0;
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
  for (const std::string& text : texts) read(text);
  has_text_ = !texts.empty();
  decide_open();
}

// Splits directives from code: a line starting with `#`, with its
// continuations, is a directive; every other line is code.
void ClassConstants::read(std::string_view text) {
  std::string s = strip(text);
  std::string code;
  code.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t end = i;
    while (end < s.size() && s[end] != '\n') end += s[end] == '\\' ? 2 : 1;
    end = std::min(end, s.size());
    std::string_view line(s.data() + i, end - i);
    size_t first = line.find_first_not_of(" \t\r\f\v");
    if (first != std::string_view::npos && line[first] == '#') {
      size_t d = line.find_first_not_of(" \t", first + 1);
      if (d != std::string_view::npos && line.compare(d, 6, "define") == 0) {
        read_define(line.substr(d + 6));
      }
    } else {
      code.append(line);
    }
    code += '\n';
    i = end + 1;
  }
  read_code(code);
}

// `NAME body` or `NAME(params) body`, continuations included.
void ClassConstants::read_define(std::string_view line) {
  size_t n = line.find_first_not_of(" \t\\\n");
  if (n == std::string_view::npos || !is_ident_start(line[n])) return;
  size_t e = n;
  while (e < line.size() && is_ident(line[e])) ++e;
  std::string name(line.substr(n, e - n));
  Macro& m = macros_[name];
  m.function_like = m.function_like || (e < line.size() && line[e] == '(');
  std::vector<Token> body = tokens(line.substr(e));
  macro_words_.insert(name);
  std::set<std::string> params;
  size_t from = 0;
  if (m.function_like) {
    from = skip_group(body, 0);
    for (size_t i = 0; i < from; ++i) {
      if (body[i].ident) params.emplace(body[i].text);
    }
  }
  for (size_t i = from; i < body.size(); ++i) {
    if (body[i].text == "##") m.pastes = true;
    if (!body[i].ident) continue;
    m.words.emplace_back(body[i].text);
    macro_words_.emplace(body[i].text);
    if (body[i].text != "namespace") continue;
    for (const std::string& ns : namespace_names(body, i)) {
      namespace_names_.insert(ns);
      if (params.count(ns) && off_why_.empty()) {
        off_why_ = "the macro " + name + " names a namespace after its parameter " + ns;
      }
    }
  }
}

void ClassConstants::read_code(std::string_view code) {
  std::vector<Token> t = tokens(code);
  for (size_t i = 0; i < t.size(); ++i) {
    std::string_view w = t[i].text;
    if (w == "namespace") {
      for (std::string& ns : namespace_names(t, i)) namespace_names_.insert(std::move(ns));
      continue;
    }
    if (w != "struct" && w != "class" && w != "union") continue;
    if (i > 0 && t[i - 1].text == "enum") continue;
    size_t name = i + 1;
    // Attributes and alignment before the name: alignas(16), [[...]], a macro(...).
    while (name < t.size() && (t[name].text == "[" || is(t, name + 1, "("))) {
      name = skip_group(t, t[name].text == "[" ? name : name + 1);
    }
    if (name >= t.size() || !t[name].ident) continue;
    size_t open = class_body(t, name);
    if (open == 0) continue;
    std::string cls(t[name].text);
    // The body: statements at its own level (braces 1, parentheses 0).
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
}

// Whether every namespace's name is in the text: a namespace named through a
// function-like macro, or a macro that pastes, could be named anything.
void ClassConstants::decide_open() {
  std::vector<std::string> work;
  for (const std::string& ns : namespace_names_) {
    if (macros_.count(ns)) work.push_back(ns);
  }
  std::set<std::string> seen;
  while (!work.empty() && off_why_.empty()) {
    std::string name = std::move(work.back());
    work.pop_back();
    if (!seen.insert(name).second) continue;
    const Macro& m = macros_.at(name);
    if (m.function_like || m.pastes) {
      off_why_ = "a namespace is named through the macro " + name +
                 (m.pastes ? ", which pastes tokens" : ", which takes arguments");
      break;
    }
    for (const std::string& w : m.words) {
      if (macros_.count(w)) work.push_back(w);
    }
  }
  if (!has_text_ && off_why_.empty()) off_why_ = "no program text";
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
    if (n.empty() || !is_ident_start(n[0])) return false;
  }
  if (namespace_names_.count(cls) || macro_words_.count(cls) || macro_words_.count(member)) {
    return false;
  }
  auto it = declared_.find({cls, member});
  return it != declared_.end() && it->second.constant > 0 && it->second.other == 0;
}

}  // namespace kcache::compiler
