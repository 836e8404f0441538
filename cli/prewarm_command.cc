// `kcache prewarm MANIFEST|DIR... [compile flags] [-j N]`: fills the store with
// many kernels at once, e.g. on a CI machine before the build, or from a
// checked-in list of the kernels a team compiles.
//
// A folder: every *.cu below it, compiled with the flags given here. A
// manifest: one `kcache compile` command line per line (the words
// "kcache compile" may be left out; '#' starts a comment line; quotes as in a
// shell); a flag on a line replaces the same flag given here. Paths are taken
// as given, relative to the current folder, exactly as `kcache compile` run
// there would take them: run prewarm where the build runs its compiles (the
// workspace root for Bazel), or the source names, and so the keys, differ.
//
// Kernels compile in parallel (-j NVRTC compiles at once in all). On a
// terminal a progress bar is drawn on stderr; otherwise one plain line per
// kernel. The summary counts hits, misses and the compile time hits saved.
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "cache/storage.h"
#include "cli/command.h"
#include "cli/compile_flags.h"
#include "cli/storage_flags.h"
#include "common/error.h"
#include "common/file_system.h"
#include "compiler/compiler.h"
#include "compiler/nvrtc/nvrtc_pool.h"
#include "compiler/nvrtc/pch.h"
#include "compiler/toolkit.h"

namespace kcache::cli {
namespace {

struct PrewarmCommand {
  std::vector<std::string> inputs;
  CompileFlags defaults;
  CompilerSetup setup;
  bool no_pch = false;
};

struct Job {
  std::string where;  // "manifest.txt:3" or the .cu path, for messages
  CompileFlags flags;
};

// Shell-like words: whitespace separates, '...' and "..." quote, \ escapes.
std::vector<std::string> split_words(const std::string& line, const std::string& where) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < line.size()) {
        word += line[++i];
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote) throw InvalidArgument(where + ": unterminated quote");
  if (in_word) words.push_back(std::move(word));
  return words;
}

// A manifest line's flags over the command line's: a flag the line gives
// replaces the default.
CompileFlags merge(const CompileFlags& defaults, CompileFlags line) {
  auto pick = [](auto& value, const auto& fallback) {
    if (value.empty()) value = fallback;
  };
  pick(line.archs, defaults.archs);
  pick(line.ptx, defaults.ptx);
  pick(line.include_dirs, defaults.include_dirs);
  pick(line.macros, defaults.macros);  // -D and -U together: their order matters
  pick(line.std, defaults.std);
  pick(line.name_expressions, defaults.name_expressions);
  pick(line.nvrtc_options, defaults.nvrtc_options);
  return line;
}

std::vector<Job> read_manifest(const std::string& path, const CompileFlags& defaults) {
  std::optional<std::string> text = read_file(path);
  if (!text) throw NotFound("manifest " + path + " does not exist");
  std::vector<Job> jobs;
  size_t start = 0;
  for (int number = 1; start < text->size(); ++number) {
    size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    std::string line = text->substr(start, end - start);
    start = end + 1;
    std::string where = path + ":" + std::to_string(number);
    std::vector<std::string> words = split_words(line, where);
    if (words.empty() || words[0][0] == '#') continue;
    if (words.size() >= 2 && words[1] == "compile" &&
        (words[0] == "kcache" ||
         (words[0].size() >= 7 && words[0].compare(words[0].size() - 7, 7, "/kcache") == 0))) {
      words.erase(words.begin(), words.begin() + 2);
    }
    CompileFlags flags;
    CLI::App parser{"manifest line"};
    add_compile_flags(parser, flags, /*per_kernel=*/true);
    try {
      std::vector<std::string> reversed(words.rbegin(), words.rend());
      parser.parse(reversed);
    } catch (const CLI::ParseError& e) {
      throw InvalidArgument(where + ": " + e.what());
    }
    jobs.push_back({where, merge(defaults, std::move(flags))});
  }
  return jobs;
}

void find_sources(const std::string& dir, std::vector<std::string>& out) {
  std::vector<std::string> names = FileSystem::real().list_directory(dir);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::string path = dir + (dir.back() == '/' ? "" : "/") + name;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      find_sources(path, out);
    } else if (name.size() > 3 && name.compare(name.size() - 3, 3, ".cu") == 0) {
      out.push_back(path);
    }
  }
}

std::string seconds(double ms) {
  char buf[32];
  if (ms >= 60000) {
    std::snprintf(buf, sizeof buf, "%dm %02ds", static_cast<int>(ms / 60000),
                  static_cast<int>(ms / 1000) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f s", ms / 1000);
  }
  return buf;
}

// Progress on stderr: a redrawn bar on a terminal, plain lines otherwise.
class Progress {
 public:
  Progress(size_t total, bool tty) : total_(total), tty_(tty) {
    if (tty_) draw();
  }

  void done(const Job& job, const compiler::CompileResult* r, const std::string& error,
            const std::string& log) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++finished_;
    if (r) {
      hit_targets_ += r->hits();
      miss_targets_ += r->misses();
    } else {
      ++failed_;
    }
    std::string what = r ? (r->misses() == 0 ? "hit " : "miss") : "FAILED";
    std::string line = "[" + std::to_string(finished_) + "/" + std::to_string(total_) + "] " +
                       what + " " + job.flags.source;
    if (r && r->misses()) {
      uint32_t ms = 0;
      for (const compiler::TargetResult& t : r->targets) ms += t.hit ? 0 : t.compile_ms;
      line += " (" + std::to_string(r->misses()) + " of " + std::to_string(r->targets.size()) +
              " targets compiled, " + seconds(ms) + ")";
    }
    if (!error.empty()) line += ": " + error;
    if (tty_) std::fputs("\r\033[K", stderr);
    if (!tty_ || !r) {
      if (!log.empty()) std::fputs(log.c_str(), stderr);
      std::fprintf(stderr, "kcache prewarm: %s\n", line.c_str());
    }
    if (tty_) draw();
  }

  void finish() {
    if (tty_) std::fputs("\n", stderr);
  }

 private:
  void draw() {
    constexpr int kWidth = 30;
    int filled = total_ ? static_cast<int>(kWidth * finished_ / total_) : kWidth;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "kcache prewarm [%s] %zu/%zu kernels, targets: %d hits, %d misses%s",
                 bar.c_str(), finished_, total_, hit_targets_, miss_targets_,
                 failed_ ? (", " + std::to_string(failed_) + " failed").c_str() : "");
    std::fflush(stderr);
  }

  std::mutex mutex_;
  size_t total_;
  bool tty_;
  size_t finished_ = 0;
  int hit_targets_ = 0, miss_targets_ = 0, failed_ = 0;
};

// The NVRTC compiles a kernel takes: one per --arch, and one for --ptx
// unless a cubin of its arch answers it (compute_90's PTX is sm_90's).
int nvrtc_runs(const CompileFlags& flags) {
  int runs = static_cast<int>(flags.archs.size());
  if (flags.ptx.empty() || flags.ptx == "none") return std::max(1, runs);
  const bool answered = std::any_of(flags.archs.begin(), flags.archs.end(), [&](const auto& a) {
    return a.compare(0, 3, "sm_") == 0 && "compute_" + a.substr(3) == flags.ptx;
  });
  return runs + (answered ? 0 : 1);
}

// Orders `jobs` so that kernels with the same leading directives (the part
// a PCH may cover: compiler/nvrtc/pch.h) follow one another, and tells
// `pool` how many of each come: a child makes a PCH only where another
// compile will use it, and its users come while it holds it. A source that
// cannot be read is left where it is (its compile says why).
void group_by_prefix(std::vector<Job>& jobs, compiler::NvrtcPool* pool) {
  std::map<std::string, int> counts;
  std::vector<std::pair<std::string, Job>> keyed;
  for (Job& job : jobs) {
    std::optional<std::string> text;
    try {
      text = read_file(job.flags.source);
    } catch (const Error&) {
    }
    std::string prefix = text ? std::string(compiler::pch_prefix(*text)) : std::string();
    if (text) ++counts[prefix];
    keyed.emplace_back(std::move(prefix), std::move(job));
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i] = std::move(keyed[i].second);
  for (const auto& [prefix, n] : counts) pool->expect(prefix, n);
  int all = 0;
  for (const Job& job : jobs) all += nvrtc_runs(job.flags);
  pool->expect_all(all);
}

// Kernels under way per CPU where the pool routes compiles: enough that
// every option set's PCH holder finds compiles waiting for it.
constexpr int kKernelsPerCpu = 4;

// The most NVRTC compiles one job's kernel may need at once: one per target.
int most_targets(const std::vector<Job>& jobs) {
  size_t most = 1;
  for (const Job& job : jobs) {
    most = std::max(most, job.flags.archs.size() + (job.flags.ptx.empty() ? 0 : 1));
  }
  return static_cast<int>(most);
}

int run_prewarm(const GlobalOptions& global, const PrewarmCommand& c) {
  std::vector<Job> jobs;
  for (const std::string& input : c.inputs) {
    struct stat st;
    if (::stat(input.c_str(), &st) != 0)
      throw NotFound(input + " does not exist (a manifest or a folder of .cu files)");
    if (S_ISDIR(st.st_mode)) {
      std::vector<std::string> sources;
      find_sources(input, sources);
      if (sources.empty()) throw NotFound("no .cu files under " + input);
      for (const std::string& s : sources) {
        CompileFlags flags = c.defaults;
        flags.source = s;
        jobs.push_back({s, flags});
      }
    } else {
      std::vector<Job> more = read_manifest(input, c.defaults);
      jobs.insert(jobs.end(), more.begin(), more.end());
    }
  }
  for (const Job& job : jobs) {
    if (job.flags.archs.empty() && job.flags.ptx.empty()) {
      throw InvalidArgument(job.where +
                            ": no target; give --arch and/or --ptx (here or on the line)");
    }
    check_outputs(job.flags);
  }

  int workers = c.setup.jobs > 0
                    ? c.setup.jobs
                    : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  // A pool of its own, unless a caller's (the Bazel worker's) is given.
  const bool pooled =
      !c.no_pch && global.pch_dir.empty() && !global.pool && !worker_command().empty();
  // With the pool, more kernels than CPUs are under way, so that each PCH's
  // holder has compiles queued for it while the others' are busy; the pool
  // keeps the compiles at once to `cpus`.
  const int cpus = workers;
  if (pooled) workers *= kKernelsPerCpu;
  workers = std::min<int>(workers, static_cast<int>(jobs.size()));
  compiler::Toolkit toolkit = compiler::find_toolkit(c.setup.cuda_path);
  std::unique_ptr<cache::Storage> storage = open_storage(global, c.setup);
  compiler::Compiler compiler(std::move(toolkit), storage.get(),
                              pooled ? workers * most_targets(jobs) : c.setup.jobs,
                              worker_command());
  // One process compiles many kernels, in long-lived children (NVRTC
  // serializes compiles within a process), with a scratch folder for their
  // work files, where NVRTC's precompiled headers live (compiler/nvrtc/pch.h:
  // a served compile that uses one is keyed by the files its maker read).
  std::optional<ScratchDir> scratch;
  std::optional<compiler::NvrtcPool> pool;
  // The pool, not the compiler's slots, keeps the compiles at once to
  // `cpus`: each kernel's targets are all sent at once, and one whose PCH's
  // holder is busy waits in the pool without taking a CPU.
  if (pooled) {
    scratch.emplace("kcache-prewarm");
    pool.emplace(worker_command(), scratch->path());
    pool->limit_cpus(cpus);
    group_by_prefix(jobs, &*pool);
    compiler.use_pool(&*pool);
  }
  if (global.pool) compiler.use_pool(global.pool);

  Progress progress(jobs.size(), global.format != "json" && ::isatty(STDERR_FILENO));
  std::atomic<size_t> next{0};
  std::mutex totals_mutex;
  int kernel_hits = 0, kernel_misses = 0, compile_failures = 0, other_failures = 0;
  int target_hits = 0, target_misses = 0;
  uint64_t saved_ms = 0, nvrtc_ms = 0;
  auto start = std::chrono::steady_clock::now();
  auto work = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      const Job& job = jobs[i];
      try {
        compiler::CompileResult r = compiler.compile(to_options(job.flags));
        write_outputs(job.flags, r);
        {
          std::lock_guard<std::mutex> lock(totals_mutex);
          (r.misses() ? kernel_misses : kernel_hits) += 1;
          target_hits += r.hits();
          target_misses += r.misses();
          for (const compiler::TargetResult& t : r.targets)
            (t.hit ? saved_ms : nvrtc_ms) += t.compile_ms;
        }
        progress.done(job, &r, "", "");
      } catch (const CompileError& e) {
        std::string options;
        for (const std::string& o : e.options()) options += " " + o;
        std::string log = e.log();
        if (!log.empty() && log.back() != '\n') log += '\n';
        log += "kcache prewarm: NVRTC options:" + options + "\n";
        {
          std::lock_guard<std::mutex> lock(totals_mutex);
          ++compile_failures;
        }
        progress.done(job, nullptr, e.what(), log);
      } catch (const std::exception& e) {
        {
          std::lock_guard<std::mutex> lock(totals_mutex);
          ++other_failures;
        }
        progress.done(job, nullptr, e.what(), "");
      }
    }
  };
  std::vector<std::thread> threads;
  for (int w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  progress.finish();
  double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  if (global.format == "json") {
    nlohmann::json j = {{"kernels", jobs.size()},
                        {"kernel_hits", kernel_hits},
                        {"kernel_misses", kernel_misses},
                        {"failed", compile_failures + other_failures},
                        {"target_hits", target_hits},
                        {"target_misses", target_misses},
                        {"nvrtc_ms", nvrtc_ms},
                        {"compile_ms_saved", saved_ms},
                        {"wall_ms", static_cast<uint64_t>(wall_ms)}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::string failed = compile_failures + other_failures
                             ? ", " + std::to_string(compile_failures + other_failures) + " failed"
                             : "";
    std::fprintf(stderr,
                 "kcache prewarm: %zu kernels in %s: %d hits, %d misses%s; targets: %d hits, %d "
                 "compiled (NVRTC %s); compile time saved by hits: %s\n",
                 jobs.size(), seconds(wall_ms).c_str(), kernel_hits, kernel_misses, failed.c_str(),
                 target_hits, target_misses, seconds(static_cast<double>(nvrtc_ms)).c_str(),
                 seconds(static_cast<double>(saved_ms)).c_str());
    if (pool) {
      compiler::NvrtcPool::PchCounts n = pool->pch_counts();
      std::fprintf(stderr,
                   "kcache prewarm: NVRTC PCH: %d made, %d used, %d without (%d waited for the "
                   "process holding theirs)\n",
                   n.made, n.reused, n.plain, n.waited);
    }
  }
  if (compile_failures) return kExitCompileFailed;
  return other_failures ? kExitFailed : kExitOk;
}

}  // namespace

void add_prewarm_command(CLI::App& app, Dispatch& dispatch) {
  CLI::App* cmd = app.add_subcommand(
      "prewarm",
      "Fill the store with many kernels in parallel: every .cu under a folder, or the compile "
      "command lines of a manifest (one per line). Flags given here apply to every kernel; a "
      "manifest line's own flag replaces them.");
  auto c = std::make_shared<PrewarmCommand>();
  cmd->add_option("inputs", c->inputs, "Manifest files or folders of .cu files")->required();
  add_compile_flags(*cmd, c->defaults, /*per_kernel=*/false);
  add_setup_flags(*cmd, c->setup);
  cmd->add_flag("--no-pch", c->no_pch,
                "Compile without long-lived NVRTC processes (a new process per extra "
                "compile), e.g. to compare");
  add_storage_flags(*cmd, dispatch.global);
  cmd->callback([&dispatch, c] {
    dispatch.verb = "prewarm";
    dispatch.action = [&dispatch, c] { return run_prewarm(dispatch.global, *c); };
  });
}

}  // namespace kcache::cli
