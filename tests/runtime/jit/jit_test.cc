// kcache_jit on machines without a GPU: real NVRTC compiles through a store in
// a temporary folder, an explicit arch (or the fake driver's device), and the
// store's counters to tell hits from compiles.
#include "runtime/jit/jit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bundle/bundle.h"
#include "bundle/embedded.h"
#include "cache/local/store.h"
#include "common/error.h"
#include "common/file_system.h"
#include "compiler/compiler.h"
#include "compiler/nvrtc/nvrtc.h"
#include "runtime/module.h"
#include "tests/runtime/fake_cuda/fake_cuda_control.h"
#include "tests/runtime/jit/test_kernels.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kcache::runtime::jit {
namespace {

using runtime::testing::fake_cuda;
using runtime::testing::last_image_starts_with;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Source scale_source(std::vector<std::string> defines = {},
                    std::vector<std::string> expressions = {"scale<float>"}) {
  Source s;
  s.name = "jit_test/scale.cu";
  s.text = testing::kScaleSource;
  s.defines = std::move(defines);
  s.name_expressions = std::move(expressions);
  return s;
}

class JitTest : public ::testing::Test {
 protected:
  // Load tests run on the fake driver; compile tests never touch a driver.
  static void SetUpTestSuite() { setenv("KCACHE_LIBCUDA", runtime::testing::kFakeCuda, 1); }

  void SetUp() override { fake_cuda().set_capability(9, 0); }

  Options options(const std::string& arch = "sm_90") {
    Options o;
    o.arch = arch;
    cache::StorageOptions storage;
    storage.local_dir = store_dir();
    o.storage = storage;
    return o;
  }
  std::string store_dir() const { return dir_.path() + "/store"; }

  static int64_t counter(Jit& jit, const std::string& name) {
    jit.storage().local()->flush();
    return jit.storage().local()->stats().counter(name);
  }
  static uint64_t entries(Jit& jit) { return jit.storage().local()->stats().entries; }

  kcache::testing::TempDir dir_;
};

TEST_F(JitTest, AMissIsCompiledAndStoredAndTheNextProcessHitsWithoutNvrtc) {
  const std::string tool = "tests/runtime/jit/jit_compile_once";
  std::map<std::string, std::string> env = {
      {"KCACHE_DIR", store_dir()}, {"KCACHE_REMOTE", ""}, {"KCACHE_CONFIG", ""}};
  kcache::testing::CommandResult first =
      kcache::testing::run_command({tool, "sm_90", "OFFSET=2"}, env);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, "hit=0 kind=cubin arch=sm_90 nvrtc_loaded=1\n");

  kcache::testing::CommandResult second =
      kcache::testing::run_command({tool, "sm_90", "OFFSET=2"}, env);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, "hit=1 kind=cubin arch=sm_90 nvrtc_loaded=0\n")
      << "a hit must not even load NVRTC";

  std::unique_ptr<cache::Store> store = cache::Store::open(store_dir());
  EXPECT_EQ(store->stats().counter("nvrtc_invocations"), 1);
  EXPECT_EQ(store->stats().entries, 1u);

  // Another value chosen at run time is another entry.
  kcache::testing::CommandResult third =
      kcache::testing::run_command({tool, "sm_90", "OFFSET=3"}, env);
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(third.out, "hit=0 kind=cubin arch=sm_90 nvrtc_loaded=1\n");
}

TEST_F(JitTest, DefinesAndTemplateArgumentsChosenAtRunTimeAreEntriesOfTheirOwn) {
  Jit jit(options());
  std::vector<Source> variants = {scale_source({"OFFSET=1"}, {"scale<float>"}),
                                  scale_source({"OFFSET=2"}, {"scale<float>"}),
                                  scale_source({"OFFSET=2"}, {"scale<double>"})};
  for (const Source& s : variants) {
    Compiled c = jit.compile(s);
    EXPECT_FALSE(c.hit);
    EXPECT_EQ(c.entry.kind(), cache::TargetKind::cubin);
    EXPECT_EQ(c.entry.arch(), "sm_90");
    EXPECT_EQ(c.entry.payload().substr(0, 4),
              "\x7f"
              "ELF");
  }
  EXPECT_EQ(counter(jit, "nvrtc_invocations"), 3);
  EXPECT_EQ(entries(jit), 3u);

  Jit again(options());  // a new Storage and compiler: as another process
  for (const Source& s : variants) EXPECT_TRUE(again.compile(s).hit);
  EXPECT_EQ(counter(again, "nvrtc_invocations"), 3);

  Compiled d = again.compile(variants[2]);
  ASSERT_EQ(d.entry.lowered_names().size(), 1u);
  EXPECT_EQ(d.entry.lowered_names()[0].name_expression, "scale<double>");
  EXPECT_EQ(d.entry.lowered_names()[0].lowered_name, "_Z5scaleIdEvPT_S0_i");
}

// CUB comes from the toolkit's CCCL headers: found without any -I.
TEST_F(JitTest, ACubKernelCompilesWithTheToolkitsHeaders) {
  Jit jit(options());
  Source s;
  s.name = "jit_test/block_sum.cu";
  s.text = testing::kBlockSumSource;
  s.name_expressions = {"block_sum<128>"};
  Compiled c = jit.compile(s);
  EXPECT_EQ(c.entry.kind(), cache::TargetKind::cubin);
  ASSERT_EQ(c.entry.lowered_names().size(), 1u);
  EXPECT_EQ(c.entry.lowered_names()[0].lowered_name, "_Z9block_sumILi128EEvPKiPi");
}

// The toolkit's headers read through the seal are keyed by their bytes: a
// second Jit (another process's) finds the entry the first stored.
TEST_F(JitTest, ACubKernelCompiledOnceIsAStoreHitForTheNextJit) {
  Source s;
  s.name = "jit_test/block_sum.cu";
  s.text = testing::kBlockSumSource;
  s.name_expressions = {"block_sum<256>"};
  EXPECT_FALSE(Jit(options()).compile(s).hit);
  Jit again(options());
  EXPECT_TRUE(again.compile(s).hit);
  EXPECT_EQ(counter(again, "nvrtc_invocations"), 1);
}

TEST_F(JitTest, ACubKernelIsLeanUnlessTheOptionSaysNot) {
  Source s;
  s.name = "jit_test/block_sum.cu";
  s.text = testing::kBlockSumSource;
  s.name_expressions = {"block_sum<128>"};
  Jit lean_jit(options());
  Compiled lean = lean_jit.compile(s);
  Options o = options();
  o.lean = false;
  Jit nvrtc_jit(o);
  Compiled nvrtc = nvrtc_jit.compile(s);
  EXPECT_FALSE(nvrtc.hit) << "lean and NVRTC's images must be keyed apart";
  EXPECT_NE(lean.entry.key(), nvrtc.entry.key());
  EXPECT_LT(lean.entry.payload().size() * 3, nvrtc.entry.payload().size())
      << "CUB's unreferenced constants should be gone from the lean cubin";
  EXPECT_EQ(lean.entry.lowered_names()[0].lowered_name,
            nvrtc.entry.lowered_names()[0].lowered_name);
}

TEST_F(JitTest, ABrokenSourceIsACompileErrorCarryingNvrtcsLog) {
  Jit jit(options());
  Source s;
  s.name = "jit_test/broken.cu";
  s.text = "extern \"C\" __global__ void k(int* x) { x[0] = undeclared_thing; }\n";
  try {
    jit.compile(s);
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    EXPECT_TRUE(contains(e.log(), "jit_test/broken.cu")) << e.log();
    EXPECT_TRUE(contains(e.log(), "undeclared_thing")) << e.log();
    EXPECT_TRUE(contains(e.what(), "sm_90")) << e.what();
  }
  EXPECT_EQ(entries(jit), 0u) << "nothing is stored for a failed compile";
}

TEST_F(JitTest, AnArchThisNvrtcDoesNotKnowGetsPtxForTheHighestItDoes) {
  std::vector<int> supported =
      compiler::Nvrtc::open(compiler::find_toolkit("").nvrtc.path).supported_archs();
  ASSERT_FALSE(supported.empty());
  int highest = *std::max_element(supported.begin(), supported.end());

  Jit jit(options("sm_990"));  // a GPU from the future
  Compiled c = jit.compile(scale_source());
  EXPECT_TRUE(c.ptx_fallback);
  EXPECT_FALSE(c.hit);
  EXPECT_EQ(c.entry.kind(), cache::TargetKind::ptx);
  EXPECT_EQ(c.entry.arch(), "compute_" + std::to_string(highest));
  EXPECT_TRUE(contains(std::string(c.entry.payload()), ".target sm_" + std::to_string(highest)));

  Compiled again = jit.compile(scale_source());
  EXPECT_TRUE(again.hit);
  EXPECT_TRUE(again.ptx_fallback);
  EXPECT_EQ(counter(jit, "nvrtc_invocations"), 1);
}

TEST_F(JitTest, AVirtualArchCompilesPtx) {
  Jit jit(options("compute_80"));
  Compiled c = jit.compile(scale_source());
  EXPECT_EQ(c.entry.kind(), cache::TargetKind::ptx);
  EXPECT_EQ(c.entry.arch(), "compute_80");
  EXPECT_FALSE(c.ptx_fallback);
}

TEST_F(JitTest, AnArchThatIsNoArchIsInvalidArgument) {
  Jit jit(options("gfx90a"));
  try {
    jit.compile(scale_source());
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(contains(e.what(), "gfx90a")) << e.what();
  }
}

TEST_F(JitTest, ASourceFileFindsTheHeadersNextToItAndTheyAreKeyed) {
  kcache::testing::write_file(dir_ / "k.cu",
                              "#include \"factor.h\"\n"
                              "extern \"C\" __global__ void k(float* x) { x[0] *= FACTOR; }\n");
  kcache::testing::write_file(dir_ / "factor.h", "#define FACTOR 2.0f\n");
  Jit jit(options());
  Source s;
  s.name = "jit_test/k.cu";
  s.path = dir_ / "k.cu";
  EXPECT_FALSE(jit.compile(s).hit);
  EXPECT_TRUE(jit.compile(s).hit);
  kcache::testing::write_file(dir_ / "factor.h", "#define FACTOR 3.0f\n");
  EXPECT_FALSE(jit.compile(s).hit) << "an edited header is a new key";
}

// A source and the header next to it, in dir_/folder.
void write_tree(const kcache::testing::TempDir& dir, const std::string& folder,
                const std::string& factor) {
  std::filesystem::create_directories(dir / (folder + "/inc"));
  kcache::testing::write_file(dir / (folder + "/k.cu"),
                              "#include \"inc/factor.h\"\n"
                              "extern \"C\" __global__ void k(float* x) { x[0] *= FACTOR; }\n");
  kcache::testing::write_file(dir / (folder + "/inc/factor.h"), "#define FACTOR " + factor + "\n");
}

Source tree_source(const kcache::testing::TempDir& dir, const std::string& folder) {
  Source s;
  s.name = "jit_test/k.cu";
  s.path = dir / (folder + "/k.cu");
  return s;
}

TEST_F(JitTest, TheSameSourceTreeInAnotherFolderHits) {
  write_tree(dir_, "one", "2.0f");
  write_tree(dir_, "two/installed", "2.0f");
  Jit jit(options());
  EXPECT_FALSE(jit.compile(tree_source(dir_, "one")).hit);
  Compiled there = jit.compile(tree_source(dir_, "two/installed"));
  EXPECT_TRUE(there.hit) << "the header is keyed relative to the source's folder";
  write_tree(dir_, "two/installed", "3.0f");
  EXPECT_FALSE(jit.compile(tree_source(dir_, "two/installed")).hit) << "its own header differs";
  EXPECT_EQ(counter(jit, "nvrtc_invocations"), 2);
}

TEST_F(JitTest, AHeaderEditedNextToTheSourceMisses) {
  write_tree(dir_, "one", "2.0f");
  Jit jit(options());
  EXPECT_FALSE(jit.compile(tree_source(dir_, "one")).hit);
  EXPECT_TRUE(jit.compile(tree_source(dir_, "one")).hit);
  write_tree(dir_, "one", "4.0f");
  Compiled edited = jit.compile(tree_source(dir_, "one"));
  EXPECT_FALSE(edited.hit);
  EXPECT_TRUE(jit.compile(tree_source(dir_, "one")).hit);
}

// The key holds what NVRTC read, not what a scanner would follow: a header
// in a branch the preprocessor skips is no part of it.
TEST_F(JitTest, AHeaderInABranchNvrtcSkipsIsNotKeyed) {
  write_tree(dir_, "one", "2.0f");
  kcache::testing::write_file(dir_ / "one/k.cu",
                              "#include \"inc/factor.h\"\n#ifdef SLOW\n#include \"inc/slow.h\"\n#endif\n"
                              "extern \"C\" __global__ void k(float* x) { x[0] *= FACTOR; }\n");
  kcache::testing::write_file(dir_ / "one/inc/slow.h", "#define SLOW_FACTOR 1\n");
  Jit jit(options());
  EXPECT_FALSE(jit.compile(tree_source(dir_, "one")).hit);
  kcache::testing::write_file(dir_ / "one/inc/slow.h", "#define SLOW_FACTOR 2\n");
  EXPECT_TRUE(jit.compile(tree_source(dir_, "one")).hit);
  Source slow = tree_source(dir_, "one");
  slow.defines = {"SLOW"};
  EXPECT_FALSE(jit.compile(slow).hit);
  kcache::testing::write_file(dir_ / "one/inc/slow.h", "#define SLOW_FACTOR 3\n");
  EXPECT_FALSE(jit.compile(slow).hit) << "read now: keyed";
}

// One path: a JIT compile and `kcache compile` (a served compile in the
// source's folder) of the same source and options are one entry.
TEST_F(JitTest, AJitCompileHitsWhatKcacheCompileStored) {
  write_tree(dir_, "one", "2.0f");
  Jit jit(options());
  compiler::CompileOptions o;
  o.source_path = dir_ / "one/k.cu";
  o.source_name = "k.cu";
  o.working_folder = dir_ / "one";
  o.archs = {"sm_90"};
  o.std = "c++17";
  compiler::Compiler compiler(jit.toolkit(), &jit.storage());
  EXPECT_EQ(compiler.compile(o).hits(), 0);
  Source s;
  s.path = dir_ / "one/k.cu";
  EXPECT_TRUE(jit.compile(s).hit);
}

// Source::name "mylib/broken.cu" for dir_/src/mylib/broken.cu: NVRTC works in
// dir_/src, finds the header next to the source and names it as the caller did.
TEST_F(JitTest, ANameThatEndsThePathIsTheNameNvrtcGives) {
  std::filesystem::create_directories(dir_ / "src/mylib");
  kcache::testing::write_file(dir_ / "src/mylib/broken.cu",
                              "#include \"factor.h\"\n"
                              "extern \"C\" __global__ void k(int* x) { x[0] = undeclared_thing; }\n");
  kcache::testing::write_file(dir_ / "src/mylib/factor.h", "#define FACTOR 2\n");
  Jit jit(options());
  Source s;
  s.name = "mylib/broken.cu";
  s.path = dir_ / "src/mylib/broken.cu";
  try {
    jit.compile(s);
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    EXPECT_TRUE(contains(e.log(), "mylib/broken.cu")) << e.log();
    EXPECT_TRUE(contains(e.log(), "undeclared_thing")) << e.log();
    EXPECT_FALSE(contains(e.log(), "factor.h")) << "the header next to it was found: " << e.log();
  }
}

// "Seccomp:" and "NoNewPrivs:" of every thread of this process.
std::vector<std::string> seal_state_of_threads() {
  std::vector<std::string> states;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream status(task.path() / "status");
    std::string line, state;
    while (std::getline(status, line)) {
      if (line.rfind("Seccomp:", 0) == 0 || line.rfind("NoNewPrivs:", 0) == 0) state += line + " ";
    }
    states.push_back(state);
  }
  return states;
}

TEST_F(JitTest, NothingOfTheSealIsLeftOnTheCallersThreads) {
  const std::vector<std::string> before = seal_state_of_threads();
  ASSERT_FALSE(before.empty());
  write_tree(dir_, "one", "2.0f");
  Jit jit(options());
  EXPECT_FALSE(jit.compile(tree_source(dir_, "one")).hit);
  EXPECT_TRUE(jit.compile(tree_source(dir_, "one")).hit);
  for (const std::string& state : seal_state_of_threads()) {
    EXPECT_EQ(state, before.front()) << "a thread of this process kept the seal";
  }
}

TEST_F(JitTest, LoadCompilesForTheCurrentDeviceAndThenHits) {
  fake_cuda().set_capability(8, 6);
  Jit jit(options(""));
  Module m = jit.load(scale_source());
  EXPECT_EQ(m.image_arch(), "sm_86");
  EXPECT_EQ(m.image_kind(), bundle::ImageKind::cubin);
  EXPECT_TRUE(
      last_image_starts_with("\x7f"
                             "ELF"));
  EXPECT_EQ(m.name(), "jit_test/scale.cu (JIT sm_86, compiled)");
  EXPECT_EQ(m.lowered("scale<float>"), "_Z5scaleIfEvPT_S0_i");

  Jit again(options(""));
  EXPECT_EQ(again.load(scale_source()).name(), "jit_test/scale.cu (JIT sm_86, store hit)");
}

// A bundle whose "images" are text naming their symbols (all the fake needs).
std::string text_bundle(const std::string& arch) {
  std::string image = "cubin " + arch + " saxpy";  // Bundle holds views: keep it alive
  bundle::Bundle b;
  b.source_name = "saxpy.cu";
  b.images.push_back({bundle::ImageKind::cubin, arch, "", image});
  return bundle::serialize(b);
}

TEST_F(JitTest, LoadOrCompileTakesTheBundlesImageWhenOneSuits) {
  Jit jit(options(""));
  std::string bytes = text_bundle("sm_90");
  Module m = load_or_compile(bundle::parse(bytes), "saxpy.kcb", scale_source(), &jit);
  EXPECT_EQ(m.name(), "saxpy.kcb");
  EXPECT_TRUE(last_image_starts_with("cubin sm_90 saxpy")) << fake_cuda().last_image();
  EXPECT_EQ(counter(jit, "nvrtc_invocations"), 0);
  EXPECT_EQ(entries(jit), 0u);
}

TEST_F(JitTest, LoadEmbeddedOrCompileCompilesTheSourceWhenNoImageSuits) {
  static const std::string bytes = text_bundle("sm_80");  // static storage, as generated code
  bundle::register_embedded({"kcache_jit_test_sm80_only",
                             reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()});
  Jit jit(options(""));
  Module m = load_embedded_or_compile("kcache_jit_test_sm80_only", scale_source(), &jit);
  EXPECT_EQ(m.name(), "jit_test/scale.cu (JIT sm_90, compiled)");
  EXPECT_EQ(counter(jit, "nvrtc_invocations"), 1);

  EXPECT_THROW(load_embedded_or_compile("kcache_jit_test_no_such_bundle", scale_source(), &jit),
               NotFound);
}

}  // namespace
}  // namespace kcache::runtime::jit
