// The remote tier against a real nginx (WebDAV) on loopback, and against
// servers that misbehave on purpose. Every test ends with a correct result (a
// miss, or the right entry: never a wrong one) and the right counters.
#include "cache/remote/remote.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "cache/format/manifest.h"
#include "cache/storage.h"
#include "common/error.h"
#include "common/file_system.h"
#include "tests/testing/http_servers.h"
#include "tests/testing/temp_dir.h"

namespace kcache::cache {
namespace {

using kcache::testing::NginxServer;
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

// Every entry carries a lean record (format 2), which must travel intact.
const LeanRecord kLean{LeanRecord::kAsked | LeanRecord::kLean, 154272, 1001};

Entry entry_of(const std::string& name, uint32_t compile_ms = 1200) {
  return Entry(key_of(name), TargetKind::cubin, "sm_90", compile_ms, 1763769600, payload_of(name),
               {}, kLean);
}

class RemoteTest : public ::testing::Test {
 protected:
  // A "CI machine": its own local store folder, the given remote.
  std::unique_ptr<Storage> machine(const std::string& name, RemoteOptions remote) {
    StorageOptions options;
    options.local_dir = dir_ / name;
    options.remote = std::move(remote);
    options.warn = [this](const std::string& m) { warnings_.push_back(m); };
    return std::make_unique<Storage>(options);
  }
  RemoteOptions remote_at(const std::string& url) {
    RemoteOptions r;
    r.url = url;
    r.timeout = std::chrono::milliseconds(5000);
    return r;
  }
  static int64_t counter(Storage& s, const std::string& name) {
    return s.local()->stats().counter(name);
  }
  std::string secret_file(const std::string& name, const std::string& content) {
    std::string path = dir_ / name;
    kcache::testing::write_file(path, content);
    return path;
  }
  // Plants raw bytes where the flat layout keeps `key` on `nginx`.
  static void plant(NginxServer& nginx, const std::string& prefix, const Hash128& key,
                    const std::string& bytes) {
    kcache::testing::write_file(nginx.root() + prefix + "/" + key.hex(), bytes);
  }
  static std::string read_object(NginxServer& nginx, const std::string& prefix,
                                 const Hash128& key) {
    return kcache::testing::read_file_or_die(nginx.root() + prefix + "/" + key.hex());
  }
  // Checks that `s` saw exactly these remote outcomes.
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

// --- the object format -------------------------------------------------------

TEST_F(RemoteTest, UnsignedObjectIsThePlainEntry) {
  Entry e = entry_of("a");
  EXPECT_EQ(encode_remote_object(e, ""), e.encoded());
  Entry back = decode_remote_object(e.encoded(), e.key(), "");
  EXPECT_EQ(back.payload(), e.payload());
  EXPECT_EQ(back.lean(), kLean);
}

TEST_F(RemoteTest, SignedObjectRoundTripsWithTheKey) {
  Entry e = entry_of("a");
  std::string object = encode_remote_object(e, kHmacKey);
  ASSERT_EQ(object.substr(0, 8), "KCSIGNED");
  EXPECT_EQ(object.size(), 8 + 2 + 1 + 1 + 16 + 8 + e.encoded().size() + 32);
  EXPECT_EQ(decode_remote_object(object, e.key(), kHmacKey).payload(), e.payload());
  EXPECT_EQ(decode_remote_object(object, e.key(), kHmacKey).lean(), kLean);
  // A reader without the key still gets the (checksum-verified) entry.
  EXPECT_EQ(decode_remote_object(object, e.key(), "").payload(), e.payload());
}

TEST_F(RemoteTest, EveryFlippedByteOfASignedObjectIsRejected) {
  Entry e(key_of("small"), TargetKind::ptx, "compute_90", 5, 1, "tiny ptx");
  const std::string object = encode_remote_object(e, kHmacKey);
  for (size_t i = 0; i < object.size(); ++i) {
    std::string bad = object;
    bad[i] = static_cast<char>(bad[i] ^ 0x20);
    try {
      decode_remote_object(bad, e.key(), kHmacKey);
      ADD_FAILURE() << "byte " << i << " flipped was accepted";
    } catch (const CorruptError&) {
    } catch (const IncompatibleVersionError&) {
    }
  }
  for (size_t n = 0; n < object.size(); ++n) {
    EXPECT_THROW(decode_remote_object(object.substr(0, n), e.key(), kHmacKey), CorruptError)
        << "truncated to " << n;
  }
  EXPECT_THROW(decode_remote_object(object + "x", e.key(), kHmacKey), CorruptError);
}

TEST_F(RemoteTest, SignatureFromAnotherKeyIsRejected) {
  Entry e = entry_of("a");
  std::string object = encode_remote_object(e, "another key, just as long as ours");
  EXPECT_THROW(decode_remote_object(object, e.key(), kHmacKey), CorruptError);
}

TEST_F(RemoteTest, SignedObjectCannotBeMovedToAnotherKey) {
  Entry e = entry_of("a");
  std::string object = encode_remote_object(e, kHmacKey);
  EXPECT_THROW(decode_remote_object(object, key_of("b"), kHmacKey), CorruptError);
  EXPECT_THROW(decode_remote_object(object, key_of("b"), ""), CorruptError);
}

TEST_F(RemoteTest, ShortHmacKeyIsRefused) {
  RemoteOptions options = remote_at("http://127.0.0.1:1");
  options.hmac_key_file = secret_file("short", "tooshort\n");
  EXPECT_THROW(Remote{options}, InvalidArgument);
}

TEST_F(RemoteTest, UrlsWithCredentialsOrOtherSchemesAreRefused) {
  EXPECT_THROW(normalize_remote_url("http://user:pw@host/x"), InvalidArgument);
  EXPECT_THROW(normalize_remote_url("ftp://host/x"), InvalidArgument);
  EXPECT_THROW(normalize_remote_url("host:8080"), InvalidArgument);
  EXPECT_EQ(normalize_remote_url("http://host:8080/x//"), "http://host:8080/x");
  try {
    normalize_remote_url("https://user:hunter2@host/x");
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
  }
}

// --- two CI machines sharing nginx --------------------------------------------

TEST_F(RemoteTest, EntryPutByOneMachineIsARemoteHitThenALocalHitForAnother) {
  NginxServer nginx;
  auto first = machine("first", remote_at(nginx.url("/kcache")));
  Entry e = entry_of("kernel");
  first->put(e);
  expect_remote_counters(*first, 0, 0, 0, 0, 1);
  EXPECT_EQ(nginx.files(), std::vector<std::string>{"kcache/" + e.key().hex()});

  auto second = machine("second", remote_at(nginx.url("/kcache")));
  std::optional<Entry> got = second->get(e.key());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->encoded(), e.encoded());
  EXPECT_EQ(got->lean(), kLean);
  expect_remote_counters(*second, 1, 0, 0, 0, 0);
  EXPECT_EQ(counter(*second, "compile_ms_saved"), 1200);
  EXPECT_EQ(nginx.count_requests("GET"), 1);

  got = second->get(e.key());  // now from its own local store
  ASSERT_TRUE(got);
  EXPECT_EQ(got->encoded(), e.encoded());
  EXPECT_EQ(counter(*second, "hits"), 1);
  EXPECT_EQ(counter(*second, "remote_hits"), 1);
  EXPECT_EQ(nginx.count_requests("GET"), 1);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(RemoteTest, MissIsAMissNotAnError) {
  NginxServer nginx;
  auto s = machine("m", remote_at(nginx.url()));
  EXPECT_FALSE(s->get(key_of("nothing")));
  EXPECT_FALSE(s->get(key_of("nothing else")));
  expect_remote_counters(*s, 0, 2, 0, 0, 0);
  EXPECT_TRUE(s->remote_usable());
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(RemoteTest, BazelLayoutKeepsEntriesUnderAcWith64HexDigits) {
  NginxServer nginx;
  RemoteOptions options = remote_at(nginx.url("/bazel/"));
  options.layout = RemoteLayout::bazel;
  Entry e = entry_of("kernel");
  machine("first", options)->put(e);
  const std::string name = e.key().hex() + std::string(32, '0');
  ASSERT_EQ(name.size(), 64u);
  EXPECT_EQ(nginx.files(), std::vector<std::string>{"bazel/ac/" + name});
  EXPECT_EQ(nginx.count_requests("PUT", "/bazel/ac/" + name), 1);

  auto second = machine("second", options);
  std::optional<Entry> got = second->get(e.key());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->encoded(), e.encoded());
  EXPECT_FALSE(second->get(key_of("other")));
  expect_remote_counters(*second, 1, 1, 0, 0, 0);
}

TEST_F(RemoteTest, ParallelLookupsFromManyThreadsGetTheRightEntries) {
  NginxServer nginx;
  constexpr int kKeys = 40;
  {
    auto writer = machine("writer", remote_at(nginx.url()));
    for (int k = 0; k < kKeys; ++k) writer->put(entry_of("k" + std::to_string(k)));
  }
  auto reader = machine("reader", remote_at(nginx.url()));
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kKeys; ++i) {
        const std::string name = "k" + std::to_string((i + t * 5) % kKeys);
        std::optional<Entry> got = reader->get(key_of(name));
        if (!got || got->payload() != payload_of(name)) wrong.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(counter(*reader, "remote_errors"), 0);
  EXPECT_GE(counter(*reader, "remote_hits"), kKeys);  // threads may race to the same key
  EXPECT_EQ(counter(*reader, "remote_hits") + counter(*reader, "hits"), 8 * kKeys);
}

// --- dead, slow and failing servers --------------------------------------------

TEST_F(RemoteTest, ServerDownFailsOnceThenIsNotAskedAgain) {
  auto s = machine(
      "m", remote_at("http://127.0.0.1:" + std::to_string(kcache::testing::unused_port()) + "/x"));
  Entry e = entry_of("kernel");
  EXPECT_FALSE(s->get(e.key()));
  EXPECT_FALSE(s->remote_usable());
  s->put(e);  // stored locally, not uploaded
  std::optional<Entry> got = s->get(e.key());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->encoded(), e.encoded());
  expect_remote_counters(*s, 0, 0, 1, 0, 0);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("not using it again"), std::string::npos) << warnings_[0];
}

TEST_F(RemoteTest, StalledServerCostsOneTimeoutThenIsSkipped) {
  ScriptedServer stalled("");  // accepts, never answers
  RemoteOptions options = remote_at(stalled.url("/x"));
  options.timeout = std::chrono::milliseconds(400);
  auto s = machine("m", options);

  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(s->get(key_of("a")));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  // The bound only guards against "waits for the default 10 s or forever";
  // how much the timeout is overshot on a loaded machine is not our business.
  EXPECT_LT(elapsed, std::chrono::seconds(5));
  EXPECT_EQ(stalled.connections(), 1);  // a timeout is not retried

  EXPECT_FALSE(s->get(key_of("b")));
  s->put(entry_of("c"));
  EXPECT_TRUE(s->get(key_of("c")));  // the local store still works
  EXPECT_EQ(stalled.connections(), 1);
  expect_remote_counters(*s, 0, 0, 1, 0, 0);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("timed out"), std::string::npos) << warnings_[0];
}

TEST_F(RemoteTest, Http500IsRetriedWithBackoffThenGivenUp) {
  NginxServer nginx("location /broken/ { return 500; }");
  auto s = machine("m", remote_at(nginx.url("/broken")));
  EXPECT_FALSE(s->get(key_of("a")));
  EXPECT_EQ(nginx.count_requests("GET", "/broken/"), 1 + kDefaultRemoteRetries);
  EXPECT_FALSE(s->get(key_of("b")));
  s->put(entry_of("c"));
  EXPECT_EQ(nginx.requests().size(), 1u + kDefaultRemoteRetries);
  expect_remote_counters(*s, 0, 0, 1, 0, 0);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("HTTP 500"), std::string::npos) << warnings_[0];
}

TEST_F(RemoteTest, Http4xxIsNotRetried) {
  NginxServer nginx("location /forbidden/ { return 403; }");
  auto s = machine("m", remote_at(nginx.url("/forbidden")));
  s->put(entry_of("a"));
  EXPECT_EQ(nginx.requests().size(), 1u);
  expect_remote_counters(*s, 0, 0, 1, 0, 0);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("HTTP 403"), std::string::npos) << warnings_[0];
}

TEST_F(RemoteTest, BazelRemoteWithAcValidationIsNamedInTheWarning) {
  NginxServer nginx("location /strict/ac/ { return 400; }");  // what bazel-remote answers
  RemoteOptions options = remote_at(nginx.url("/strict"));
  options.layout = RemoteLayout::bazel;
  machine("m", options)->put(entry_of("a"));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("--disable_http_ac_validation"), std::string::npos) << warnings_[0];
}

TEST_F(RemoteTest, BodyCutShortOfItsLengthIsAnErrorNotAnEntry) {
  Entry e = entry_of("kernel");
  ScriptedServer liar("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(e.encoded().size()) +
                      "\r\nConnection: close\r\n\r\n" + e.encoded().substr(0, 100));
  auto s = machine("m", remote_at(liar.url()));
  EXPECT_FALSE(s->get(e.key()));
  EXPECT_EQ(liar.connections(), 1 + kDefaultRemoteRetries);  // a broken transfer is retried
  expect_remote_counters(*s, 0, 0, 1, 0, 0);
  EXPECT_FALSE(s->local()->info(e.key()));
}

TEST_F(RemoteTest, TruncatedEntryIsRejectedAndTheRemoteStaysInUse) {
  NginxServer nginx;
  Entry e = entry_of("kernel");
  plant(nginx, "", e.key(), e.encoded().substr(0, e.encoded().size() / 2));
  auto s = machine("m", remote_at(nginx.url()));
  EXPECT_FALSE(s->get(e.key()));
  EXPECT_FALSE(s->local()->info(e.key()));
  EXPECT_TRUE(s->remote_usable());
  EXPECT_FALSE(s->get(key_of("other")));
  expect_remote_counters(*s, 0, 1, 0, 1, 0);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("corrupt"), std::string::npos) << warnings_[0];
}

TEST_F(RemoteTest, GarbageBodyIsRejected) {
  NginxServer nginx;
  Entry e = entry_of("kernel");
  plant(nginx, "", e.key(), payload_of("garbage", 5000));
  auto s = machine("m", remote_at(nginx.url()));
  EXPECT_FALSE(s->get(e.key()));
  EXPECT_FALSE(s->local()->info(e.key()));
  expect_remote_counters(*s, 0, 0, 0, 1, 0);
}

TEST_F(RemoteTest, ValidEntryForAnotherKeyIsRejected) {
  NginxServer nginx;
  Entry asked = entry_of("asked"), other = entry_of("other");
  plant(nginx, "", asked.key(), other.encoded());
  auto s = machine("m", remote_at(nginx.url()));
  EXPECT_FALSE(s->get(asked.key()));
  EXPECT_FALSE(s->local()->info(asked.key()));
  EXPECT_FALSE(s->local()->info(other.key()));
  expect_remote_counters(*s, 0, 0, 0, 1, 0);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find(other.key().hex()), std::string::npos) << warnings_[0];
}

// --- signatures ---------------------------------------------------------------

TEST_F(RemoteTest, WithHmacSignedEntriesAreHitsAndTamperedOnesAreRejected) {
  NginxServer nginx;
  RemoteOptions options = remote_at(nginx.url());
  options.hmac_key_file = secret_file("hmac.key", std::string(kHmacKey) + "\n");
  Entry good = entry_of("good"), forged = entry_of("forged"), flipped = entry_of("flipped");
  {
    auto writer = machine("writer", options);
    writer->put(good);
    writer->put(forged);
    writer->put(flipped);
  }
  EXPECT_EQ(read_object(nginx, "", good.key()).substr(0, 8), "KCSIGNED");
  // An attacker who can write to the server but lacks the key: a different,
  // self-consistent entry (valid checksum) signed with another key...
  Entry evil(forged.key(), TargetKind::cubin, "sm_90", 1, 1, "evil cubin");
  plant(nginx, "", forged.key(), encode_remote_object(evil, "attacker key, long enough"));
  // ...and one bit of a signed object changed.
  std::string bytes = read_object(nginx, "", flipped.key());
  bytes[bytes.size() - 40] ^= 1;
  plant(nginx, "", flipped.key(), bytes);

  auto reader = machine("reader", options);
  std::optional<Entry> got = reader->get(good.key());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->encoded(), good.encoded());
  EXPECT_FALSE(reader->get(forged.key()));
  EXPECT_FALSE(reader->get(flipped.key()));
  EXPECT_FALSE(reader->local()->info(forged.key()));
  EXPECT_FALSE(reader->local()->info(flipped.key()));
  expect_remote_counters(*reader, 1, 0, 0, 2, 0);
}

TEST_F(RemoteTest, WithHmacUnsignedEntriesAreRejected) {
  NginxServer nginx;
  Entry e = entry_of("kernel");
  machine("unsigned-writer", remote_at(nginx.url()))->put(e);  // no key: plain entry
  RemoteOptions options = remote_at(nginx.url());
  options.hmac_key_file = secret_file("hmac.key", kHmacKey);
  auto reader = machine("reader", options);
  EXPECT_FALSE(reader->get(e.key()));
  expect_remote_counters(*reader, 0, 0, 0, 1, 0);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("not signed"), std::string::npos) << warnings_[0];
}

TEST_F(RemoteTest, MissingHmacKeyFileTurnsTheRemoteOffRatherThanTrustingAnything) {
  NginxServer nginx;
  Entry e = entry_of("kernel");
  machine("writer", remote_at(nginx.url()))->put(e);
  RemoteOptions options = remote_at(nginx.url());
  options.hmac_key_file = dir_ / "no-such-key";
  auto reader = machine("reader", options);
  EXPECT_EQ(reader->remote(), nullptr);
  EXPECT_FALSE(reader->get(e.key()));
  EXPECT_EQ(nginx.count_requests("GET"), 0);
  EXPECT_EQ(counter(*reader, "remote_errors"), 1);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("no-such-key"), std::string::npos) << warnings_[0];
}

// --- manifests (cache/format/manifest.h) ----------------------------------------------

Manifest manifest_of(const std::string& name) {
  Manifest m(manifest_key(key_of(name)));
  m.add({{"v.cuh", "k.cu", false, {{"v.cuh", xxh3_64(name)}}}});
  return m;
}

TEST_F(RemoteTest, ManifestsAreSignedLikeEntries) {
  Manifest m = manifest_of("kernel");
  EXPECT_EQ(encode_remote_manifest(m, ""), m.encode());
  std::string object = encode_remote_manifest(m, kHmacKey);
  EXPECT_EQ(object.substr(0, 8), "KCSIGNED");
  EXPECT_EQ(decode_remote_manifest(object, m.key(), kHmacKey).sets(), m.sets());
  for (size_t i = 0; i < object.size(); ++i) {
    std::string damaged = object;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x01);
    EXPECT_THROW(decode_remote_manifest(damaged, m.key(), kHmacKey), Error) << "byte " << i;
  }
  EXPECT_THROW(decode_remote_manifest(m.encode(), m.key(), kHmacKey), CorruptError)
      << "unsigned, with a key configured";
  EXPECT_THROW(decode_remote_manifest(object, manifest_key(key_of("other")), kHmacKey),
               CorruptError)
      << "moved to another key";
  // An entry where a manifest is expected (or the reverse) is rejected.
  EXPECT_THROW(decode_remote_manifest(entry_of("kernel").encoded(), m.key(), ""), CorruptError);
}

TEST_F(RemoteTest, AManifestPutByOneMachineIsFoundByAnotherAndTamperedOnesAreMisses) {
  NginxServer nginx;
  RemoteOptions options = remote_at(nginx.url());
  options.hmac_key_file = secret_file("hmac.key", kHmacKey);
  Manifest good = manifest_of("good"), flipped = manifest_of("flipped");
  {
    auto writer = machine("writer", options);
    writer->put_manifest(good);
    writer->put_manifest(flipped);
  }
  std::string bytes = read_object(nginx, "", flipped.key());
  bytes[bytes.size() - 40] ^= 1;
  plant(nginx, "", flipped.key(), bytes);

  auto reader = machine("reader", options);
  std::optional<Manifest> got = reader->get_manifest(good.key());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->sets(), good.sets());
  EXPECT_FALSE(reader->get_manifest(flipped.key()));
  EXPECT_FALSE(reader->get_manifest(manifest_of("absent").key()));
  expect_remote_counters(*reader, 1, 1, 0, 1, 0);
  // Copied into the local store.
  EXPECT_TRUE(read_file(manifest_path(dir_ / "reader", good.key())));

  RemoteOptions read_only = options;
  read_only.read_only = true;
  machine("pull-request", read_only)->put_manifest(manifest_of("pr"));
  EXPECT_EQ(nginx.count_requests("PUT"), 2);  // the writer's two
}

// --- read-only mode and credentials ---------------------------------------------

TEST_F(RemoteTest, ReadOnlyNeverWritesButReads) {
  NginxServer nginx;
  Entry shared = entry_of("shared");
  machine("trusted", remote_at(nginx.url()))->put(shared);
  const std::vector<std::string> before = nginx.files();

  RemoteOptions options = remote_at(nginx.url());
  options.read_only = true;
  auto pr = machine("pull-request", options);
  for (int k = 0; k < 3; ++k) pr->put(entry_of("pr" + std::to_string(k)));
  std::optional<Entry> got = pr->get(shared.key());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->encoded(), shared.encoded());
  EXPECT_TRUE(pr->get(key_of("pr0")));  // its own results stay in its local store

  EXPECT_EQ(nginx.files(), before);
  EXPECT_EQ(nginx.count_requests("PUT"), 1);  // the trusted writer's
  expect_remote_counters(*pr, 1, 0, 0, 0, 0);
  EXPECT_THROW(pr->remote()->put(entry_of("direct")), InvalidArgument);
}

TEST_F(RemoteTest, BearerTokenFromAFileIsSent) {
  NginxServer nginx(
      "location /private/ {\n"
      "  if ($http_authorization != \"Bearer s3cret-token\") { return 401; }\n"
      "  dav_methods PUT DELETE; create_full_put_path on;\n"
      "}");
  RemoteOptions options = remote_at(nginx.url("/private"));
  options.bearer_token_file = secret_file("token", "  s3cret-token\n");
  Entry e = entry_of("kernel");
  machine("with-token", options)->put(e);
  EXPECT_TRUE(machine("with-token-2", options)->get(e.key()));

  auto anonymous = machine("anonymous", remote_at(nginx.url("/private")));
  EXPECT_FALSE(anonymous->get(e.key()));
  expect_remote_counters(*anonymous, 0, 0, 1, 0, 0);
  EXPECT_EQ(nginx.count_requests("GET", "/private/"), 2);  // 401 is not retried
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("HTTP 401"), std::string::npos) << warnings_[0];
  EXPECT_EQ(warnings_[0].find("s3cret"), std::string::npos) << warnings_[0];
}

TEST_F(RemoteTest, BasicAuthFromAFileIsSent) {
  NginxServer secured(
      "location /basic/ {\n"
      "  auth_basic \"kcache\"; auth_basic_user_file {dir}/htpasswd;\n"
      "  dav_methods PUT DELETE; create_full_put_path on;\n"
      "}");
  kcache::testing::write_file(secured.dir() + "/htpasswd", "ci:{PLAIN}pa55word\n");
  RemoteOptions options = remote_at(secured.url("/basic"));
  options.basic_auth_file = secret_file("basic", "ci:pa55word\n");
  Entry e = entry_of("kernel");
  auto s = machine("m", options);
  s->put(e);
  EXPECT_EQ(counter(*s, "remote_stored"), 1);
  EXPECT_TRUE(machine("m2", options)->get(e.key()));

  options.basic_auth_file = secret_file("wrong", "ci:wrong\n");
  auto wrong = machine("m3", options);
  EXPECT_FALSE(wrong->get(e.key()));
  EXPECT_EQ(counter(*wrong, "remote_errors"), 1);
}

TEST_F(RemoteTest, MissingTokenFileTurnsTheRemoteOffWithOneWarning) {
  RemoteOptions options = remote_at("http://127.0.0.1:1");
  options.bearer_token_file = dir_ / "absent-token";
  auto s = machine("m", options);
  EXPECT_EQ(s->remote(), nullptr);
  Entry e = entry_of("kernel");
  s->put(e);
  EXPECT_TRUE(s->get(e.key()));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("absent-token"), std::string::npos) << warnings_[0];
}

// --- the backend contract directly ------------------------------------------------

TEST_F(RemoteTest, BackendGetHeadPutRemove) {
  NginxServer nginx;
  RemoteOptions options = remote_at(nginx.url("/b"));
  std::unique_ptr<RemoteBackend> backend = make_http_backend(options);
  const Hash128 key = key_of("k");
  EXPECT_FALSE(backend->get(key));
  EXPECT_FALSE(backend->exists(key));
  backend->put(key, "bytes");
  EXPECT_TRUE(backend->exists(key));
  EXPECT_EQ(backend->get(key), std::optional<std::string>("bytes"));
  backend->put(key, "replaced");
  EXPECT_EQ(backend->get(key), std::optional<std::string>("replaced"));
  EXPECT_TRUE(backend->remove(key));
  EXPECT_FALSE(backend->remove(key));
  EXPECT_FALSE(backend->get(key));
  EXPECT_EQ(backend->url_of(key), nginx.url("/b/" + key.hex()));
}

TEST_F(RemoteTest, LargeEntryRoundTrips) {
  NginxServer nginx;
  Entry big(key_of("big"), TargetKind::cubin, "sm_90", 1, 1, payload_of("big", 3 << 20));
  machine("a", remote_at(nginx.url()))->put(big);
  std::optional<Entry> got = machine("b", remote_at(nginx.url()))->get(big.key());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->encoded(), big.encoded());
}

}  // namespace
}  // namespace kcache::cache
