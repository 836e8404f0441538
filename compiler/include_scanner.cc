// The scanner's half of includes.h: the lexer that finds include
// directives (scan_file, scan_includes) and the reader of NVRTC's "cannot
// open" complaints (parse_cannot_open). Pure text in, pure values out.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/includes.h"

namespace kcache::compiler {
namespace {

bool is_id_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool is_id(char c) { return is_id_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

// A small preprocessing-token walker: just enough C++ lexing to tell code from
// comments and literals, and to find include directives and __has_include.
class Scanner {
 public:
  Scanner(std::string_view t, const ScanOptions& options) : t_(t), trigraphs_(options.trigraphs) {}

  ScannedFile run() {
    while (i_ < t_.size()) step();
    return std::move(out_);
  }

 private:
  char at(size_t i) const { return i < t_.size() ? t_[i] : '\0'; }

  // The length of a line splice at i (translation phase 2), else 0: a
  // backslash then LF or CR LF (NVRTC 13 joins both; a lone CR ends no line,
  // and a blank between the backslash and the line end makes no splice),
  // and with trigraphs (-std=c++03/11/14) `??/` spelling the backslash.
  size_t splice(size_t i) const {
    char c = at(i);
    return c == '\\' || c == '?' ? splice_after(i, c) : 0;  // runs per byte: kept small
  }
  [[gnu::noinline]] size_t splice_after(size_t i, char c) const {
    if (c == '\\') {
      if (at(i + 1) == '\n') return 2;
      if (at(i + 1) == '\r' && at(i + 2) == '\n') return 3;
    } else if (trigraphs_ && at(i + 1) == '?' && at(i + 2) == '/') {
      if (at(i + 3) == '\n') return 4;
      if (at(i + 3) == '\r' && at(i + 4) == '\n') return 5;
    }
    return 0;
  }
  bool trigraph_backslash(size_t i) const {
    return trigraphs_ && at(i) == '?' && at(i + 1) == '?' && at(i + 2) == '/';
  }
  // `??=`, the trigraph of `#`, at i.
  bool trigraph_hash(size_t i) const {
    return trigraphs_ && at(i) == '?' && at(i + 1) == '?' && at(i + 2) == '=';
  }

  void step() {
    char c = t_[i_];
    if (c == '\n') {
      ++line_;
      line_start_ = true;
      ++i_;
    } else if (is_space(c)) {
      ++i_;
    } else if (size_t n = splice(i_)) {
      i_ += n;
      ++line_;
    } else if (c == '/' && at(i_ + 1) == '/') {
      skip_line_comment();
    } else if (c == '/' && at(i_ + 1) == '*') {
      skip_block_comment();
    } else if (line_start_ &&
               (c == '#' || (c == '%' && at(i_ + 1) == ':') || (c == '?' && trigraph_hash(i_)))) {
      line_start_ = false;
      i_ += c == '#' ? 1 : c == '%' ? 2 : 3;  // `%:` is the digraph of `#`, `??=` its trigraph
      directive();
    } else {
      line_start_ = false;
      if (c == '"') {
        skip_quoted('"');
      } else if (c == '\'') {
        skip_quoted('\'');
      } else if (is_id_start(c)) {
        identifier();
      } else if (is_digit(c) || (c == '.' && is_digit(at(i_ + 1)))) {
        skip_number();
      } else {
        ++i_;
      }
    }
  }

  // The comment loops run on local copies of i_ and line_: the compiler
  // need not keep the members up to date on every byte.
  void skip_line_comment() {
    size_t i = i_;
    int line = line_;
    while (i < t_.size() && t_[i] != '\n') {
      if (size_t n = splice(i)) {
        ++line;
        i += n;
        continue;
      }
      ++i;
    }
    i_ = i;
    line_ = line;
  }

  void skip_block_comment() {
    size_t i = i_ + 2;
    int line = line_;
    while (i < t_.size() && !(t_[i] == '*' && at(i + 1) == '/')) {
      if (t_[i] == '\n') ++line;
      ++i;
    }
    i_ = std::min(t_.size(), i + 2);
    line_ = line;
  }

  void skip_blanks() {
    for (;;) {
      if (is_space(at(i_))) {
        ++i_;
      } else if (at(i_) == '/' && at(i_ + 1) == '*') {
        skip_block_comment();
      } else if (size_t n = splice(i_)) {
        i_ += n;
        ++line_;
      } else {
        return;
      }
    }
  }

  // A string or character literal; an unterminated one ends at the line's end
  // (an apostrophe in an #error text must not swallow the file).
  void skip_quoted(char quote) {
    ++i_;
    while (i_ < t_.size() && t_[i_] != quote && t_[i_] != '\n') {
      if (size_t n = splice(i_)) {
        i_ += n;
        ++line_;
        continue;
      }
      if (t_[i_] == '\\' || trigraph_backslash(i_)) {
        i_ += t_[i_] == '\\' ? 1 : 3;  // an escape: the next character is skipped,
        if (splice(i_)) continue;      // unless it starts a splice (phase 2 comes first)
      }
      ++i_;
    }
    if (at(i_) == quote) ++i_;
  }

  // pp-number, digit separators included: 1'000'000 is not a char literal.
  void skip_number() {
    while (i_ < t_.size()) {
      char c = t_[i_];
      if (is_id(c) || c == '.') {
        ++i_;
      } else if (c == '\'' && is_id(at(i_ + 1))) {
        i_ += 2;
      } else if ((c == '+' || c == '-') && (t_[i_ - 1] == 'e' || t_[i_ - 1] == 'E' ||
                                            t_[i_ - 1] == 'p' || t_[i_ - 1] == 'P')) {
        ++i_;
      } else {
        break;
      }
    }
  }

  std::string_view read_identifier() {
    size_t start = i_;
    while (i_ < t_.size() && is_id(t_[i_])) ++i_;
    return t_.substr(start, i_ - start);
  }

  void identifier() {
    std::string_view id = read_identifier();
    if (at(i_) == '"' && (id == "R" || id == "u8R" || id == "uR" || id == "UR" || id == "LR")) {
      skip_raw_string();
    } else if (at(i_) == '"' || at(i_) == '\'') {
      // u8"...", L'x': an encoding prefix, then an ordinary literal.
    } else if ((id == "__has_include" || id == "__has_include_next") && dead_ == 0) {
      int line = line_;
      size_t begin = i_ - id.size();
      skip_blanks();
      if (at(i_) != '(') return;
      ++i_;
      skip_blanks();
      header_name(line, begin, /*probe=*/true, id.size() > 13);
    }
  }

  void skip_raw_string() {
    size_t open = t_.find('(', i_);
    if (open == std::string_view::npos) {
      i_ = t_.size();
      return;
    }
    std::string close = ")" + std::string(t_.substr(i_ + 1, open - i_ - 1)) + "\"";
    size_t end = t_.find(close, open);
    end = end == std::string_view::npos ? t_.size() : end + close.size();
    for (size_t k = i_; k < end; ++k) line_ += t_[k] == '\n';
    i_ = end;
  }

  // Conditionals are tracked only to skip groups under a literal `#if 0` or
  // `#elif 0` (see the grammar at dead_ below); everything else stays live.
  void directive() {
    skip_blanks();
    int line = line_;
    size_t begin = i_;
    std::string_view name = directive_name();
    if (name == "if" || name == "ifdef" || name == "ifndef") {
      if (dead_ > 0) {
        ++dead_;  // nested in a dead group: only its #endif matters
      } else if (name == "if" && literal_zero()) {
        dead_ = 1;
      }
    } else if (name == "elif" || name == "elifdef" || name == "elifndef") {
      // At depth 1 the dead group's chain goes on; live, this ends a live
      // group of the innermost conditional, whatever it was.
      if (dead_ <= 1) dead_ = name == "elif" && literal_zero() ? 1 : 0;
    } else if (name == "else") {
      if (dead_ == 1) dead_ = 0;  // may be taken: kept, conservatively
    } else if (name == "endif") {
      if (dead_ > 0) --dead_;
    } else if ((name == "include" || name == "include_next") && dead_ == 0) {
      skip_blanks();
      header_name(line, begin, /*probe=*/false, name.size() > 7);
    } else if ((name == "line" || (!name.empty() && is_digit(name.front()))) && dead_ == 0) {
      line_name(/*number_read=*/name != "line");
    }
  }

  // `#line N "name"` (and the line marker `# N "name"`): the name, its
  // escapes undone (NVRTC names the file so in its log, unescaped).
  void line_name(bool number_read) {
    skip_blanks();
    if (!number_read) {
      while (is_id(at(i_))) ++i_;  // the line number (a macro: then no name is known)
      skip_blanks();
    }
    if (at(i_) != '"') return;
    std::string name;
    size_t k = i_ + 1;
    while (k < t_.size() && t_[k] != '"' && t_[k] != '\n') {
      if (t_[k] == '\\' && k + 1 < t_.size() && t_[k + 1] != '\n') ++k;
      name += t_[k++];
    }
    if (at(k) != '"') return;
    i_ = k + 1;
    if (std::find(out_.line_names.begin(), out_.line_names.end(), name) == out_.line_names.end()) {
      out_.line_names.push_back(std::move(name));
    }
  }

  // The directive's name, backslash-newlines inside it removed: `#end`,
  // backslash, newline, `if` is an #endif, and missing one would stretch a
  // dead group. A view into the text, or into spliced_ where it was split.
  std::string_view directive_name() {
    std::string_view name = read_identifier();
    if (name.empty() || !splice(i_)) return name;
    spliced_.assign(name);
    for (;;) {
      if (is_id(at(i_))) {
        spliced_ += t_[i_++];
      } else if (size_t n = splice(i_)) {
        i_ += n;
        ++line_;
      } else {
        return spliced_;
      }
    }
  }

  // The controlling expression is exactly the pp-number `0`, then the line
  // ends (blanks and comments allowed). `00`, `0x0`, `0u`, `(0)`, `0 && X`
  // and macros are not recognised: they stay live (over-keying, never wrong).
  bool literal_zero() {
    skip_blanks();
    if (at(i_) != '0' || is_id(at(i_ + 1)) || at(i_ + 1) == '.' || at(i_ + 1) == '\'') {
      return false;
    }
    ++i_;
    skip_blanks();
    return i_ >= t_.size() || t_[i_] == '\n' || (t_[i_] == '/' && at(i_ + 1) == '/');
  }

  // "x.h" or <x.h> at i_ (no escapes in header names, no line breaks).
  // `begin`: where the directive's name (or __has_include_next) starts.
  void header_name(int line, size_t begin, bool probe, bool next) {
    char open = at(i_);
    char close = open == '"' ? '"' : open == '<' ? '>' : '\0';
    if (!close) return;  // a computed include: left to NVRTC
    size_t end = i_ + 1;
    while (end < t_.size() && t_[end] != close && t_[end] != '\n') ++end;
    if (at(end) != close) return;
    IncludeDirective d;
    d.name = std::string(t_.substr(i_ + 1, end - i_ - 1));
    d.angled = open == '<';
    d.probe = probe;
    d.next = next;
    d.line = line;
    d.begin = begin;
    d.end = end + 1;
    if (!d.name.empty()) out_.includes.push_back(std::move(d));
    i_ = end + 1;
  }

  std::string_view t_;
  size_t i_ = 0;
  int line_ = 1;
  bool line_start_ = true;
  // How deep the scan is inside a dead group; 0: live. A group is dead when
  // it is controlled by `#if 0` or `#elif 0` (literal_zero) and its enclosing
  // group is live, or when it lies inside a dead group:
  //   live:  #if 0 -> 1;  #elif 0 -> 1;  other conditionals: untracked
  //   n > 0: #if/#ifdef/#ifndef -> n+1;  #endif -> n-1;
  //          at 1: #else, #elif/#elifdef/#elifndef (not `#elif 0`) -> 0
  // No preprocessor compiles a dead group, whatever is defined, so NVRTC
  // never opens an include or evaluates a __has_include inside one: not
  // following them is exact. A group whose life needs macro evaluation is
  // live. Should this lexer ever misjudge where a dead group ends, only a
  // hint or a program's scanner key lacks a header: NVRTC reads the disk
  // itself and what it read is keyed. A counter, not a stack: bounded for
  // any nesting.
  size_t dead_ = 0;
  bool trigraphs_;
  std::string spliced_;  // a directive name split by backslash-newlines
  ScannedFile out_;
};

}  // namespace

ScannedFile scan_file(std::string_view text, const ScanOptions& options) {
  return Scanner(text, options).run();
}

std::vector<IncludeDirective> scan_includes(std::string_view text, const ScanOptions& options) {
  return Scanner(text, options).run().includes;
}

std::optional<AskedInclude> parse_cannot_open(std::string_view log) {
  for (std::string_view phrase :
       {std::string_view("): catastrophic error: cannot open source file \""),
        std::string_view("): catastrophic error: could not open source file \"")}) {
    size_t at = log.find(phrase);
    if (at == std::string_view::npos) continue;
    size_t line_start = at == 0 ? std::string_view::npos : log.rfind('\n', at - 1);
    line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
    size_t open = log.rfind('(', at);
    size_t name_start = at + phrase.size();
    size_t name_end = log.find('"', name_start);
    if (open == std::string_view::npos || open < line_start || name_end == std::string_view::npos ||
        name_end == name_start) {
      continue;
    }
    std::string_view digits = log.substr(open + 1, at - open - 1);
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string_view::npos) {
      continue;
    }
    AskedInclude a;
    a.includer = std::string(log.substr(line_start, open - line_start));
    a.line = std::stoi(std::string(digits));
    a.name = std::string(log.substr(name_start, name_end - name_start));
    size_t echo_start = log.find('\n', name_end);
    if (echo_start != std::string_view::npos) {
      std::string_view echo = log.substr(echo_start + 1);
      echo = echo.substr(0, echo.find('\n'));
      a.angled = echo.find("<" + a.name + ">") != std::string_view::npos;
    }
    return a;
  }
  return std::nullopt;
}

}  // namespace kcache::compiler
