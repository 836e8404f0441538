#include "compiler/program.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string_view>
#include <utility>

#include "common/error.h"

namespace kcache::compiler {
namespace {

// What stands for the program's name in the log of an entry shared by
// every name (a text NVRTC does not write; a log holding it is not shared).
constexpr std::string_view kNamePlaceholder = "<kcache: the program's name>";

// Names through which a compile may reach its own source's name without it
// showing in the answer: where the program's own text (its source, the
// options it expands in it, its name expressions) or a header it hands (for
// __BASE_FILE__, which names the main source anywhere) has one of them, the
// name is always keyed.
constexpr std::string_view kFileNameMacros[] = {"__FILE__", "__BASE_FILE__", "__builtin_FILE",
                                                "__FILE_NAME__"};

bool mentions_file_name_macro(std::string_view text, bool base_only = false) {
  for (std::string_view m : kFileNameMacros) {
    if (base_only && m != "__BASE_FILE__") continue;
    if (text.find(m) != std::string_view::npos) return true;
  }
  return false;
}

bool may_share_across_names(const CompileOptions& o) {
  // The file name stays keyed (NVRTC writes it into the names of internal
  // symbols): only a name with a folder has other names to share with.
  size_t slash = o.source_name.rfind('/');
  if (slash == std::string::npos || slash + 1 == o.source_name.size()) return false;
  // A source that holds its own name (CuPy's jitify path puts it on the first
  // line) is another text under every name: nothing to share, and the
  // second compile would only double the cost.
  if (o.source_text && o.source_text->find(o.source_name) != std::string::npos) return false;
  if (mentions_file_name_macro(o.source_text.value_or(""))) return false;
  for (const std::vector<std::string>* texts :
       {&o.defines, &o.macros, &o.nvrtc_options, &o.name_expressions}) {
    for (const std::string& t : *texts) {
      if (mentions_file_name_macro(t)) return false;
    }
  }
  for (const cache::Header& h : o.memory_headers) {
    if (mentions_file_name_macro(h.content, /*base_only=*/true)) return false;
  }
  return true;
}

bool digits_then(std::string_view text, size_t at, std::string_view then) {
  size_t end = at;
  while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
  return end > at && text.substr(end, then.size()) == then;
}

// Whether `at`, where `name` occurs in `log`, is one of NVRTC's diagnostic
// mentions of the source: "NAME(12): ..." at a line's start, "... in the
// compilation of "NAME"." and "... at line 12 of NAME" at a line's end.
bool diagnostic_mention(std::string_view log, size_t at, std::string_view name) {
  size_t after = at + name.size();
  auto line_ends_at = [&](size_t i) { return i == log.size() || log[i] == '\n'; };
  if ((at == 0 || log[at - 1] == '\n') && after < log.size() && log[after] == '(' &&
      digits_then(log, after + 1, "): ")) {
    return true;
  }
  constexpr std::string_view kCompilation = "in the compilation of \"";
  if (at >= kCompilation.size() && log.substr(at - kCompilation.size(), kCompilation.size()) ==
                                       kCompilation &&
      log.substr(after, 2) == "\"." && line_ends_at(after + 2)) {
    return true;
  }
  if (line_ends_at(after)) {
    size_t of = log.rfind(" at line ", at);
    if (of != std::string_view::npos && digits_then(log, of + 9, " of ") &&
        log.find(" of ", of + 9) + 4 == at) {
      return true;
    }
  }
  return false;
}

}  // namespace

// The log with every mention of `name` (each in a diagnostic place) as the
// placeholder, or nothing if one is not.
std::optional<std::string> log_without_name(const std::string& log, const std::string& name) {
  if (name.empty() || log.find(kNamePlaceholder) != std::string::npos) return std::nullopt;
  std::string out;
  size_t from = 0;
  for (size_t at = log.find(name); at != std::string::npos; at = log.find(name, at + name.size())) {
    if (!diagnostic_mention(log, at, name)) return std::nullopt;
    out.append(log, from, at - from);
    out += kNamePlaceholder;
    from = at + name.size();
  }
  out.append(log, from, std::string::npos);
  return out;
}

std::string other_program_name(const std::string& name) {
  // The same file name in another folder, of another length and other
  // characters; absolute where the name is (NVRTC and the seal treat those
  // apart).
  size_t slash = name.rfind('/');
  std::string file = slash == std::string::npos ? name : name.substr(slash + 1);
  std::string folder = "kcache-name-check-";
  while (folder.size() + file.size() + 2 < name.size() + 7) folder += 'q';
  // Deep (NVRTC reads the disk, issue 27): a name a header climbs to with
  // `..` from here stays beneath this folder, which exists nowhere, so it
  // differs from what the same climb reaches from the program's folder, and
  // the compiles' paths tell the two apart (Compiler::check_name).
  for (int i = 0; i < kNameCheckDepth; ++i) folder += "/d";
  return (name.empty() || name.front() != '/' ? "" : "/") + folder + "/" + file;
}

std::string shared_program_name(const std::string& name) {
  size_t slash = name.rfind('/');
  return std::string(name.front() == '/' ? "<any folder>/" : "<any relative folder>/") +
         (slash == std::string::npos ? name : name.substr(slash + 1));
}

bool same_answer_for_any_name(const cache::ProgramRecord& answer, const std::string& name,
                              const cache::ProgramRecord& other, const std::string& other_name) {
  if (answer.compile_result != other.compile_result || !(answer.outputs == other.outputs)) {
    return false;
  }
  for (const cache::ProgramRecord::Output& o : answer.outputs) {
    if (o.bytes.find(name) != std::string::npos) return false;
  }
  std::optional<std::string> a = log_without_name(answer.log, name);
  std::optional<std::string> b = log_without_name(other.log, other_name);
  return a && b && *a == *b;
}

std::optional<std::string> shared_record(const std::string& payload, const std::string& name) {
  cache::ProgramRecord record = cache::ProgramRecord::decode(payload);
  for (const cache::ProgramRecord::Output& o : record.outputs) {
    if (o.bytes.find(name) != std::string::npos) return std::nullopt;
  }
  std::optional<std::string> log = log_without_name(record.log, name);
  if (!log) return std::nullopt;
  record.log = std::move(*log);
  return record.encode();
}

void restore_name(cache::ProgramRecord& record, const std::string& name) {
  std::string log;
  size_t from = 0;
  for (size_t at = record.log.find(kNamePlaceholder); at != std::string::npos;
       at = record.log.find(kNamePlaceholder, at + kNamePlaceholder.size())) {
    log.append(record.log, from, at - from);
    log += name;
    from = at + kNamePlaceholder.size();
  }
  log.append(record.log, from, std::string::npos);
  record.log = std::move(log);
}

ProgramOptions program_options(const ProgramSource& program,
                               const std::vector<std::string>& nvrtc_options) {
  ProgramOptions out;
  MappedProgramOptions mapped = map_program_options(nvrtc_options);
  out.unsupported = std::move(mapped.unsupported);
  CompileOptions& o = out.options;
  o.program = true;
  o.lean = false;  // a program may look up any variable by its own names
  o.source_text = program.source;
  o.source_name = program.name.empty() ? kDefaultProgramName : program.name;
  // NVRTC searches a quoted include next to the program's name, relative to
  // the working directory: so does kcache (the text is not read from there).
  o.source_path = o.source_name;
  o.memory_headers = program.headers;
  o.name_expressions = program.name_expressions;
  o.archs = std::move(mapped.archs);
  o.ptx_arch = std::move(mapped.ptx_arch);
  o.include_dirs = std::move(mapped.include_dirs);
  o.macros = std::move(mapped.macros);
  o.std = std::move(mapped.std);
  o.nvrtc_options = std::move(mapped.nvrtc_options);
  return out;
}

ProgramResult compile_program(Compiler& compiler, const CompileOptions& options) {
  CompileOptions shared = options;
  const std::string name = options.logical_name();
  if (may_share_across_names(options)) {
    shared.name_free = [name](const std::string& payload) { return shared_record(payload, name); };
    shared.name_check = other_program_name(name);
    shared.shared_name = shared_program_name(name);
    shared.name_check_same = [name, other = shared.name_check](const cache::ProgramRecord& a,
                                                               const cache::ProgramRecord& b) {
      return same_answer_for_any_name(a, name, b, other);
    };
  }
  CompileResult compiled = compiler.compile(shared);
  const TargetResult& target = compiled.targets.at(0);
  ProgramResult out;
  out.record = cache::ProgramRecord::decode(target.entry->payload(),
                                            "program record of " + target.key.hex());
  if (target.hit && target.any_name) restore_name(out.record, name);
  out.lowered_names = target.entry->lowered_names();
  out.hit = target.hit;
  out.any_name = target.any_name;
  out.name_dependent = target.name_dependent;
  out.key = target.key;
  out.not_stored = target.not_stored;
  out.miss_reason = target.miss_reason;
  out.compile_ms = target.compile_ms;
  if (!out.hit && !out.not_stored.empty() && out.record.compile_result != cache::kNvrtcSuccess) {
    throw Error(ErrorKind::compile_failed, "a failed compile that was not stored (" +
                                               out.not_stored + "): the real NVRTC answers it");
  }
  return out;
}

}  // namespace kcache::compiler
