// What issue 9's dead-group rule buys (compiler/includes.h): for each kernel,
// the user headers kcache hands to NVRTC (and so keys) with the scanner as it
// was ("before": every literal #include followed, comments skipped) and as it
// is ("now": groups under `#if 0` / `#elif 0` skipped too), and, for each user
// header in the kernel's folder, whether an edit to it, or its deletion, keeps
// every key of the kernel (a hit) or not.
//
// "Before" runs today's scanner on a copy of the folder whose `#if 0` and
// `#elif 0` lines read `#if 0+0`: the same program for any preprocessor, but
// not the literal 0, so nothing is skipped, as before. Keys are
// Compiler::keys(), what a lookup computes. "Ideal" is a key over exactly
// the headers NVRTC compiles, found by NVRTC (compiled_by_nvrtc): the bound
// no scanner can beat.
//
//   bazel run //bench:overkeying_hit_rate
//
// reads tests/compiler/kernels, examples/ and bench/overkeying (the fixture)
// from the workspace. Figures: docs/PERFORMANCE.md (issue 9).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file_system.h"
#include "common/hash.h"
#include "compiler/compiler.h"
#include "compiler/includes.h"
#include "compiler/toolkit.h"

namespace fs = std::filesystem;
using namespace kcache;
using namespace kcache::compiler;

namespace {

struct Case {
  std::string folder;                         // copied, relative to the workspace
  std::string source;                         // relative to folder
  std::vector<std::string> include_dirs;      // relative to folder; "@cccl": the toolkit's
  std::vector<std::string> name_expressions;  // for templates
  bool compiles = true;
};

const std::vector<Case> kCases = {
    {"tests/compiler/kernels", "saxpy.cu", {}, {}},
    {"tests/compiler/kernels", "half_cg.cu", {"include"}, {}},
    {"tests/compiler/kernels", "cub_block.cu", {"@cccl"}, {}},
    {"tests/compiler/kernels", "scale_template.cu", {}, {"scale<float>", "scale<double>"}},
    {"tests/compiler/kernels", "broken.cu", {}, {}, false},
    {"examples/saxpy", "saxpy.cu", {}, {}},
    {"examples/cub_reduce", "block_reduce.cu", {}, {"block_reduce<float, 256, 4>"}},
    {"bench/overkeying", "histogram.cu", {"include"}, {}},
};

bool is_header(const fs::path& p) {
  static const std::set<std::string> kExt = {".h", ".cuh", ".hpp", ".hh", ".inl"};
  return kExt.count(p.extension().string()) > 0;
}

// `#if 0` -> `#if 0+0`, `#elif 0` -> `#elif 0+0`: still false, not literal.
std::string undeaden(const std::string& text) {
  static const std::regex kDead(R"(^(\s*#\s*(?:if|elif)\s+)0(\s*(?://.*)?\r?)$)");
  std::istringstream in(text);
  std::string out, line;
  while (std::getline(in, line)) {
    std::smatch m;
    out += (std::regex_match(line, m, kDead) ? m[1].str() + "0+0" + m[2].str() : line) + "\n";
  }
  if (!text.empty() && text.back() != '\n' && !out.empty()) out.pop_back();
  return out;
}

void copy_tree(const fs::path& from, const fs::path& to, bool rewrite) {
  for (const auto& e : fs::recursive_directory_iterator(from)) {
    fs::path target = to / fs::relative(e.path(), from);
    if (e.is_directory()) {
      fs::create_directories(target);
    } else if (e.is_regular_file()) {
      fs::create_directories(target.parent_path());
      std::string text = *read_file(e.path().string());
      write_file_atomically(target.string(), rewrite ? undeaden(text) : text);
    }
  }
}

struct Measure {
  size_t handed = 0;  // user headers handed to NVRTC
  std::set<std::string> handed_paths;
  int edits = 0, hits = 0;
  std::map<std::string, int> hits_by_header;  // 0..2 of its two edits
};

CompileOptions options_for(const Case& c, const fs::path& tree, const Toolkit& toolkit) {
  CompileOptions o;
  o.source_path = (tree / c.source).string();
  o.source_name = c.folder + "/" + c.source;
  o.archs = {"sm_90"};
  o.ptx_arch = "compute_90";
  o.name_expressions = c.name_expressions;
  for (const std::string& d : c.include_dirs) {
    o.include_dirs.push_back(d == "@cccl" ? toolkit.root + "/include/cccl" : (tree / d).string());
  }
  return o;
}

Measure measure(const Case& c, const fs::path& tree, const Toolkit& toolkit,
                const Compiler& compiler) {
  Measure m;
  CompileOptions o = options_for(c, tree, toolkit);
  IncludeGraph g = resolve_includes(o.source_path, *read_file(o.source_path),
                                    {o.include_dirs, toolkit.include_dirs, {}});
  m.handed = g.headers.size();
  for (const ResolvedHeader& h : g.headers) {
    m.handed_paths.insert(
        fs::relative(fs::weakly_canonical(h.path), fs::weakly_canonical(tree)).string());
  }
  std::vector<Hash128> base = compiler.keys(o);
  for (const auto& e : fs::recursive_directory_iterator(tree)) {
    if (!e.is_regular_file() || !is_header(e.path())) continue;
    std::string path = e.path().string();
    std::string text = *read_file(path);
    write_file_atomically(path, text + "\n#define KCACHE_BENCH_EDITED 1\n");
    int hits = compiler.keys(o) == base;
    fs::rename(path, path + ".moved");
    hits += compiler.keys(o) == base;
    fs::rename(path + ".moved", path);
    write_file_atomically(path, text);
    m.hits_by_header[fs::relative(e.path(), tree).string()] = hits;
    m.hits += hits;
    m.edits += 2;
  }
  return m;
}

// The headers NVRTC really compiles, found by NVRTC itself: in the "before"
// copy (every referenced header handed), each handed header in turn becomes
// an #error; the compile still succeeding means NVRTC never compiled it, so
// an ideal key would not cover it. Headers not handed are never read.
std::set<std::string> compiled_by_nvrtc(const Case& c, const fs::path& tree,
                                        const std::set<std::string>& handed, const Toolkit& toolkit,
                                        Compiler& compiler) {
  std::set<std::string> compiled;
  if (handed.empty()) return compiled;
  CompileOptions o = options_for(c, tree, toolkit);
  o.archs.clear();      // PTX is enough to know what was compiled
  compiler.compile(o);  // as is, it compiles
  for (const std::string& h : handed) {
    std::string path = (tree / h).string();
    std::string text = *read_file(path);
    write_file_atomically(path, "#error kcache bench: compiled\n");
    try {
      compiler.compile(o);
    } catch (const CompileError& e) {
      if (std::string(e.log()).find("kcache bench: compiled") == std::string::npos) throw;
      compiled.insert(h);
    }
    write_file_atomically(path, text);
  }
  return compiled;
}

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const std::string& x : s) out += (out.empty() ? "" : ", ") + x;
  return out.empty() ? "-" : out;
}

}  // namespace

int main() {
  const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  fs::path root = ws ? fs::path(ws) : fs::current_path();
  if (!fs::exists(root / "bench/overkeying/histogram.cu")) {
    std::fprintf(stderr,
                 "overkeying_hit_rate: %s is not the kcache workspace; run it with bazel run "
                 "//bench:overkeying_hit_rate, or from the workspace root\n",
                 root.c_str());
    return 2;
  }
  try {
    Toolkit toolkit = find_toolkit("");
    Compiler compiler(toolkit, nullptr);
    fs::path tmp = fs::temp_directory_path() / ("kcache_overkeying." + std::to_string(::getpid()));
    std::printf(
        "| kernel | headers in its folder | handed before | handed now | compiled by NVRTC | "
        "referenced, never compiled | edits (2 per header) | hits before | hits now | hits, ideal "
        "| edits to referenced, never compiled: hits before / now |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    int edits = 0, hits_before = 0, hits_now = 0, hits_ideal = 0, over = 0, over_before = 0,
        over_now = 0;
    for (size_t i = 0; i < kCases.size(); ++i) {
      const Case& c = kCases[i];
      fs::path before = tmp / std::to_string(i) / "before", now = tmp / std::to_string(i) / "now";
      copy_tree(root / c.folder, before, /*rewrite=*/true);
      copy_tree(root / c.folder, now, /*rewrite=*/false);
      size_t headers = 0;
      for (const auto& e : fs::recursive_directory_iterator(now)) {
        headers += e.is_regular_file() && is_header(e.path());
      }
      Measure b = measure(c, before, toolkit, compiler);
      Measure n = measure(c, now, toolkit, compiler);
      std::set<std::string> compiled;
      if (c.compiles) compiled = compiled_by_nvrtc(c, before, b.handed_paths, toolkit, compiler);
      std::set<std::string> never;  // referenced (handed before), never compiled
      int never_before = 0, never_now = 0;
      for (const std::string& p : b.handed_paths) {
        if (compiled.count(p)) continue;
        never.insert(p);
        never_before += b.hits_by_header[p];
        never_now += n.hits_by_header[p];
      }
      int ideal = 2 * static_cast<int>(headers - compiled.size());
      std::printf("| %s/%s | %zu | %zu | %zu | %zu | %s | %d | %d | %d | %d | %d / %d of %zu |\n",
                  c.folder.c_str(), c.source.c_str(), headers, b.handed, n.handed, compiled.size(),
                  join(never).c_str(), n.edits, b.hits, n.hits, ideal, never_before, never_now,
                  2 * never.size());
      edits += n.edits;
      hits_before += b.hits;
      hits_now += n.hits;
      hits_ideal += ideal;
      over += 2 * static_cast<int>(never.size());
      over_before += never_before;
      over_now += never_now;
    }
    auto pct = [](int a, int b) { return b ? 100.0 * a / b : 0.0; };
    std::printf(
        "| all | | | | | | %d | %d (%.1f %%) | %d (%.1f %%) | %d (%.1f %%) | %d / %d of %d |\n",
        edits, hits_before, pct(hits_before, edits), hits_now, pct(hits_now, edits), hits_ideal,
        pct(hits_ideal, edits), over_before, over_now, over);
    fs::remove_all(tmp);
  } catch (const Error& e) {
    std::fprintf(stderr, "overkeying_hit_rate: %s\n", e.what());
    return 1;
  }
  return 0;
}
