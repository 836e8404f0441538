// Direct-mode manifests (cache/format/manifest.h): a result that needed headers NVRTC
// asked for (a computed include) is found by a lookup without compiling, and
// only when replaying its asks against the disk gives the same files. Every
// result is compared with a compile without a store of the files as they are.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstdio>
#include <memory>

#include "cache/format/manifest.h"
#include "cache/remote/remote.h"
#include "cache/storage.h"
#include "common/file_system.h"
#include "compiler/compiler.h"
#include "compiler/toolkit.h"
#include "tests/compiler/test_files.h"
#include "tests/testing/http_servers.h"

namespace kcache::compiler {
namespace {

using testing::test_dir;
using testing::write;

const char kStringize[] = "#define STR2(x) #x\n#define STR(x) STR2(x)\n";
const char kKernel[] = "extern \"C\" __global__ void k(int* p) { *p = V; }\n";

class DirectModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_dir();
    toolkit_ = find_toolkit("");
    storage_ = storage_at(dir_ + "/store");
    cached_ = std::make_unique<Compiler>(toolkit_, storage_.get());
    fresh_ = std::make_unique<Compiler>(toolkit_, nullptr);
  }

  std::unique_ptr<cache::Storage> storage_at(const std::string& dir,
                                             std::optional<cache::RemoteOptions> remote = {}) {
    cache::StorageOptions options;
    options.local_dir = dir;
    options.remote = std::move(remote);
    return std::make_unique<cache::Storage>(options);
  }

  // The kernel: a header chosen by a stringized -D.
  CompileOptions computed(const std::string& variant = "v7") {
    write(dir_, "k.cu", std::string(kStringize) + "#include STR(VARIANT.cuh)\n" + kKernel);
    CompileOptions o;
    o.source_path = dir_ + "/k.cu";
    o.source_name = "k.cu";
    o.working_folder = dir_;
    o.archs = {"sm_80"};
    o.defines = {"VARIANT=" + variant};
    return o;
  }

  int64_t counter(cache::Storage& s, const std::string& name) {
    return s.local()->stats().counter(name);
  }

  // Compiles through `compiler`, checks the bundle equals a compile without
  // a store, and returns how many NVRTC runs it took.
  int64_t nvrtc_runs(Compiler& compiler, cache::Storage& s, const CompileOptions& o,
                     CompileResult* out = nullptr) {
    int64_t before = counter(s, "nvrtc_invocations");
    CompileResult got = compiler.compile(o);
    CompileResult want = fresh_->compile(o);
    EXPECT_EQ(got.bundle, want.bundle) << "differs from a compile without a store";
    EXPECT_EQ(got.targets[0].key, want.targets[0].key);
    if (out) *out = std::move(got);
    return counter(s, "nvrtc_invocations") - before;
  }

  Hash128 manifest_key_of(const CompileOptions& o) {
    return cache::manifest_key(cached_->keys(o)[0]);
  }

  std::string dir_;
  Toolkit toolkit_;
  std::unique_ptr<cache::Storage> storage_;
  std::unique_ptr<Compiler> cached_, fresh_;
};

TEST_F(DirectModeTest, AComputedIncludeIsAHitWithZeroNvrtcRuns) {
  write(dir_, "v7.cuh", "#define V 7\n");
  CompileOptions o = computed();
  EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o), 1);
  CompileResult hit;
  EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o, &hit), 0);
  EXPECT_EQ(hit.hits(), 1);
  EXPECT_EQ(counter(*storage_, "manifest_hits"), 1);
  EXPECT_EQ(counter(*storage_, "uncached_compiles"), 0);
  // One lookup per compile in the statistics, however many keys it tried.
  EXPECT_EQ(counter(*storage_, "hits"), 1);
  EXPECT_EQ(counter(*storage_, "misses"), 1);
}

TEST_F(DirectModeTest, EditingTheComputedHeaderIsAMissEqualToAFreshCompile) {
  write(dir_, "v7.cuh", "#define V 7\n");
  CompileOptions o = computed();
  CompileResult before, after;
  nvrtc_runs(*cached_, *storage_, o, &before);
  write(dir_, "v7.cuh", "#define V 9\n");
  EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o, &after), 1) << "the edit must be compiled";
  EXPECT_NE(after.bundle, before.bundle);
  // Both variants are now in the manifest: either is a hit.
  EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o), 0);
  write(dir_, "v7.cuh", "#define V 7\n");
  EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o), 0);
  EXPECT_EQ(counter(*storage_, "manifest_hits"), 2);
}

TEST_F(DirectModeTest, AHeaderBroughtByTheComputedOneIsChecked) {
  write(dir_, "v7.cuh", "#include \"deep.cuh\"\n");
  write(dir_, "deep.cuh", "#define V 1\n");
  CompileOptions o = computed();
  nvrtc_runs(*cached_, *storage_, o);
  write(dir_, "deep.cuh", "#define V 2\n");
  EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o), 1);
}

TEST_F(DirectModeTest, AHeaderAppearingInAnEarlierIncludeFolderChangesTheResult) {
  write(dir_, "inc2/v7.cuh", "#define V 2\n");
  // The source lives elsewhere, so the -I folders decide.
  write(dir_, "src/k.cu", std::string(kStringize) + "#include STR(VARIANT.cuh)\n" + kKernel);
  CompileOptions o;
  o.source_path = dir_ + "/src/k.cu";
  o.source_name = "k.cu";
  o.working_folder = dir_ + "/src";
  o.archs = {"sm_80"};
  o.defines = {"VARIANT=v7"};
  o.include_dirs = {dir_ + "/inc1", dir_ + "/inc2"};
  CompileResult from_second, from_first;
  nvrtc_runs(*cached_, *storage_, o, &from_second);
  EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o), 0);
  write(dir_, "inc1/v7.cuh", "#define V 1\n");
  EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o, &from_first), 1);
  EXPECT_NE(from_first.bundle, from_second.bundle);
  // Same content in the earlier folder: another file NVRTC read (its path
  // can reach the output through __FILE__), another key; the same image.
  write(dir_, "inc1/v7.cuh", "#define V 2\n");
  CompileResult same;
  EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o, &same), 1);
  EXPECT_EQ(same.targets[0].entry->payload(), from_second.targets[0].entry->payload());
}

TEST_F(DirectModeTest, ACorruptManifestIsAMissAndIsReplaced) {
  write(dir_, "v7.cuh", "#define V 7\n");
  CompileOptions o = computed();
  nvrtc_runs(*cached_, *storage_, o);
  const std::string path = cache::manifest_path(dir_ + "/store", manifest_key_of(o));
  std::optional<std::string> bytes = read_file(path);
  ASSERT_TRUE(bytes) << path;
  (*bytes)[bytes->size() / 2] ^= 0x20;
  write_file_atomically(path, *bytes);
  EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o), 1);
  EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o), 0) << "the manifest was not replaced";
}

TEST_F(DirectModeTest, AForgedManifestCanOnlyCauseAMiss) {
  write(dir_, "v7.cuh", "#define V 7\n");
  CompileOptions o = computed();
  CompileResult first;
  nvrtc_runs(*cached_, *storage_, o, &first);
  // A manifest whose recorded hash matches the old content, while the disk
  // holds another: the key is computed from the disk, so never the old entry.
  write(dir_, "v7.cuh", "#define V 8\n");
  Hash128 key = manifest_key_of(o);
  cache::Manifest forged(key);
  forged.add({{"v7.cuh", "k.cu", false, {{"v7.cuh", xxh3_64("#define V 8\n")}}}});
  cache::write_manifest_file(dir_ + "/store", forged);
  CompileResult second;
  nvrtc_runs(*cached_, *storage_, o, &second);  // equal to a fresh compile
  EXPECT_NE(second.bundle, first.bundle);
}

TEST_F(DirectModeTest, AForgedIncluderCannotLeadToAnotherCompilesResult) {
  // k.cu asks for v7.cuh, found next to it. A forged set claims the ask came
  // from b/h.cuh, whose folder holds a v7.cuh with the old content: the
  // replay resolves there, hands the old bytes, and without the asks in the
  // key would land on the first compile's entry while the disk says V 9.
  write(dir_, "b/h.cuh", "// a handed header in another folder\n");
  write(dir_, "b/v7.cuh", "#define V 7\n");
  write(dir_, "v7.cuh", "#define V 7\n");
  CompileOptions o = computed();  // writes the plain k.cu, replaced here
  write(dir_, "k.cu",
        std::string(kStringize) + "#include \"b/h.cuh\"\n#include STR(VARIANT.cuh)\n" + kKernel);
  CompileResult first;
  EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o, &first), 1);
  write(dir_, "v7.cuh", "#define V 9\n");
  cache::Manifest forged(manifest_key_of(o));
  forged.add({{"v7.cuh", "b/h.cuh", false, {{"v7.cuh", xxh3_64("#define V 7\n")}}}});
  cache::write_manifest_file(dir_ + "/store", forged);
  CompileResult second;
  EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o, &second), 1) << "must compile, not hit";
  EXPECT_NE(second.bundle, first.bundle);
  EXPECT_EQ(counter(*storage_, "manifest_hits"), 0);
}

TEST_F(DirectModeTest, SeventeenSetsKeepTheNewestSixteen) {
  CompileOptions o = computed();
  for (int v = 0; v < 17; ++v) {
    write(dir_, "v7.cuh", "#define V " + std::to_string(v) + "\n");
    EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o), 1) << v;
  }
  std::optional<std::string> bytes =
      read_file(cache::manifest_path(dir_ + "/store", manifest_key_of(o)));
  ASSERT_TRUE(bytes);
  cache::Manifest m = cache::Manifest::decode(*bytes, manifest_key_of(o));
  ASSERT_EQ(m.sets().size(), cache::kMaxManifestSets);
  // The newest set holds what the last compile read: v7.cuh's last bytes.
  const std::vector<cache::ManifestProbe>& newest = m.sets().front().probes;
  auto v7 = std::find_if(newest.begin(), newest.end(), [](const cache::ManifestProbe& p) {
    return p.path.size() >= 6 && p.path.compare(p.path.size() - 6, 6, "v7.cuh") == 0;
  });
  ASSERT_NE(v7, newest.end());
  EXPECT_EQ(v7->content, xxh3_128("#define V 16\n"));
  // The oldest set was dropped: its entry is stored but no lookup reaches it.
  write(dir_, "v7.cuh", "#define V 0\n");
  EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o), 1);
  write(dir_, "v7.cuh", "#define V 2\n");
  EXPECT_EQ(nvrtc_runs(*cached_, *storage_, o), 0);
}

TEST_F(DirectModeTest, ClearRemovesManifests) {
  write(dir_, "v7.cuh", "#define V 7\n");
  CompileOptions o = computed();
  nvrtc_runs(*cached_, *storage_, o);
  const std::string path = cache::manifest_path(dir_ + "/store", manifest_key_of(o));
  ASSERT_TRUE(read_file(path));
  storage_->local()->clear();
  EXPECT_FALSE(read_file(path));
}

TEST_F(DirectModeTest, ARemoteSharesManifestsBetweenMachines) {
  kcache::testing::NginxServer nginx;
  cache::RemoteOptions remote;
  remote.url = nginx.url("/cache");
  write(dir_, "hmac.key", "0123456789abcdef0123456789abcdef");
  remote.hmac_key_file = dir_ + "/hmac.key";
  write(dir_, "v7.cuh", "#define V 7\n");
  CompileOptions o = computed();
  {
    std::unique_ptr<cache::Storage> a = storage_at(dir_ + "/a", remote);
    Compiler compiler(toolkit_, a.get());
    EXPECT_EQ(nvrtc_runs(compiler, *a, o), 1);
  }
  std::unique_ptr<cache::Storage> b = storage_at(dir_ + "/b", remote);
  Compiler compiler(toolkit_, b.get());
  EXPECT_EQ(nvrtc_runs(compiler, *b, o), 0) << "the manifest did not travel";
  EXPECT_EQ(counter(*b, "manifest_hits"), 1);
  // Copied locally: the next lookup does not need the remote.
  EXPECT_TRUE(read_file(cache::manifest_path(dir_ + "/b", manifest_key_of(o))));

  // A read-only remote never receives a manifest.
  cache::RemoteOptions read_only = remote;
  read_only.read_only = true;
  int puts = nginx.count_requests("PUT");
  std::unique_ptr<cache::Storage> c = storage_at(dir_ + "/c", read_only);
  Compiler c_compiler(toolkit_, c.get());
  write(dir_, "v7.cuh", "#define V 3\n");
  EXPECT_EQ(nvrtc_runs(c_compiler, *c, o), 1);
  EXPECT_EQ(nginx.count_requests("PUT"), puts);
}

}  // namespace
}  // namespace kcache::compiler
