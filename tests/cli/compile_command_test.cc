// `kcache compile` as a user (or a Bazel action) runs it: exit codes, what it
// prints, what it writes. Tried as a new user would: wrong arch, missing
// header, unreadable file, missing output folder.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <iterator>
#include <memory>
#include <set>
#include <nlohmann/json.hpp>

#include "bundle/bundle.h"
#include "cache/local/store.h"
#include "common/file_system.h"
#include "tests/compiler/test_files.h"
#include "tests/testing/http_servers.h"
#include "tests/testing/run_command.h"

namespace kcache::cli {
namespace {

using compiler::testing::test_dir;
using compiler::testing::write;
using kcache::testing::CommandResult;

const std::string kSaxpy = "tests/compiler/kernels/saxpy.cu";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

int lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

class CompileCommandTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test_dir(); }

  CommandResult kcache(std::vector<std::string> args) {
    args.insert(args.begin(), {kcache::testing::kcache_binary(), "--dir", dir_ + "/store"});
    return kcache::testing::run_command(args);
  }

  int64_t counter(const std::string& name) {
    return cache::Store::open(dir_ + "/store")->stats().counter(name);
  }

  std::string dir_;
};

// The rule takes ptx = "none"; the CLI takes the same word.
TEST_F(CompileCommandTest, PtxNoneMeansNoPtxAsInTheRule) {
  std::string out = dir_ + "/saxpy.kcb";
  CommandResult r = kcache({"compile", kSaxpy, "--arch", "sm_80", "--ptx", "none", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string bytes = *read_file(out);
  bundle::Bundle b = bundle::parse(bytes, out);
  ASSERT_EQ(b.images.size(), 1u);
  EXPECT_EQ(b.images[0].arch, "sm_80");
  EXPECT_EQ(b.images[0].kind, bundle::ImageKind::cubin);

  CommandResult nothing = kcache({"compile", kSaxpy, "--ptx", "none", "-o", out});
  EXPECT_EQ(nothing.exit_code, 2);  // usage
  EXPECT_TRUE(contains(nothing.err, "nothing to compile")) << nothing.err;
}

TEST_F(CompileCommandTest, WritesTheBundleQuietlyAndTheSecondRunIsAHit) {
  std::string out = dir_ + "/saxpy.kcb";
  CommandResult first =
      kcache({"compile", kSaxpy, "--arch", "sm_80,sm_90", "--ptx", "compute_90", "-o", out});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, "");
  EXPECT_EQ(first.err, "");
  std::string bytes = *read_file(out);
  bundle::Bundle b = bundle::parse(bytes, out);
  EXPECT_EQ(b.source_name, kSaxpy);
  ASSERT_EQ(b.images.size(), 3u);
  EXPECT_EQ(b.images[2].arch, "compute_90");
  // compute_90's PTX comes from sm_90's compile (compiler_misses.cc).
  EXPECT_EQ(counter("nvrtc_invocations"), 2);

  CommandResult second = kcache({"--format", "json", "compile", kSaxpy, "--arch", "sm_80,sm_90",
                                 "--ptx", "compute_90", "-o", out});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_TRUE(contains(second.out, "\"hits\": 3")) << second.out;
  EXPECT_EQ(counter("nvrtc_invocations"), 2) << "a hit must not invoke NVRTC";
  EXPECT_EQ(*read_file(out), bytes);
}

// __TIME__: compiled each time, never stored, counted and shown by -s (text
// and JSON); --sloppiness time_macros (or KCACHE_SLOPPINESS) caches it.
TEST_F(CompileCommandTest, TimeMacrosAreNotCachedUnlessSloppy) {
  std::string src = write(dir_, "t.cu",
                          "#define STAMP __TIME__\n"
                          "extern \"C\" __global__ void k(int* p) { *p = 1; }\n");
  std::string out = dir_ + "/t.kcb";
  for (int i = 0; i < 2; ++i) {
    CommandResult r = kcache({"--format", "json", "compile", src, "--ptx", "compute_80", "-o", out});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "\"hits\": 0")) << r.out;
  }
  EXPECT_EQ(counter("uncached_time_macros"), 2);
  CommandResult s = kcache({"-s"});
  EXPECT_TRUE(contains(s.out, "Uncached: time macros:     2")) << s.out;
  EXPECT_TRUE(contains(s.out, "Entries:                   0")) << s.out;
  nlohmann::json j = nlohmann::json::parse(kcache({"-s", "--format", "json"}).out);
  EXPECT_EQ(j["counters"]["uncached_time_macros"], 2);

  for (int i = 0; i < 2; ++i) {
    CommandResult r = kcache({"--format", "json", "compile", src, "--ptx", "compute_80", "-o", out,
                              "--sloppiness", "time_macros"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, i == 0 ? "\"hits\": 0" : "\"hits\": 1")) << r.out;
  }
  EXPECT_EQ(counter("uncached_time_macros"), 2);
}

TEST_F(CompileCommandTest, VerboseSaysHitOrMissPerTarget) {
  CommandResult r = kcache({"compile", kSaxpy, "--arch", "sm_80", "-o", dir_ + "/k.kcb", "-v"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "saxpy.cu sm_80 cubin miss ")) << r.out;
  r = kcache({"compile", kSaxpy, "--arch", "sm_80", "-o", dir_ + "/k.kcb", "-v"});
  EXPECT_TRUE(contains(r.out, "saxpy.cu sm_80 cubin hit ")) << r.out;
}

TEST_F(CompileCommandTest, NoLeanIsAnEntryOfItsOwnAndVerboseSaysWhyAnImageIsNvrtcs) {
  std::string out = dir_ + "/k.kcb";
  CommandResult r =
      kcache({"compile", kSaxpy, "--arch", "sm_90", "--nvrtc-opt=-G", "-o", out, "-v"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "NVRTC's image kept: the NVRTC option -G has no nvJitLink")) << r.out;
  r = kcache(
      {"compile", kSaxpy, "--arch", "sm_90", "--nvrtc-opt=-G", "--no-lean", "-o", out, "-v"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "saxpy.cu sm_90 cubin miss ")) << "lean and NVRTC's keyed apart";
  EXPECT_FALSE(contains(r.out, "NVRTC's image kept")) << "--no-lean runs no pass";
  EXPECT_EQ(counter("nvrtc_invocations"), 2);
  r = kcache({"bundle", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "lean: off (NVRTC's bytes)")) << r.out;
  // The first (lean, -G) entry is a hit now; its record says the pass was not applied.
  r = kcache({"compile", kSaxpy, "--arch", "sm_90", "--nvrtc-opt=-G", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = kcache({"bundle", out});
  EXPECT_TRUE(contains(r.out, "lean: not applied (NVRTC's bytes)")) << r.out;
}

// Issue 10: what the lean pass removed survives the store, so a hit reports
// it as the miss did, and `kcache bundle` shows it per image.
TEST_F(CompileCommandTest, AHitReportsWhatTheLeanPassRemovedAsTheMissDid) {
  std::string out = dir_ + "/half.kcb";
  const std::vector<std::string> compile = {"compile", "tests/compiler/kernels/half_cg.cu",
                                            "-I",      "tests/compiler/kernels/include",
                                            "--arch",  "sm_90",
                                            "--ptx",   "none",
                                            "-o",      out};
  auto json_run = [&] {
    std::vector<std::string> args = {"--format", "json"};
    args.insert(args.end(), compile.begin(), compile.end());
    CommandResult r = kcache(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["targets"][0];
  };
  nlohmann::json miss = json_run();
  EXPECT_FALSE(miss["hit"].get<bool>());
  ASSERT_TRUE(miss["lean"].get<bool>()) << miss.dump();
  const int64_t bytes = miss["lean_bytes_removed"].get<int64_t>();
  const int64_t variables = miss["lean_variables_removed"].get<int64_t>();
  EXPECT_GT(bytes, 0);
  EXPECT_GT(variables, 100);

  nlohmann::json hit = json_run();
  EXPECT_TRUE(hit["hit"].get<bool>());
  EXPECT_TRUE(hit["lean"].get<bool>());
  EXPECT_EQ(hit["lean_bytes_removed"].get<int64_t>(), bytes);
  EXPECT_EQ(hit["lean_variables_removed"].get<int64_t>(), variables);
  EXPECT_EQ(counter("nvrtc_invocations"), 1);

  std::vector<std::string> verbose = compile;
  verbose.push_back("-v");
  CommandResult r = kcache(verbose);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "half_cg.cu sm_90 cubin hit ")) << r.out;
  EXPECT_TRUE(contains(r.out, "half_cg.cu sm_90 lean: " + std::to_string(variables) +
                                  " variables, " + std::to_string(bytes) + " bytes removed"))
      << r.out;

  r = kcache({"--format", "json", "bundle", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json image = nlohmann::json::parse(r.out)["images"][0];
  EXPECT_EQ(image["lean"]["state"], "lean");
  EXPECT_EQ(image["lean"]["bytes_removed"].get<int64_t>(), bytes);
  EXPECT_EQ(image["lean"]["variables_removed"].get<int64_t>(), variables);
  r = kcache({"bundle", out});
  EXPECT_TRUE(contains(r.out, " variables")) << r.out;
  EXPECT_TRUE(contains(r.out, "lean: -")) << r.out;
}

// Issue 28's fault matrix, end to end: kernels compiled into a store, then its
// index lost or damaged each way. The next compiles are hits with the same
// bytes and no NVRTC run, one stderr line says the index was rebuilt (none
// with KCACHE_QUIET=1), and verify, -c and -C succeed. Prints the matrix
// docs/TESTING.md holds.
TEST_F(CompileCommandTest, ALostOrDamagedIndexCostsNoCompileAndNoWrongByte) {
  const std::string pristine = dir_ + "/pristine";
  std::vector<std::vector<std::string>> compiles;
  compiles.push_back({"compile", kSaxpy, "--arch", "sm_80,sm_90", "--ptx", "compute_90"});
  for (int k = 0; k < 5; ++k) {
    std::string src = write(dir_, "k" + std::to_string(k) + ".cu",
                            "extern \"C\" __global__ void k" + std::to_string(k) +
                                "(float* x) { x[threadIdx.x] *= " + std::to_string(k + 2) + "; }\n");
    compiles.push_back({"compile", src, "--arch", "sm_80", "--ptx", "none"});
  }
  // Runs every compile with -v; adds stderr to `err` and the targets that
  // needed NVRTC ("miss") to `misses`.
  auto run_all = [&](const std::string& store, const std::string& out_dir,
                     const std::map<std::string, std::string>& env, std::string* err,
                     int* misses) {
    ::mkdir(out_dir.c_str(), 0700);
    for (size_t i = 0; i < compiles.size(); ++i) {
      std::vector<std::string> args = {kcache::testing::kcache_binary(), "--dir", store};
      args.insert(args.end(), compiles[i].begin(), compiles[i].end());
      args.insert(args.end(), {"-o", out_dir + "/" + std::to_string(i) + ".kcb", "-v"});
      CommandResult r = kcache::testing::run_command(args, env);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      *err += r.err;
      for (size_t at = r.out.find(" miss "); at != std::string::npos;
           at = r.out.find(" miss ", at + 1)) {
        *misses += 1;
      }
    }
  };
  std::string err;
  int first_misses = 0;
  run_all(pristine, dir_ + "/expected", {}, &err, &first_misses);
  ASSERT_EQ(err, "");
  ASSERT_EQ(first_misses, 8);
  const int64_t entries = cache::Store::open(pristine)->stats().entries;
  ASSERT_EQ(entries, 8);

  struct Fault {
    const char* name;
    const char* damage;  // shell, in the store folder
  };
  const Fault faults[] = {
      {"deleted", "rm index.sqlite"},
      {"emptied", ": > index.sqlite"},
      {"truncated to 2 pages", "truncate -s 8192 index.sqlite"},
      {"one page overwritten (page 3, header intact)",
       "dd if=/dev/urandom of=index.sqlite bs=4096 seek=2 count=1 conv=notrunc status=none"},
      {"header overwritten",
       "dd if=/dev/urandom of=index.sqlite bs=100 count=1 conv=notrunc status=none"},
      {"replaced by a folder", "rm index.sqlite && mkdir index.sqlite"},
  };
  std::printf("| fault | entries | NVRTC compiles after | wrong bytes | stderr lines | verify, -c, -C |\n");
  for (const Fault& fault : faults) {
    for (bool quiet : {false, true}) {
      SCOPED_TRACE(std::string(fault.name) + (quiet ? ", quiet" : ""));
      const std::string store = dir_ + "/case";
      ASSERT_EQ(std::system(("rm -rf " + store + " " + dir_ + "/got && cp -a " + pristine + " " +
                             store + " && cd " + store + " && " + fault.damage)
                                .c_str()),
                0);
      std::string said;
      int compiled = 0;
      std::map<std::string, std::string> env;
      if (quiet) env["KCACHE_QUIET"] = "1";
      run_all(store, dir_ + "/got", env, &said, &compiled);
      int wrong = 0;
      for (size_t i = 0; i < compiles.size(); ++i) {
        const std::string name = "/" + std::to_string(i) + ".kcb";
        wrong += *read_file(dir_ + "/expected" + name) != *read_file(dir_ + "/got" + name);
      }
      CommandResult verify = kcache::testing::run_command(
          {kcache::testing::kcache_binary(), "--dir", store, "verify"});
      CommandResult cleanup = kcache::testing::run_command(
          {kcache::testing::kcache_binary(), "--dir", store, "-c"});
      CommandResult clear = kcache::testing::run_command(
          {kcache::testing::kcache_binary(), "--dir", store, "-C"});
      EXPECT_EQ(compiled, 0);
      EXPECT_EQ(wrong, 0);
      if (quiet) {
        EXPECT_EQ(said, "");
      } else {
        EXPECT_EQ(lines(said), 1) << said;
        EXPECT_TRUE(contains(said, "rebuilt")) << said;
      }
      EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
      EXPECT_EQ(cleanup.exit_code, 0) << cleanup.err;
      EXPECT_EQ(clear.exit_code, 0) << clear.err;
      EXPECT_TRUE(contains(clear.out, "Cleared 8 entries")) << clear.out;
      EXPECT_EQ(cache::Store::open(store)->stats().entries, 0u);
      if (!quiet) {
        std::printf("| %s | %lld | %d | %d | %d | %d, %d, %d |\n", fault.name,
                    static_cast<long long>(entries), compiled, wrong,
                    lines(said), verify.exit_code, cleanup.exit_code, clear.exit_code);
      }
    }
  }
}

TEST_F(CompileCommandTest, WritesEmbeddingSourceAndHeader) {
  CommandResult r = kcache({"compile", kSaxpy, "--arch", "sm_80", "--cc-out", dir_ + "/saxpy.cc",
                            "--h-out", dir_ + "/saxpy.h", "--symbol", "demo::saxpy_bundle"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string cc = *read_file(dir_ + "/saxpy.cc"), h = *read_file(dir_ + "/saxpy.h");
  EXPECT_TRUE(contains(cc, "kcache::bundle::register_embedded")) << cc.substr(0, 2000);
  EXPECT_TRUE(contains(cc, "namespace demo {")) << cc.substr(0, 2000);
  EXPECT_TRUE(contains(h, "const kcache::bundle::EmbeddedBundle& saxpy_bundle();")) << h;
}

TEST_F(CompileCommandTest, ReadsArgumentsFromAParamsFile) {
  // Bazel's multiline format: one argument per line.
  write(dir_, "args.params",
        "compile\n" + kSaxpy + "\n--arch\nsm_80\n--nvrtc-opt=-lineinfo\n-DSCALE=2\n-o\n" + dir_ +
            "/k.kcb\n");
  CommandResult r = kcache({"@" + dir_ + "/args.params"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(read_file(dir_ + "/k.kcb").has_value());
}

TEST_F(CompileCommandTest, CompileErrorExitsWith3PrintingTheLogAndOptionsAndWritesNothing) {
  CommandResult r = kcache({"compile", "tests/compiler/kernels/broken.cu", "--arch", "sm_80", "-o",
                            dir_ + "/broken.kcb"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_TRUE(contains(r.err,
                       "tests/compiler/kernels/broken.cu(4): error: identifier "
                       "\"undeclared_variable\" is undefined"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "kcache compile: NVRTC options: -arch=sm_80")) << r.err;
  EXPECT_TRUE(contains(r.err, "kcache compile: NVRTC could not compile")) << r.err;
  EXPECT_FALSE(read_file(dir_ + "/broken.kcb").has_value());
  EXPECT_EQ(cache::Store::open(dir_ + "/store")->stats().entries, 0u);
}

TEST_F(CompileCommandTest, WrongArchIsAUsageErrorListingSupportedArchs) {
  CommandResult r = kcache({"compile", kSaxpy, "--arch", "sm_85", "-o", dir_ + "/k.kcb"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_TRUE(contains(r.err, "sm_85 is not supported by NVRTC")) << r.err;
  EXPECT_TRUE(contains(r.err, "sm_90")) << r.err;
  r = kcache({"compile", kSaxpy, "--arch", "compute_90", "-o", dir_ + "/k.kcb"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "use --ptx compute_90")) << r.err;
}

TEST_F(CompileCommandTest, MissingHeaderNamesItAndTheFoldersSearched) {
  std::string src = write(dir_, "k.cu", "#include \"nothere.h\"\n__global__ void k() {}\n");
  CommandResult r =
      kcache({"compile", src, "--arch", "sm_80", "-I", dir_ + "/inc", "-o", dir_ + "/k.kcb"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_TRUE(contains(r.err, "\"nothere.h\" (included from " + src +
                                  ":1) was not found in: " + dir_ + ", " + dir_ + "/inc, "))
      << r.err;
}

TEST_F(CompileCommandTest, MissingOrUnreadableSourceIsOneLine) {
  CommandResult r =
      kcache({"compile", dir_ + "/nothere.cu", "--arch", "sm_80", "-o", dir_ + "/k.kcb"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_TRUE(contains(r.err, "nothere.cu does not exist")) << r.err;
  FileSystem::real().create_directories(dir_ + "/folder.cu", 0755);
  r = kcache({"compile", dir_ + "/folder.cu", "--arch", "sm_80", "-o", dir_ + "/k.kcb"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_TRUE(contains(r.err, "folder.cu: it is a folder, not a regular file")) << r.err;
}

TEST_F(CompileCommandTest, MissingOutputFolderIsOneLineBeforeAnyCompile) {
  CommandResult r = kcache({"compile", kSaxpy, "--arch", "sm_80", "-o", dir_ + "/no/such/k.kcb"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_TRUE(contains(r.err, "output folder " + dir_ + "/no/such does not exist")) << r.err;
  EXPECT_EQ(counter("nvrtc_invocations"), 0);
}

TEST_F(CompileCommandTest, OutputFlagsThatCannotWorkAreUsageErrors) {
  CommandResult r = kcache({"compile", kSaxpy, "--arch", "sm_80"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "no output")) << r.err;
  r = kcache({"compile", kSaxpy, "--arch", "sm_80", "--cc-out", dir_ + "/k.cc"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "need --symbol")) << r.err;
  r = kcache({"compile", kSaxpy, "--arch", "sm_80", "--cc-out", dir_ + "/k.cc", "--symbol", "a-b"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST_F(CompileCommandTest, MissingToolkitSaysWhereItLooked) {
  CommandResult r = kcache({"compile", kSaxpy, "--arch", "sm_80", "-o", dir_ + "/k.kcb",
                            "--cuda-path", dir_ + "/no-cuda"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "no CUDA toolkit found; looked at:")) << r.err;
  EXPECT_TRUE(contains(r.err, "--cuda-path = " + dir_ + "/no-cuda (does not exist)")) << r.err;
}

// What the Bazel rule passes (--no-default-store): the store only when the
// user opted in with $KCACHE_DIR, and no warning or stray store otherwise.
TEST_F(CompileCommandTest, StoreFromTheEnvironmentOnlyWhenAsked) {
  std::vector<std::string> args = {kcache::testing::kcache_binary(),
                                   "compile",
                                   kSaxpy,
                                   "--arch",
                                   "sm_80",
                                   "--no-default-store",
                                   "-o",
                                   dir_ + "/k.kcb"};
  std::map<std::string, std::string> no_store = {
      {"KCACHE_DIR", ""}, {"XDG_CACHE_HOME", ""}, {"HOME", dir_ + "/home"}};
  CommandResult r = kcache::testing::run_command(args, no_store);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_FALSE(FileSystem::real().stat(dir_ + "/home/.cache/kcache").has_value());

  std::map<std::string, std::string> opted_in = no_store;
  opted_in["KCACHE_DIR"] = dir_ + "/opted-in";
  r = kcache::testing::run_command(args, opted_in);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(cache::Store::open(dir_ + "/opted-in")->stats().entries, 1u);

  r = kcache({"compile", kSaxpy, "--arch", "sm_80", "--no-store", "-o", dir_ + "/k.kcb"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(FileSystem::real().stat(dir_ + "/store").has_value());
}

// --umask is a storage flag like --remote (ccache's `umask`): what a compile
// makes in the store is group-writable whatever the process's own umask.
TEST_F(CompileCommandTest, UmaskFlagMakesTheStoresFilesGroupWritable) {
  const mode_t process_umask = ::umask(022);
  CommandResult r = kcache(
      {"compile", kSaxpy, "--arch", "sm_80", "--umask", "002", "-o", dir_ + "/k.kcb"});
  ::umask(process_umask);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string store = dir_ + "/store";
  std::vector<std::string> made = {store, store + "/index.sqlite", store + "/blobs"};
  FileSystem& fs = FileSystem::real();
  for (const std::string& shard : fs.list_directory(store + "/blobs")) {
    made.push_back(store + "/blobs/" + shard);
    for (const std::string& blob : fs.list_directory(store + "/blobs/" + shard)) {
      made.push_back(store + "/blobs/" + shard + "/" + blob);
    }
  }
  ASSERT_GE(made.size(), 5u) << "no blob file was written";
  for (const std::string& path : made) {
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_mode & 0077, static_cast<mode_t>(S_ISDIR(st.st_mode) ? 0075 : 0064))
        << path << " has mode " << std::oct << (st.st_mode & 07777);
  }
}

// NVRTC's warnings are kept with the entry: a hit prints them again, as the
// miss did (a review of issue 27 found a hit silent).
TEST_F(CompileCommandTest, AHitPrintsNvrtcsWarningsAgain) {
  std::string src = write(dir_, "w.cu", "__global__ void k() { int unused; }\n");
  CommandResult miss = kcache({"compile", src, "--ptx", "compute_80", "-o", dir_ + "/w.kcb"});
  ASSERT_EQ(miss.exit_code, 0) << miss.err;
  EXPECT_TRUE(contains(miss.err, "warning")) << miss.err;
  CommandResult hit =
      kcache({"--format", "json", "compile", src, "--ptx", "compute_80", "-o", dir_ + "/w.kcb"});
  ASSERT_EQ(hit.exit_code, 0) << hit.err;
  EXPECT_TRUE(contains(hit.out, "\"hits\": 1")) << hit.out;
  EXPECT_EQ(hit.err, miss.err);
}

TEST_F(CompileCommandTest, SourceNameReplacesThePathInTheLogAndTheBundle) {
  CommandResult r = kcache({"compile", "tests/compiler/kernels/broken.cu", "--source-name",
                            "kernels/broken.cu", "--arch", "sm_80", "-o", dir_ + "/k.kcb"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.err.rfind("kernels/broken.cu(4): error", 0), 0u) << r.err;
  r = kcache(
      {"compile", kSaxpy, "--source-name", "saxpy.cu", "--arch", "sm_80", "-o", dir_ + "/k.kcb"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string bytes = *read_file(dir_ + "/k.kcb");
  EXPECT_EQ(bundle::parse(bytes).source_name, "saxpy.cu");
}

// A CI fleet: one machine compiles and uploads; another, with an empty local
// store, gets every target from the remote without invoking NVRTC. Inside a
// Bazel action (--no-default-store) the remote alone is used.
TEST_F(CompileCommandTest, SecondMachineHitsThroughTheRemote) {
  kcache::testing::NginxServer nginx;
  CommandResult r = kcache::testing::run_command(
      {kcache::testing::kcache_binary(), "--dir", dir_ + "/machine-a", "compile", kSaxpy, "--arch",
       "sm_80,sm_90", "--remote", nginx.url("/kcache"), "-o", dir_ + "/a.kcb"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Two entries and their manifests (what NVRTC read, served: issue 27).
  EXPECT_EQ(nginx.count_requests("PUT", "/kcache/"), 4);

  r = kcache::testing::run_command({kcache::testing::kcache_binary(), "--dir", dir_ + "/machine-b",
                                    "--format", "json", "compile", kSaxpy, "--arch", "sm_80,sm_90",
                                    "--remote", nginx.url("/kcache"), "-o", dir_ + "/b.kcb"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "\"hits\": 2")) << r.out;
  EXPECT_EQ(cache::Store::open(dir_ + "/machine-b")->stats().counter("nvrtc_invocations"), 0);
  EXPECT_EQ(*read_file(dir_ + "/b.kcb"), *read_file(dir_ + "/a.kcb"));

  r = kcache::testing::run_command(
      {kcache::testing::kcache_binary(), "--format", "json", "compile", kSaxpy, "--arch", "sm_80",
       "--no-default-store", "-o", dir_ + "/c.kcb"},
      {{"KCACHE_DIR", ""}, {"HOME", dir_ + "/home"}, {"KCACHE_REMOTE", nginx.url("/kcache")}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "\"hits\": 1")) << r.out;
  EXPECT_FALSE(FileSystem::real().stat(dir_ + "/home/.cache/kcache").has_value());
}

TEST_F(CompileCommandTest, UnwritableStoreStillCompiles) {
  write(dir_, "store", "a file where the store folder should be");
  CommandResult r = kcache({"compile", kSaxpy, "--arch", "sm_80", "-o", dir_ + "/k.kcb"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "warning")) << r.err;
  EXPECT_TRUE(read_file(dir_ + "/k.kcb").has_value());
}

// Issue 9's report as a user ran it: a header chosen by a stringized -D,
// edited after a miss. Two archs, so one compiles in a worker process.
TEST_F(CompileCommandTest, AnEditedComputedIncludeIsNeverAStaleHit) {
  std::string src = write(dir_, "k.cu",
                          "#define STR2(x) #x\n#define STR(x) STR2(x)\n#include STR(VARIANT.cuh)\n"
                          "extern \"C\" __global__ void k(int* p) { *p = V; }\n");
  write(dir_, "v7.cuh", "#define V 7\n");
  std::vector<std::string> args = {"compile", src,          "--arch", "sm_80,sm_90",
                                   "-D",      "VARIANT=v7", "-o"};
  auto compile = [&](const std::string& out, bool store) {
    std::vector<std::string> a = args;
    a.push_back(dir_ + "/" + out);
    if (!store) a.push_back("--no-store");
    CommandResult r = kcache(a);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return *read_file(dir_ + "/" + out);
  };
  std::string before = compile("a.kcb", true);
  EXPECT_EQ(before, compile("a_fresh.kcb", false));
  write(dir_, "v7.cuh", "#define V 9\n");
  std::string after = compile("b.kcb", true);
  EXPECT_NE(after, before) << "a stale hit: the edited header was not compiled";
  EXPECT_EQ(after, compile("b_fresh.kcb", false));
}

// -D and -U (also --nvrtc-opt=-UX) keep their order on the command line, as
// NVRTC applies them (issue 26): `-U X -D X=1` defines X, `-D X=1 -U X`
// does not, and the two are different keys.
TEST_F(CompileCommandTest, DefinesAndUndefinesKeepTheirOrder) {
  write(dir_, "order.cu",
        "#ifdef X\n__device__ int x_defined_as = X + 0;\n#else\n__device__ int x_not_defined = "
        "1;\n#endif\nextern \"C\" __global__ void k(int* p) { *p = 1; }\n");
  struct Case {
    std::vector<std::string> flags;
    std::string x;  // what the PTX says
  };
  const Case cases[] = {
      {{"-U", "X", "-D", "X=1"}, "x_defined_as = 1;"},
      {{"-D", "X=1", "-U", "X"}, "x_not_defined"},
      {{"--define", "X=2", "--nvrtc-opt=-UX"}, "x_not_defined"},
      {{"--nvrtc-opt=-UX", "--define=X=2"}, "x_defined_as = 2;"},
      {{"-D", "X=3", "--nvrtc-opt=--undefine-macro=X", "-D", "X=4"}, "x_defined_as = 4;"},
      // A rule's nvrtc_opts: -D and -U there keep their order too.
      {{"--nvrtc-opt=-UX", "--nvrtc-opt=-DX=5"}, "x_defined_as = 5;"},
      {{"--nvrtc-opt=--define-macro=X=6", "--nvrtc-opt=-UX"}, "x_not_defined"},
  };
  std::set<std::string> keys;
  for (const Case& c : cases) {
    std::vector<std::string> args = {"compile", dir_ + "/order.cu", "--source-name", "order.cu",
                                     "--ptx", "compute_80", "--no-lean", "-o", dir_ + "/o.kcb"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    CommandResult r = kcache(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    bundle::Bundle b = bundle::parse(*read_file(dir_ + "/o.kcb"));
    ASSERT_EQ(b.images.size(), 1u);
    EXPECT_TRUE(contains(std::string(b.images[0].data), c.x)) << c.flags.front();
    keys.insert(std::string(b.images[0].key));
  }
  EXPECT_EQ(keys.size(), std::size(cases)) << "two orders shared a key";
  // -U takes a name only.
  CommandResult bad = kcache({"compile", dir_ + "/order.cu", "--ptx", "compute_80", "-U", "X=1",
                              "-o", dir_ + "/o.kcb"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_TRUE(contains(bad.err, "-UX=1")) << bad.err;
}

// A computed include of a FIFO used to hang `kcache compile` for good, one of
// /dev/zero to read until std::bad_alloc (issue 27): each is now a one-line
// error naming the file, well within the time limit (`timeout` ends a hang
// with 124).
TEST_F(CompileCommandTest, AComputedIncludeOfAFifoOrDevZeroIsAnErrorNotAHang) {
  const std::string fifo = dir_ + "/pipe.h";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  struct Case {
    std::string header;
    std::string says;
  };
  const Case cases[] = {
      {fifo, "NVRTC opened " + fifo + " is a FIFO; kcache serves NVRTC only regular files"},
      {"/dev/zero", "NVRTC opened /dev/zero is a device; kcache serves NVRTC only regular files"},
      {"pipe.h", "NVRTC opened " + fifo + " is a FIFO; kcache serves NVRTC only regular files"},
  };
  for (const Case& c : cases) {
    write(dir_, "k.cu", "#define H \"" + c.header + "\"\n#include H\n__global__ void k() {}\n");
    CommandResult r = kcache::testing::run_command(
        {"/usr/bin/timeout", "120", kcache::testing::kcache_binary(), "--dir", dir_ + "/store", "compile",
         dir_ + "/k.cu", "--ptx", "compute_80", "-o", dir_ + "/k.kcb"});
    EXPECT_NE(r.exit_code, 124) << c.header << ": kcache compile hung";
    EXPECT_NE(r.exit_code, 0) << c.header;
    EXPECT_TRUE(contains(r.err, c.says)) << r.err;
    EXPECT_LE(lines(r.err), 2) << r.err;
  }
}

}  // namespace
}  // namespace kcache::cli
