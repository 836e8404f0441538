// A differential test that cannot be tuned to: a small include tree with
// macros, conditional, computed and __has_include includes is edited at
// random (header contents, -D values, files appearing and disappearing), and
// after every edit a compile through the store must give exactly what a
// compile without a store gives (or fail the same way).
//
// KCACHE_DIFF_STEPS (default 200) and KCACHE_DIFF_SEED (default 1) choose the
// run; docs/TESTING.md says how to run it longer. Results that needed computed
// includes are found through manifests (cache/manifest.h), so the test also
// asserts that some hits came that way.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>

#include "cache/storage.h"
#include "common/error.h"
#include "compiler/compiler.h"
#include "compiler/toolkit.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::test_dir;
using testing::write;

long env_or(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

// a and b live next to the source and are included "quoted"; c and d live
// in both -I folders (the first shadows the second) and are included
// <angled>. (One spelling meaning two files in one compile is refused by
// kcache; this keeps most states compilable.)
const char* const kNames[] = {"a", "b", "c", "d"};
std::string dir_of(int name, int pick2) { return name < 2 ? "src" : pick2 ? "inc1" : "inc2"; }

std::string spelled(int name) {
  std::string n = std::string(kNames[name]) + ".cuh";
  return name < 2 ? "\"" + n + "\"" : "<" + n + ">";
}

class Tree {
 public:
  Tree(std::string root, uint32_t seed) : root_(std::move(root)), rng_(seed) {}

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  // One header's text: a guard, a value, maybe another header (literal,
  // computed or probed).
  std::string header(const std::string& name) {
    std::string guard = "H_" + name + "_" + std::to_string(pick(1000));
    std::string t = pick(2) ? "#pragma once\n" : "#ifndef " + guard + "\n#define " + guard + "\n";
    t +=
        "#ifndef V_" + name + "\n#define V_" + name + " " + std::to_string(pick(50)) + "\n#endif\n";
    int other = pick(4);
    switch (pick(5)) {
      case 0:
        t += "#include " + spelled(other) + "\n";
        break;
      case 1:
        t += "#include STR(" + std::string(kNames[pick(2)]) + ".cuh)\n";
        break;
      case 2:
        t += "#if __has_include(" + spelled(other) + ")\n#include " + spelled(other) + "\n#endif\n";
        break;
      case 3:
        t += "#if 0\n#include " + spelled(other) + "\n#endif\n";
        break;
      default:
        break;
    }
    if (t.compare(0, 7, "#pragma") != 0) t += "#endif\n";
    return t;
  }

  std::string source() {
    std::string t = "#define STR2(x) #x\n#define STR(x) STR2(x)\n";
    for (int i = 0; i < 3; ++i) {
      int n = pick(4);
      switch (pick(5)) {
        case 0:
          t += "#include " + spelled(n) + "\n";
          break;
        case 1:
          t += "#define NAME_" + std::to_string(i) + " " + spelled(n) + "\n#include NAME_" +
               std::to_string(i) + "\n";
          break;
        case 2:
          t += "#ifdef PICK\n#include STR(PICK.cuh)\n#endif\n";
          break;
        case 3:
          t += "#if __has_include(" + spelled(n) + ")\n#include " + spelled(n) + "\n#endif\n";
          break;
        default:
          t += "#if SEL == " + std::to_string(pick(2)) + "\n#include " + spelled(n) + "\n#endif\n";
          break;
      }
    }
    for (const char* n : kNames) {
      t += "#ifndef V_" + std::string(n) + "\n#define V_" + n + " 0\n#endif\n";
    }
    t += "extern \"C\" __global__ void k(int* p) { p[0] = V_a; p[1] = V_b; p[2] = V_c; "
         "p[3] = V_d; }\n";
    return t;
  }

  // One random edit of the tree or the options.
  void edit(CompileOptions& o) {
    int name = pick(4);
    std::string relative = dir_of(name, pick(2)) + "/" + kNames[name] + ".cuh";
    std::string path = root_ + "/" + relative;
    switch (pick(6)) {
      case 0:
      case 1:
        write(root_, relative, header(kNames[name]));
        break;
      case 2:
        std::remove(path.c_str());
        break;
      case 3:
        write(root_, "src/k.cu", source());
        break;
      default:
        o.defines.clear();
        if (pick(3)) o.defines.push_back(std::string("PICK=") + kNames[pick(4)]);
        if (pick(2)) o.defines.push_back("SEL=" + std::to_string(pick(2)));
        break;
    }
  }

 private:
  std::string root_;
  std::mt19937 rng_;
};

// What a compile gives: the bundle, or the error's message.
std::string outcome(Compiler& c, const CompileOptions& o, int* hits = nullptr) {
  try {
    CompileResult r = c.compile(o);
    if (hits) *hits += r.hits();
    return r.bundle;
  } catch (const CompileError& e) {
    return std::string("error: ") + e.what() + "\n" + e.log();
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
}

TEST(DifferentialTest, EveryCachedResultEqualsAFreshCompileOfTheSameFiles) {
  const long steps = env_or("KCACHE_DIFF_STEPS", 200);
  const auto seed = static_cast<uint32_t>(env_or("KCACHE_DIFF_SEED", 1));
  std::string dir = test_dir();
  cache::StorageOptions so;
  so.local_dir = dir + "/store";
  cache::Storage storage(so);
  Toolkit toolkit = find_toolkit("");
  Compiler cached(toolkit, &storage), fresh(toolkit, nullptr);

  Tree tree(dir, seed);
  for (int n = 0; n < 4; ++n) {
    for (int d = 0; d < 2; ++d) {
      write(dir, dir_of(n, d) + "/" + kNames[n] + ".cuh", tree.header(kNames[n]));
    }
  }
  write(dir, "src/k.cu", tree.source());
  CompileOptions o;
  o.source_path = dir + "/src/k.cu";
  o.source_name = "src/k.cu";
  o.ptx_arch = "compute_80";
  o.include_dirs = {dir + "/inc1", dir + "/inc2"};

  auto start = std::chrono::steady_clock::now();
  int hits = 0, errors = 0;
  for (long step = 0; step < steps; ++step) {
    tree.edit(o);
    std::string want = outcome(fresh, o);
    std::string got = outcome(cached, o, &hits);
    errors += want.compare(0, 7, "error: ") == 0;
    if (std::getenv("KCACHE_DIFF_VERBOSE") && want.compare(0, 7, "error: ") == 0) {
      std::printf("step %ld: %s\n", step, want.c_str());
    }
    ASSERT_EQ(got, want) << "seed " << seed << ", step " << step;
    if ((step + 1) % 250 == 0) {
      std::printf("differential: seed %u, %ld steps so far, all equal\n", seed, step + 1);
      std::fflush(stdout);
    }
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t manifest_hits = storage.local()->stats().counter("manifest_hits");
  std::printf(
      "differential: seed %u, %ld steps, %d hits (%lld through manifests), %d compile errors, "
      "%.1f s\n",
      seed, steps, hits, static_cast<long long>(manifest_hits), errors, s);
  // Results that needed computed includes are stored and found (direct mode):
  // with this many steps, states repeat, so some hits must come through them.
  if (steps >= 100) {
    EXPECT_GT(manifest_hits, 0) << "no hit through a manifest";
  }
}

}  // namespace
}  // namespace kcache::compiler
