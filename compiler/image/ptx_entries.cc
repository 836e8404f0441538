#include "compiler/image/ptx_entries.h"

#include <cstdint>

namespace kcache::compiler {
// A named namespace: //cli:kcache_tool compiles this file in one unit with
// the other compiler sources, whose anonymous namespaces would merge with it.
namespace ptx_entries_reader {

bool ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%';
}
bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }

// Tokens: identifiers and directives (".entry", ".u64": a dot and an
// identifier), numbers, and single punctuation characters. Strings never
// hold ".entry" in PTX; a quoted string is skipped as one token.
class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  // The next token, empty at the end.
  std::string_view next() {
    skip_space_and_comments();
    if (at_ >= s_.size()) return {};
    size_t start = at_;
    char c = s_[at_];
    if (c == '"') {
      ++at_;
      while (at_ < s_.size() && s_[at_] != '"') at_ += s_[at_] == '\\' ? 2 : 1;
      at_ = at_ < s_.size() ? at_ + 1 : s_.size();
    } else if (c == '.' && at_ + 1 < s_.size() && ident_char(s_[at_ + 1])) {
      ++at_;
      while (at_ < s_.size() && ident_char(s_[at_])) ++at_;
    } else if (ident_char(c)) {
      while (at_ < s_.size() && ident_char(s_[at_])) ++at_;
    } else {
      ++at_;
    }
    return s_.substr(start, at_ - start);
  }

  size_t line() const {
    size_t n = 1;
    for (size_t i = 0; i < at_ && i < s_.size(); ++i) n += s_[i] == '\n';
    return n;
  }

 private:
  void skip_space_and_comments() {
    while (at_ < s_.size()) {
      char c = s_[at_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        ++at_;
      } else if (s_.compare(at_, 2, "//") == 0) {
        size_t end = s_.find('\n', at_);
        at_ = end == std::string_view::npos ? s_.size() : end + 1;
      } else if (s_.compare(at_, 2, "/*") == 0) {
        size_t end = s_.find("*/", at_ + 2);
        at_ = end == std::string_view::npos ? s_.size() : end + 2;
      } else {
        return;
      }
    }
  }

  std::string_view s_;
  size_t at_ = 0;
};

size_t type_size(std::string_view t) {
  if (t == ".b8" || t == ".u8" || t == ".s8") return 1;
  if (t == ".b16" || t == ".u16" || t == ".s16" || t == ".f16" || t == ".bf16") return 2;
  if (t == ".b32" || t == ".u32" || t == ".s32" || t == ".f32" || t == ".f16x2" || t == ".bf16x2")
    return 4;
  if (t == ".b64" || t == ".u64" || t == ".s64" || t == ".f64") return 8;
  if (t == ".b128") return 16;
  return 0;
}

bool is_qualifier(std::string_view t) {
  return t == ".ptr" || t == ".global" || t == ".const" || t == ".local" || t == ".shared";
}

bool is_ident(std::string_view t) {
  if (t.empty() || !ident_start(t[0])) return false;
  for (char c : t) {
    if (!ident_char(c)) return false;
  }
  return true;
}

// A decimal number up to `max`; false otherwise.
bool number(std::string_view t, size_t max, size_t* out) {
  if (t.empty() || t.size() > 10) return false;
  uint64_t v = 0;
  for (char c : t) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > max) return false;
  *out = static_cast<size_t>(v);
  return true;
}

PtxEntries fail(const Lexer& lex, const std::string& what) {
  PtxEntries out;
  out.ok = false;
  out.why = what + " (line " + std::to_string(lex.line()) + ")";
  return out;
}

}  // namespace ptx_entries_reader

size_t ptx_type_size(std::string_view type) { return ptx_entries_reader::type_size(type); }

ParamKind ptx_param_kind(const PtxParam& param) {
  std::string_view type = param.type;
  if (ptx_type_size(type) == 0 || param.size != ptx_type_size(type)) return ParamKind::bits;
  if (type[1] == 'f' || type.substr(0, 3) == ".bf") return ParamKind::floating;
  if (type[1] == 'u' || type[1] == 's') return ParamKind::integer;
  return ParamKind::bits;
}

PtxEntries ptx_entries(std::string_view ptx) {
  using namespace ptx_entries_reader;
  PtxEntries out;
  if (ptx.size() > kMaxEntriesPtxBytes) {
    out.ok = false;
    out.why = "PTX over " + std::to_string(kMaxEntriesPtxBytes) + " bytes";
    return out;
  }
  Lexer lex(ptx);
  for (std::string_view t = lex.next(); !t.empty(); t = lex.next()) {
    if (t != ".entry") continue;
    if (out.entries.size() >= kMaxEntries) return fail(lex, "more than 65536 entries");
    PtxEntry entry;
    std::string_view name = lex.next();
    if (!is_ident(name) || name.size() > kMaxEntryNameBytes) {
      return fail(lex, "an .entry without a name");
    }
    entry.name = std::string(name);
    t = lex.next();
    if (t != "(") {
      // `.entry k` with no parameter list: a kernel without parameters.
      out.entries.push_back(std::move(entry));
      if (t == ".entry") return fail(lex, "an .entry inside an .entry");
      continue;
    }
    t = lex.next();
    while (t != ")") {
      if (t != ".param") return fail(lex, "a parameter of " + entry.name + " without .param");
      if (entry.params.size() >= kMaxEntryParams) return fail(lex, "too many parameters");
      PtxParam p;
      for (t = lex.next();; t = lex.next()) {
        if (t == ".align") {
          if (!number(lex.next(), 1 << 16, &p.align) || p.align == 0) {
            return fail(lex, "a bad .align in a parameter of " + entry.name);
          }
        } else if (is_qualifier(t)) {
          p.pointer = p.pointer || t == ".ptr";
        } else if (p.type.empty() && type_size(t) != 0) {
          p.type = std::string(t);
        } else {
          break;
        }
      }
      if (p.type.empty()) return fail(lex, "a parameter of " + entry.name + " without a type");
      if (!is_ident(t) || t.size() > kMaxEntryNameBytes) {
        return fail(lex, "a parameter of " + entry.name + " without a name");
      }
      p.name = std::string(t);
      size_t count = 1;
      t = lex.next();
      if (t == "[") {
        if (!number(lex.next(), kMaxEntryParamBytes, &count) || lex.next() != "]") {
          return fail(lex, "a bad array size in parameter " + p.name);
        }
        t = lex.next();
      }
      p.size = type_size(p.type) * count;
      if (p.size == 0 || p.size > kMaxEntryParamBytes) {
        return fail(lex, "parameter " + p.name + " of " + std::to_string(p.size) + " bytes");
      }
      if (p.align == 0) p.align = type_size(p.type);
      entry.params.push_back(std::move(p));
      if (t == ",") {
        t = lex.next();
      } else if (t != ")") {
        return fail(lex, "the parameters of " + entry.name + " are not closed");
      }
    }
    out.entries.push_back(std::move(entry));
  }
  return out;
}

}  // namespace kcache::compiler
