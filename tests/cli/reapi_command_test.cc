// kcache with a grpc:// remote (the Remote Execution API), run as a user runs
// it, against a real BuildGrid on loopback: two machines share kernels with no
// NVRTC run on the second, and `kcache remote check` works.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cache/store.h"
#include "tests/testing/buildgrid_server.h"
#include "tests/testing/http_servers.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cli {
namespace {

using kcache::testing::BuildGridServer;
using kcache::testing::CommandResult;
using kcache::testing::TempDir;

const std::string kSaxpy = "tests/compiler/kernels/saxpy.cu";

class ReapiCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (BuildGridServer::find_bgd().empty()) {
      GTEST_SKIP() << "BuildGrid is not installed; tools/install_deps.sh installs it";
    }
  }
  CommandResult kcache(const std::string& machine, std::vector<std::string> args,
                       const std::map<std::string, std::string>& env = {}) {
    args.insert(args.begin(), {kcache::testing::kcache_binary(), "--dir", dir_ / machine});
    return kcache::testing::run_command(args, env);
  }
  int64_t counter(const std::string& machine, const std::string& name) {
    return cache::Store::open(dir_ / machine)->stats().counter(name);
  }
  TempDir dir_;
};

TEST_F(ReapiCommandTest, SecondMachineGetsEveryTargetThroughTheRemoteWithoutNvrtc) {
  BuildGridServer server;
  CommandResult r = kcache("a", {"compile", kSaxpy, "--arch", "sm_80,sm_90", "--remote",
                                 server.url(), "-o", dir_ / "a.kcb"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(counter("a", "nvrtc_invocations"), 2);
  EXPECT_EQ(counter("a", "remote_stored"), 2);

  r = kcache("b",
             {"--format", "json", "compile", kSaxpy, "--arch", "sm_80,sm_90", "-o", dir_ / "b.kcb"},
             {{"KCACHE_REMOTE", server.url()}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"hits\": 2"), std::string::npos) << r.out;
  EXPECT_EQ(counter("b", "nvrtc_invocations"), 0);
  EXPECT_EQ(counter("b", "remote_hits"), 2);
  EXPECT_EQ(kcache::testing::read_file_or_die(dir_ / "b.kcb"),
            kcache::testing::read_file_or_die(dir_ / "a.kcb"));
}

// The hit path's start-up: with a grpc:// remote configured, a build step whose
// lookups hit the local store never loads gRPC (the dynamic loader's own log
// lists every library opened, dlopen included); a miss does.
TEST_F(ReapiCommandTest, LocalHitWithAGrpcRemoteConfiguredNeverLoadsGrpc) {
  ASSERT_EQ(kcache("m", {"compile", kSaxpy, "--arch", "sm_90", "-o", dir_ / "a.kcb"}).exit_code, 0);
  const std::map<std::string, std::string> env = {
      {"KCACHE_REMOTE", "grpc://127.0.0.1:" + std::to_string(kcache::testing::unused_port())},
      {"LD_DEBUG", "files"}};
  CommandResult hit =
      kcache("m", {"compile", kSaxpy, "--arch", "sm_90", "-o", dir_ / "b.kcb"}, env);
  ASSERT_EQ(hit.exit_code, 0) << hit.err;
  EXPECT_EQ(hit.err.find("libkcache_reapi"), std::string::npos) << hit.err;
  EXPECT_EQ(hit.err.find("libgrpc"), std::string::npos) << hit.err;

  CommandResult miss =
      kcache("n", {"compile", kSaxpy, "--arch", "sm_90", "-o", dir_ / "c.kcb"}, env);
  ASSERT_EQ(miss.exit_code, 0) << miss.err;  // the dead server costs nothing but a warning
  EXPECT_NE(miss.err.find("libkcache_reapi.so"), std::string::npos);
  EXPECT_NE(miss.err.find("libgrpc++"), std::string::npos);
}

TEST_F(ReapiCommandTest, CheckSaysOkAndNamesTheProtocol) {
  BuildGridServer server;
  CommandResult r = kcache("m", {"remote", "check", "--remote", server.url()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Remote Execution API v2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Verdict:   OK: the remote answers and takes writes"), std::string::npos)
      << r.out;
  // REAPI has no delete: the probe stays until the server evicts it.
  EXPECT_NE(r.out.find("harmless"), std::string::npos) << r.out;
}

TEST_F(ReapiCommandTest, CheckFailsWhenTheServerIsDown) {
  CommandResult r =
      kcache("m", {"remote", "check", "--remote",
                   "grpc://127.0.0.1:" + std::to_string(kcache::testing::unused_port()),
                   "--remote-timeout", "2s"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAILED: the remote does not answer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("UNAVAILABLE"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kcache::cli
