// Randomized differential test of NVRTC option lists: a seeded generator
// makes lists of 1-7 options from NVRTC 13's vocabulary (-arch, -I, -D, -U,
// -std in all spellings, flags, valued options with '=' and with a separate
// value, values that look like options, duplicates, unknown options); each
// list compiles one program (nvrtc_attack --steps) with the real NVRTC and
// with the drop-in: a miss, then a hit in a later process, and in another
// working folder (the real NVRTC again there, and the shim, whose store then
// holds the first folder's entries). Every answer (result codes, log bytes,
// PTX, CUBIN, lowered names) must be the real NVRTC's, byte for byte.
//
//   KCACHE_OPTDIFF_SEED   first seed (default 1)
//   KCACHE_OPTDIFF_SEEDS  how many seeds from it (default 1)
//   KCACHE_OPTDIFF_STEPS  steps per seed (default 40)
//   KCACHE_OPTDIFF_OTHER  0: skip the other working folder
//
// A mismatch prints its seed, step and option list; replay one with
// KCACHE_OPTDIFF_SEED=S (the steps of a seed do not depend on the others).
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/file_system.h"
#include "compiler/toolkit.h"
#include "tests/testing/answer_files.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kcache {
namespace {

using testing::answer_files;
using testing::AnswerFiles;
using testing::differences;
using testing::run_command;
using testing::runfile;
using testing::TempDir;

constexpr int kStepsPerBatch = 10;

std::string folder_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

// ptxas's "Compile time = 1.777 ms" differs between two runs of NVRTC itself.
std::string without_timings(std::string log) {
  const std::string before = "Compile time = ";
  for (size_t at = log.find(before); at != std::string::npos; at = log.find(before, at + 1)) {
    size_t from = at + before.size(), to = from;
    while (to < log.size() && (isdigit(static_cast<unsigned char>(log[to])) || log[to] == '.')) ++to;
    log.replace(from, to - from, "#");
  }
  return log;
}

// The files of one step ("sN.*") in `dir`.
AnswerFiles files_of(const std::string& dir, const std::string& step) {
  AnswerFiles out =
      answer_files(dir, [&](const std::string& name) { return name.rfind(step + ".", 0) == 0; });
  for (auto& [name, bytes] : out) {
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".log") == 0) bytes = without_timings(bytes);
  }
  // The log's size in the codes ("log 0 N") counts the timings too: where N
  // is the raw log's size, it becomes the size without them.
  auto codes = out.find(step + ".codes");
  if (codes != out.end()) {
    std::string& c = codes->second;
    size_t at = c.find("\nlog 0 ");
    if (at != std::string::npos) {
      size_t from = at + 7, to = c.find('\n', from);
      auto log = out.find(step + ".0.log");
      std::string raw = read_file(dir + "/" + step + ".0.log").value_or("");
      if (log != out.end() && c.substr(from, to - from) == std::to_string(raw.size())) {
        c.replace(from, to - from, std::to_string(log->second.size()));
      }
    }
  }
  return out;
}

// ---- The generator.

struct Gen {
  std::mt19937_64 rng;
  std::string scratch;  // absolute folders: inc1, inc2 (optdiff.h), empty
  explicit Gen(uint64_t seed, std::string s) : rng(seed), scratch(std::move(s)) {}

  size_t below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }
  template <typename T>
  const T& pick(const std::vector<T>& v) { return v[below(v.size())]; }

  // `name` with `value`: "name=value", "name value" (two arguments), or
  // glued "nameVALUE" where `glued`.
  std::vector<std::string> spell(const std::string& name, const std::string& value, bool glued) {
    size_t how = below(glued ? 3 : 2);
    if (how == 0) return {name + "=" + value};
    if (how == 1) return {name, value};
    return {name + value};
  }

  std::vector<std::string> arch() {
    std::string v = pick<std::string>({"sm_80", "sm_90", "compute_90"});
    if (chance(0.05)) return {"-arch" + v};  // glued: not an NVRTC spelling
    return spell(pick<std::string>({"-arch", "--gpu-architecture"}), v, false);
  }
  std::vector<std::string> include() {
    std::string v = pick<std::string>({scratch + "/inc1", scratch + "/inc2", "inc",
                                       "/nonexistent/kcache/optdiff", scratch + "/empty",
                                       scratch + "/inc1/"});
    bool short_name = chance(0.6);
    return spell(short_name ? "-I" : "--include-path", v, short_name);
  }
  std::vector<std::string> define() {
    std::string v = pick<std::string>({"X", "X=3", "Y=4", "X=Y", "X=(1+2)", "Y", "HDR=11",
                                       "X=", "__cplusplus_x=1"});
    bool short_name = chance(0.6);
    return spell(short_name ? "-D" : "--define-macro", v, short_name);
  }
  std::vector<std::string> undefine() {
    std::string v = pick<std::string>({"X", "Y", "HDR", "__CUDA_ARCH__"});
    bool short_name = chance(0.6);
    return spell(short_name ? "-U" : "--undefine-macro", v, short_name);
  }
  std::vector<std::string> standard() {
    std::string v = pick<std::string>({"c++17", "c++20", "c++14"});
    if (chance(0.1)) return {"-std", v};
    return {pick<std::string>({"-std=", "--std="}) + v};
  }
  std::vector<std::string> flag() {
    return {pick<std::string>({"-default-device", "-ewp", "-dc", "-dw", "-w", "--use_fast_math",
                               "-use_fast_math", "-restrict", "--minimal", "-minimal", "-err-no",
                               "--display-error-number", "-no-err-no", "-rdc=true",
                               "-extra-device-vectorization", "-device-int128",
                               "--disable-warnings", "-fdevice-syntax-only", "-gen-opt-lto",
                               "--device-c", "--restrict"})};
  }
  std::vector<std::string> valued() {
    struct V {
      std::vector<std::string> names;
      std::vector<std::string> values;
    };
    static const std::vector<V> kValued = {
        {{"-ftz", "--ftz"}, {"true", "false"}},
        {{"-prec-div", "--prec-div"}, {"true", "false"}},
        {{"-prec-sqrt", "--prec-sqrt"}, {"true", "false"}},
        {{"-fmad", "--fmad"}, {"true", "false"}},
        {{"-maxrregcount", "--maxrregcount"}, {"32", "64"}},
        {{"-Xptxas", "--ptxas-options"}, {"-v", "-O2", "-O0", "--warn-on-spills"}},
        {{"-split-compile", "--split-compile"}, {"0", "2"}},
        {{"-dopt", "--dopt"}, {"on", "off"}},
        {{"-Ofc", "--Ofast-compile"}, {"max", "mid", "min", "0"}},
        {{"-diag-suppress", "--diag-suppress"}, {"177", "550"}},
        {{"-diag-error", "--diag-error"}, {"177"}},
        {{"-diag-warn", "--diag-warn"}, {"177"}},
        {{"-rdc", "--relocatable-device-code"}, {"true", "false"}},
        {{"-modify-stack-limit", "--modify-stack-limit"}, {"true", "false"}},
        {{"-device-stack-protector", "--device-stack-protector"}, {"true", "false"}},
        {{"-builtin-move-forward", "--builtin-move-forward"}, {"true", "false"}},
        {{"-brief-diag", "--brief-diagnostics"}, {"true", "false"}},
        {{"-jtd", "--jump-table-density"}, {"0", "50"}},
    };
    const V& v = pick(kValued);
    return spell(pick(v.names), pick(v.values), false);
  }
  // A value that looks like another option.
  std::vector<std::string> tricky() {
    return pick<std::vector<std::string>>({{"-Xptxas", "-DX"},
                                           {"--ptxas-options", "-DX"},
                                           {"-ftz", "-DX"},
                                           {"-D", "-UX"},
                                           {"-U", "-DX"},
                                           {"-I", "-DX"},
                                           {"-D", "-arch=sm_80"},
                                           {"-maxrregcount", "-I/nonexistent"},
                                           {"--ptxas-options", "-arch=sm_80"},
                                           {"-Xptxas", "-Isomewhere"},
                                           {"-diag-suppress", "-UY"},
                                           {"-dopt", "-DX=5"},
                                           {"-D", "-std=c++20"},
                                           {"--define-macro", "--undefine-macro"},
                                           {"-Ofc", "-w"}});
  }
  std::vector<std::string> unknown() {
    return {pick<std::string>({"--no-such-option", "-foo", "-unknown-flag=1", "-Wreorder",
                               "--kcache-unknown", "-archsm_90", "-Dfoo", "-x", "cu"})};
  }

  std::vector<std::string> options() {
    std::vector<std::string> out;
    std::vector<std::vector<std::string>> items;
    size_t n = 1 + below(7);
    if (chance(0.85)) items.push_back(arch());
    while (items.size() < n) {
      size_t r = below(100);
      std::vector<std::string> item;
      if (r < 8) item = arch();
      else if (r < 22) item = include();
      else if (r < 36) item = define();
      else if (r < 43) item = undefine();
      else if (r < 49) item = standard();
      else if (r < 64) item = flag();
      else if (r < 82) item = valued();
      else if (r < 88) item = tricky();
      else if (r < 93) item = unknown();
      else if (!items.empty()) item = items[below(items.size())];  // a duplicate
      else item = flag();
      items.push_back(item);
    }
    // The arch need not come first.
    std::shuffle(items.begin(), items.end(), rng);
    for (const auto& item : items) out.insert(out.end(), item.begin(), item.end());
    return out;
  }
};

std::string show(const std::vector<std::string>& options) {
  std::string out;
  for (const std::string& o : options) out += (out.empty() ? "" : " ") + std::string("'") + o + "'";
  return "[" + out + "]";
}

// Per stats line: "hit", "miss", "real(why)".
std::vector<std::string> stat_lines(const std::string& stats) {
  std::vector<std::string> out;
  std::istringstream in(stats);
  for (std::string line; std::getline(in, line);) {
    std::string kind = line.substr(0, line.find(' '));
    if (kind == "real") kind = line;
    out.push_back(kind);
  }
  return out;
}

struct Batch {
  long seed;
  int first, count;
};

std::vector<Batch> batches() {
  long seed = env_long("KCACHE_OPTDIFF_SEED", 1), seeds = env_long("KCACHE_OPTDIFF_SEEDS", 1);
  long steps = env_long("KCACHE_OPTDIFF_STEPS", 40);
  std::vector<Batch> out;
  for (long s = seed; s < seed + seeds; ++s) {
    for (long first = 0; first < steps; first += kStepsPerBatch) {
      out.push_back({s, static_cast<int>(first),
                     static_cast<int>(std::min<long>(kStepsPerBatch, steps - first))});
    }
  }
  return out;
}

class OptionDifferentialTest : public ::testing::TestWithParam<Batch> {
 protected:
  void SetUp() override {
    real_dir_ = folder_of(compiler::find_toolkit("").nvrtc.path);
    shim_dir_ = folder_of(runfile("nvrtc_shim/libnvrtc.so.13"));
    scratch_ = tmp_ / "scratch";
    a_ = tmp_ / "cwd_a";
    b_ = tmp_ / "the_other_working_folder";
    for (const std::string& d : {scratch_, scratch_ + "/inc1", scratch_ + "/inc2",
                                 scratch_ + "/empty", a_, a_ + "/inc", b_, b_ + "/inc"}) {
      ::mkdir(d.c_str(), 0755);
    }
    write_file_atomically(scratch_ + "/inc1/optdiff.h", "#define HDR 7\n");
    write_file_atomically(scratch_ + "/inc2/optdiff.h", "#define HDR 9\n#define Y 2\n");
    // A relative -Iinc reaches another header from each working folder.
    write_file_atomically(a_ + "/inc/optdiff.h", "#define HDR 3\n");
    write_file_atomically(b_ + "/inc/optdiff.h", "#define HDR 5\n#undef X\n");
  }

  // Runs the steps file with the real NVRTC or the shim in `cwd`.
  std::string run(bool shim, const std::string& cwd, const std::string& steps,
                  const std::string& stats = "") {
    std::string out = tmp_ / ("out" + std::to_string(runs_++));
    ::mkdir(out.c_str(), 0755);
    testing::CommandResult r = run_command(
        {runfile("tests/nvrtc_shim/nvrtc_attack"), out, "--steps", steps},
        {{"LD_LIBRARY_PATH", shim ? shim_dir_ + ":" + real_dir_ : real_dir_},
         {"KCACHE_DIR", tmp_ / "store"},
         {"KCACHE_SHIM_STATS", stats.empty() ? "" : tmp_ / stats},
         {"KCACHE_REMOTE", ""},
         {"KCACHE_QUIET", "1"},
         {"ATTACK_DIR", scratch_},
         {"ATTACK_CWD", cwd}});
    EXPECT_EQ(r.exit_code, 0) << (shim ? "drop-in" : "real NVRTC") << " run in " << cwd
                              << " exited " << r.exit_code << ": " << r.err;
    return out;
  }

  std::string stats(const std::string& name) { return read_file(tmp_ / name).value_or(""); }

  TempDir tmp_;
  std::string real_dir_, shim_dir_, scratch_, a_, b_;
  int runs_ = 0;
};

TEST_P(OptionDifferentialTest, AnswersAreNvrtcsForRandomOptionLists) {
  const Batch batch = GetParam();
  Gen gen(static_cast<uint64_t>(batch.seed), scratch_);
  // Steps before this batch's first are drawn and dropped: a seed's step N
  // is the same list whatever the batching.
  std::vector<std::vector<std::string>> lists;
  std::string file;
  for (int step = 0; step < batch.first + batch.count; ++step) {
    std::vector<std::string> options = gen.options();
    if (step < batch.first) continue;
    lists.push_back(options);
    file += "@@ s" + std::to_string(step) + "\n";
    for (const std::string& o : options) file += o + "\n";
  }
  const std::string steps = tmp_ / "steps.txt";
  write_file_atomically(steps, file);
  const bool other = env_long("KCACHE_OPTDIFF_OTHER", 1) != 0;
  std::string want_a = run(false, a_, steps);
  std::string miss = run(true, a_, steps, "miss");
  std::string hit = run(true, a_, steps, "hit");
  std::string want_b, in_b;
  if (other) {
    want_b = run(false, b_, steps);
    in_b = run(true, b_, steps, "other");
  }
  std::vector<std::string> miss_stats = stat_lines(stats("miss")),
                           hit_stats = stat_lines(stats("hit")),
                           other_stats = stat_lines(stats("other"));
  auto stat_of = [](const std::vector<std::string>& s, size_t i) {
    return i < s.size() ? s[i] : std::string("?");
  };
  int mismatches = 0;
  for (int i = 0; i < batch.count; ++i) {
    const int step = batch.first + i;
    const std::string name = "s" + std::to_string(step);
    std::map<std::string, std::string> real_a = files_of(want_a, name);
    std::string miss_diff = differences(files_of(miss, name), real_a);
    std::string hit_diff = differences(files_of(hit, name), real_a);
    std::string other_diff = other ? differences(files_of(in_b, name), files_of(want_b, name)) : "";
    const std::string& codes = real_a[name + ".codes"];
    std::string compile_code = "?";
    if (size_t at = codes.find("compile "); at != std::string::npos) {
      compile_code = codes.substr(at + 8, codes.find('\n', at) - at - 8);
    }
    bool same = miss_diff.empty() && hit_diff.empty() && other_diff.empty();
    // Stats lines are counted per compile; a step that went to the real
    // NVRTC may write none, so they are shown only as a hint.
    std::cout << "OPTDIFF seed=" << batch.seed << " step=" << step << " compile=" << compile_code
              << " " << show(lists[i]) << " | " << (same ? "equal" : "MISMATCH") << "\n";
    if (!same) {
      ++mismatches;
      ADD_FAILURE() << "seed " << batch.seed << " step " << step << " options "
                    << show(lists[i]) << " (replay: KCACHE_OPTDIFF_SEED=" << batch.seed
                    << " KCACHE_OPTDIFF_STEPS=" << step + 1 << ")\n"
                    << (miss_diff.empty() ? "" : " miss differs from the real NVRTC:\n" + miss_diff)
                    << (hit_diff.empty() ? "" : " hit differs from the real NVRTC:\n" + hit_diff)
                    << (other_diff.empty() ? ""
                                           : " other working folder differs:\n" + other_diff)
                    << " stats (by compile, this batch): miss " << stat_of(miss_stats, i)
                    << " | hit " << stat_of(hit_stats, i) << " | other "
                    << stat_of(other_stats, i);
    }
  }
  std::cout << "OPTDIFF batch seed=" << batch.seed << " steps " << batch.first << ".."
            << batch.first + batch.count - 1 << ": " << mismatches << " mismatches; stats miss ["
            << stats("miss") << "]\n";
}

INSTANTIATE_TEST_SUITE_P(Seeds, OptionDifferentialTest, ::testing::ValuesIn(batches()),
                         [](const ::testing::TestParamInfo<Batch>& info) {
                           return "seed" + std::to_string(info.param.seed) + "_steps" +
                                  std::to_string(info.param.first) + "_" +
                                  std::to_string(info.param.first + info.param.count - 1);
                         });

}  // namespace
}  // namespace kcache
