// What the grpc:// remote sends, seen from the server's side: a recording
// proxy (tests/testing/grpc_recording_proxy.h) sits between kcache and a real
// BuildGrid and keeps every call's method, metadata and request bytes. The
// bearer token and the headers file's headers arrive on every call, the
// instance name is in every request, and a read-only client makes no write.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "cache/remote/remote.h"
#include "cache/storage.h"
#include "tests/testing/buildgrid_server.h"
#include "tests/testing/grpc_recording_proxy.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cache {
namespace {

using kcache::testing::BuildGridOptions;
using kcache::testing::BuildGridServer;
using kcache::testing::GrpcRecordingProxy;
using kcache::testing::TempDir;

Entry entry_of(const std::string& name, size_t size = 3000) {
  std::string payload(size, '\0');
  std::mt19937 rng(static_cast<unsigned>(xxh3_64(name)));
  for (char& c : payload) c = static_cast<char>(rng());
  return Entry(xxh3_128(name), TargetKind::cubin, "sm_90", 1200, 1763769600, payload);
}

// The metadata values under `name` (lowercase) that one call carried.
std::vector<std::string> values(const GrpcRecordingProxy::Call& call, const std::string& name) {
  std::vector<std::string> out;
  auto [begin, end] = call.metadata.equal_range(name);
  for (auto it = begin; it != end; ++it) out.push_back(it->second);
  return out;
}

class ReapiMetadataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (BuildGridServer::find_bgd().empty()) {
      GTEST_SKIP() << "BuildGrid is not installed (/opt/kcache-buildgrid or "
                      "$KCACHE_BUILDGRID_VENV); tools/install_deps.sh installs it";
    }
  }
  static RemoteOptions remote_at(const std::string& url) {
    RemoteOptions r;
    r.url = url;
    r.timeout = std::chrono::milliseconds(10000);
    return r;
  }
  std::unique_ptr<Storage> machine(const std::string& name, RemoteOptions remote) {
    StorageOptions options;
    options.local_dir = dir_ / name;
    options.remote = std::move(remote);
    options.warn = [this](const std::string& m) { warnings_.push_back(m); };
    return std::make_unique<Storage>(options);
  }
  static int64_t counter(Storage& s, const std::string& name) {
    return s.local()->stats().counter(name);
  }
  // One machine puts an entry, another gets it, both through the proxy.
  void round_trip(const RemoteOptions& remote, const Entry& e) {
    auto writer = machine("writer-" + e.key().hex(), remote);
    writer->put(e);
    ASSERT_EQ(counter(*writer, "remote_stored"), 1);
    std::optional<Entry> got = machine("reader-" + e.key().hex(), remote)->get(e.key());
    ASSERT_TRUE(got);
    EXPECT_EQ(got->encoded(), e.encoded());
  }

  TempDir dir_;
  std::vector<std::string> warnings_;
};

TEST_F(ReapiMetadataTest, BearerTokenArrivesAsAuthorizationOnEveryCall) {
  BuildGridServer server;
  GrpcRecordingProxy proxy(server.url());
  kcache::testing::write_file(dir_ / "token", "s3cret-t0ken\n");
  RemoteOptions remote = remote_at(proxy.url());
  remote.bearer_token_file = dir_ / "token";
  round_trip(remote, entry_of("kernel"));
  const std::vector<GrpcRecordingProxy::Call> calls = proxy.calls();
  // GetCapabilities, FindMissingBlobs, BatchUpdateBlobs, UpdateActionResult,
  // then GetCapabilities, GetActionResult, BatchReadBlobs.
  ASSERT_GE(calls.size(), 7u);
  for (const auto& call : calls) {
    EXPECT_EQ(values(call, "authorization"), std::vector<std::string>{"Bearer s3cret-t0ken"})
        << call.method;
  }
  EXPECT_TRUE(warnings_.empty()) << warnings_[0];
}

// BuildGrid checking tokens itself (`authorization: {method: jwt}`): the
// token file's JSON Web Token is accepted; a forged one or none is refused,
// once, with a warning that says which setting to check.
TEST_F(ReapiMetadataTest, ServerThatChecksBearerTokensAcceptsTheTokenFile) {
  BuildGridOptions options;
  options.jwt_hs256_secret = "kcache-test-secret-0123456789abcdef";
  BuildGridServer server(options);
  kcache::testing::write_file(dir_ / "token",
                              kcache::testing::make_jwt(options.jwt_hs256_secret) + "\n");
  RemoteOptions remote = remote_at(server.url());
  remote.bearer_token_file = dir_ / "token";
  round_trip(remote, entry_of("kernel"));
  EXPECT_TRUE(warnings_.empty()) << warnings_[0];
}

TEST_F(ReapiMetadataTest, ServerThatChecksBearerTokensRefusesAForgedOneOnceNamingTheTokenFile) {
  BuildGridOptions options;
  options.jwt_hs256_secret = "kcache-test-secret-0123456789abcdef";
  BuildGridServer server(options);
  kcache::testing::write_file(dir_ / "forged.jwt",
                              kcache::testing::make_jwt("some-other-secret-0123456789abcdef"));
  RemoteOptions remote = remote_at(server.url());
  remote.bearer_token_file = dir_ / "forged.jwt";
  auto s = machine("forged", remote);
  Entry e = entry_of("kernel");
  EXPECT_FALSE(s->get(e.key()));
  s->put(e);
  EXPECT_TRUE(s->get(e.key()));  // the local store carries the build
  EXPECT_FALSE(s->remote_usable());
  EXPECT_EQ(counter(*s, "remote_errors"), 1);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("UNAUTHENTICATED"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("remote_token_file"), std::string::npos) << warnings_[0];

  auto without = machine("without", remote_at(server.url()));
  EXPECT_FALSE(without->get(e.key()));
  EXPECT_FALSE(without->remote_usable());
  ASSERT_EQ(warnings_.size(), 2u);
  EXPECT_NE(warnings_[1].find("UNAUTHENTICATED"), std::string::npos) << warnings_[1];
}

TEST_F(ReapiMetadataTest, HeadersFromTheHeadersFileArriveOnEveryCall) {
  BuildGridServer server;
  GrpcRecordingProxy proxy(server.url());
  kcache::testing::write_file(dir_ / "headers",
                              "# BuildBuddy's API key, and one of our own\n"
                              "x-buildbuddy-api-key: abc123\n"
                              "\n"
                              "X-Team:  gpu kernels \n");
  RemoteOptions remote = remote_at(proxy.url());
  remote.headers_file = dir_ / "headers";
  round_trip(remote, entry_of("kernel"));
  const std::vector<GrpcRecordingProxy::Call> calls = proxy.calls();
  ASSERT_GE(calls.size(), 7u);
  for (const auto& call : calls) {
    EXPECT_EQ(values(call, "x-buildbuddy-api-key"), std::vector<std::string>{"abc123"})
        << call.method;
    EXPECT_EQ(values(call, "x-team"), std::vector<std::string>{"gpu kernels"}) << call.method;
    EXPECT_TRUE(values(call, "authorization").empty()) << call.method;
  }
}

TEST_F(ReapiMetadataTest, InstanceNameIsInEveryRequestAndTheServerFilesEntriesUnderIt) {
  BuildGridOptions options;
  options.instance_name = "kcache-ci";
  BuildGridServer server(options);
  GrpcRecordingProxy proxy(server.url());
  RemoteOptions remote = remote_at(proxy.url());
  remote.instance_name = "kcache-ci";
  // A small entry (batch RPCs) and one larger than BuildGrid's 4 MiB batch
  // limit (ByteStream, whose resource names carry the instance name).
  round_trip(remote, entry_of("small"));
  round_trip(remote, entry_of("big", 5u << 20));
  EXPECT_EQ(proxy.count("Write"), 1);
  EXPECT_EQ(proxy.count("Read"), 1);
  for (const auto& call : proxy.calls()) {
    ASSERT_FALSE(call.requests.empty()) << call.method;
    // The first message names the instance: the request's instance_name
    // field, or a ByteStream resource name "kcache-ci/uploads/..." or
    // "kcache-ci/blobs/...".
    EXPECT_NE(call.requests[0].find("kcache-ci"), std::string::npos) << call.method;
    EXPECT_EQ(call.status, grpc::StatusCode::OK) << call.method;
  }
  EXPECT_TRUE(warnings_.empty()) << warnings_[0];
}

TEST_F(ReapiMetadataTest, WrongInstanceNameIsAnErrorOnceNamingTheInstance) {
  BuildGridOptions options;
  options.instance_name = "kcache-ci";
  BuildGridServer server(options);
  RemoteOptions remote = remote_at(server.url());
  remote.instance_name = "kcache-ci";
  Entry e = entry_of("kernel");
  machine("writer", remote)->put(e);

  remote.instance_name = "kcache-typo";
  auto s = machine("reader", remote);
  EXPECT_FALSE(s->get(e.key()));
  EXPECT_FALSE(s->get(e.key()));
  EXPECT_FALSE(s->remote_usable());
  EXPECT_EQ(counter(*s, "remote_errors"), 1);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("kcache-typo"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("remote_instance_name"), std::string::npos) << warnings_[0];
}

TEST_F(ReapiMetadataTest, ReadOnlyClientSendsNoWriteRpc) {
  BuildGridServer server;
  Entry shared = entry_of("shared"), mine = entry_of("mine"), big = entry_of("big", 5u << 20);
  {
    auto writer = machine("writer", remote_at(server.url()));
    writer->put(shared);
    writer->put(big);
  }
  GrpcRecordingProxy proxy(server.url());
  RemoteOptions ro = remote_at(proxy.url());
  ro.read_only = true;
  auto reader = machine("pr", ro);
  EXPECT_TRUE(reader->get(shared.key()));
  EXPECT_TRUE(reader->get(big.key()));
  EXPECT_FALSE(reader->get(mine.key()));
  reader->put(mine);
  EXPECT_TRUE(reader->get(mine.key()));  // a local hit
  EXPECT_EQ(counter(*reader, "remote_hits"), 2);
  EXPECT_EQ(counter(*reader, "remote_stored"), 0);
  // Reads went through the proxy; no write did.
  EXPECT_EQ(proxy.count("GetActionResult"), 3);
  EXPECT_EQ(proxy.count("BatchReadBlobs"), 1);
  EXPECT_EQ(proxy.count("Read"), 1);
  EXPECT_EQ(proxy.count("BatchUpdateBlobs"), 0);
  EXPECT_EQ(proxy.count("Write"), 0);
  EXPECT_EQ(proxy.count("UpdateActionResult"), 0);
  EXPECT_EQ(proxy.count("FindMissingBlobs"), 0);
  EXPECT_TRUE(warnings_.empty()) << warnings_[0];
}

TEST_F(ReapiMetadataTest, EntriesOverTheServersBatchLimitAreStreamedAndSmallOnesBatched) {
  BuildGridServer server;
  GrpcRecordingProxy proxy(server.url());
  // BuildGrid's capabilities say max_batch_total_size_bytes = 4 MiB - 1 KiB.
  round_trip(remote_at(proxy.url()), entry_of("small"));
  EXPECT_EQ(proxy.count("BatchUpdateBlobs"), 1);
  EXPECT_EQ(proxy.count("BatchReadBlobs"), 1);
  EXPECT_EQ(proxy.count("Write"), 0);
  round_trip(remote_at(proxy.url()), entry_of("big", 5u << 20));
  EXPECT_EQ(proxy.count("BatchUpdateBlobs"), 1);
  EXPECT_EQ(proxy.count("BatchReadBlobs"), 1);
  EXPECT_EQ(proxy.count("Write"), 1);
  EXPECT_EQ(proxy.count("Read"), 1);
}

}  // namespace
}  // namespace kcache::cache
