#include "compiler/nvrtc/pch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "common/environment.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/hash.h"
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
};
std::mutex made_mutex;
std::map<std::string, Made>& made() {
  static auto* m = new std::map<std::string, Made>;
  return *m;
}

std::atomic<std::time_t (*)()> pch_clock{nullptr};

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
  for (const std::string& p : out.probes) {
    bool beneath = std::any_of(dirs.begin(), dirs.end(),
                               [&](const std::string& d) { return p.compare(0, d.size(), d) == 0; });
    struct stat st;
    if (!beneath || ::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    try {
      if (std::optional<std::string> text = read_input_file(p)) look(*text);
    } catch (const Error&) {
      m->unknown = true;
    }
  }
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

}  // namespace

void set_pch_clock_for_testing(std::time_t (*clock)()) { pch_clock.store(clock); }

NvrtcOutput compile_with_pch(const Nvrtc& nvrtc, const NvrtcInput& input,
                             const std::string& pch_dir) {
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
    if (!created.empty()) {
      Made& m = made()[created];
      m.headers.clear();
      for (const NvrtcHeader& h : input.headers) m.headers[h.name] = xxh3_64(h.content);
      m.probes = out.probes;
      m.states.clear();
      for (const std::string& p : m.probes) m.states.push_back(state_of(p));
      m.started_ns = out.started_ns;
      record_frozen(input, out, &m);
    }
    if (used.empty()) return out;
    auto it = made().find(used);
    bool current = it != made().end();
    for (size_t i = 0; current && i < it->second.probes.size(); ++i) {
      current = state_of(it->second.probes[i]) == it->second.states[i];
    }
    // A PCH another source made may hold that source's __BASE_FILE__, or
    // another day's __DATE__: NVRTC does not check either.
    if (current) current = frozen_matches(it->second, input);
    if (current) {
      std::map<std::string, uint64_t> handed;
      for (const NvrtcHeader& h : input.headers) handed[h.name] = xxh3_64(h.content);
      for (const auto& [name, hash] : it->second.headers) {
        auto h = handed.find(name);
        if (h == handed.end() || h->second != hash) current = false;
      }
    }
    if (!current) {
      // Made elsewhere, or a header it stands for changed since: NVRTC
      // would not notice. Drop it and compile again, making a new one.
      ::unlink(used.c_str());
      if (it != made().end()) made().erase(it);
      continue;
    }
    std::set<std::string> have(out.probes.begin(), out.probes.end());
    for (const std::string& p : it->second.probes) {
      if (have.insert(p).second) out.probes.push_back(p);
    }
    out.started_ns = std::min(out.started_ns, it->second.started_ns);
    return out;
  }
  return nvrtc.compile(input);
}

}  // namespace kcache::compiler
