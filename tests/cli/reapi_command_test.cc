// kcache with a grpc:// remote (the Remote Execution API), run as a user runs
// it, against a real BuildGrid on loopback: two machines share kernels with no
// NVRTC run on the second, and `kcache remote check` works.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cache/local/store.h"
#include "tests/testing/buildgrid_server.h"
#include "tests/testing/http_servers.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tls_certificates.h"

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
  EXPECT_EQ(counter("a", "remote_stored"), 4);  // two entries and their manifests

  r = kcache("b",
             {"--format", "json", "compile", kSaxpy, "--arch", "sm_80,sm_90", "-o", dir_ / "b.kcb"},
             {{"KCACHE_REMOTE", server.url()}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"hits\": 2"), std::string::npos) << r.out;
  EXPECT_EQ(counter("b", "nvrtc_invocations"), 0);
  EXPECT_EQ(counter("b", "remote_hits"), 4);
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

// The TLS settings as a user passes them (flags), against a BuildGrid that
// requires mutual TLS: `remote check` says OK with all three files, and
// without the CA file says what is wrong and which setting fixes it.
TEST_F(ReapiCommandTest, CheckOverMutualTlsSaysOkWithTheCertificatesAndNamesTheTlsProblemWithout) {
  if (kcache::testing::find_openssl().empty()) {
    GTEST_SKIP() << "the openssl program is not installed; tools/install_deps.sh installs it";
  }
  TempDir certs_dir;
  const kcache::testing::TlsCertificates certs =
      kcache::testing::make_tls_certificates(certs_dir.path());
  kcache::testing::BuildGridOptions options;
  options.tls_server_cert = certs.server_cert;
  options.tls_server_key = certs.server_key;
  options.tls_client_ca = certs.ca_cert;
  BuildGridServer server(options);
  const std::vector<std::string> client_certificate = {
      "--remote-tls-client-cert-file", certs.client_cert, "--remote-tls-client-key-file",
      certs.client_key};

  std::vector<std::string> args = {
      "remote", "check", "--remote", server.url(), "--remote-tls-ca-file", certs.ca_cert};
  args.insert(args.end(), client_certificate.begin(), client_certificate.end());
  CommandResult ok = kcache("m", args);
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("client certificate " + certs.client_cert), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("Verdict:   OK: the remote answers and takes writes"), std::string::npos)
      << ok.out;

  args = {"remote", "check", "--remote", server.url(), "--remote-timeout", "5s"};
  args.insert(args.end(), client_certificate.begin(), client_certificate.end());
  CommandResult untrusted = kcache("m", args);
  EXPECT_EQ(untrusted.exit_code, 1) << untrusted.out << untrusted.err;
  EXPECT_NE(untrusted.out.find("certificate verify failed"), std::string::npos) << untrusted.out;
  EXPECT_NE(untrusted.out.find("set remote_tls_ca_file"), std::string::npos) << untrusted.out;
}

}  // namespace
}  // namespace kcache::cli
