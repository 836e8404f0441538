// `kcache run -- CMD [ARGS...]`: runs CMD with kcache's drop-in libnvrtc
// (nvrtc_shim/) first on LD_LIBRARY_PATH and in LD_PRELOAD, so the NVRTC
// compiles CMD makes go through the cache: through a linked libnvrtc, one it
// opens by soname, or one it takes because it is already loaded (CuPy 14
// looks for a loaded libnvrtc before opening its pip wheel's by path,
// measured on the GPU machine: docs/NVRTC_SHIM.md). A program linked to
// another NVRTC major binds none of the shim's symbols (their version node is
// libnvrtc.so.13). The store and remote are configured as for every kcache
// command, by the environment (KCACHE_DIR, KCACHE_REMOTE, ...), which CMD
// inherits.
//
// When CMD exits, one stderr line says what its compiles did (hits, misses,
// not cached and why, time saved), read from the drop-in's per-compile lines
// ($KCACHE_SHIM_STATS: the user's file if set, else a private temporary one).
// So kcache waits for CMD rather than exec'ing it: signals sent to kcache are
// passed on, and CMD's exit status is kcache's (death by a signal: the same
// signal, else 128 + N). KCACHE_QUIET=1 or -q: no line, and CMD replaces
// kcache; -v: one line per compile before the summary (docs/WHY.md).
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "common/environment.h"
#include "common/error.h"
#include "common/file_system.h"
#include "common/paths.h"

namespace kcache::cli {
namespace {

constexpr const char kShimName[] = "libnvrtc.so.13";

// The folder holding the shim: $KCACHE_NVRTC_SHIM_DIR, else next to this
// binary (an install), else bazel-bin's nvrtc_shim/ beside cli/.
std::string shim_dir() {
  std::vector<std::string> looked;
  auto has_shim = [&](const std::string& dir) {
    looked.push_back(dir);
    return ::access((dir + "/" + kShimName).c_str(), R_OK) == 0;
  };
  if (const char* dir = env::value(env::Var::kcache_nvrtc_shim_dir)) {
    if (has_shim(dir)) return dir;
    throw NotFound(std::string("$KCACHE_NVRTC_SHIM_DIR is ") + dir + ", which holds no " +
                   kShimName + ": point it at the folder of kcache's drop-in libnvrtc");
  }
  char exe[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    std::string here = parent_folder(exe);
    for (const std::string& dir : {here, here + "/../nvrtc_shim", here + "/../lib/kcache"}) {
      char real[PATH_MAX];
      if (has_shim(dir)) return ::realpath(dir.c_str(), real) ? std::string(real) : dir;
    }
  }
  std::string list;
  for (const std::string& d : looked) list += (list.empty() ? "" : ", ") + d;
  throw NotFound(std::string("kcache's drop-in ") + kShimName + " was not found (looked in " +
                 list + "): build it with `bazel build //nvrtc_shim:" + kShimName +
                 "`, install it next to kcache, or set KCACHE_NVRTC_SHIM_DIR");
}

// The drop-in's lines (nvrtc_shim/shim.cc, record_stat: fields separated by
// " | ", each labelled by its first words), summed up.
struct RunStats {
  int hits = 0, misses = 0, not_cached = 0;
  double saved_ms = 0;     // what NVRTC took to make the hits' entries, summed
  double hit_call_ms = 0;  // what the hits' calls took here, summed
  double miss_ms = 0;      // what NVRTC took for the misses, summed
  std::map<std::string, int> miss_why;  // a miss's reason -> compiles
  std::map<std::string, int> why;       // not cached: reason -> compiles
  // Every cached compile call, [start, end) in CLOCK_MONOTONIC ms: whether
  // any two overlapped decides whether wall time saved is known.
  std::vector<std::pair<double, double>> calls;
  std::vector<std::string> lines;  // -v: one readable line per compile
};

// A short reason: its first clause, at most 80 characters.
std::string short_reason(std::string why) {
  if (why.empty()) return "the call was not one kcache caches";
  size_t cut = why.find_first_of(":;(");
  if (cut != std::string::npos && cut > 0) why.resize(cut);
  while (!why.empty() && why.back() == ' ') why.pop_back();
  if (why.size() > 80) why = why.substr(0, 77) + "...";
  return why;
}

std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> fields;
  const std::string sep = " | ";
  for (size_t at = 0;;) {
    size_t end = line.find(sep, at);
    fields.push_back(line.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) return fields;
    at = end + sep.size();
  }
}

// The number after `label` in the field that starts with it, if any.
std::optional<double> labelled(const std::vector<std::string>& fields, const std::string& label) {
  for (const std::string& f : fields) {
    if (f.compare(0, label.size(), label) == 0) {
      return std::strtod(f.c_str() + label.size(), nullptr);
    }
  }
  return std::nullopt;
}
std::string labelled_text(const std::vector<std::string>& fields, const std::string& label) {
  for (const std::string& f : fields) {
    if (f.compare(0, label.size(), label) == 0) return f.substr(label.size());
  }
  return "";
}

void add_stat_line(RunStats& s, const std::string& line) {
  std::vector<std::string> f = split_fields(line);
  if (f.size() < 2) return;
  const std::string& kind = f[0];
  const std::string& name = f[1];
  if (kind == "real") {
    const std::string why = labelled_text(f, "not cached: ");
    ++s.not_cached;
    ++s.why[short_reason(why)];
    s.lines.push_back("not cached " + name + (why.empty() ? "" : " (" + why + ")"));
    return;
  }
  if (kind != "hit" && kind != "miss") return;
  const double took = labelled(f, "took ").value_or(0);
  if (std::optional<double> started = labelled(f, "started at ")) {
    s.calls.emplace_back(*started * 1000, *started * 1000 + took);
  }
  if (kind == "hit") {
    const double saved = labelled(f, "saved ").value_or(0);
    ++s.hits;
    s.saved_ms += saved;
    s.hit_call_ms += took;
    char buf[96];
    std::snprintf(buf, sizeof buf, " (took %.1f ms, saved %.0f ms of NVRTC)", took, saved);
    s.lines.push_back("hit " + name + buf);
    return;
  }
  const double nvrtc = labelled(f, "NVRTC took ").value_or(0);
  const std::string reason = f.size() > 2 ? f[2] : "";
  const std::string not_stored = labelled_text(f, "not stored: ");
  s.miss_ms += nvrtc;
  char buf[64];
  std::snprintf(buf, sizeof buf, ", NVRTC took %.0f ms", nvrtc);
  s.lines.push_back("miss " + name + " (" + reason + ")" + buf +
                    (not_stored.empty() ? "" : ", not stored: " + not_stored));
  if (not_stored.empty()) {
    ++s.misses;
    ++s.miss_why[reason];
    return;
  }
  ++s.not_cached;
  ++s.why[short_reason(not_stored)];
}

std::string run_seconds(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms < 10000 ? "%.2f s" : "%.0f s", ms / 1000);
  return buf;
}

// Whether two compile calls ran at once (threads or processes of the program).
bool calls_overlapped(std::vector<std::pair<double, double>> calls) {
  std::sort(calls.begin(), calls.end());
  for (size_t i = 1; i < calls.size(); ++i) {
    if (calls[i].first < calls[i - 1].second) return true;
  }
  return false;
}

// "(inc/v.h changed)", "(inc/v.h changed: 2; not in store: 1)".
std::string reasons(const std::map<std::string, int>& why, bool counts) {
  std::string out;
  for (const auto& [reason, count] : why) {
    out += (out.empty() ? "" : "; ") + reason + (counts ? ": " + std::to_string(count) : "");
  }
  return " (" + out + ")";
}

// "kcache run: 7 NVRTC compiles: 5 hits, 1 miss (inc/v.h changed), 1 not
// cached (-dlto: 1); wall time saved 1.18 s (the hits' NVRTC compiles took
// 1.20 s when stored, their lookups 0.02 s), the misses' NVRTC took 0.30 s".
// Wall time saved is known where no two compile calls overlapped; where they
// ran in parallel, NVRTC's time is given as the sum it is.
std::string summary_line(const RunStats& s) {
  const int total = s.hits + s.misses + s.not_cached;
  if (total == 0) {
    return "kcache run: no NVRTC compile went through kcache (the program compiled nothing, or "
           "loaded an NVRTC other than libnvrtc.so.13)";
  }
  auto n = [](int count, const char* one, const char* many) {
    return std::to_string(count) + " " + (count == 1 ? one : many);
  };
  std::string line = "kcache run: " + n(total, "NVRTC compile", "NVRTC compiles") + ": " +
                     n(s.hits, "hit", "hits") + ", " + n(s.misses, "miss", "misses");
  if (!s.miss_why.empty()) line += reasons(s.miss_why, s.miss_why.size() > 1);
  line += ", " + std::to_string(s.not_cached) + " not cached";
  if (!s.why.empty()) line += reasons(s.why, true);
  const bool parallel = calls_overlapped(s.calls);
  if (s.hits && !parallel) {
    line += "; wall time saved " + run_seconds(std::max(0.0, s.saved_ms - s.hit_call_ms)) +
            " (the hits' NVRTC compiles took " + run_seconds(s.saved_ms) +
            " when stored, their lookups " + run_seconds(s.hit_call_ms) + ")";
  } else if (s.hits) {
    line += "; NVRTC time saved " + run_seconds(s.saved_ms) +
            ", summed over compiles that ran in parallel (the wall time saved is less)";
  }
  if (s.misses + s.not_cached > 0 && s.miss_ms > 0) {
    line += std::string(s.hits ? ", " : "; ") + "the misses' NVRTC took " + run_seconds(s.miss_ms) +
            (parallel ? " summed" : "");
  }
  return line;
}

bool run_quiet() {
  return env::enabled(env::Var::kcache_quiet);
}

// -v: one line per compile before the summary; -q: none, as KCACHE_QUIET=1.
enum class Verbosity { quiet, normal, verbose };

pid_t g_child = 0;

// Signals a process sends to kcache (kill, a supervisor) go on to the
// program. Those the kernel sends (a terminal's ^C, ^\, hangup, resize) reach
// the whole foreground process group, the program too: not sent twice.
void forward_signal(int sig, siginfo_t* info, void*) {
  const bool from_a_process = !info || info->si_code <= 0;  // SI_USER, SI_QUEUE, SI_TKILL
  if (g_child > 0 && from_a_process) ::kill(g_child, sig);
}

int wait_for(pid_t child) {
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return 1;
  }
  return status;
}

// kcache ends as the program did: its exit code, or death by its signal.
int end_as(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (!WIFSIGNALED(status)) return 1;
  const int sig = WTERMSIG(status);
  std::fflush(nullptr);
  struct rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);  // the program dumped its own core, if any
  ::signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(sig);
  return 128 + sig;  // a signal whose default is not to end the process
}

int run_command(const std::vector<std::string>& command, Verbosity verbosity) {
  if (command.empty()) {
    throw InvalidArgument("no command: kcache run -- CMD [ARGS...]");
  }
  // The drop-in in the program is quiet too.
  if (verbosity == Verbosity::quiet) ::setenv("KCACHE_QUIET", "1", 1);
  std::string path = shim_dir();
  const char* old = env::read(env::Var::ld_library_path);
  std::string value = old && *old ? path + ":" + old : path;
  ::setenv("LD_LIBRARY_PATH", value.c_str(), 1);
  std::string preload = path + "/" + kShimName;
  const char* old_preload = env::read(env::Var::ld_preload);
  if (old_preload && *old_preload) preload += std::string(":") + old_preload;
  ::setenv("LD_PRELOAD", preload.c_str(), 1);
  // CuPy's own disk cache is keyed by a kernel's source text alone: after an
  // -I header changes it answers the old kernel, before NVRTC (and so kcache)
  // is asked. Under kcache run kcache is the cache, exact for headers; CuPy
  // keeps its in-memory cache. A user's own setting wins.
  ::setenv("CUPY_CACHE_IN_MEMORY", "1", /*overwrite=*/0);
  // The drop-in starts its compile processes with this kcache.
  char exe[PATH_MAX];
  if (::realpath("/proc/self/exe", exe)) ::setenv("KCACHE_EXE", exe, 1);
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  if (run_quiet()) {
    ::execvp(argv[0], argv.data());
    int error = errno;
    throw NotFound("cannot run " + command[0] + ": " + std::strerror(error));
  }

  // The drop-in's lines: after the end of the user's file, else in ours.
  std::string stats_path;
  off_t stats_from = 0;
  bool own_stats = false;
  if (const char* user = env::value(env::Var::kcache_shim_stats)) {
    stats_path = user;
    struct stat st{};
    if (::stat(user, &st) == 0) stats_from = st.st_size;
  } else {
    const char* tmp = env::read(env::Var::tmpdir);
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/kcache-run-XXXXXX";
    int fd = ::mkstemp(&templ[0]);
    if (fd >= 0) {
      ::close(fd);
      stats_path = templ;
      own_stats = true;
      ::setenv("KCACHE_SHIM_STATS", stats_path.c_str(), 1);
    }
  }
  struct StatsFile {
    std::string path;
    bool own;
    ~StatsFile() {
      if (own) ::unlink(path.c_str());
    }
  } stats_file{stats_path, own_stats};

  // exec's errno comes back through a pipe closed on a successful exec.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    throw Error(ErrorKind::io, std::string("cannot create a pipe: ") + std::strerror(errno));
  }
  sigset_t all, old_mask;
  sigfillset(&all);
  ::sigprocmask(SIG_BLOCK, &all, &old_mask);  // no signal before the handlers know the child
  pid_t child = ::fork();
  if (child == 0) {
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    ::execvp(argv[0], argv.data());
    int error = errno;
    ssize_t ignored = ::write(report[1], &error, sizeof error);
    (void)ignored;
    ::_exit(127);
  }
  if (child < 0) {
    int error = errno;
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    throw Error(ErrorKind::io, "cannot run " + command[0] + ": " + std::strerror(error));
  }
  g_child = child;
  struct sigaction action{};
  action.sa_sigaction = forward_signal;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  // Not the job-control signals: ^Z stops kcache and the program alike, as
  // the shell expects of a job.
  for (int sig : {SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGWINCH, SIGALRM}) {
    ::sigaction(sig, &action, nullptr);
  }
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  ::close(report[1]);
  int error = 0;
  ssize_t got;
  do {
    got = ::read(report[0], &error, sizeof error);
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  int status = wait_for(child);
  if (got == static_cast<ssize_t>(sizeof error)) {
    throw NotFound("cannot run " + command[0] + ": " + std::strerror(error));
  }

  RunStats stats;
  if (!stats_path.empty()) {
    std::optional<std::string> text = read_file(stats_path);
    if (text && static_cast<off_t>(text->size()) >= stats_from) {
      std::string lines = text->substr(static_cast<size_t>(stats_from));
      for (size_t at = 0; at < lines.size();) {
        size_t end = lines.find('\n', at);
        if (end == std::string::npos) end = lines.size();
        add_stat_line(stats, lines.substr(at, end - at));
        at = end + 1;
      }
    }
  }
  if (verbosity == Verbosity::verbose) {
    for (const std::string& line : stats.lines) std::fprintf(stderr, "kcache run: %s\n", line.c_str());
  }
  std::fprintf(stderr, "%s\n", summary_line(stats).c_str());
  return end_as(status);
}

}  // namespace

void add_run_command(CLI::App& app, Dispatch& dispatch) {
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run a program with kcache's drop-in libnvrtc first on LD_LIBRARY_PATH and in LD_PRELOAD: "
      "its NVRTC compiles go through the cache (kcache run [-v | -q] -- CMD [ARGS...]).");
  auto command = std::make_shared<std::vector<std::string>>();
  auto verbose = std::make_shared<bool>(false);
  auto quiet = std::make_shared<bool>(false);
  cmd->add_flag("-v,--verbose", *verbose,
                "Before the summary, one line per compile: hit or miss, why it missed, times");
  cmd->add_flag("-q,--quiet", *quiet, "No summary and no drop-in messages (KCACHE_QUIET=1)")
      ->excludes(cmd->get_option("--verbose"));
  cmd->add_option("command", *command, "The program and its arguments, after --")->required();
  cmd->callback([&dispatch, command, verbose, quiet] {
    dispatch.verb = "run";
    dispatch.action = [command, verbose, quiet] {
      return run_command(*command, *quiet     ? Verbosity::quiet
                                   : *verbose ? Verbosity::verbose
                                              : Verbosity::normal);
    };
  });
}

}  // namespace kcache::cli
