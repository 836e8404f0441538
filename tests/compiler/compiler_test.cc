// The precompiler against the real NVRTC (it needs no GPU). NVRTC is slow
// here (seconds for CUB), so each real kernel is compiled once per test, and
// key properties are checked with Compiler::keys(), which compiles nothing.
#include "compiler/compiler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "bundle/bundle.h"
#include "cache/storage.h"
#include "common/error.h"
#include "common/lean_record.h"
#include "compiler/program.h"
#include "compiler/toolkit.h"
#include "tests/compiler/test_files.h"

namespace kcache::compiler {
namespace {

using testing::ScopedCwd;
using testing::test_dir;
using testing::write;

const std::string kKernels = "tests/compiler/kernels/";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class CompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_dir();
    cache::StorageOptions options;
    options.local_dir = dir_ + "/store";
    storage_ = std::make_unique<cache::Storage>(options);
    ASSERT_NE(storage_->local(), nullptr);
    compiler_ = std::make_unique<Compiler>(find_toolkit(""), storage_.get());
  }

  int64_t counter(const std::string& name) {
    storage_->local()->flush();
    return storage_->local()->stats().counter(name);
  }
  uint64_t entries() { return storage_->local()->stats().entries; }

  // Compiles twice: the first compiles every target with NVRTC, the second is
  // a hit for every target with no NVRTC invocation. Returns the second.
  CompileResult compile_twice(const CompileOptions& options) {
    size_t targets = options.archs.size() + (options.ptx_arch.empty() ? 0 : 1);
    // A PTX target beside a cubin of its arch comes from that cubin's compile.
    const bool ptx_shared =
        !options.ptx_arch.empty() &&
        std::count(options.archs.begin(), options.archs.end(), "sm_" + options.ptx_arch.substr(8));
    const int64_t runs = static_cast<int64_t>(targets) - (ptx_shared ? 1 : 0);
    int64_t before = counter("nvrtc_invocations");
    CompileResult first = compiler_->compile(options);
    EXPECT_EQ(first.misses(), static_cast<int>(targets));
    EXPECT_EQ(counter("nvrtc_invocations") - before, runs);
    EXPECT_EQ(entries(), targets);

    CompileResult second = compiler_->compile(options);
    EXPECT_EQ(second.hits(), static_cast<int>(targets));
    EXPECT_EQ(counter("nvrtc_invocations") - before, runs) << "a hit must not invoke NVRTC";
    EXPECT_EQ(second.bundle, first.bundle) << "a hit must give the bundle a compile gives";
    for (size_t i = 0; i < targets; ++i) {
      EXPECT_EQ(second.targets[i].key, first.targets[i].key);
      EXPECT_EQ(second.targets[i].compile_ms, first.targets[i].compile_ms);
      // What the lean pass did comes back from the entry (issue 10).
      EXPECT_EQ(second.targets[i].entry->lean(), first.targets[i].entry->lean());
      EXPECT_EQ(second.targets[i].lean, first.targets[i].lean);
      EXPECT_EQ(second.targets[i].lean_bytes_removed, first.targets[i].lean_bytes_removed);
      EXPECT_EQ(second.targets[i].lean_variables_removed, first.targets[i].lean_variables_removed);
    }
    return second;
  }

  // The bundle parses back into what was compiled.
  void expect_round_trip(const CompileResult& r, const CompileOptions& options) {
    bundle::Bundle b = bundle::parse(r.bundle, "test bundle");
    EXPECT_EQ(b.source_name, options.source_path);
    EXPECT_EQ(b.compiler_identity, compiler_->toolkit().identity());
    ASSERT_EQ(b.images.size(), r.targets.size());
    for (size_t i = 0; i < b.images.size(); ++i) {
      const TargetResult& t = r.targets[i];
      EXPECT_EQ(b.images[i].arch, t.target.arch);
      EXPECT_EQ(b.images[i].key, t.key.hex());
      EXPECT_EQ(b.images[i].data, t.entry->payload());
      EXPECT_EQ(b.images[i].lean, t.entry->lean()) << t.target.arch;
      if (t.target.kind == cache::TargetKind::cubin) {
        EXPECT_EQ(b.images[i].kind, bundle::ImageKind::cubin);
        EXPECT_EQ(b.images[i].data.substr(0, 4),
                  "\x7f"
                  "ELF");
      } else {
        EXPECT_EQ(b.images[i].kind, bundle::ImageKind::ptx);
        EXPECT_TRUE(
            contains(std::string(b.images[i].data), ".target sm_" + t.target.arch.substr(8)));
      }
    }
    ASSERT_EQ(b.lowered_names.size(), options.name_expressions.size());
    for (const std::string& e : options.name_expressions) EXPECT_FALSE(b.lowered(e).empty()) << e;
  }

  // The keys a compile stores its targets under (the full keys, over what
  // NVRTC read).
  std::vector<Hash128> result_keys(const CompileOptions& options) {
    std::vector<Hash128> keys;
    for (const TargetResult& t : compiler_->compile(options).targets) keys.push_back(t.key);
    return keys;
  }

  std::string dir_;
  std::unique_ptr<cache::Storage> storage_;
  std::unique_ptr<Compiler> compiler_;
};

CompileOptions kernel(const std::string& name, std::vector<std::string> archs,
                      std::string ptx = "") {
  CompileOptions o;
  o.source_path = kKernels + name;
  o.archs = std::move(archs);
  o.ptx_arch = std::move(ptx);
  return o;
}

// -- the four real kernels --------------------------------------------------

TEST_F(CompilerTest, SaxpyCompilesOnceThenHits) {
  CompileOptions o = kernel("saxpy.cu", {"sm_80", "sm_90"}, "compute_90");
  CompileResult r = compile_twice(o);
  expect_round_trip(r, o);
  for (const TargetResult& t : r.targets) {
    EXPECT_EQ(t.entry->lean(), LeanRecord{LeanRecord::kAsked}) << "nothing to remove";
  }
}

TEST_F(CompilerTest, HalfPrecisionCooperativeGroupsKernelCompilesOnceThenHits) {
  CompileOptions o = kernel("half_cg.cu", {"sm_80"}, "compute_90");
  o.include_dirs = {kKernels + "include"};
  CompileResult r = compile_twice(o);
  expect_round_trip(r, o);
  EXPECT_TRUE(contains(std::string(r.targets[1].entry->payload()), "half_dot"));
  // cooperative_groups' constants: a lean image even on a hit.
  for (const TargetResult& t : r.targets) {
    EXPECT_TRUE(t.lean) << t.target.arch;
    EXPECT_GT(t.lean_variables_removed, 100u) << t.target.arch;
    EXPECT_EQ(t.entry->lean(), (LeanRecord{LeanRecord::kAsked | LeanRecord::kLean,
                                           t.lean_bytes_removed, t.lean_variables_removed}));
  }
}

TEST_F(CompilerTest, CubBlockSortAndReduceCompilesOnceThenHits) {
  CompileOptions o = kernel("cub_block.cu", {"sm_90"});
  o.include_dirs = {compiler_->toolkit().root + "/include/cccl"};  // as users write it
  CompileResult r = compile_twice(o);
  expect_round_trip(r, o);
}

// `--arch sm_90 --ptx compute_90` runs NVRTC once: the cubin's compile gives
// the PTX target, which must be what a compile for compute_90 alone gives
// (lean or not, a header-heavy kernel and a plain one).
TEST_F(CompilerTest, APtxTargetBesideACubinOfItsArchIsWhatItsOwnCompileGives) {
  for (const char* name : {"saxpy.cu", "half_cg.cu", "cub_block.cu"}) {
    for (bool lean : {true, false}) {
      {
        SCOPED_TRACE(std::string(name) + (lean ? " lean" : " not lean"));
        CompileOptions o = kernel(name, {"sm_80", "sm_90"}, "compute_90");
        o.include_dirs = {kKernels + "include", compiler_->toolkit().root + "/include/cccl"};
        o.lean = lean;
        Compiler fresh(find_toolkit(""), nullptr);
        const int64_t before = counter("nvrtc_invocations");
        CompileResult both = compiler_->compile(o);
        EXPECT_EQ(counter("nvrtc_invocations") - before, 2);
        CompileOptions alone = o;
        alone.archs.clear();
        CompileResult ptx = fresh.compile(alone);
        ASSERT_EQ(both.targets.size(), 3u);
        ASSERT_EQ(ptx.targets.size(), 1u);
        EXPECT_EQ(both.targets[2].key, ptx.targets[0].key);
        EXPECT_EQ(both.targets[2].entry->payload(), ptx.targets[0].entry->payload());
        EXPECT_EQ(both.targets[2].entry->lean(), ptx.targets[0].entry->lean());
        // A hit gives it back as stored.
        CompileResult hit = compiler_->compile(alone);
        EXPECT_TRUE(hit.targets[0].hit);
        EXPECT_EQ(hit.targets[0].entry->payload(), ptx.targets[0].entry->payload());
      }
    }
  }
}

TEST_F(CompilerTest, TemplateInstancesThroughNameExpressionsCompileOnceThenHit) {
  CompileOptions o = kernel("scale_template.cu", {"sm_90"});
  o.name_expressions = {"scale<float>", "scale<double>"};
  CompileResult r = compile_twice(o);
  expect_round_trip(r, o);
  // The hit carries the lowered names NVRTC computed on the miss.
  ASSERT_EQ(r.lowered_names.size(), 2u);
  EXPECT_EQ(r.lowered_names[0].name_expression, "scale<float>");
  EXPECT_EQ(r.lowered_names[0].lowered_name, "_Z5scaleIfEvPT_S0_i");
  EXPECT_EQ(r.lowered_names[1].lowered_name, "_Z5scaleIdEvPT_S0_i");
  EXPECT_TRUE(contains(std::string(r.targets[0].entry->payload()), "_Z5scaleIdEvPT_S0_i"));
}

// -- failures ---------------------------------------------------------------

TEST_F(CompilerTest, BrokenSourceFailsWithNvrtcsLogAndStoresNothing) {
  try {
    compiler_->compile(kernel("broken.cu", {"sm_80"}));
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    EXPECT_TRUE(contains(e.log(),
                         "tests/compiler/kernels/broken.cu(4): error: identifier "
                         "\"undeclared_variable\" is undefined"))
        << e.log();
    EXPECT_TRUE(contains(e.what(), "broken.cu for sm_80")) << e.what();
    EXPECT_EQ(e.options().front(), "-arch=sm_80");
  }
  EXPECT_EQ(entries(), 0u);
  EXPECT_EQ(counter("nvrtc_failures"), 1);
}

// Through the drop-in a rejected source is NVRTC's answer, stored like any
// other, not a throw: it still counts as a compile error (issue 28).
TEST_F(CompilerTest, ProgramRejectedByNvrtcCountsAsACompileError) {
  ProgramSource program;
  program.source = "extern \"C\" __global__ void k() { undeclared_variable = 1; }\n";
  program.name = "rejected.cu";
  ProgramOptions mapped = program_options(program, {"-arch=sm_80"});
  ASSERT_TRUE(mapped.unsupported.empty()) << mapped.unsupported;
  ProgramResult result = compile_program(*compiler_, mapped.options);
  EXPECT_NE(result.record.compile_result, cache::kNvrtcSuccess);
  EXPECT_EQ(counter("nvrtc_failures"), 1);
  EXPECT_EQ(counter("nvrtc_invocations"), 1);
}

TEST_F(CompilerTest, FailureOnOneArchStoresNoArch) {
  write(dir_, "k.cu",
        "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900\n#error no sm_90 here\n#endif\n"
        "extern \"C\" __global__ void k() {}\n");
  CompileOptions o;
  o.source_path = dir_ + "/k.cu";
  o.archs = {"sm_80", "sm_90"};
  EXPECT_THROW(compiler_->compile(o), CompileError);
  EXPECT_EQ(entries(), 0u);
}

TEST_F(CompilerTest, MissingHeaderFailsNamingItAndEveryFolderSearched) {
  write(dir_, "src/k.cu", "#include \"nothere.h\"\nextern \"C\" __global__ void k() {}\n");
  CompileOptions o;
  o.source_path = dir_ + "/src/k.cu";
  o.archs = {"sm_80"};
  o.include_dirs = {dir_ + "/inc"};
  try {
    compiler_->compile(o);
    FAIL() << "expected CompileError";
  } catch (const CompileError& e) {
    EXPECT_TRUE(contains(e.what(), "\"nothere.h\" (included from " + dir_ +
                                       "/src/k.cu:1) was not found in: " + dir_ + "/src, " +
                                       dir_ + "/inc"))
        << e.what();
    EXPECT_TRUE(contains(e.log(), "cannot open source file \"nothere.h\"")) << e.log();
  }
}

TEST_F(CompilerTest, MissingIncludeInAnInactiveBlockIsFine) {
  write(dir_, "k.cu",
        "#if 0\n#include \"nothere.h\"\n#endif\nextern \"C\" __global__ void k() {}\n");
  CompileOptions o;
  o.source_path = dir_ + "/k.cu";
  o.archs = {"sm_80"};
  EXPECT_EQ(compiler_->compile(o).misses(), 1);
}

// A header found through -I as "lib/x.h" that includes a missing "y.h" is
// searched next to inc/lib/x.h, where NVRTC found it: ./lib/y.h (next to the
// spelling) is never read.
TEST_F(CompilerTest, NvrtcIsNeverServedAnUnkeyedHeaderFromDisk) {
  write(dir_, "k.cu", "#include <lib/x.h>\nextern \"C\" __global__ void k() {}\n");
  write(dir_, "inc/lib/x.h", "#include \"y.h\"\n");
  write(dir_, "lib/y.h", "#define SNEAKED_IN 1\n");
  ScopedCwd cwd(dir_);
  CompileOptions o;
  o.source_path = "k.cu";
  o.archs = {"sm_80"};
  o.include_dirs = {"inc"};
  try {
    compiler_->compile(o);
    FAIL() << "NVRTC read lib/y.h from disk";
  } catch (const CompileError& e) {
    EXPECT_TRUE(contains(e.log(), "inc/lib/x.h(1): catastrophic error: cannot open source file "
                                  "\"y.h\""))
        << e.log();
  }
}

TEST_F(CompilerTest, NestedRelativeIncludeCompilesTheRightHeader) {
  write(dir_, "k.cu",
        "#include \"a/x.h\"\nstatic_assert(FROM_A == 1, \"wrong b.h\");\n"
        "extern \"C\" __global__ void k() {}\n");
  write(dir_, "a/x.h", "#include \"b.h\"\n");
  write(dir_, "a/b.h", "#define FROM_A 1\n");
  write(dir_, "b.h", "#define FROM_A 2\n");
  ScopedCwd cwd(dir_);
  CompileOptions o;
  o.source_path = "k.cu";
  o.archs = {"sm_80"};
  EXPECT_EQ(compiler_->compile(o).misses(), 1);
}

TEST_F(CompilerTest, UnknownArchListsWhatThisNvrtcSupports) {
  try {
    compiler_->compile(kernel("saxpy.cu", {"sm_85"}));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(contains(e.what(), "sm_85 is not supported by NVRTC")) << e.what();
    EXPECT_TRUE(contains(e.what(), "sm_80, sm_86")) << e.what();
  }
  EXPECT_EQ(counter("nvrtc_invocations"), 0);
}

TEST_F(CompilerTest, MalformedArchSaysWhatAValidOneLooksLike) {
  auto message = [&](CompileOptions o) -> std::string {
    try {
      compiler_->compile(o);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_TRUE(contains(message(kernel("saxpy.cu", {"sm90"})), "such as sm_80"));
  EXPECT_TRUE(contains(message(kernel("saxpy.cu", {"sm90"})),
                       "\"sm90\" is not an architecture name (did you mean sm_90?)"));
  EXPECT_TRUE(contains(message(kernel("saxpy.cu", {"compute_90"})), "use --ptx compute_90"));
  EXPECT_TRUE(contains(message(kernel("saxpy.cu", {}, "sm_90")), "use --arch sm_90"));
  EXPECT_TRUE(contains(message(kernel("saxpy.cu", {})), "nothing to compile"));
  EXPECT_TRUE(contains(message(kernel("saxpy.cu", {"sm_80", "sm_80"})), "given twice"));
  EXPECT_EQ(parse_target("sm_90a", cache::TargetKind::cubin).number, 90);
  EXPECT_EQ(parse_target("sm_100f", cache::TargetKind::cubin).number, 100);
  // The grammar bundles are checked against (common/arch.h), no looser.
  for (const char* bad : {"sm_9000", "sm_9", "sm_05", "sm_90/..", "sm_90\n"}) {
    EXPECT_THROW(parse_target(bad, cache::TargetKind::cubin), InvalidArgument) << bad;
  }
}

TEST_F(CompilerTest, MissingOrUnreadableSourceSaysWhich) {
  EXPECT_THROW(compiler_->compile(kernel("nothere.cu", {"sm_80"})), NotFound);
  FileSystem::real().create_directories(dir_ + "/folder.cu", 0755);
  CompileOptions o;
  o.source_path = dir_ + "/folder.cu";
  o.archs = {"sm_80"};
  try {
    compiler_->compile(o);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_TRUE(contains(e.what(), "folder.cu")) << e.what();
  }
}

TEST_F(CompilerTest, OptionsThatWouldBypassTheKeyAreRefused) {
  for (const char* bad : {"-I/usr/include", "--include-path=/x", "-arch=sm_90", "--pre-include=x.h",
                          "-DX=1", "-std=c++20"}) {
    CompileOptions o = kernel("saxpy.cu", {"sm_80"});
    o.nvrtc_options = {bad};
    EXPECT_THROW(compiler_->keys(o), InvalidArgument) << bad;
  }
  CompileOptions o = kernel("saxpy.cu", {"sm_80"});
  o.nvrtc_options = {"-lineinfo", "--use_fast_math"};
  EXPECT_NO_THROW(compiler_->keys(o));
}

// -- keys -------------------------------------------------------------------

TEST_F(CompilerTest, EditingAnIncludedHeaderChangesTheKeyAndAnUnincludedOneDoesNot) {
  write(dir_, "k.cu", "#include \"used.h\"\nextern \"C\" __global__ void k() {}\n");
  write(dir_, "used.h", "#include <nested/deep.h>\n");
  write(dir_, "inc/nested/deep.h", "#define DEEP 1\n");
  write(dir_, "unused.h", "#define UNUSED 1\n");
  write(dir_, "inc/nested/unused.h", "#define UNUSED 1\n");
  ScopedCwd cwd(dir_);
  CompileOptions o;
  o.source_path = "k.cu";
  o.archs = {"sm_80", "sm_90"};
  o.ptx_arch = "compute_90";
  o.include_dirs = {"inc"};
  std::vector<Hash128> before = result_keys(o);

  write(dir_, "unused.h", "#define UNUSED 2\n");
  write(dir_, "inc/nested/unused.h", "#define UNUSED 2\n");
  const int64_t runs = counter("nvrtc_invocations");
  EXPECT_EQ(result_keys(o), before);
  EXPECT_EQ(counter("nvrtc_invocations"), runs) << "an unincluded header's edit is a hit";

  write(dir_, "inc/nested/deep.h", "#define DEEP 2\n");
  std::vector<Hash128> after = result_keys(o);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_NE(after[i], before[i]) << i;
}

TEST_F(CompilerTest, KeysDoNotDependOnTheCheckoutLocation) {
  // The same tree in two places, compiled from its root with -I relative to
  // it, as two CI machines with different checkout folders would: paths
  // beneath the working folder are keyed relative to it.
  std::vector<std::vector<Hash128>> keys;
  for (const std::string& checkout : {dir_ + "/ci-a", dir_ + "/elsewhere/ci-b"}) {
    write(checkout, "kernels/k.cu", "#include <lib/x.h>\n#include \"near.h\"\n");
    write(checkout, "kernels/near.h", "// near\n");
    write(checkout, "third_party/inc/lib/x.h", "// x\n");
    ScopedCwd cwd(checkout);
    CompileOptions o;
    o.source_path = "kernels/k.cu";
    o.archs = {"sm_90"};
    o.include_dirs = {"third_party/inc"};
    keys.push_back(result_keys(o));
  }
  EXPECT_EQ(keys[0], keys[1]);
  EXPECT_EQ(counter("nvrtc_invocations"), 1) << "the second checkout hits";
}

TEST_F(CompilerTest, KeyCoversEveryInputThatChangesTheImage) {
  CompileOptions base = kernel("saxpy.cu", {"sm_80", "sm_90"}, "compute_90");
  std::vector<Hash128> k = compiler_->keys(base);
  EXPECT_NE(k[0], k[1]);
  EXPECT_NE(k[1], k[2]);
  std::vector<CompileOptions> variants(6, base);
  variants[0].defines = {"X=1"};
  variants[1].std = "c++20";
  variants[2].nvrtc_options = {"-lineinfo"};
  variants[3].name_expressions = {"saxpy"};
  variants[4].source_path = "./" + base.source_path;  // the logical name NVRTC reports
  variants[5].archs = {"sm_80", "sm_90a"};
  for (size_t i = 0; i < variants.size(); ++i) {
    EXPECT_NE(compiler_->keys(variants[i])[1], k[1]) << "variant " << i;
  }
  EXPECT_EQ(compiler_->keys(base), k);
}

TEST_F(CompilerTest, SourceNameIsWhatTheKeyAndNvrtcSee) {
  std::string copy =
      write(dir_, "elsewhere/bazel-out/k8-opt/bin/saxpy.cu", *read_file(kKernels + "saxpy.cu"));
  CompileOptions a = kernel("saxpy.cu", {"sm_80"});
  CompileOptions b = a;
  b.source_path = copy;
  a.source_name = b.source_name = "kernels/saxpy.cu";
  EXPECT_EQ(compiler_->keys(a), compiler_->keys(b));
  a.source_name = "";
  EXPECT_NE(compiler_->keys(a), compiler_->keys(b));
}

// The runtime JIT hands the source over in memory: it is keyed (and its
// quoted includes found) exactly as the same file would be.
TEST_F(CompilerTest, SourceTextIsKeyedLikeTheSameFile) {
  write(dir_, "k.cu", "#include \"near.h\"\nextern \"C\" __global__ void k() {}\n");
  write(dir_, "near.h", "// near\n");
  ScopedCwd cwd(dir_);
  CompileOptions file;
  file.source_path = "k.cu";
  file.archs = {"sm_90"};
  CompileOptions text = file;
  text.source_path = "";
  text.source_name = "k.cu";
  text.source_text = *read_file("k.cu");
  std::vector<Hash128> before = result_keys(text);
  EXPECT_EQ(before, result_keys(file));
  write(dir_, "near.h", "// changed\n");
  EXPECT_NE(result_keys(text), before) << "the include next to it is keyed";
  text.source_name = "";
  EXPECT_THROW(compiler_->keys(text), InvalidArgument);
}

// A hit must not even load NVRTC: with the toolkit's libnvrtc replaced by a
// file that is not a library at all (its fingerprint, and so the key, kept),
// stored targets still come back; only a miss trips on it.
TEST_F(CompilerTest, HitNeverLoadsNvrtc) {
  CompileOptions o = kernel("saxpy.cu", {"sm_80"});
  Toolkit real = find_toolkit("");
  CompileResult stored = Compiler(real, storage_.get()).compile(o);
  Toolkit broken = real;
  broken.nvrtc.path = write(dir_, "fake-cuda/lib64/libnvrtc.so.13", "not a shared library");
  Compiler fake(broken, storage_.get());
  CompileResult r = fake.compile(o);
  EXPECT_EQ(r.hits(), 1);
  EXPECT_EQ(r.targets[0].entry->payload(), stored.targets[0].entry->payload());
  EXPECT_EQ(r.targets[0].compile_ms, stored.targets[0].compile_ms);
  try {
    fake.compile(kernel("saxpy.cu", {"sm_90"}));
    FAIL() << "a miss must load NVRTC";
  } catch (const NotFound& e) {
    EXPECT_TRUE(contains(e.what(), "cannot load NVRTC from " + broken.nvrtc.path)) << e.what();
  }
}

TEST_F(CompilerTest, WorksWithoutAStore) {
  Compiler uncached(find_toolkit(""), nullptr);
  CompileOptions o = kernel("saxpy.cu", {"sm_80"});
  EXPECT_EQ(uncached.compile(o).misses(), 1);
  EXPECT_EQ(uncached.compile(o).misses(), 1);
}

}  // namespace
}  // namespace kcache::compiler
