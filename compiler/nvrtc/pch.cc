#include "compiler/nvrtc/pch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "common/environment.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/hash.h"
#include "common/stamp_trust.h"
#include "compiler/time_macros.h"

namespace kcache::compiler {
namespace {

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool is_pch_message(std::string_view line, const std::string& pch_dir) {
  // "kernel.cu": using precompiled header file "/scratch/pch/kernel_0.pch"
  for (std::string_view verb :
       {"\": using precompiled header file \"", "\": creating precompiled header file \""}) {
    size_t at = line.find(verb);
    if (!line.empty() && line.front() == '"' && at != std::string_view::npos &&
        line.substr(at + verb.size()).compare(0, pch_dir.size(), pch_dir) == 0) {
      return true;
    }
  }
  // NVRTC's PCH diagnostics, e.g. "Warning #629-D: the command line options do
  // not match those used when precompiled header file "..." was created".
  if ((contains(line, "warning #") || contains(line, "Warning #")) &&
      contains(line, "precompiled header")) {
    return true;
  }
  // " warning: PCH heap reset failed, ..." and "warning: PCH Heap initialization ..."
  size_t start = line.find_first_not_of(' ');
  if (start != std::string_view::npos) {
    std::string_view rest = line.substr(start);
    if (rest.compare(0, 18, "warning: PCH heap ") == 0 ||
        rest.compare(0, 18, "warning: PCH Heap ") == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string strip_pch_messages(std::string_view log, const std::string& pch_dir) {
  constexpr std::string_view kRemark = "Remark: The warnings can be suppressed with";
  std::string out;
  bool after_dropped = false;  // the last line that was not empty was dropped
  while (!log.empty()) {
    size_t end = log.find('\n');
    std::string_view line = log.substr(0, end == std::string_view::npos ? log.size() : end + 1);
    log.remove_prefix(line.size());
    std::string_view text = line;
    if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
    // NVRTC follows a diagnostic with an empty line, and the first warning
    // with a remark on suppressing warnings: they go with it.
    bool drop = is_pch_message(text, pch_dir) ||
                (after_dropped && (text.empty() || text.compare(0, kRemark.size(), kRemark) == 0));
    if (!text.empty()) after_dropped = drop;
    if (!drop) out.append(line);
  }
  return out;
}

namespace {

// What a path was when a PCH was made from a compile that named it.
struct PathState {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const PathState& o) const {
    return exists == o.exists && dev == o.dev && ino == o.ino && size == o.size &&
           mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns;
  }
};

PathState state_of(const std::string& path) {
  PathState s;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return s;
  s.exists = true;
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  s.size = st.st_size;
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  s.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return s;
}

// A PCH stands for the headers of the compile that made it: NVRTC that uses
// one opens none of them again, so a compile's probes alone would miss what
// the PCH brought. Per process (a PCH is only valid in the NVRTC instance that
// made it): each PCH file's maker's probes, start time and the state of each
// probed path then.
struct Made {
  // The headers it was handed in memory: NVRTC checks a PCH's source prefix
  // and options, not the contents of in-memory headers of the same name.
  std::map<std::string, uint64_t> headers;
  // What the prefix may have frozen from its maker (issue 27): NVRTC expands
  // __BASE_FILE__ (the maker's source name) and __DATE__ / __TIME__ once,
  // when it makes the PCH, and reuses the PCH for any source with the same
  // prefix and options. So where the maker's inputs (its source, handed
  // headers, options and the toolkit headers it read) name one of them, the
  // PCH serves only the same source name on the same date, and never where
  // they use __TIME__. `unknown`: an input could not be read to tell.
  std::string source_name;
  std::string date;  // __DATE__'s value when it was made
  bool uses_base_file = false, uses_date = false, uses_time = false, unknown = false;
  std::vector<std::string> probes;
  std::vector<PathState> states;
  int64_t started_ns = 0;
  // Served (NvrtcInput::serve_disk): every file the maker was served but
  // its own source, with the names it used, and where it looked from (a
  // quoted include is searched from the source's folder first, a relative
  // name from the working folder: a PCH serves only compiles with both).
  std::vector<ServedFile> served;
  std::vector<std::string> relative_names, absolute_names;
  std::vector<std::string> hidden;  // answered "no such file" (NvrtcOutput::hidden)
  // Where the maker's environment put the driver's JIT cache (what the seal
  // hid from it): a compile in another environment may not use its PCH.
  std::vector<std::string> driver_cache;
  std::string working_dir, source_dir;
  // And the working folder's spelling (NvrtcInput::pwd), which NVRTC writes
  // into the line tables of the headers the PCH holds.
  std::string pwd;
  // Served: the maker's leading directives, which a user must share.
  std::string prefix;
};
std::mutex made_mutex;
std::map<std::string, Made>& made() {
  static auto* m = new std::map<std::string, Made>;
  return *m;
}

std::atomic<std::time_t (*)()> pch_clock{nullptr};
std::atomic<int> pch_uses{0};

std::time_t now() {
  std::time_t (*clock)() = pch_clock.load();
  return clock ? clock() : std::time(nullptr);
}

// __BASE_FILE__ anywhere in `text` (a name in a comment counts too: a PCH
// not shared, never a stale one).
bool uses_base_file(std::string_view text) {
  return text.find("__BASE_FILE__") != std::string_view::npos;
}

// Records in `m` what the inputs of a compile that made a PCH use.
void record_frozen(const NvrtcInput& input, const NvrtcOutput& out, Made* m) {
  m->source_name = input.source_name;
  m->date = date_macro_value(now());
  m->uses_base_file = m->uses_date = m->uses_time = m->unknown = false;
  auto look = [m](std::string_view text) {
    m->uses_base_file = m->uses_base_file || uses_base_file(text);
    m->uses_date = m->uses_date || uses_date_macro(text);
    m->uses_time = m->uses_time || uses_time_macros(text);
  };
  look(input.source);
  for (const NvrtcHeader& h : input.headers) look(h.content);
  for (const std::string& o : input.options) look(o);
  // The headers NVRTC read itself: those beneath its -I folders (the
  // toolkit's; user headers are handed). Read once per PCH made.
  std::vector<std::string> dirs;
  for (const std::string& o : input.options) {
    if (o.size() > 2 && o.compare(0, 2, "-I") == 0) dirs.push_back(o.substr(2) + "/");
  }
  auto look_at = [&](const std::string& p) {
    try {
      if (std::optional<std::string> text = read_input_file(p)) look(*text);
    } catch (const Error&) {
      m->unknown = true;
    }
  };
  for (const std::string& p : out.probes) {
    bool beneath = std::any_of(dirs.begin(), dirs.end(),
                               [&](const std::string& d) { return p.compare(0, d.size(), d) == 0; });
    struct stat st;
    if (!beneath || ::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    look_at(p);
  }
  // Served, every file it read was served (none is among the probes): the
  // user's headers as well as the toolkit's. One changed since reads other
  // bytes here, but then the PCH is dropped before use (drop_stale_pchs).
  for (const ServedFile& f : out.served) look_at(f.path);
}

// Whether a PCH made as `m` may serve `input`: what it froze matches.
bool frozen_matches(const Made& m, const NvrtcInput& input) {
  if (m.unknown || m.uses_time) return false;
  if (m.uses_base_file && m.source_name != input.source_name) return false;
  if (m.uses_date && m.date != date_macro_value(now())) return false;
  return true;
}

// The PCH file a log line names after `verb`, or "".
std::string pch_named(std::string_view log, std::string_view verb) {
  size_t at = log.find(verb);
  if (at == std::string_view::npos) return "";
  size_t start = at + verb.size();
  size_t end = log.find('"', start);
  return end == std::string_view::npos ? "" : std::string(log.substr(start, end - start));
}

// The absolute, lexically normal name of `name` taken from `working_dir`
// (empty: this process's working folder).
std::string absolute_from(const std::string& working_dir, const std::string& name) {
  namespace fs = std::filesystem;
  fs::path p(name);
  if (p.is_relative()) p = (working_dir.empty() ? fs::current_path() : fs::path(working_dir)) / p;
  return p.lexically_normal().string();
}

// The folder part of a source name as NVRTC is given it (the text before its
// last '/'): NVRTC names a quoted include by that text (`./h.h`,
// `link/../h.h`) and resolves `..` on disk, so two spellings of one lexical
// folder are neither one set of names (__FILE__, line tables) nor one search.
std::string folder_as_written(const std::string& source_name) {
  size_t slash = source_name.rfind('/');
  return slash == std::string::npos ? std::string() : source_name.substr(0, slash);
}

// Whether `line` ends inside a block comment, given whether it began in one.
bool ends_in_comment(std::string_view line, bool in_comment) {
  for (size_t i = 0; i + 1 < line.size(); ++i) {
    if (!in_comment && line[i] == '/' && line[i + 1] == '/') return false;
    std::string_view pair = line.substr(i, 2);
    if (pair == (in_comment ? "*/" : "/*")) {
      in_comment = !in_comment;
      ++i;
    }
  }
  return in_comment;
}

// The length of `text`'s leading run of preprocessing directives, blank
// lines and comments: where NVRTC's PCH may stop at the latest (the first
// other token). A line continued with a backslash belongs to its directive.
size_t leading_directives(std::string_view text) {
  size_t at = 0;
  bool in_comment = false, continued = false;
  while (at < text.size()) {
    size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    size_t start = line.find_first_not_of(" \t\r\f\v");
    std::string_view rest = start == std::string_view::npos ? "" : line.substr(start);
    bool part = in_comment || continued || rest.empty() || rest.front() == '#' ||
                rest.compare(0, 2, "//") == 0 || rest.compare(0, 2, "/*") == 0;
    if (!part) return at;
    in_comment = ends_in_comment(line, in_comment);
    continued = !line.empty() && line.back() == '\\';
    at = end + (end < text.size() ? 1 : 0);
  }
  return at;
}

// Whether `text` may read a file: names an include or an embed (textually,
// so a comment counts too: a PCH not shared, never a wrong key).
bool may_read_files(std::string_view text) {
  return text.find("include") != std::string_view::npos ||
         text.find("embed") != std::string_view::npos;
}

// Whether `f` still holds the bytes it was served with: its stat where that
// stat stood for its bytes when the maker read them (common/stamp_trust.h),
// else its bytes hashed again.
bool served_file_holds(const ServedFile& f, int64_t read_ns) {
  struct stat st;
  if (::stat(f.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  FileStamp now = FileStamp::of(st);
  FileStamp then{f.dev, f.ino, f.size, f.mtime_ns, f.ctime_ns};
  if (now == then && stamp_stands_for_bytes(then, f.path, read_ns)) return true;
  try {
    std::optional<std::string> bytes = read_input_file(f.path);
    return bytes && xxh3_128(*bytes) == f.content;
  } catch (const Error&) {
    return false;
  }
}

// Whether every path the maker of `m` named is as it was, and every file it
// was served still has the same bytes.
bool files_hold(const Made& m) {
  for (size_t i = 0; i < m.probes.size(); ++i) {
    // A name the seal hid is "no such file" to every user of the PCH
    // (serves: the same driver's cache), whatever the driver wrote there.
    if (std::find(m.hidden.begin(), m.hidden.end(), m.probes[i]) != m.hidden.end()) continue;
    if (!(state_of(m.probes[i]) == m.states[i])) return false;
  }
  return std::all_of(m.served.begin(), m.served.end(),
                     [&](const ServedFile& f) { return served_file_holds(f, m.started_ns); });
}

// NVRTC loads a PCH without opening the headers it froze: one whose files
// changed since it was made would give the old headers. Those are deleted
// before NVRTC looks, so it makes them again. Called with made_mutex held.
void drop_stale_pchs() {
  for (auto it = made().begin(); it != made().end();) {
    if (files_hold(it->second)) {
      ++it;
    } else {
      ::unlink(it->first.c_str());
      it = made().erase(it);
    }
  }
}

// Remembers what the compile of `input` (its output `out`) that created the
// PCH `created` read. False where what it read is not known (a file that
// changed while it was served): such a PCH must not be used.
bool remember_maker(const std::string& created, const NvrtcInput& input, const NvrtcOutput& out) {
  Made& m = made()[created];
  m = Made{};
  for (const NvrtcHeader& h : input.headers) m.headers[h.name] = xxh3_64(h.content);
  m.started_ns = out.started_ns;
  record_frozen(input, out, &m);
  // Served, the maker's own source is no header of the PCH's: a user that
  // named it would key another source's file.
  std::string source =
      input.serve_disk ? absolute_from(input.working_dir, input.source_name) : std::string();
  for (const std::string& p : out.probes) {
    if (p == source) continue;
    m.probes.push_back(p);
    m.states.push_back(state_of(p));
  }
  if (!input.serve_disk) return true;
  // Every file the maker read must be one a plain compile of a user with the
  // same leading directives reads too (a Bazel action declares only its own
  // headers): so its source past them names no include.
  size_t run = leading_directives(input.source);
  if (may_read_files(std::string_view(input.source).substr(run))) return false;
  m.prefix = input.source.substr(0, run);
  m.working_dir = absolute_from("", input.working_dir);
  m.source_dir = folder_as_written(input.source_name);
  m.pwd = input.pwd;
  std::set<std::string> kept(m.probes.begin(), m.probes.end());
  for (const ServedFile& f : out.served) {
    if (f.ctime_ns == UINT64_MAX) return false;
    if (f.path == source) continue;
    m.served.push_back(f);
    kept.insert(f.path);
  }
  // The names of its probes and of the files kept: a lookup checks them.
  for (const std::string& n : out.relative_names) {
    if (kept.count(n)) m.relative_names.push_back(n);
  }
  for (const std::string& n : out.absolute_names) {
    if (kept.count(n)) m.absolute_names.push_back(n);
  }
  m.hidden = out.hidden;
  m.driver_cache = driver_cache_folders();
  return true;
}

// Whether the PCH made as `m` may serve `input` (its files already checked
// by drop_stale_pchs): what it froze matches, and it was handed the same
// in-memory headers and, served, looked from the same folders.
bool serves(const Made& m, const NvrtcInput& input) {
  // A PCH another source made may hold that source's __BASE_FILE__, or
  // another day's __DATE__: NVRTC does not check either.
  if (!frozen_matches(m, input)) return false;
  std::map<std::string, uint64_t> handed;
  for (const NvrtcHeader& h : input.headers) handed[h.name] = xxh3_64(h.content);
  for (const auto& [name, hash] : m.headers) {
    auto h = handed.find(name);
    if (h == handed.end() || h->second != hash) return false;
  }
  if (!input.serve_disk) return m.working_dir.empty();
  return m.driver_cache == driver_cache_folders() &&
         m.prefix == input.source.substr(0, leading_directives(input.source)) &&
         m.working_dir == absolute_from("", input.working_dir) &&
         m.source_dir == folder_as_written(input.source_name) && m.pwd == input.pwd;
}

void add_missing(const std::vector<std::string>& from, std::vector<std::string>* to) {
  std::set<std::string> have(to->begin(), to->end());
  for (const std::string& n : from) {
    if (have.insert(n).second) to->push_back(n);
  }
}

// Adds to `out` (a compile that used the PCH made as `m`) what the maker
// read, as if NVRTC had read it itself: the PCH holds those headers. False
// where `out` was served a file the maker was served with other bytes (one
// changed while NVRTC ran: which bytes the output holds is not known).
bool add_makers_reads(const Made& m, NvrtcOutput* out) {
  std::map<std::string, Hash128> served;
  for (const ServedFile& f : out->served) served.emplace(f.path, f.content);
  for (const ServedFile& f : m.served) {
    auto it = served.find(f.path);
    if (it != served.end() && it->second != f.content) return false;
    if (it == served.end()) out->served.push_back(f);
  }
  // A name the maker was served is not a probe of this compile's: served
  // paths are not repeated in `probes`.
  std::vector<std::string> probes;
  for (const std::string& p : m.probes) {
    if (!served.count(p)) probes.push_back(p);
  }
  add_missing(probes, &out->probes);
  add_missing(m.relative_names, &out->relative_names);
  add_missing(m.absolute_names, &out->absolute_names);
  add_missing(m.hidden, &out->hidden);
  out->started_ns = std::min(out->started_ns, m.started_ns);
  return true;
}

}  // namespace

std::string_view pch_prefix(std::string_view source) {
  return source.substr(0, leading_directives(source));
}

void set_pch_clock_for_testing(std::time_t (*clock)()) { pch_clock.store(clock); }

int pch_uses_for_testing() { return pch_uses.load(); }

NvrtcOutput compile_with_pch(const Nvrtc& nvrtc, const NvrtcInput& input,
                             const std::string& pch_dir) {
  // A program's answers are NVRTC's own, its log included.
  if (input.program) return nvrtc.compile(input);
  NvrtcInput with_pch = input;
  with_pch.options.push_back("-pch");
  with_pch.options.push_back("-pch-dir=" + pch_dir);
  with_pch.writable_dirs.push_back(pch_dir);
  // NVRTC writes its PCH work files to $TMPDIR: the seal lets it only where
  // the PCH folder is (the processes that use PCH point TMPDIR there).
  const char* tmp = env::read(env::Var::tmpdir);
  std::string tmp_dir = tmp ? tmp : "";
  bool tmp_ok = tmp_dir == pch_dir || tmp_dir.rfind(pch_dir + "/", 0) == 0;
  for (int attempt = 0; tmp_ok && attempt < 2; ++attempt) {
    {
      std::lock_guard<std::mutex> lock(made_mutex);
      drop_stale_pchs();
    }
    NvrtcOutput out;
    try {
      out = nvrtc.compile(with_pch);
    } catch (const Error&) {
      break;  // a PCH problem or a wrong source: the plain compile tells which
    }
    std::string created = pch_named(out.log, "\": creating precompiled header file \"");
    std::string used = pch_named(out.log, "\": using precompiled header file \"");
    out.log = strip_pch_messages(out.log, pch_dir);
    std::lock_guard<std::mutex> lock(made_mutex);
    if (!created.empty() && !remember_maker(created, input, out)) {
      ::unlink(created.c_str());
      made().erase(created);
    }
    if (used.empty()) return out;
    auto it = made().find(used);
    if (it != made().end() && serves(it->second, input) && add_makers_reads(it->second, &out)) {
      pch_uses.fetch_add(1);
      return out;
    }
    // Made elsewhere, by a maker whose frozen inputs differ, or read while
    // a file changed: NVRTC would not notice. Drop it and compile again,
    // making a new one.
    ::unlink(used.c_str());
    if (it != made().end()) made().erase(it);
  }
  return nvrtc.compile(input);
}

}  // namespace kcache::compiler
