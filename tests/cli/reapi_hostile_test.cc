// kcache against Remote Execution API servers that lie, run as a user runs it
// (the kcache binary as a child): one misbehaviour per test, from
// tests/testing/hostile_reapi_server.py. Each checks that the kernel still
// comes out right (the bytes a compile without any remote gives), that the
// lie costs bounded time and memory (the child's peak RSS, from wait4), and
// that the one warning names the problem.
//
// The bounds are correctness bounds, not benchmarks: far above what a good
// run takes, far below what the lie cost before it was bounded (a 200 MiB
// batch reply: 619 MB peak; a peer that never answers: the 10 s timeout).
#include <gtest/gtest.h>

#include "cache/local/store.h"
#include "tests/testing/hostile_reapi_server.h"
#include "tests/testing/run_command.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cli {
namespace {

using kcache::testing::CommandResult;
using kcache::testing::HostileReapiServer;
using kcache::testing::TempDir;

const std::string kSaxpy = "tests/compiler/kernels/saxpy.cu";
// A compile that reads a 200 MiB reply whole peaks above this; one compile
// normally peaks near 95 MB (NVRTC), 200 MiB more is 300.
constexpr long kPeakRssBoundKb = 180 * 1000;
// Under the 10 s remote timeout a lie would cost, with room for a slow compile.
constexpr double kSecondsBound = 8;

int count_of(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

class ReapiHostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (HostileReapiServer::find_python().empty()) {
      GTEST_SKIP() << "the BuildGrid venv is not installed; tools/install_deps.sh installs it";
    }
  }
  CommandResult kcache(const std::string& machine, std::vector<std::string> args) {
    args.insert(args.begin(), {kcache::testing::kcache_binary(), "--dir", dir_ / machine});
    return kcache::testing::run_command(args);
  }
  // Compiles saxpy for `arch` on a fresh machine; the result's bytes.
  std::string compile(const std::string& machine, const std::string& arch,
                      const std::vector<std::string>& remote, CommandResult* result = nullptr) {
    std::vector<std::string> args = {"compile", kSaxpy, "--arch",
                                     arch,      "-o",   dir_ / (machine + ".kcb")};
    args.insert(args.end(), remote.begin(), remote.end());
    CommandResult r = kcache(machine, args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (result) *result = r;
    return kcache::testing::read_file_or_die(dir_ / (machine + ".kcb"));
  }
  int64_t counter(const std::string& machine, const std::string& name) {
    return cache::Store::open(dir_ / machine)->stats().counter(name);
  }
  // Machine "writer" uploads honestly (the server stores honestly); then
  // machine "reader" finds the action result and meets the lie. Returns the
  // reader's run, after checking it compiled the same bytes as "writer".
  CommandResult read_back(HostileReapiServer& server, const std::vector<std::string>& flags = {}) {
    std::vector<std::string> remote = {"--remote", server.url()};
    remote.insert(remote.end(), flags.begin(), flags.end());
    const std::string expected = compile("writer", "sm_90", remote);
    // The entry and its manifest (what NVRTC read, served: issue 27).
    EXPECT_EQ(counter("writer", "remote_stored"), 2);
    CommandResult r;
    EXPECT_EQ(compile("reader", "sm_90", remote, &r), expected);
    EXPECT_EQ(counter("reader", "remote_hits"), 0);
    EXPECT_EQ(counter("reader", "nvrtc_invocations"), 1);  // compiled instead
    EXPECT_LT(r.peak_rss_kb, kPeakRssBoundKb);
    EXPECT_LT(r.seconds, kSecondsBound);
    EXPECT_EQ(count_of(r.err, "kcache: warning:"), 1) << r.err;
    return r;
  }
  TempDir dir_;
};

TEST_F(ReapiHostileTest, HonestServerIsAHitSoTheLiesBelowAreWhatFails) {
  HostileReapiServer server("honest");
  const std::string expected = compile("writer", "sm_90", {"--remote", server.url()});
  CommandResult r;
  EXPECT_EQ(compile("reader", "sm_90", {"--remote", server.url()}, &r), expected);
  EXPECT_EQ(counter("reader", "remote_hits"), 2);  // the manifest, then the entry
  EXPECT_EQ(counter("reader", "nvrtc_invocations"), 0);
  EXPECT_EQ(r.err, "");
}

TEST_F(ReapiHostileTest, OversizedBatchReplyIsCutOffWhileItArrivesAndTheRemoteIsDropped) {
  HostileReapiServer server("oversized-batch");
  CommandResult r = read_back(server);
  EXPECT_NE(r.err.find("BatchReadBlobs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("answered with more than was asked for"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not using it again in this process"), std::string::npos) << r.err;
  EXPECT_EQ(counter("reader", "remote_errors"), 1);
}

TEST_F(ReapiHostileTest, WrongDigestBytesAreRejectedAndCompiledInstead) {
  HostileReapiServer server("wrong-digest");
  CommandResult r = read_back(server);
  EXPECT_NE(r.err.find("does not match its digest"), std::string::npos) << r.err;
  EXPECT_EQ(counter("reader", "remote_rejected"), 2);  // the manifest and the entry
}

TEST_F(ReapiHostileTest, EndlessByteStreamIsStoppedAtTheDigestsSize) {
  HostileReapiServer server("endless-bytestream");
  CommandResult r = read_back(server);
  EXPECT_NE(r.err.find("ByteStream.Read"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sent more than the"), std::string::npos) << r.err;
  EXPECT_EQ(counter("reader", "remote_errors"), 1);
}

// Not the batch-read channel: the one for every other reply, whose limit is
// gRPC's usual 4 MiB, with its own memory quota.
TEST_F(ReapiHostileTest, OversizedByteStreamChunkIsCutOffWhileItArrives) {
  HostileReapiServer server("oversized-chunk");
  CommandResult r = read_back(server);
  EXPECT_NE(r.err.find("ByteStream.Read"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("answered with more than was asked for"), std::string::npos) << r.err;
  EXPECT_EQ(counter("reader", "remote_errors"), 1);
}

TEST_F(ReapiHostileTest, StalledByteStreamCostsTheRemoteTimeoutOnce) {
  HostileReapiServer server("stalled-bytestream");
  CommandResult r = read_back(server, {"--remote-timeout", "2s"});
  EXPECT_NE(r.err.find("ByteStream.Read"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("timed out after 2000 ms (remote_timeout)"), std::string::npos) << r.err;
}

TEST_F(ReapiHostileTest, PeerThatAcceptsAndNeverAnswersCostsTheConnectTimeoutNotTheWholeTimeout) {
  HostileReapiServer server("silent");
  const std::string expected = compile("alone", "sm_90", {});
  CommandResult r;
  // The default remote timeout (10 s) stays; the connect timeout (1 s) bounds it.
  EXPECT_EQ(compile("m", "sm_90", {"--remote", server.url()}, &r), expected);
  EXPECT_LT(r.seconds, kSecondsBound);
  EXPECT_LT(r.peak_rss_kb, kPeakRssBoundKb);
  EXPECT_EQ(count_of(r.err, "kcache: warning:"), 1) << r.err;
  EXPECT_NE(r.err.find("could not connect within 1 s (remote_connect_timeout)"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("not a REAPI/gRPC server"), std::string::npos) << r.err;

  // grpcs://: the TLS handshake is never answered either.
  const std::string tls_url = "grpcs://" + server.url().substr(7);
  EXPECT_EQ(compile("tls", "sm_90", {"--remote", tls_url}, &r), expected);
  EXPECT_LT(r.seconds, kSecondsBound);
  EXPECT_EQ(count_of(r.err, "kcache: warning:"), 1) << r.err;
  EXPECT_NE(r.err.find("could not connect within 1 s"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("TLS handshake"), std::string::npos) << r.err;

  CommandResult check = kcache("m", {"remote", "check", "--remote", server.url()});
  EXPECT_EQ(check.exit_code, 1) << check.out << check.err;
  EXPECT_LT(check.seconds, kSecondsBound);
  EXPECT_NE(check.out.find("could not connect within 1 s"), std::string::npos) << check.out;
}

TEST_F(ReapiHostileTest, WriteOnlyRemoteIsNoticedAfterItsUploadsWithOneWarning) {
  HostileReapiServer server("write-only");
  const std::string expected = compile("alone", "sm_80,sm_90", {});
  CommandResult r;
  EXPECT_EQ(compile("m", "sm_80,sm_90", {"--remote", server.url()}, &r), expected);
  EXPECT_EQ(counter("m", "remote_stored"), 4);  // two entries and their manifests
  EXPECT_LT(r.seconds, kSecondsBound);
  EXPECT_EQ(count_of(r.err, "kcache: warning:"), 1) << r.err;
  EXPECT_NE(r.err.find("took 2 uploads but had none of them"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stores but never returns"), std::string::npos) << r.err;

  // `remote check` says the same, in REAPI terms.
  CommandResult check = kcache("m", {"remote", "check", "--remote", server.url()});
  EXPECT_EQ(check.exit_code, 1) << check.out << check.err;
  EXPECT_NE(check.out.find("UpdateActionResult"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("GetActionResult right after answered NOT_FOUND"), std::string::npos)
      << check.out;
  EXPECT_EQ(check.out.find("PUT"), std::string::npos) << check.out;
}

TEST_F(ReapiHostileTest, GarbageBytesPeerIsNamedAsNotAReapiServer) {
  HostileReapiServer server("garbage");
  const std::string expected = compile("alone", "sm_90", {});
  CommandResult r;
  EXPECT_EQ(compile("m", "sm_90", {"--remote", server.url()}, &r), expected);
  EXPECT_LT(r.seconds, kSecondsBound);
  EXPECT_EQ(count_of(r.err, "kcache: warning:"), 1) << r.err;
  EXPECT_NE(r.err.find("does not speak gRPC: not a REAPI/gRPC server"), std::string::npos) << r.err;
}

TEST_F(ReapiHostileTest, Http1PeerIsNamedAsNotAReapiServer) {
  HostileReapiServer server("http1");
  const std::string expected = compile("alone", "sm_90", {});
  CommandResult r;
  EXPECT_EQ(compile("m", "sm_90", {"--remote", server.url()}, &r), expected);
  EXPECT_LT(r.seconds, kSecondsBound);
  EXPECT_EQ(count_of(r.err, "kcache: warning:"), 1) << r.err;
  EXPECT_NE(r.err.find("speaks HTTP/1.1: not a REAPI/gRPC server"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("last error: OK"), std::string::npos) << r.err;
}

TEST_F(ReapiHostileTest, RemoteCheckAgainstAnHonestServerNamesTheRpcs) {
  HostileReapiServer server("honest");
  CommandResult check = kcache("m", {"remote", "check", "--remote", server.url()});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_NE(check.out.find("GetCapabilities: SHA-256 offered"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("FindMissingBlobs, BatchUpdateBlobs"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("BatchReadBlobs (ByteStream.Read) back and verified"), std::string::npos)
      << check.out;
}

}  // namespace
}  // namespace kcache::cli
