// A randomized differential test of the drop-in's path (compile_program, what
// nvrtc_shim/ runs) against the REAL NVRTC (RealNvrtc::answer) on the real
// file system (issue 27's serving seal). A small world of headers lives in
// two absolute -I folders (ainc1, ainc2), one relative one (rinc, also
// spelled ./rinc) beneath the working folder the test chdirs into, next to
// the program (q.h in each program folder) and in a targets folder a
// symlink (ainc1/l.h) points into. Same-named headers live in two folders
// (x.h, y.h, z.h, cfg.h), ainc1/x.h may #include_next <x.h>, y.h may include
// "z.h" beside itself. The program includes them angled, quoted, through
// macro names, token pasting, literal and computed __has_include (relative
// and absolute names, `..` names), a symlink, and in-memory headers that may
// shadow disk ones; it is named in changing folders (CuPy-style tmpXXXX/
// kern.cu folders that may or may not exist, names relative to the working
// folder, an absolute name in it, no name at all) and given -D options; sometimes a header or a -D
// makes it fail to compile, or it includes a header found nowhere.
//
// Each step mutates the disk and/or the program at random (headers appearing,
// disappearing, edited, edited in place to the same size with their mtime set
// back, symlinks retargeted) and then looks the state up twice through one
// persistent store (lookup records on: a 50 ms "too new" margin, files aged
// at random): every answer (result code, log, PTX) must equal the real
// NVRTC's from the disk as it is at that step. Where compile_program throws
// (the drop-in then hands the program to the real NVRTC) the step counts as
// a fallback, not a mismatch. The test fails if fewer than 20 % of the
// lookups hit, so the cache is exercised.
//
// Files a compile process copied before are served as themselves (seal.cc,
// SnapshotCache) once they have not changed for KCACHE_DIFF_SETTLE_MS
// (default 0 here, so most steps serve some that way; 2,000 in kcache):
// their stat and bytes are checked after each compile, so even an edit
// within one timestamp tick must give NVRTC's answer.
//
// KCACHE_DIFF_SEED (default 1) and KCACHE_DIFF_STEPS (default 250, about
// 40 s) choose the run; KCACHE_DIFF_KEEP_GOING=1 counts every differing step
// instead of stopping at the first; KCACHE_DIFF_VERBOSE=1 prints the log of
// every state NVRTC fails to compile. Run it longer from bazel-bin:
//   TEST_TMPDIR=/tmp/x KCACHE_DIFF_SEED=7 KCACHE_DIFF_STEPS=1500
//   bazel-bin/tests/compiler/program_differential_test
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cache/storage.h"
#include "common/error.h"
#include "common/file_system.h"
#include "compiler/program.h"
#include "compiler/seal/seal.h"
#include "compiler/toolkit.h"
#include "tests/compiler/lookup_record_testing.h"
#include "tests/compiler/program_vs_nvrtc.h"
#include "tests/compiler/real_nvrtc.h"
#include "tests/testing/temp_dir.h"

namespace kcache::compiler {
namespace {

namespace fs = std::filesystem;

long env_or(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

using testing::InFolder;

// The headers' paths, relative to the test's root; header i defines M<i>.
const char* const kHeaders[] = {
    "ainc1/x.h",     "ainc2/x.h",      "ainc1/y.h",     "ainc2/y.h",     "work/rinc/y.h",
    "work/rinc/z.h", "ainc2/z.h",      "ainc1/part_a.h", "ainc2/part_b.h", "ainc1/m.h",
    "work/q.h",      "work/sub/q.h",   "p1/q.h",        "p2/q.h",        "ainc2/cfg.h",
    "work/rinc/cfg.h", "targets/t1.h", "targets/t2.h",  "p1/cfg.h",       "ainc2/sub/u.h",
};
constexpr int kHeaderCount = sizeof kHeaders / sizeof kHeaders[0];
constexpr int kTmpQ = kHeaderCount;  // M<kTmpQ>: a tmpXXXX folder's q.h

std::string base_of(const std::string& p) { return p.substr(p.rfind('/') + 1); }

struct State {
  // The program.
  std::vector<int> parts;  // include menu items, in order
  int sel = 0;             // -DSEL=1
  int bias = -1;           // -DBIAS=n where >= 0
  bool boom = false;       // -DBOOM: #error
  int inc_order = 0;       // which -I folders, in which order
  int name_kind = 0;
  std::string tmp;         // the tmpXXXX folder for name_kind 4
  int mem = 0;             // in-memory headers: none, m.h, y.h
  int mem_value = 1;
  bool file_macro = false;
};

class ProgramDifferentialTest : public testing::LookupRecordFixture {
 protected:
  void SetUp() override {
    LookupRecordFixture::SetUp();
    toolkit_ = find_toolkit("");
    real_ = std::make_unique<RealNvrtc>(toolkit_.nvrtc.path);
  }

  std::string root() const { return dir_.path(); }

  void write(const std::string& relative, const std::string& text) {
    std::string path = dir_ / relative;
    FileSystem::real().create_directories(path.substr(0, path.rfind('/')), 0755);
    std::ofstream(path, std::ios::binary) << text;
  }

  std::string header_text(int i, std::mt19937& rng) {
    std::string p = kHeaders[i];
    std::string base = base_of(p);
    std::string t = "// " + p + "\n";
    auto pick = [&](int n) { return static_cast<int>(rng() % n); };
    if (base == "x.h" && p.rfind("ainc1/", 0) == 0 && pick(3) == 0) t += "#include_next <x.h>\n";
    if (base == "y.h" && pick(2)) t += "#if __has_include(\"z.h\")\n#include \"z.h\"\n#endif\n";
    if (base == "q.h" && pick(3) == 0) t += "#include \"cfg.h\"\n";  // maybe nowhere
    if (base == "u.h" && pick(3)) {  // up out of its folder, as cooperative_groups/reduce.h
      t += "#if __has_include(\"../cfg.h\")\n#include \"../cfg.h\"\n#endif\n";
    }
    if (pick(80) == 0) t += "#error broken header " + std::to_string(i) + "\n";
    if (pick(80) == 0) t += "int syntax_error_" + std::to_string(i) + " = ;\n";
    t += "#define M" + std::to_string(i) + " " + std::to_string(1 + pick(9)) + "\n";
    return t;
  }

  // The program's name and folder.
  std::string program_name(const State& s) const {
    switch (s.name_kind) {
      case 0: return "kern.cu";
      case 1: return "sub/kern.cu";
      case 2: return root() + "/p1/kern.cu";
      case 3: return root() + "/p2/kern.cu";
      case 4: return root() + "/" + s.tmp + "/kern.cu";
      case 5: return root() + "/work/kern.cu";  // absolute, in the working folder
      default: return "";  // default_program
    }
  }

  std::vector<std::string> options(const State& s) const {
    std::vector<std::string> o = {"-arch=sm_90"};
    const std::string a1 = "-I" + root() + "/ainc1", a2 = "-I" + root() + "/ainc2";
    switch (s.inc_order) {
      case 0: o.insert(o.end(), {a1, a2}); break;
      case 1: o.insert(o.end(), {a2, a1}); break;
      case 2: o.insert(o.end(), {a1, "-Irinc", a2}); break;
      case 3: o.insert(o.end(), {"-I./rinc", a1}); break;
      case 4: o.insert(o.end(), {a2, "-Irinc", a1}); break;
      default: o.insert(o.end(), {"-I", "rinc", a2}); break;
    }
    if (s.sel) o.push_back("-DSEL=1");
    if (s.bias >= 0) o.push_back("-DBIAS=" + std::to_string(s.bias));
    if (s.boom) o.push_back("-DBOOM");
    return o;
  }

  std::vector<cache::Header> memory_headers(const State& s) const {
    std::string v = "#define MEM_VALUE " + std::to_string(s.mem_value) + "\n";
    if (s.mem == 1) return {{"m.h", v}};
    if (s.mem == 2) return {{"y.h", v + "#define M3 77\n"}};
    return {};
  }

  std::string source(const State& s) const {
    std::string t =
        "#define CAT(a, b) a##b\n#define STR(x) #x\n#define XSTR(x) STR(x)\n"
        "#ifdef BOOM\n#error boom\n#endif\n";
    for (int part : s.parts) {
      switch (part) {
        case 0: t += "#if __has_include(<x.h>)\n#include <x.h>\n#endif\n"; break;
        case 1: t += "#include <x.h>\n"; break;
        case 2: t += "#if __has_include(\"y.h\")\n#include \"y.h\"\n#endif\n"; break;
        case 3: t += "#if __has_include(\"q.h\")\n#include \"q.h\"\n#endif\n"; break;
        case 4:
          t += "#if SEL\n#define HN <z.h>\n#else\n#define HN \"cfg.h\"\n#endif\n"
               "#if __has_include(HN)\n#include HN\n#endif\n";
          break;
        case 5: t += "#include XSTR(CAT(part_, a.h))\n"; break;
        case 6: t += "#if __has_include(XSTR(CAT(part_, b.h)))\n#include XSTR(CAT(part_, b.h))\n#endif\n"; break;
        case 7: t += "#define CFG \"cfg.h\"\n#if __has_include(CFG)\n#include CFG\n#endif\n"; break;
        case 8:
          t += "#if __has_include(\"" + root() + "/ainc2/z.h\")\n#include \"" + root() +
               "/ainc2/z.h\"\n#endif\n";
          break;
        case 9:
          t += "#define ABS_Q \"" + root() + "/p1/q.h\"\n#if __has_include(ABS_Q)\n#include ABS_Q\n#endif\n";
          break;
        case 10: t += "#if __has_include(<l.h>)\n#include <l.h>\n#endif\n"; break;
        case 11: t += "#if __has_include(\"m.h\")\n#include \"m.h\"\n#endif\n"; break;
        case 12: t += "#if __has_include(\"../p1/cfg.h\")\n#include \"../p1/cfg.h\"\n#endif\n"; break;
        case 13: t += "#if __has_include(\"rinc/z.h\")\n#include \"rinc/z.h\"\n#endif\n"; break;
        case 14: t += "#include \"nothere.h\"\n"; break;
        case 17: t += "#if __has_include(<sub/u.h>)\n#include <sub/u.h>\n#endif\n"; break;
        case 15: t += "#include \"q.h\"\n"; break;
        default: t += "#include <y.h>\n"; break;
      }
    }
    for (int i = 0; i <= kTmpQ; ++i) {
      std::string m = "M" + std::to_string(i);
      t += "#ifndef " + m + "\n#define " + m + " 0\n#endif\n";
    }
    t += "#ifndef BIAS\n#define BIAS 0\n#endif\n#ifndef MEM_VALUE\n#define MEM_VALUE 0\n#endif\n";
    if (s.file_macro) t += "__device__ const char where[] = __FILE__;\n";
    t += "extern \"C\" __global__ void k(int* p) {\n";
    for (int i = 0; i <= kTmpQ; ++i) {
      t += "  p[" + std::to_string(i) + "] = M" + std::to_string(i) + ";\n";
    }
    t += "  p[40] = BIAS; p[41] = MEM_VALUE;\n";
    if (s.file_macro) t += "  p[42] = where[1];\n";
    t += "}\n";
    return t;
  }

  void random_program(State& s, std::mt19937& rng) {
    auto pick = [&](int n) { return static_cast<int>(rng() % n); };
    s.parts.clear();
    for (int part = 0; part <= 17; ++part) {
      int odds = part == 1 || part == 15 || part == 16 ? 8 : part == 14 || part == 5 ? 20 : 3;
      if (pick(odds) == 0) s.parts.push_back(part);
    }
    std::shuffle(s.parts.begin(), s.parts.end(), rng);
  }

  std::string random_tmp(std::mt19937& rng) {
    std::string t = "tmp";
    for (int i = 0; i < 4; ++i) t += static_cast<char>('a' + rng() % 3);
    return t;
  }

  void mutate_disk(std::mt19937& rng, std::string& did) {
    auto pick = [&](int n) { return static_cast<int>(rng() % n); };
    int what = pick(10);
    int i = pick(kHeaderCount);
    std::string path = dir_ / kHeaders[i];
    struct stat st;
    bool there = ::lstat(path.c_str(), &st) == 0;
    if (what <= 3 || (!there && what <= 6)) {
      write(kHeaders[i], header_text(i, rng));
      did += " write " + std::string(kHeaders[i]) + ";";
    } else if (what <= 5) {
      ::unlink(path.c_str());
      did += " unlink " + std::string(kHeaders[i]) + ";";
    } else if (what == 6) {
      // Same size, other bytes, mtime (and atime) set back.
      std::ifstream in(path, std::ios::binary);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      size_t at = text.rfind(' ');
      if (at != std::string::npos && at + 1 < text.size() && std::isdigit(text[at + 1])) {
        text[at + 1] = static_cast<char>('1' + (text[at + 1] - '1' + 1 + pick(8)) % 9);
        std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
        struct timespec times[2] = {st.st_atim, st.st_mtim};
        ::utimensat(AT_FDCWD, path.c_str(), times, 0);
        did += " same-size edit " + std::string(kHeaders[i]) + ";";
      }
    } else if (what == 7) {
      std::string link = dir_ / "ainc1/l.h";
      ::unlink(link.c_str());
      const char* targets[] = {"../targets/t1.h", "../targets/t2.h", "", "../targets/none.h"};
      std::string target = targets[pick(4)];
      if (target.empty()) target = root() + "/targets/t2.h";
      EXPECT_EQ(::symlink(target.c_str(), link.c_str()), 0);
      did += " l.h -> " + target + ";";
    } else if (what == 8) {
      // A CuPy-style folder appears (with or without its own q.h), or goes.
      std::string tmp = random_tmp(rng);
      if (pick(3)) {
        write(tmp + "/kern.cu", "// CuPy writes the source here\n");
        if (pick(2)) {
          write(tmp + "/q.h", "#define M" + std::to_string(kTmpQ) + " " +
                                  std::to_string(1 + pick(9)) + "\n");
        }
        did += " mkdir " + tmp + ";";
      } else {
        std::error_code ec;
        fs::remove_all(dir_ / tmp, ec);
        did += " rm -r " + tmp + ";";
      }
    } else {
      // A header moved between two folders of the same name.
      int j = pick(kHeaderCount);
      if (base_of(kHeaders[i]) == base_of(kHeaders[j]) && i != j && there) {
        std::string to = dir_ / kHeaders[j];
        ::rename(path.c_str(), to.c_str());
        did += " mv " + std::string(kHeaders[i]) + " " + kHeaders[j] + ";";
      } else {
        write(kHeaders[i], header_text(i, rng));
        did += " write " + std::string(kHeaders[i]) + ";";
      }
    }
  }

  std::string disk() const {
    std::ostringstream o;
    std::vector<std::string> lines;
    for (auto it = fs::recursive_directory_iterator(root()); it != fs::recursive_directory_iterator();
         ++it) {
      std::string rel = it->path().string().substr(root().size() + 1);
      if (rel == "store" || rel.rfind("store/", 0) == 0) {
        if (rel == "store") it.disable_recursion_pending();
        continue;
      }
      std::error_code ec;
      if (it->is_symlink(ec)) {
        lines.push_back(rel + " -> " + fs::read_symlink(it->path(), ec).string());
      } else if (it->is_regular_file(ec)) {
        std::ifstream in(it->path(), std::ios::binary);
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        struct stat st;
        ::stat(it->path().c_str(), &st);
        lines.push_back(rel + " (mtime " + std::to_string(st.st_mtim.tv_sec) + "." +
                        std::to_string(st.st_mtim.tv_nsec) + "):\n" + text);
      } else if (it->is_directory(ec)) {
        lines.push_back(rel + "/");
      }
    }
    std::sort(lines.begin(), lines.end());
    for (const std::string& l : lines) o << "  " << l << "\n";
    return o.str();
  }

  Toolkit toolkit_;
  std::unique_ptr<RealNvrtc> real_;
  kcache::testing::TempDir dir_;
};

std::string show(const cache::ProgramRecord& r) {
  const auto& ptx = r.output(cache::ProgramOutput::ptx);
  return "result " + std::to_string(r.compile_result) + "\nlog:\n" + r.log + "\nptx (size result " +
         std::to_string(ptx.size_result) + ", " + std::to_string(ptx.bytes.size()) +
         " bytes):\n" + ptx.bytes + "\n";
}

bool same(const cache::ProgramRecord& a, const cache::ProgramRecord& b) {
  return a.compile_result == b.compile_result && a.log == b.log &&
         a.output(cache::ProgramOutput::ptx) == b.output(cache::ProgramOutput::ptx);
}

TEST_F(ProgramDifferentialTest, EveryAnswerIsTheRealNvrtcsOnTheDiskAsItIs) {
  const long seed = env_or("KCACHE_DIFF_SEED", 1);
  const long steps = env_or("KCACHE_DIFF_STEPS", 250);
  const bool keep_going = env_or("KCACHE_DIFF_KEEP_GOING", 0) != 0;
  set_snapshot_settle_margin_for_testing(env_or("KCACHE_DIFF_SETTLE_MS", 0) * 1000000);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };

  for (const char* d : {"ainc1", "ainc2", "work/rinc", "work/sub", "p1", "p2", "targets"}) {
    FileSystem::real().create_directories(dir_ / d, 0755);
  }
  for (int i = 0; i < kHeaderCount; ++i) {
    if (pick(3)) write(kHeaders[i], header_text(i, rng));
  }
  EXPECT_EQ(::symlink("../targets/t1.h", (dir_ / "ainc1/l.h").c_str()), 0);
  cache::Storage& storage = store_in(root());
  InFolder in(dir_ / "work");

  State s;
  random_program(s, rng);
  s.tmp = random_tmp(rng);
  std::unique_ptr<Compiler> compiler;
  long lookups = 0, hits = 0, fallbacks = 0, mismatches = 0, failed_compiles = 0;
  std::string fallback_reasons;
  for (long step = 0; step < steps && (keep_going || mismatches == 0); ++step) {
    if (!compiler || pick(25) == 0) {
      compiler = std::make_unique<Compiler>(toolkit_, &storage);  // a new process
    }
    std::string did;
    if (step > 0) {
      if (pick(3) == 0) {
        for (int n = 1 + pick(3); n > 0; --n) mutate_disk(rng, did);
      }
      if (pick(5) == 0) {
        random_program(s, rng);
        did += " new program;";
      }
      if (pick(6) == 0) {
        s.inc_order = pick(6);
        did += " -I order " + std::to_string(s.inc_order) + ";";
      }
      if (pick(6) == 0) {
        s.name_kind = pick(7);
        if (s.name_kind == 4) s.tmp = random_tmp(rng);
        did += " name " + std::to_string(s.name_kind) + ";";
      }
      if (pick(8) == 0) {
        s.sel = pick(2);
        s.bias = pick(3) ? -1 : pick(5);
        s.boom = pick(15) == 0;
        did += " -D;";
      }
      if (pick(8) == 0) {
        s.mem = pick(3);
        s.mem_value = pick(9);
        did += " memory headers " + std::to_string(s.mem) + ";";
      }
      if (s.boom && pick(3) == 0) {
        s.boom = false;
        did += " no -DBOOM;";
      }
      if (pick(10) == 0) {
        s.file_macro = !s.file_macro;
        did += " __FILE__;";
      }
    }
    if (pick(2)) kcache::compiler::testing::age();  // past the too-new margin: records
    const std::string src = source(s), name = program_name(s);
    const std::vector<std::string> opts = options(s);
    const std::vector<cache::Header> mem = memory_headers(s);
    const cache::ProgramRecord want = real_->answer(src, name, opts, mem);
    if (want.compile_result != 0) {
      ++failed_compiles;
      if (env_or("KCACHE_DIFF_VERBOSE", 0)) std::printf("step %ld fails:\n%s\n", step, want.log.c_str());
    }
    for (int round = 0; round < 2; ++round) {
      if (round == 1 && pick(2)) kcache::compiler::testing::age();
      ProgramSource p;
      p.source = src;
      p.name = name;
      p.headers = mem;
      ProgramOptions mapped = program_options(p, opts);
      ASSERT_EQ(mapped.unsupported, "");
      ProgramResult got;
      ++lookups;
      try {
        got = compile_program(*compiler, mapped.options);
      } catch (const std::exception& e) {
        ++fallbacks;  // the drop-in compiles with the real NVRTC instead
        if (fallback_reasons.size() < 2000) {
          fallback_reasons += "  step " + std::to_string(step) + ": " + e.what() + "\n";
        }
        continue;
      }
      if (got.hit) ++hits;
      if (!same(got.record, want)) {
        ++mismatches;
        ADD_FAILURE() << "MISMATCH seed " << seed << " step " << step << " round " << round
                      << (got.hit ? " (a hit)" : " (a miss)") << "\nthis step:" << did
                      << "\nname: " << name << "\noptions:"
                      << [&] {
                           std::string o;
                           for (const auto& x : opts) o += " " + x;
                           return o;
                         }()
                      << "\nmemory headers: " << s.mem << " (" << s.mem_value << ")\nsource:\n"
                      << src << "\ndisk (root " << root() << "):\n"
                      << disk() << "\nreal NVRTC:\n"
                      << show(want) << "\nkcache:\n"
                      << show(got.record);
      }
    }
  }
  std::printf(
      "seed %ld steps %ld: %ld lookups, %ld hits (%ld record hits), %ld fallbacks, %ld failed "
      "compiles (steps), %ld mismatches\n",
      seed, steps, lookups, hits, static_cast<long>(kcache::compiler::testing::record_hits(storage)),
      fallbacks, failed_compiles, mismatches);
  if (!fallback_reasons.empty()) std::printf("fallbacks:\n%s", fallback_reasons.c_str());
  EXPECT_EQ(mismatches, 0);
  EXPECT_GE(hits * 5, lookups) << "fewer than 20% of lookups hit: the cache is not exercised";
}

}  // namespace
}  // namespace kcache::compiler
