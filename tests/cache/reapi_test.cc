// The grpc:// remote (Remote Execution API) against a real BuildGrid on
// loopback, and against servers that are dead or stall. Every test ends with a
// correct result (a miss, or the right entry: never a wrong one) and the right
// counters; the server's own folder is the witness of what was written.
#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "cache/format/manifest.h"
#include "cache/remote/remote.h"
#include "cache/storage.h"
#include "common/error.h"
#include "tests/testing/buildgrid_server.h"
#include "tests/testing/http_servers.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cache {
namespace {

using kcache::testing::BuildGridServer;
using kcache::testing::ScriptedServer;
using kcache::testing::TempDir;

constexpr const char* kHmacKey = "0123456789abcdef0123456789abcdef";

Hash128 key_of(const std::string& name) { return xxh3_128(name); }

std::string payload_of(const std::string& name, size_t size = 3000) {
  std::string p(size, '\0');
  std::mt19937 rng(static_cast<unsigned>(xxh3_64(name)));
  for (char& c : p) c = static_cast<char>(rng());
  return p;
}

Entry entry_of(const std::string& name, size_t size = 3000) {
  return Entry(key_of(name), TargetKind::cubin, "sm_90", 1200, 1763769600, payload_of(name, size));
}

std::string sha256_hex(const std::string& data) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), d);
  std::string out;
  char buf[3];
  for (unsigned char c : d) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    out += buf;
  }
  return out;
}

std::string read_all(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return "";
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

void write_all(const std::string& path, const std::string& data) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_TRUE(f) << path;
  std::fwrite(data.data(), 1, data.size(), f);
  std::fclose(f);
}

class ReapiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (BuildGridServer::find_bgd().empty()) {
      GTEST_SKIP() << "BuildGrid is not installed (/opt/kcache-buildgrid or "
                      "$KCACHE_BUILDGRID_VENV); tools/install_deps.sh installs it";
    }
  }
  std::unique_ptr<Storage> machine(const std::string& name, RemoteOptions remote) {
    StorageOptions options;
    options.local_dir = dir_ / name;
    options.remote = std::move(remote);
    options.warn = [this](const std::string& m) { warnings_.push_back(m); };
    return std::make_unique<Storage>(options);
  }
  static RemoteOptions remote_at(const std::string& url) {
    RemoteOptions r;
    r.url = url;
    r.timeout = std::chrono::milliseconds(10000);
    return r;
  }
  static int64_t counter(Storage& s, const std::string& name) {
    return s.local()->stats().counter(name);
  }
  static void expect_remote_counters(Storage& s, int64_t hits, int64_t misses, int64_t errors,
                                     int64_t rejected, int64_t stored) {
    EXPECT_EQ(counter(s, "remote_hits"), hits);
    EXPECT_EQ(counter(s, "remote_misses"), misses);
    EXPECT_EQ(counter(s, "remote_errors"), errors);
    EXPECT_EQ(counter(s, "remote_rejected"), rejected);
    EXPECT_EQ(counter(s, "remote_stored"), stored);
  }

  TempDir dir_;
  std::vector<std::string> warnings_;
};

TEST_F(ReapiTest, EntryPutByOneMachineIsARemoteHitForAnotherAndTheBlobIsTheEntry) {
  BuildGridServer server;
  Entry e = entry_of("kernel");
  auto first = machine("first", remote_at(server.url()));
  first->put(e);
  expect_remote_counters(*first, 0, 0, 0, 0, 1);
  // The CAS holds the entry byte for byte under its SHA-256 (and BuildGrid's
  // own copy of the action result: two blobs per entry).
  EXPECT_EQ(server.blob_count(), 2);
  EXPECT_EQ(read_all(server.blob_path(sha256_hex(e.encoded()))), e.encoded());

  auto second = machine("second", remote_at(server.url()));
  std::optional<Entry> got = second->get(e.key());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->encoded(), e.encoded());
  expect_remote_counters(*second, 1, 0, 0, 0, 0);
  EXPECT_TRUE(second->local()->get(e.key()));  // written through to the local store
  EXPECT_TRUE(warnings_.empty()) << warnings_[0];
}

TEST_F(ReapiTest, MissIsAMissNotAnError) {
  BuildGridServer server;
  auto s = machine("m", remote_at(server.url()));
  EXPECT_FALSE(s->get(key_of("absent")));
  EXPECT_TRUE(s->remote_usable());
  expect_remote_counters(*s, 0, 1, 0, 0, 0);
}

TEST_F(ReapiTest, SignedEntriesRoundTripAndUnsignedOnesAreRejectedByAKeyHolder) {
  BuildGridServer server;
  const std::string key_file = dir_ / "hmac";
  write_all(key_file, kHmacKey);
  RemoteOptions signed_remote = remote_at(server.url());
  signed_remote.hmac_key_file = key_file;
  Entry a = entry_of("signed"), b = entry_of("unsigned");
  machine("w1", signed_remote)->put(a);
  machine("w2", remote_at(server.url()))->put(b);
  auto reader = machine("r", signed_remote);
  ASSERT_TRUE(reader->get(a.key()));
  EXPECT_FALSE(reader->get(b.key()));
  expect_remote_counters(*reader, 1, 0, 0, 1, 0);
}

// Manifests (cache/format/manifest.h) travel through the same backend, under their
// manifest key, signed like entries: no backend change.
TEST_F(ReapiTest, ASignedManifestPutByOneMachineIsFoundByAnother) {
  BuildGridServer server;
  const std::string key_file = dir_ / "hmac";
  write_all(key_file, kHmacKey);
  RemoteOptions signed_remote = remote_at(server.url());
  signed_remote.hmac_key_file = key_file;
  Manifest m(manifest_key(key_of("kernel")));
  m.add({{"v.cuh", "k.cu", false, {{"v.cuh", 7}}}});
  machine("w", signed_remote)->put_manifest(m);
  auto reader = machine("r", signed_remote);
  std::optional<Manifest> got = reader->get_manifest(m.key());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->sets(), m.sets());
  EXPECT_FALSE(reader->get_manifest(manifest_key(key_of("absent"))));
  expect_remote_counters(*reader, 1, 1, 0, 0, 0);
}

// BuildGrid's batch limit is 4 MiB - 1 KiB (its capabilities say so, and it
// refuses larger batches): a bigger entry only round-trips if kcache reads the
// capabilities and streams it through ByteStream Write and Read instead.
TEST_F(ReapiTest, EntryLargerThanTheServersBatchLimitGoesThroughByteStream) {
  BuildGridServer server;
  Entry big = entry_of("big", 6u << 20);
  machine("w", remote_at(server.url()))->put(big);
  EXPECT_EQ(read_all(server.blob_path(sha256_hex(big.encoded()))).size(), big.encoded().size());
  auto reader = machine("r", remote_at(server.url()));
  std::optional<Entry> got = reader->get(big.key());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->encoded(), big.encoded());
  EXPECT_TRUE(warnings_.empty()) << warnings_[0];
}

TEST_F(ReapiTest, BlobAlteredOnTheServerIsRejectedAndTheRemoteStaysInUse) {
  BuildGridServer server;
  Entry e = entry_of("victim"), other = entry_of("other");
  auto writer = machine("w", remote_at(server.url()));
  writer->put(e);
  writer->put(other);
  // Flip one byte of the stored blob: same size, different content.
  const std::string path = server.blob_path(sha256_hex(e.encoded()));
  std::string bytes = read_all(path);
  ASSERT_EQ(bytes.size(), e.encoded().size());
  bytes[bytes.size() / 2] ^= 0x01;
  write_all(path, bytes);

  auto reader = machine("r", remote_at(server.url()));
  EXPECT_FALSE(reader->get(e.key()));
  EXPECT_TRUE(reader->remote_usable());
  EXPECT_TRUE(reader->get(other.key()));
  expect_remote_counters(*reader, 1, 0, 0, 1, 0);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("does not match its digest"), std::string::npos) << warnings_[0];
}

TEST_F(ReapiTest, ActionResultNamingAMissingBlobIsAMissAndAnUploadRepairsIt) {
  BuildGridServer server;
  Entry e = entry_of("lost");
  machine("w", remote_at(server.url()))->put(e);
  ASSERT_EQ(std::remove(server.blob_path(sha256_hex(e.encoded())).c_str()), 0);

  auto reader = machine("r", remote_at(server.url()));
  EXPECT_FALSE(reader->get(e.key()));
  EXPECT_TRUE(reader->remote_usable());
  expect_remote_counters(*reader, 0, 1, 0, 0, 0);

  // The reader compiles it and uploads it: FindMissingBlobs reports the blob
  // missing, so it is stored again, and a third machine hits.
  reader->put(e);
  EXPECT_EQ(read_all(server.blob_path(sha256_hex(e.encoded()))), e.encoded());
  EXPECT_TRUE(machine("third", remote_at(server.url()))->get(e.key()));
}

TEST_F(ReapiTest, ReadOnlyModeWritesNothingToTheServer) {
  BuildGridServer server;
  Entry shared = entry_of("shared"), mine = entry_of("mine");
  machine("w", remote_at(server.url()))->put(shared);
  const int blobs = server.blob_count();  // the entry and its action result

  RemoteOptions ro = remote_at(server.url());
  ro.read_only = true;
  auto reader = machine("pr", ro);
  EXPECT_TRUE(reader->get(shared.key()));
  reader->put(mine);
  EXPECT_TRUE(reader->get(mine.key()));  // a local hit
  // Nothing reached the server: no blob, and no action result for `mine`.
  EXPECT_EQ(server.blob_count(), blobs);
  EXPECT_EQ(read_all(server.blob_path(sha256_hex(mine.encoded()))), "");
  Remote probe(remote_at(server.url()));
  EXPECT_FALSE(probe.backend().exists(mine.key()));
  EXPECT_TRUE(probe.backend().exists(shared.key()));
  expect_remote_counters(*reader, 1, 0, 0, 0, 0);
}

TEST_F(ReapiTest, ServerWhoseActionCacheRefusesUpdatesIsAnErrorOnceWithAClearWarning) {
  BuildGridServer server(/*allow_updates=*/false);
  auto s = machine("m", remote_at(server.url()));
  s->put(entry_of("a"));
  s->put(entry_of("b"));
  EXPECT_FALSE(s->remote_usable());
  EXPECT_EQ(server.blob_count(), 0);  // nothing stored that no action result names
  expect_remote_counters(*s, 0, 0, 1, 0, 0);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("read-only"), std::string::npos) << warnings_[0];
}

TEST_F(ReapiTest, ServerKilledMidBuildFailsOnceAndTheBuildGoesOn) {
  auto server = std::make_unique<BuildGridServer>();
  auto s = machine("m", remote_at(server->url()));
  s->put(entry_of("before"));
  EXPECT_FALSE(s->get(key_of("absent")));
  server->kill_now();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(s->get(key_of("after")));
  s->put(entry_of("after"));
  EXPECT_TRUE(s->get(key_of("after")));  // the local store still works
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_FALSE(s->remote_usable());
  expect_remote_counters(*s, 0, 1, 1, 0, 1);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("not using it again"), std::string::npos) << warnings_[0];
}

TEST_F(ReapiTest, DeadServerFailsOnceThenIsNotAskedAgain) {
  auto s =
      machine("m", remote_at("grpc://127.0.0.1:" + std::to_string(kcache::testing::unused_port())));
  Entry e = entry_of("kernel");
  EXPECT_FALSE(s->get(e.key()));
  EXPECT_FALSE(s->remote_usable());
  s->put(e);
  EXPECT_TRUE(s->get(e.key()));
  expect_remote_counters(*s, 0, 0, 1, 0, 0);
  EXPECT_EQ(warnings_.size(), 1u);
}

TEST_F(ReapiTest, StalledServerCostsOneTimeoutThenIsSkipped) {
  ScriptedServer stalled("");             // accepts, never answers (not even the HTTP/2 handshake)
  const std::string url = stalled.url();  // http://127.0.0.1:PORT
  RemoteOptions options = remote_at("grpc://" + url.substr(url.find("://") + 3));
  options.timeout = std::chrono::milliseconds(400);
  auto s = machine("m", options);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(s->get(key_of("a")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  const int connections = stalled.connections();
  EXPECT_FALSE(s->get(key_of("b")));
  s->put(entry_of("c"));
  EXPECT_TRUE(s->get(key_of("c")));
  EXPECT_EQ(stalled.connections(), connections);  // never asked again
  expect_remote_counters(*s, 0, 0, 1, 0, 0);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("timed out"), std::string::npos) << warnings_[0];
}

TEST_F(ReapiTest, ParallelLookupsFromManyThreadsGetTheRightEntries) {
  BuildGridServer server;
  std::vector<Entry> entries;
  for (int i = 0; i < 24; ++i) entries.push_back(entry_of("k" + std::to_string(i), 1000 + 97 * i));
  {
    auto writer = machine("writer", remote_at(server.url()));
    for (const Entry& e : entries) writer->put(e);
  }
  auto reader = machine("reader", remote_at(server.url()));
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < entries.size(); i += 6) {
        std::optional<Entry> got = reader->get(entries[i].key());
        right += got && got->encoded() == entries[i].encoded();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(right.load(), 24);
  expect_remote_counters(*reader, 24, 0, 0, 0, 0);
}

TEST_F(ReapiTest, UrlWithAPathOrTlsSettingsOnPlainGrpcIsRefusedClearly) {
  RemoteOptions path = remote_at("grpc://127.0.0.1:1/instance");
  EXPECT_THROW(Remote{path}, InvalidArgument);
  RemoteOptions tls = remote_at("grpc://127.0.0.1:1");
  tls.tls_ca_file = dir_ / "ca.pem";
  EXPECT_THROW(Remote{tls}, InvalidArgument);
}

}  // namespace
}  // namespace kcache::cache
