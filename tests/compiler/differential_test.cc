// A differential test that cannot be tuned to: a small include tree with
// macros, conditional, computed and __has_include includes, absolute and `..`
// names, a header in the toolkit's include folder, CR LF files, line splices
// and #include_next, same-named headers in two folders included relatively
// ("cfg.cuh" next to each includer, probed by a computed relative
// __has_include too; a user "mma.h" beside the toolkit's <mma.h>), is edited
// at random (header contents, -D values, files appearing and disappearing,
// HOME and CUDA_CACHE_PATH between steps, the -I folders respelt: absolute,
// relative, with "./" or a trailing "/"; every header keeps its __FILE__ in a
// device variable, so the names NVRTC gives files are in every answer), and
// after every edit a compile through the
// store must give exactly what a compile without a store (--no-store) gives
// of the files as they are (or fail the same way). The same seed gives the
// same trees, edits and options. A third run (`seams`) adds what slips
// between a stat and the bytes: headers rewritten through a shared mapping
// whose page stays dirty (no stamp moves), steps in a checkout reached
// through a link with $PWD spelling the link (or the working folder with
// "//", "/./" or a trailing "/"), -lineinfo compiles, and folders renamed
// out of and back into place, and files removed, while NVRTC compiles
// (DuringCompile).
//
// KCACHE_DIFF_STEPS (default 200) and KCACHE_DIFF_SEED (default 1) choose the
// run (KCACHE_DIFF_KEEP_GOING=1 counts every differing step); docs/TESTING.md says how to run it
// longer. Results that needed computed includes are found through manifests (cache/format/manifest.h), so
// the test also asserts that some hits came that way.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <map>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bundle/bundle.h"
#include "cache/storage.h"
#include "common/error.h"
#include "compiler/compiler.h"
#include "compiler/lookup_record.h"
#include "compiler/toolkit.h"
#include "runtime/jit/jit.h"
#include "tests/compiler/test_files.h"
#include "tests/compiler/toolkit_copy.h"

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
// <angled>; e lives in the include folder of the toolkit the compiles use, a
// copy of the real one made of symlinks (toolkit_copy.h), as a site install
// puts a header there, and is included <angled>. Any of them may also be
// spelled by its absolute name or by a `..` name, literally or through a
// macro. (One spelling meaning two files in one compile is refused by
// kcache; these spellings keep most states compilable.)
const char* const kNames[] = {"a", "b", "c", "d", "e"};
constexpr int kNameCount = 5;
std::string dir_of(int name, int pick2) {
  return name < 2 ? "src" : name < 4 ? (pick2 ? "inc1" : "inc2") : "cuda/include";
}

std::string file_of(int name) { return std::string(kNames[name]) + ".cuh"; }

// Same-named headers in two folders, each included relatively by its own
// neighbour: p/x.cuh and q/y.cuh (reached <angled> through -I inc1 and -I
// inc2) each include "cfg.cuh" meaning the cfg.cuh next to them (which comes
// and goes: a computed relative __has_include probes it); inc1/q/cfg.cuh
// takes the spelling <q/cfg.cuh> (the source includes it sometimes), which
// inc2/q/cfg.cuh is also reached by; and p/mma.h is a
// user header named like the toolkit's WMMA header, included "quoted" by its
// neighbour x.cuh while <mma.h> (the toolkit's) is included elsewhere.
const char* const kRelPaths[] = {"inc1/p/x.cuh",   "inc2/q/y.cuh",   "inc1/p/cfg.cuh",
                                 "inc2/q/cfg.cuh", "inc1/q/cfg.cuh", "inc1/p/mma.h"};
constexpr int kRelCount = 6;
// The macro each cfg.cuh defines (its own, mostly).
const char* const kCfgMacros[] = {"CFG_P", "CFG_Q", "CFG_I"};

// The variables that once decided what was NVRTC's own (issue 27: HOME,
// CUDA_CACHE_PATH, LD_LIBRARY_PATH, PWD), as they were before the test, put
// back after it.
class SavedEnv {
 public:
  SavedEnv() {
    for (int i = 0; i < kCount; ++i) {
      const char* v = std::getenv(kVars[i]);
      had_[i] = v != nullptr;
      if (v) value_[i] = v;
    }
  }
  ~SavedEnv() {
    for (int i = 0; i < kCount; ++i) {
      if (had_[i]) {
        setenv(kVars[i], value_[i].c_str(), 1);
      } else {
        unsetenv(kVars[i]);
      }
    }
  }
  static constexpr int kCount = 4;
  static constexpr const char* kVars[kCount] = {"HOME", "CUDA_CACHE_PATH", "LD_LIBRARY_PATH",
                                                 "PWD"};

 private:
  bool had_[kCount] = {};
  std::string value_[kCount];
};

std::string spelled(int name) {
  return name < 2 ? "\"" + file_of(name) + "\"" : "<" + file_of(name) + ">";
}

// LF to CR LF, a `\` + LF line splice becoming a `\` + CR LF one.
std::string crlf(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') out += '\r';
    out += c;
  }
  return out;
}

// Files kept mapped shared and writable across steps: a write through one
// to a page already dirty moves no stamp (common/stamp_trust.h), which is
// what the mapped edits below exercise.
class Mappings {
 public:
  ~Mappings() {
    for (auto& [path, m] : maps_) unmap(m);
  }
  // Replaces the digits after `marker` in `path` by as many random ones,
  // through the file's mapping (made again where the file is another one or
  // another size). False where the file or the marker is not there.
  template <typename Pick>
  bool rewrite_digits(const std::string& path, const std::string& marker, Pick pick) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || st.st_size == 0) return false;
    Map& m = maps_[path];
    struct stat mapped;
    if (m.bytes && (::fstat(m.fd, &mapped) != 0 || mapped.st_ino != st.st_ino ||
                    mapped.st_dev != st.st_dev || static_cast<size_t>(mapped.st_size) != m.size)) {
      unmap(m);
    }
    if (!m.bytes && !map(path, static_cast<size_t>(st.st_size), m)) return false;
    char* at = static_cast<char*>(::memmem(m.bytes, m.size, marker.data(), marker.size()));
    if (!at) return false;
    for (char* d = at + marker.size(); d < m.bytes + m.size && *d >= '0' && *d <= '9'; ++d) {
      *d = static_cast<char>('0' + pick(10));
    }
    return true;
  }

 private:
  struct Map {
    int fd = -1;
    char* bytes = nullptr;
    size_t size = 0;
  };
  static bool map(const std::string& path, size_t size, Map& m) {
    m.fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (m.fd < 0) return false;
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
    if (p == MAP_FAILED) {
      ::close(m.fd);
      m.fd = -1;
      return false;
    }
    m.bytes = static_cast<char*>(p);
    m.size = size;
    return true;
  }
  static void unmap(Map& m) {
    if (m.bytes) ::munmap(m.bytes, m.size);
    if (m.fd >= 0) ::close(m.fd);
    m = Map{};
  }
  std::map<std::string, Map> maps_;
};

class Tree {
 public:
  Tree(std::string root, uint32_t seed) : root_(std::move(root)), rng_(seed) {}

  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  // How a header names `name`: as usual, by its absolute path, or by a name
  // that climbs out of the includer's folder with `..` (the folders are all
  // one level under the root, so "../inc1/c.cuh" means the same file from
  // each of them, or is found through the -I folders from cuda/include).
  std::string spell(int name) { return pick(5) < 2 ? spell_away(name) : spelled(name); }

  // An absolute or a `..` name only (for APICK, a -D the scanner cannot read).
  std::string spell_away(int name) {
    return pick(2) ? "\"" + root_ + "/" + dir_of(name, pick(2)) + "/" + file_of(name) + "\""
                   : "\"../" + dir_of(name, pick(2)) + "/" + file_of(name) + "\"";
  }

  // A device variable holding the header's __FILE__ (in the PTX), so the name
  // NVRTC gives each file is part of every answer.
  std::string file_name_variable() {
    return "__device__ const char* file_" + std::to_string(pick(1000000)) + " = __FILE__;\n";
  }

  // A file's text as written: LF, or (one time in four) CR LF throughout.
  std::string line_ends(const std::string& text) { return pick(4) ? text : crlf(text); }

  // One header's text: a guard, a value, maybe another header (literal,
  // computed, probed, behind a line splice, or the next one of its name).
  std::string header(const std::string& name, const std::string& folder) {
    std::string guard = "H_" + name + "_" + std::to_string(pick(1000));
    std::string t = pick(2) ? "#pragma once\n" : "#ifndef " + guard + "\n#define " + guard + "\n";
    t +=
        "#ifndef V_" + name + "\n#define V_" + name + " " + std::to_string(pick(50)) + "\n#endif\n";
    t += file_name_variable();
    int other = pick(kNameCount);
    std::string s = spell(other);
    switch (pick(9)) {
      case 0:
        t += "#include " + s + "\n";
        break;
      case 1:
        t += "#include STR(" + std::string(kNames[pick(2)]) + ".cuh)\n";
        break;
      case 2:
        t += "#if __has_include(" + s + ")\n#include " + s + "\n#endif\n";
        break;
      case 3:
        t += "#if 0\n#include " + s + "\n#endif\n";
        break;
      case 4:  // a computed probe: the scanner cannot read the name
        t += "#undef PROBED\n#define PROBED " + s +
             "\n#if __has_include(PROBED)\n#include PROBED\n#endif\n";
        break;
      case 5:  // the splice comments out `#if 0`: the include is live
        t += "#if 1 // spliced \\\n#if 0\n#include " + s + "\n#endif\n";
        break;
      case 6:  // the same name in the next -I folder (or nowhere)
        if (folder == "inc1" && (name == "c" || name == "d")) {
          t += "#include_next <" + name + ".cuh>\n";
        }
        break;
      case 7:  // an absolute or `..` name given by -D, probed
        t += "#ifdef APICK\n#if __has_include(APICK)\n#include APICK\n#endif\n#endif\n";
        break;
      default:
        break;
    }
    if (t.compare(0, 7, "#pragma") != 0) t += "#endif\n";
    return line_ends(t);
  }

  // One of the relatively included files (kRelPaths[r]).
  std::string rel_header(int r) {
    std::string guard = "R_" + std::to_string(r) + "_" + std::to_string(pick(1000));
    // Sometimes one guard shared by all the cfg.cuh: the second one is then empty.
    if (r >= 2 && r <= 4 && pick(5) == 0) guard = "CFG_GUARD";
    std::string t = pick(2) ? "#pragma once\n" : "#ifndef " + guard + "\n#define " + guard + "\n";
    if (r < 2) {  // x.cuh or y.cuh: its neighbour cfg.cuh, maybe mma.h
      const std::string v = r == 0 ? "V_x" : "V_y";
      t += "#ifndef " + v + "\n#define " + v + " " + std::to_string(pick(50)) + "\n#endif\n";
      t += file_name_variable();
      switch (pick(6)) {
        case 0:
          t += "#include \"cfg.cuh\"\n";
          break;
        case 1:  // a computed relative probe
        case 2:
          t += "#undef REL\n#define REL \"cfg.cuh\"\n#if __has_include(REL)\n#include REL\n#endif\n";
          break;
        case 3:
          t += "#if __has_include(\"cfg.cuh\")\n#include \"cfg.cuh\"\n#endif\n";
          break;
        case 4:
          t += "#undef REL\n#define REL \"cfg.cuh\"\n#include REL\n";
          break;
        default:
          break;
      }
      switch (pick(5)) {
        case 0:  // the neighbour p/mma.h if x.cuh's, else the toolkit's
          t += "#include \"mma.h\"\n";
          break;
        case 1:  // the toolkit's
          t += "#include <mma.h>\n";
          break;
        case 2:
          t += "#if __has_include(\"mma.h\")\n#include \"mma.h\"\n#endif\n";
          break;
        default:
          break;
      }
    } else if (r <= 4) {  // a cfg.cuh: its own macro, or (one time in four) another's
      const char* macro = kCfgMacros[pick(4) ? r - 2 : pick(3)];
      t += "#ifndef " + std::string(macro) + "\n#define " + macro + " " +
           std::to_string(100 + pick(50)) + "\n#endif\n";
    } else {  // the user's mma.h
      t += "#ifndef USER_MMA\n#define USER_MMA " + std::to_string(200 + pick(50)) + "\n#endif\n";
    }
    if (t.compare(0, 7, "#pragma") != 0) t += "#endif\n";
    return line_ends(t);
  }

  // HOME, CUDA_CACHE_PATH, LD_LIBRARY_PATH and PWD set, changed or unset in
  // the test process; some name a folder whose headers the kernels include.
  void change_env() {
    static const char* const kHeaderFolders[] = {"src", "inc1", "inc2", "inc1/p", "inc2/q"};
    for (const char* var : SavedEnv::kVars) {
      switch (pick(6)) {
        case 5:
          setenv(var, (root_ + "/" + kHeaderFolders[pick(5)]).c_str(), 1);
          break;
        case 0:
          unsetenv(var);
          break;
        case 1:
          setenv(var, "", 1);
          break;
        case 2:
          setenv(var, (root_ + "/env1").c_str(), 1);
          break;
        case 3:
          setenv(var, (root_ + "/env2").c_str(), 1);
          break;
        default:
          setenv(var, "/nonexistent/kcache-env", 1);
          break;
      }
    }
  }

  std::string source() {
    std::string t = "#define STR2(x) #x\n#define STR(x) STR2(x)\n";
    for (int i = 0; i < 3; ++i) {
      int n = pick(kNameCount);
      std::string s = spell(n);
      std::string macro = "NAME_" + std::to_string(i);
      switch (pick(7)) {
        case 0:
          t += "#include " + s + "\n";
          break;
        case 1:
          t += "#define " + macro + " " + s + "\n#include " + macro + "\n";
          break;
        case 2:
          t += "#ifdef PICK\n#include STR(PICK.cuh)\n#endif\n";
          break;
        case 3:
          t += "#if __has_include(" + s + ")\n#include " + s + "\n#endif\n";
          break;
        case 4:
          t += "#define " + macro + " " + s + "\n#if __has_include(" + macro + ")\n#include " +
               macro + "\n#endif\n";
          break;
        case 5:  // an absolute or `..` name given by -D, probed
          t += "#ifdef APICK\n#if __has_include(APICK)\n#include APICK\n#endif\n#endif\n";
          break;
        default:
          t += "#if SEL == " + std::to_string(pick(2)) + "\n#include " + s + "\n#endif\n";
          break;
      }
    }
    // The relatively included headers, in a random order.
    // (Literally or probed: these come and go.)
    std::vector<std::string> rel;
    auto include = [&](const std::string& name) {
      rel.push_back(pick(2) ? "#include " + name + "\n"
                            : "#if __has_include(" + name + ")\n#include " + name + "\n#endif\n");
    };
    if (pick(4)) include("<p/x.cuh>");
    if (pick(4)) include("<q/y.cuh>");
    if (pick(4) == 0) include("<q/cfg.cuh>");
    if (pick(4) == 0) rel.push_back("#include <mma.h>\n");
    if (pick(6) == 0) include("<p/mma.h>");
    if (pick(3) == 0) {  // inc1/plain: no header's name
      rel.push_back("#if __has_include(<plain>)\n#include <plain>\n#endif\n");
    }
    std::shuffle(rel.begin(), rel.end(), rng_);
    for (const std::string& line : rel) t += line;
    for (const char* n : kNames) {
      t += "#ifndef V_" + std::string(n) + "\n#define V_" + n + " 0\n#endif\n";
    }
    for (const char* n : {"V_x", "V_y", "CFG_P", "CFG_Q", "CFG_I", "USER_MMA", "PLAIN_V"}) {
      t += "#ifndef " + std::string(n) + "\n#define " + n + " 0\n#endif\n";
    }
    t += "#ifdef __CUDA_MMA_H__\n#define TK_MMA ((int)sizeof(nvcuda::wmma::fragment<"
         "nvcuda::wmma::accumulator, 16, 16, 16, float>))\n#else\n#define TK_MMA 0\n#endif\n";
    t += "extern \"C\" __global__ void k(int* p) { p[0] = V_a; p[1] = V_b; p[2] = V_c; "
         "p[3] = V_d; p[4] = V_e; p[5] = V_x; p[6] = V_y; p[7] = CFG_P; p[8] = CFG_Q; "
         "p[9] = CFG_I; p[10] = USER_MMA; p[11] = TK_MMA; p[12] = PLAIN_V; }\n";
    return line_ends(t);
  }

  // One random edit of the tree or the options.
  void edit(CompileOptions& o) {
    int name = pick(kNameCount);
    std::string folder = dir_of(name, pick(2));
    std::string relative = folder + "/" + kNames[name] + ".cuh";
    std::string path = root_ + "/" + relative;
    // Between some steps HOME and CUDA_CACHE_PATH change too.
    if (pick(5) == 0) change_env();
    // inc1/plain, named like no header: where CUDA_CACHE_PATH names inc1, a
    // served compile is answered "no such file" for it (seal.h).
    if (pick(8) == 0) {
      if (pick(3)) {
        write(root_, "inc1/plain", "#define PLAIN_V " + std::to_string(1 + pick(50)) + "\n");
      } else {
        std::remove((root_ + "/inc1/plain").c_str());
      }
      return;
    }
    const int rel = pick(kRelCount);
    // A header's value rewritten through a shared mapping, its stamp kept.
    if (mapped_ && pick(4) == 0 &&
        mappings_.rewrite_digits(path, "#define V_" + std::string(kNames[name]) + " ",
                                 [this](int n) { return pick(n); })) {
      return;
    }
    switch (pick(9)) {
      case 0:
      case 1:
        write(root_, relative, header(kNames[name], folder));
        break;
      case 2:
        std::remove(path.c_str());
        break;
      case 3:
        write(root_, "src/k.cu", source());
        break;
      case 4:  // a relatively included file changes or appears
      case 5:
        write(root_, kRelPaths[rel], rel_header(rel));
        break;
      case 6:  // or disappears (x.cuh and y.cuh less often than the others)
        std::remove((root_ + "/" + kRelPaths[rel < 2 && pick(3) ? 2 + pick(4) : rel]).c_str());
        break;
      default:
        o.defines.clear();
        if (pick(3)) o.defines.push_back(std::string("PICK=") + kNames[pick(kNameCount)]);
        if (pick(2)) o.defines.push_back("SEL=" + std::to_string(pick(2)));
        if (pick(2)) o.defines.push_back("APICK=" + spell_away(pick(kNameCount)));
        // The -I folders spelt another way (relative ones from the root, the
        // working folder): the names NVRTC gives their headers change.
        if (pick(3) == 0) {
          const std::vector<std::vector<std::string>> spellings = {
              {root_ + "/inc1", root_ + "/inc2"}, {"inc1", "inc2"}, {"./inc1", "./inc2/"},
              {"inc1/", "inc2"}};
          o.include_dirs = spellings[pick(4)];
        }
        break;
    }
  }

  // Mapped edits (Mappings) among the others.
  void use_mappings() { mapped_ = true; }

 private:
  std::string root_;
  std::mt19937 rng_;
  bool mapped_ = false;
  Mappings mappings_;
};

// A change made to the tree while NVRTC compiles (the seams run): a folder
// renamed out of place (`mv inc1/q inc1/q.staged`) or back into it (how
// generators publish), a whole -I folder likewise, or a header removed. The
// compile it races may answer for either state; what it stores must answer
// only for the state it read, which the next lookups check.
class DuringCompile {
 public:
  explicit DuringCompile(uint32_t seed) : rng_(seed) {}

  // Whether this step races one (one step in four), and which.
  bool pick_change(const std::string& tree) {
    if (pick(4) != 0) return false;
    static const char* const kFolders[] = {"inc1/q", "inc1/p", "inc2/q", "inc2", "src"};
    static const char* const kFiles[] = {"inc1/c.cuh", "inc2/c.cuh", "inc1/d.cuh", "src/a.cuh",
                                         "src/b.cuh",  "inc1/p/cfg.cuh", "inc2/q/cfg.cuh",
                                         "inc1/q/cfg.cuh", "inc1/p/x.cuh"};
    if (pick(3) == 0) {
      from_ = tree + "/" + kFiles[pick(9)];
      to_.clear();
    } else {
      // Out of place where it is there, else back in (a rename onto a
      // folder written meanwhile fails, and the tree stays as it is).
      const std::string folder = tree + "/" + kFolders[pick(4 + (pick(4) == 0))];
      struct stat st;
      const bool there = ::stat(folder.c_str(), &st) == 0;
      from_ = there ? folder : folder + ".staged";
      to_ = there ? folder + ".staged" : folder;
    }
    delay_ms_ = pick(250);
    return true;
  }

  // Runs the change `delay_ms_` after now, on a thread of its own.
  void start() {
    thread_ = std::thread([this] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
      if (to_.empty()) {
        std::remove(from_.c_str());
      } else {
        (void)::rename(from_.c_str(), to_.c_str());
      }
    });
  }
  void join() { thread_.join(); }

  // $PWD as a shell or a program may spell `where`: as it is, with a
  // trailing "/", or with "//" or "/./" before its last part.
  std::string pwd_spelling(const std::string& where) {
    const size_t slash = where.rfind('/');
    switch (pick(6)) {
      case 0:
        return where + "/";
      case 1:
        return where.substr(0, slash) + "//" + where.substr(slash + 1);
      case 2:
        return where.substr(0, slash) + "/./" + where.substr(slash + 1);
      default:
        return where;
    }
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::mt19937 rng_;
  std::string from_, to_;
  int delay_ms_ = 0;
  std::thread thread_;
};

// The compiles of the current step (outcome), for a differing step's report.
std::string& step_log() {
  static std::string log;
  return log;
}

// Where `got` and `want` first differ, with some bytes of each around it.
std::string first_difference(const std::string& got, const std::string& want) {
  size_t at = 0;
  while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
  const size_t from = at < 80 ? 0 : at - 80;
  return "first difference at byte " + std::to_string(at) + "\n  got:  " +
         got.substr(from, 200) + "\n  want: " + want.substr(from, 200);
}

// What a compile gives: the bundle without its store keys, or the error's
// message. A key is where the answer is stored, and one answer may be
// stored under two (an entry another checkout stored answers this one: keys
// relative to the working folder); with `storage`, each key must hold exactly
// the image the bundle has.
std::string outcome(Compiler& c, const CompileOptions& o, int* hits = nullptr,
                    cache::Storage* storage = nullptr) {
  try {
    CompileResult r = c.compile(o);
    if (hits) *hits += r.hits();
    bundle::Bundle b = bundle::parse(r.bundle);
    for (size_t i = 0; i < b.images.size(); ++i) {
      bundle::Image& image = b.images[i];
      if (storage && r.targets[i].not_stored.empty()) {
        std::optional<cache::Entry> e = storage->get(r.targets[i].key);
        EXPECT_TRUE(e && e->payload() == image.data) << "no entry under the key " << image.key;
      }
      // What each compile of the step did, printed where the step differs.
      step_log() += std::string(r.targets[i].hit ? "  hit " : "  miss ") +
                    r.targets[i].key.hex() + " found by " +
                    std::to_string(static_cast<int>(r.targets[i].found_by)) + ", not stored: " +
                    r.targets[i].not_stored + "\n";
      if (std::getenv("KCACHE_DIFF_VERBOSE") && !r.targets[i].not_stored.empty()) {
        std::printf("not stored: %s\n", r.targets[i].not_stored.c_str());
      }
      image.key = "";
    }
    return bundle::serialize(b);
  } catch (const CompileError& e) {
    return std::string("error: ") + e.what() + "\n" + e.log();
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
}

// The runtime JIT's answer for `o` (its Source made from `o`, as a program
// would write it): its image, or the error's message.
std::string jit_outcome(runtime::jit::Jit& jit, const CompileOptions& o, int* hits) {
  runtime::jit::Source s;
  s.path = o.source_path;
  s.name = o.source_name;
  s.include_dirs = o.include_dirs;
  s.defines = o.defines;
  s.std = o.std;
  s.nvrtc_options = o.nvrtc_options;
  s.name_expressions = o.name_expressions;
  try {
    runtime::jit::Compiled c = jit.compile(s);
    *hits += c.hit ? 1 : 0;
    return "image:\n" + std::string(c.entry.payload());
  } catch (const CompileError& e) {
    return std::string("error: ") + e.what() + "\n" + e.log();
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
}

// A fresh compile's answer as jit_outcome gives it: NVRTC run on what the JIT
// gives it (its -I taken from this process's folder, jit.h), in this folder
// (where "src/k.cu" puts the JIT's NVRTC), given as the JIT gives it.
std::string fresh_image(Compiler& fresh, CompileOptions o) {
  const std::string here = std::filesystem::current_path().string();
  for (std::string& d : o.include_dirs) {
    if (d.front() != '/') d = here + "/" + d;
  }
  o.working_folder = here;
  try {
    CompileResult r = fresh.compile(o);
    return "image:\n" + std::string(r.targets.front().entry->payload());
  } catch (const CompileError& e) {
    return std::string("error: ") + e.what() + "\n" + e.log();
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
}

// The folders a second checkout (dir/B) copies from the first (dir).
const char* const kCheckoutFolders[] = {"src", "inc1", "inc2"};

// Makes dir/B a copy of dir's checkout folders (the toolkit copy is shared);
// one renamed out of place (the seams run) is out of place in B too.
void copy_checkout(const std::string& dir) {
  namespace fs = std::filesystem;
  for (const char* f : kCheckoutFolders) {
    fs::remove_all(dir + "/B/" + f);
    fs::create_directories(dir + "/B");
    if (fs::exists(dir + "/" + f)) {
      fs::copy(dir + "/" + f, dir + "/B/" + f, fs::copy_options::recursive);
    }
  }
}

// Served, as every compile is, with a second checkout: dir/B, a copy of the first taken from time to time, where some
// steps compile (the source and -I folders relative), so an entry one
// checkout stored is looked up from the other (keys relative to the working
// folder), while each checkout's files may differ.
// `seams`: some edits write a header through a shared mapping
// whose page is dirty already (no stamp moves: the measured writeback window
// is used, not a short one), some steps run in the second checkout reached
// through a link with $PWD spelling the link, and some compile with
// -lineinfo (NVRTC writes $PWD's spelling into the line table); $PWD is
// sometimes spelt with "//", "/./" or a trailing "/", and some steps race a
// folder renamed or a file removed (DuringCompile; its own random numbers, so
// the tree's edits and options are those of the run without it).
// `jit` (no seams): the cached compile is the runtime JIT's
// (runtime/jit/jit.h), in its own store, from either checkout.
void run_differential(long default_steps, bool seams = false, bool jit = false) {
  const long steps = env_or("KCACHE_DIFF_STEPS", default_steps);
  // Seed 6 for the seams: seed 1's first steps are mostly one broken tree,
  // and 6's 120 steps met three stale hits through mapped writes before the
  // stamp rule (docs/TESTING.md).
  const auto seed = static_cast<uint32_t>(env_or("KCACHE_DIFF_SEED", seams || jit ? 6 : 1));
  std::string dir = test_dir();
  cache::StorageOptions so;
  so.local_dir = dir + "/store";
  cache::Storage storage(so);
  // The compiles use a copy of the toolkit (--cuda-path), in whose include
  // folder e.cuh comes and goes.
  testing::make_toolkit_copy(find_toolkit("").root, dir + "/cuda");
  Toolkit toolkit = find_toolkit(dir + "/cuda");
  Compiler cached(toolkit, &storage), fresh(toolkit, nullptr);
  std::unique_ptr<runtime::jit::Jit> jitted;
  if (jit) {
    runtime::jit::Options jo;
    jo.cuda_path = dir + "/cuda";
    jo.arch = "compute_80";
    jo.storage = cache::StorageOptions();
    jo.storage->local_dir = dir + "/jit-store";
    jitted = std::make_unique<runtime::jit::Jit>(jo);
  }
  cache::Storage& counted = jit ? jitted->storage() : storage;

  Tree tree(dir, seed);
  if (seams) tree.use_mappings();
  for (int n = 0; n < kNameCount; ++n) {
    for (int d = 0; d < 2; ++d) {
      write(dir, dir_of(n, d) + "/" + kNames[n] + ".cuh", tree.header(kNames[n], dir_of(n, d)));
    }
  }
  for (int r = 0; r < kRelCount; ++r) write(dir, kRelPaths[r], tree.rel_header(r));
  write(dir, "src/k.cu", tree.source());
  copy_checkout(dir);
  if (seams) {
    ASSERT_EQ(::symlink((dir + "/B").c_str(), (dir + "/LB").c_str()), 0);
  }
  // The test changes HOME and CUDA_CACHE_PATH between steps; this puts them back.
  SavedEnv saved_env;
  CompileOptions o;
  o.source_path = dir + "/src/k.cu";
  o.source_name = "src/k.cu";
  o.ptx_arch = "compute_80";
  o.include_dirs = {dir + "/inc1", dir + "/inc2"};
  std::mt19937 checkouts(seed);
  DuringCompile during(seed + 1);
  int raced = 0;
  auto pick = [&checkouts](int n) { return std::uniform_int_distribution<int>(0, n - 1)(checkouts); };

  auto start = std::chrono::steady_clock::now();
  // KCACHE_DIFF_KEEP_GOING=1: count every differing step instead of stopping
  // at the first (to see how often, while a fix is under way).
  const bool keep_going = env_or("KCACHE_DIFF_KEEP_GOING", 0) != 0;
  int hits = 0, errors = 0, mismatches = 0, in_b = 0;
  // A lookup record (lookup_record.h) is written only where every stamp is
  // older than this margin; two seconds would leave it unused here. 50 ms is
  // still above the file systems' timestamp granularity (jiffies), and every
  // lookup below starts at least that long after the last edit.
  set_too_new_margin_for_testing(seams ? -1 : int64_t{50} * 1000000);
  for (long step = 0; step < steps; ++step) {
    tree.edit(o);
    std::string where = dir;
    if (pick(4) == 0) copy_checkout(dir);
    if (pick(3) == 0) where = dir + (seams && pick(2) ? "/LB" : "/B");
    if (seams) o.nvrtc_options = pick(3) ? std::vector<std::string>{} : std::vector<std::string>{"-lineinfo"};
    // Relative where the working folder is in play (Tree::edit respells -I).
    o.source_path = pick(3) ? "src/k.cu" : where + "/src/k.cu";
    in_b += where != dir;
    testing::ScopedCwd cwd(where);  // where relative -I spellings (Tree::edit) start
    // As a shell sets it (a link keeps its name), or left as change_env made it.
    if (seams && pick(3)) ::setenv("PWD", during.pwd_spelling(where).c_str(), 1);
    // The checkout's own folder (LB is B through a link).
    const std::string tree = where == dir ? dir : dir + "/B";
    step_log().clear();
    const bool raced_now = seams && during.pick_change(tree);
    if (raced_now) {
      // What the raced compile answers is not compared (it may have read
      // either state); what it stored is, below, from the state it left.
      ++raced;
      during.start();
      outcome(cached, o, nullptr, &storage);
      during.join();
    }
    const auto edited = std::chrono::steady_clock::now();
    std::string want = jit ? fresh_image(fresh, o) : outcome(fresh, o);
    std::this_thread::sleep_until(edited + std::chrono::milliseconds(60));
    auto cached_outcome = [&] {
      return jit ? jit_outcome(*jitted, o, &hits) : outcome(cached, o, &hits, &storage);
    };
    std::string got = cached_outcome();
    // The same state looked up again: now through its lookup record.
    if (got == want) got = cached_outcome();
    errors += want.compare(0, 7, "error: ") == 0;
    if (std::getenv("KCACHE_DIFF_VERBOSE") && want.compare(0, 7, "error: ") == 0) {
      std::printf("step %ld: %s\n", step, want.c_str());
    }
    if (got != want) {
      ++mismatches;
      if (!keep_going) {
        ASSERT_EQ(got, want) << "seed " << seed << ", step " << step << " in " << where;
      }
      const char* pwd = std::getenv("PWD");
      ADD_FAILURE() << "seed " << seed << ", step " << step << " in " << where
                    << ": the cached result differs from a compile without a store (PWD "
                    << (pwd ? pwd : "unset") << ", options " << o.nvrtc_options.size()
                    << ", source " << o.source_path << ", raced " << raced_now << ")\n"
                    << step_log() << first_difference(got, want);
    }
    if ((step + 1) % 250 == 0) {
      std::printf("differential: seed %u, %ld steps so far, %d differ\n", seed, step + 1,
                  mismatches);
      std::fflush(stdout);
    }
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  counted.local()->flush();
  const int64_t manifest_hits = counted.local()->stats().counter("manifest_hits");
  const int64_t record_hits = counted.local()->stats().counter("lookup_record_hits");
  std::printf(
      "differential (%s): seed %u, %ld steps (%d in the second checkout, %d racing a change), "
      "%d differ, %d hits (%lld through manifests, %lld in lookup records), %d compile errors, "
      "%.1f s\n",
      jit ? "runtime JIT" : "served", seed, steps, in_b, raced, mismatches, hits,
      static_cast<long long>(manifest_hits), static_cast<long long>(record_hits), errors, s);
  // Results that needed computed includes are stored and found (direct mode):
  // with this many steps, states repeat, so some hits must come through them.
  if (steps >= 100) {
    EXPECT_GT(manifest_hits, 0) << "no hit through a manifest";
    // With the measured writeback window few files settle within a run.
    if (!seams) {
      EXPECT_GT(record_hits, 0) << "no hit through a lookup record";
    }
  }
}

TEST(DifferentialTest, EveryCachedResultEqualsAFreshCompileOfTheSameFiles) {
  run_differential(200);
}

// Mapped writes, $PWD through a link and respelt, -lineinfo, folders renamed
// and files removed while NVRTC compiles (run_differential's `seams`).
TEST(DifferentialTest, SeamsEveryCachedResultEqualsAFreshCompileOfTheSameFiles) {
  run_differential(120, /*seams=*/true);
}

// The runtime JIT, served, against a fresh compile of the same files, from
// either checkout.
TEST(DifferentialTest, JitEveryCachedResultEqualsAFreshCompileOfTheSameFiles) {
  run_differential(150, /*seams=*/false, /*jit=*/true);
}

}  // namespace
}  // namespace kcache::compiler
