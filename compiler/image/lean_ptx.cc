#include "compiler/image/lean_ptx.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "compiler/image/mangled_name.h"

// The PTX this pass relies on (PTX ISA, "Syntax" and "Directives"); anything
// else at the top level leaves the PTX unchanged:
//
//   module      := { line-directive | statement }
//   line-directive := (".version" | ".target" | ".address_size" | ".file")
//                     tokens up to the end of the line
//   statement   := lead { token } ( ";" | body )     ";" at nesting depth 0
//   body        := "{" balanced-tokens "}"           only after .entry/.func
//   lead        := ".visible" | ".extern" | ".weak" | ".common" | ".global"
//                | ".const" | ".shared" | ".local" | ".entry" | ".func"
//                | ".alias" | ".pragma" | ".tex" | ".surfref" | ".samplerref"
//   removable   := ".global" [".align" NUMBER] [".v2" | ".v4" | ".v8"] TYPE
//                  IDENT { "[" [NUMBER] "]" } ["=" initializer] ";"
//   TYPE        := .b8 .b16 .b32 .b64 .u8 ... .s64 .f16 .f16x2 .bf16 .bf16x2
//                  .f32 .f64 .pred
//   tokens: IDENT  := [A-Za-z_$%][A-Za-z0-9_$]*
//           DIRECTIVE := "." [A-Za-z0-9_$]+
//           NUMBER := [0-9][A-Za-z0-9_.]*   (0x.., 0f.., 1.5, ...)
//           STRING := '"' { char but '"', '\', newline | '\' char } '"'
//           any other printable character is punctuation; "//" and "/* */"
//           are comments.
//
// A variable is referenced when its name is a token of a kept statement (or a
// dot-separated part of a DIRECTIVE or NUMBER token): an instruction operand (`mov.u64 %rd1, x;`),
// an initializer
// (`= {generic(x)}`), anything. That over-approximates (an opcode spelled like
// a variable keeps it), which is the safe direction.

namespace kcache::compiler {
namespace {

enum class Tok { ident, directive, number, string, punct };

struct Token {
  Tok kind;
  size_t begin, end;  // byte range in the PTX
  bool newline_before;
};

struct Unchanged {
  std::string why;
};

bool is_follow(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$';
}

std::vector<Token> tokenize(std::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  bool newline = true;
  while (i < s.size()) {
    char c = s[i];
    if (c == '\n') {
      newline = true;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++i;
      continue;
    }
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i < s.size() && s[i] != '\n') ++i;
      continue;
    }
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      size_t close = s.find("*/", i + 2);
      if (close == std::string_view::npos) throw Unchanged{"an unterminated /* comment"};
      if (s.substr(i, close - i).find('\n') != std::string_view::npos) newline = true;
      i = close + 2;
      continue;
    }
    Token t{Tok::punct, i, i + 1, newline};
    newline = false;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%') {
      t.kind = Tok::ident;
      size_t j = i + 1;
      while (j < s.size() && is_follow(s[j])) ++j;
      t.end = j;
    } else if (c == '.' && i + 1 < s.size() && is_follow(s[i + 1])) {
      t.kind = Tok::directive;
      size_t j = i + 1;
      while (j < s.size() && is_follow(s[j])) ++j;
      t.end = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      t.kind = Tok::number;
      size_t j = i + 1;
      while (j < s.size() && (is_follow(s[j]) || s[j] == '.')) ++j;
      t.end = j;
    } else if (c == '"') {
      t.kind = Tok::string;
      size_t j = i + 1;
      while (j < s.size() && s[j] != '"') {
        if (s[j] == '\n') throw Unchanged{"a string broken by a newline"};
        j += s[j] == '\\' ? 2 : 1;
      }
      if (j >= s.size()) throw Unchanged{"an unterminated string"};
      t.end = j + 1;
    } else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      throw Unchanged{"a byte that is not PTX text (" +
                      std::to_string(static_cast<unsigned char>(c)) + ") at offset " +
                      std::to_string(i)};
    }
    if (t.end - t.begin > kMaxTokenBytes) throw Unchanged{"a token over the size bound"};
    out.push_back(t);
    i = t.end;
  }
  return out;
}

constexpr std::string_view kLineDirectives[] = {".version", ".target", ".address_size", ".file"};
constexpr std::string_view kLeads[] = {".visible", ".extern", ".weak",  ".common",  ".global",
                                       ".const",   ".shared", ".local", ".entry",   ".func",
                                       ".alias",   ".pragma", ".tex",   ".surfref", ".samplerref"};
constexpr std::string_view kTypes[] = {".b8",   ".b16",    ".b32", ".b64", ".u8",  ".u16", ".u32",
                                       ".u64",  ".s8",     ".s16", ".s32", ".s64", ".f16", ".f16x2",
                                       ".bf16", ".bf16x2", ".f32", ".f64", ".pred"};

template <size_t N>
bool one_of(std::string_view word, const std::string_view (&set)[N]) {
  return std::find(std::begin(set), std::end(set), word) != std::end(set);
}

struct Statement {
  size_t first, last;      // token indices, inclusive
  bool variable = false;   // not .entry/.func/.alias/.pragma
  bool candidate = false;  // of the removable form
  bool host_nameable = false;  // of that form, kept only because a host can name it
  size_t name = 0;         // token index of the name, when a candidate
};

class Pass {
 public:
  Pass(std::string_view ptx, const ClassConstants* classes)
      : s_(ptx), toks_(tokenize(ptx)), classes_(classes) {}

  std::string_view text(size_t t) const {
    return s_.substr(toks_[t].begin, toks_[t].end - toks_[t].begin);
  }
  bool is(size_t t, std::string_view word) const { return t < toks_.size() && text(t) == word; }

  std::vector<Statement> split() const {
    std::vector<Statement> out;
    size_t i = 0;
    while (i < toks_.size()) {
      std::string_view lead = text(i);
      if (toks_[i].kind == Tok::directive && one_of(lead, kLineDirectives)) {
        if (!toks_[i].newline_before) throw Unchanged{std::string(lead) + " not at a line start"};
        Statement line{i, i};
        while (line.last + 1 < toks_.size() && !toks_[line.last + 1].newline_before) ++line.last;
        out.push_back(line);  // kept: whatever it names counts as referenced
        i = line.last + 1;
        continue;
      }
      if (toks_[i].kind != Tok::directive || !one_of(lead, kLeads)) {
        throw Unchanged{"an unexpected top-level `" + std::string(lead.substr(0, 40)) + "`"};
      }
      if (out.size() >= kMaxStatements) throw Unchanged{"more statements than the bound"};
      Statement st{i, i};
      bool function = false;
      std::string stack;
      size_t j = i;
      for (;; ++j) {
        if (j >= toks_.size()) throw Unchanged{"a statement that never ends"};
        std::string_view w = text(j);
        if (stack.empty() && (w == ".entry" || w == ".func")) function = true;
        if (toks_[j].kind != Tok::punct) continue;
        char c = w[0];
        if (c == '(' || c == '[' || c == '{') {
          if (stack.size() >= static_cast<size_t>(kMaxNesting)) throw Unchanged{"nesting too deep"};
          stack.push_back(c);
        } else if (c == ')' || c == ']' || c == '}') {
          char open = c == ')' ? '(' : c == ']' ? '[' : '{';
          if (stack.empty() || stack.back() != open) throw Unchanged{"unbalanced brackets"};
          stack.pop_back();
          if (c == '}' && stack.empty() && function) break;
        } else if (c == ';' && stack.empty()) {
          break;
        }
      }
      st.last = j;
      st.variable = !function && lead != ".alias" && lead != ".pragma";
      classify(st);
      out.push_back(st);
      i = j + 1;
    }
    return out;
  }

  // Marks the removable form (see the grammar) and its name.
  void classify(Statement& st) const {
    size_t k = st.first;
    if (!is(k, ".global")) return;
    ++k;
    if (is(k, ".align")) {
      if (k + 1 > st.last || toks_[k + 1].kind != Tok::number) return;
      k += 2;
    }
    if (is(k, ".v2") || is(k, ".v4") || is(k, ".v8")) ++k;
    if (k > st.last || !one_of(text(k), kTypes)) return;
    ++k;
    if (k > st.last || toks_[k].kind != Tok::ident || text(k)[0] == '%') return;
    size_t name = k++;
    while (is(k, "[")) {
      ++k;
      if (k <= st.last && toks_[k].kind == Tok::number) ++k;
      if (!is(k, "]")) return;
      ++k;
    }
    if (k > st.last || !(is(k, ";") || is(k, "="))) return;
    if (is(k, ";") && k != st.last) return;
    if (!removable(text(name))) {
      st.host_nameable = host_reach(text(name)).reach == HostReach::by_name;
      return;
    }
    st.candidate = true;
    st.name = name;
  }

  // Only nvrtcGetLoweredName can name it, or it is a class's constant
  // static data member, which no program declared __device__ (class_constants.h).
  bool removable(std::string_view name) const {
    HostReach reach = host_reach(name).reach;
    return reach == HostReach::lowered_name_only ||
           (reach == HostReach::by_name && classes_ && classes_->is_class_constant(name));
  }

  const std::vector<Token>& tokens() const { return toks_; }

 private:
  std::string_view s_;
  std::vector<Token> toks_;
  const ClassConstants* classes_;
};

// The byte range cut for a statement: its whole line(s) when nothing else
// shares them, else just its tokens.
std::pair<size_t, size_t> cut_range(std::string_view s, size_t a, size_t b) {
  size_t line_start = a;
  while (line_start > 0 && (s[line_start - 1] == ' ' || s[line_start - 1] == '\t')) --line_start;
  size_t line_end = b;
  while (line_end < s.size() && (s[line_end] == ' ' || s[line_end] == '\t' || s[line_end] == '\r'))
    ++line_end;
  if ((line_start == 0 || s[line_start - 1] == '\n') && line_end < s.size() &&
      s[line_end] == '\n') {
    return {line_start, line_end + 1};
  }
  return {a, b};
}

}  // namespace

LeanPtx lean_ptx(std::string_view ptx, const std::vector<std::string>& keep,
                 const ClassConstants* classes) {
  LeanPtx out;
  out.ptx = std::string(ptx);
  if (ptx.size() > kMaxPtxBytes) {
    out.why = "the PTX is over the size bound";
    return out;
  }
  try {
    Pass pass(ptx, classes);
    std::vector<Statement> statements = pass.split();
    const std::vector<Token>& toks = pass.tokens();

    std::unordered_map<std::string_view, size_t> candidates;  // name -> statement
    for (size_t i = 0; i < statements.size(); ++i) {
      if (!statements[i].candidate) continue;
      if (!candidates.emplace(pass.text(statements[i].name), i).second) {
        throw Unchanged{"a variable declared twice: " + std::string(pass.text(statements[i].name))};
      }
    }
    std::vector<bool> kept(statements.size(), false);
    std::vector<size_t> work;
    for (size_t i = 0; i < statements.size(); ++i) {
      const Statement& st = statements[i];
      bool named = st.candidate && std::find(keep.begin(), keep.end(),
                                             std::string(pass.text(st.name))) != keep.end();
      if (!st.candidate || named) {
        kept[i] = true;
        work.push_back(i);
      }
    }
    while (!work.empty()) {
      const Statement& st = statements[work.back()];
      work.pop_back();
      for (size_t t = st.first; t <= st.last; ++t) {
        Tok kind = toks[t].kind;
        if (kind == Tok::punct || kind == Tok::string || (st.candidate && t == st.name)) continue;
        // Every dot-separated part of a word: `._ZN4cuda1xE` or `0._ZN...` is
        // no PTX, but keeping on it is the safe side.
        std::string_view word = pass.text(t);
        for (size_t from = 0; from <= word.size();) {
          size_t dot = std::min(word.find('.', from), word.size());
          auto it = candidates.find(word.substr(from, dot - from));
          if (it != candidates.end() && !kept[it->second]) {
            kept[it->second] = true;
            work.push_back(it->second);
          }
          from = dot + 1;
        }
      }
    }

    std::string lean;
    lean.reserve(ptx.size());
    size_t copied = 0;
    for (size_t i = 0; i < statements.size(); ++i) {
      const Statement& st = statements[i];
      if (kept[i]) {
        out.variables_kept += st.variable;
        out.host_nameable_kept += st.host_nameable;
        continue;
      }
      auto [a, b] = cut_range(ptx, toks[st.first].begin, toks[st.last].end);
      a = std::max(a, copied);  // a line shared with the previous cut
      lean.append(ptx.substr(copied, a - copied));
      copied = b;
      ++out.variables_removed;
      out.removed.emplace_back(pass.text(st.name));
    }
    if (out.variables_removed == 0) return out;
    lean.append(ptx.substr(copied));
    out.bytes_removed = ptx.size() - lean.size();
    out.ptx = std::move(lean);
    out.changed = true;
    return out;
  } catch (const Unchanged& u) {
    out.why = "left unchanged: the PTX has " + u.why;
    out.variables_kept = 0;
    out.host_nameable_kept = 0;
    return out;
  }
}

}  // namespace kcache::compiler
