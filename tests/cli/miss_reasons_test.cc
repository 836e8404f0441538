// Why a compile missed, as a user asks it: `kcache compile -v` and `kcache
// explain` name what changed, `kcache run`'s summary does for a program's
// NVRTC compiles, and `kcache ls` names what each entry was compiled from.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cache/local/store.h"
#include "common/file_system.h"
#include "compiler/toolkit.h"
#include "tests/compiler/test_files.h"
#include "tests/testing/run_command.h"

namespace kcache::cli {
namespace {

using compiler::testing::test_dir;
using compiler::testing::write;
using kcache::testing::CommandResult;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string folder_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

class MissReasonsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_dir();
    src_ = write(dir_, "k.cu",
                 "#include \"inc/v.h\"\n"
                 "extern \"C\" __global__ void scale(float* p) { p[threadIdx.x] *= V; }\n");
    write(dir_, "inc/v.h", "#define V 2\n");
  }

  CommandResult kcache(std::vector<std::string> args,
                       const std::map<std::string, std::string>& env = {}) {
    args.insert(args.begin(), {kcache::testing::kcache_binary(), "--dir", dir_ + "/store"});
    return kcache::testing::run_command(args, env);
  }

  CommandResult compile(std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"compile",       src_, "--arch", "sm_80", "-o",
                                     dir_ + "/k.kcb", "-v"};
    args.insert(args.end(), more.begin(), more.end());
    return kcache(args);
  }

  int64_t counter(const std::string& name) {
    return cache::Store::open(dir_ + "/store")->stats().counter(name);
  }

  std::string dir_, src_;
};

TEST_F(MissReasonsTest, AHeaderEditThenVerboseCompileNamesTheHeader) {
  CommandResult first = compile();
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(contains(first.out, "miss")) << first.out;
  EXPECT_TRUE(contains(first.out, "(new source)")) << first.out;
  write(dir_, "inc/v.h", "#define V 3\n");
  CommandResult edited = compile();
  ASSERT_EQ(edited.exit_code, 0) << edited.err;
  EXPECT_TRUE(contains(edited.out, "cubin miss ")) << edited.out;
  EXPECT_TRUE(contains(edited.out, "inc/v.h changed)")) << edited.out;
  EXPECT_TRUE(contains(edited.out, "NVRTC took ")) << edited.out;
}

// A hit says what it took (the lookup), not what the stored compile took,
// and labels that as what it saved.
TEST_F(MissReasonsTest, AHitAtVerboseSaysItsLookupTimeAndWhatItSaved) {
  ASSERT_EQ(compile().exit_code, 0);
  CommandResult hit = compile();
  ASSERT_EQ(hit.exit_code, 0) << hit.err;
  EXPECT_TRUE(contains(hit.out, "cubin hit  ")) << hit.out;
  EXPECT_TRUE(contains(hit.out, ": looked up in ")) << hit.out;
  EXPECT_TRUE(contains(hit.out, " ms of NVRTC")) << hit.out;
  EXPECT_TRUE(contains(hit.out, ", saved ")) << hit.out;
}

// Options, the source and a target new to the source each say so; the
// lookup counts each target once (no miss counted for a hit on the way).
TEST_F(MissReasonsTest, WhatChangedSinceTheLastStoredCompileIsNamed) {
  ASSERT_EQ(compile({"-D", "N=3"}).exit_code, 0);
  EXPECT_TRUE(contains(compile({"-D", "N=4"}).out, "(options changed: -DN=4; dropped -DN=3)"));
  write(dir_, "k.cu",
        "#include \"inc/v.h\"\n"
        "extern \"C\" __global__ void scale(float* p) { p[threadIdx.x] += V; }\n");
  EXPECT_TRUE(contains(compile({"-D", "N=4"}).out, "k.cu changed)"));
  CommandResult target = kcache({"compile", src_, "--arch", "sm_80", "--ptx", "compute_80", "-D",
                                 "N=4", "-o", dir_ + "/k.kcb", "-v"});
  EXPECT_TRUE(contains(target.out, "sm_80 cubin hit ")) << target.out;
  EXPECT_TRUE(contains(target.out, "(new target compute_80)")) << target.out;
  EXPECT_EQ(counter("hits"), 1);
  EXPECT_EQ(counter("misses"), 4);
}

// An entry gone from the store (a clear) while the disk is as it was.
TEST_F(MissReasonsTest, AnEntryClearedFromTheStoreIsNotInStore) {
  ASSERT_EQ(compile().exit_code, 0);
  ASSERT_EQ(kcache({"-C"}).exit_code, 0);
  EXPECT_TRUE(contains(compile().out, "(not in store)"));
}

TEST_F(MissReasonsTest, ExplainSaysHitOrMissAndWhyWithoutCompiling) {
  CommandResult before = kcache({"explain", src_, "--arch", "sm_80"});
  EXPECT_EQ(before.exit_code, 5) << before.err;
  EXPECT_TRUE(contains(before.out, "sm_80 cubin miss (new source)")) << before.out;
  ASSERT_EQ(compile().exit_code, 0);
  const int64_t compiles = counter("nvrtc_invocations");
  CommandResult hit = kcache({"explain", src_, "--arch", "sm_80"});
  EXPECT_EQ(hit.exit_code, 0) << hit.err;
  EXPECT_TRUE(contains(hit.out, "sm_80 cubin hit ")) << hit.out;
  write(dir_, "inc/v.h", "#define V 4\n");
  CommandResult miss = kcache({"--format", "json", "explain", src_, "--arch", "sm_80"});
  EXPECT_EQ(miss.exit_code, 5) << miss.err;
  nlohmann::json j = nlohmann::json::parse(miss.out);
  EXPECT_EQ(j["targets"][0]["hit"], false);
  EXPECT_TRUE(contains(j["targets"][0]["miss_reason"].get<std::string>(), "inc/v.h changed"))
      << miss.out;
  EXPECT_EQ(counter("nvrtc_invocations"), compiles) << "explain compiled";
  EXPECT_EQ(counter("hits") + counter("misses"), 1) << "explain counted its lookups";
}

TEST_F(MissReasonsTest, LsNamesEachEntrysSourceAndKernels) {
  ASSERT_EQ(
      kcache({"compile", src_, "--arch", "sm_80", "--ptx", "compute_80", "-o", dir_ + "/k.kcb"})
          .exit_code,
      0);
  CommandResult ls = kcache({"ls"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_TRUE(contains(ls.out, "SOURCE")) << ls.out;
  EXPECT_TRUE(contains(ls.out, src_)) << ls.out;
  EXPECT_TRUE(contains(ls.out, "scale")) << ls.out;
  nlohmann::json j = nlohmann::json::parse(kcache({"--format", "json", "ls"}).out);
  ASSERT_EQ(j.size(), 2u);
  for (const nlohmann::json& e : j) {
    EXPECT_EQ(e["source"], src_) << e.dump();
    EXPECT_EQ(e["kernels"], nlohmann::json::array({"scale"})) << e.dump();
  }
}

// `kcache run` with the drop-in: flags before `--`, and a program's miss
// after a header edit named in the summary.
TEST_F(MissReasonsTest, RunTakesVerboseAndQuietBeforeTheCommand) {
  const std::string real = folder_of(compiler::find_toolkit("").nvrtc.path);
  const std::map<std::string, std::string> env = {{"KCACHE_DIR", dir_ + "/store"},
                                                  {"LD_LIBRARY_PATH", real},
                                                  {"KCACHE_SHIM_STATS", ""},
                                                  {"KCACHE_QUIET", ""},
                                                  {"KCACHE_REMOTE", ""}};
  auto run = [&](const std::string& flag) {
    std::vector<std::string> args = {kcache::testing::kcache_binary(), "run"};
    if (!flag.empty()) args.push_back(flag);
    args.insert(args.end(), {"--", kcache::testing::runfile("tests/cli/nvrtc_one"), dir_ + "/inc"});
    return kcache::testing::run_command(args, env);
  };
  CommandResult first = run("-v");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(contains(first.err, "kcache run: miss k.cu (new source)")) << first.err;
  EXPECT_TRUE(contains(first.err, "1 NVRTC compile: 0 hits, 1 miss (new source)")) << first.err;

  CommandResult hit = run("");
  ASSERT_EQ(hit.exit_code, 0) << hit.err;
  EXPECT_TRUE(contains(hit.err, "1 hit")) << hit.err;
  EXPECT_TRUE(contains(hit.err, "wall time saved ")) << hit.err;

  write(dir_, "inc/v.h", "#define V 5\n");
  CommandResult edited = run("");
  ASSERT_EQ(edited.exit_code, 0) << edited.err;
  EXPECT_TRUE(contains(edited.err, "1 miss (")) << edited.err;
  EXPECT_TRUE(contains(edited.err, "inc/v.h changed)")) << edited.err;

  CommandResult quiet = run("-q");
  EXPECT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
}

}  // namespace
}  // namespace kcache::cli
