// The grpcs:// remote against a real BuildGrid serving TLS, and mutual TLS,
// with certificates made by openssl for each test (tests/testing/
// tls_certificates.h). A TLS problem — a certificate kcache cannot verify, a
// server that does not speak TLS, a server that wants a client certificate —
// never fails the build: it is one clear warning, then the local store alone.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "cache/remote/remote.h"
#include "cache/storage.h"
#include "tests/testing/buildgrid_server.h"
#include "tests/testing/http_servers.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/tls_certificates.h"

namespace kcache::cache {
namespace {

using kcache::testing::BuildGridOptions;
using kcache::testing::BuildGridServer;
using kcache::testing::TempDir;
using kcache::testing::TlsCertificates;

Entry entry_of(const std::string& name) {
  std::string payload(3000, '\0');
  std::mt19937 rng(static_cast<unsigned>(xxh3_64(name)));
  for (char& c : payload) c = static_cast<char>(rng());
  return Entry(xxh3_128(name), TargetKind::cubin, "sm_90", 1200, 1763769600, payload);
}

class ReapiTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (BuildGridServer::find_bgd().empty()) {
      GTEST_SKIP() << "BuildGrid is not installed (/opt/kcache-buildgrid or "
                      "$KCACHE_BUILDGRID_VENV); tools/install_deps.sh installs it";
    }
    if (kcache::testing::find_openssl().empty()) {
      GTEST_SKIP() << "the openssl program is not installed; tools/install_deps.sh installs it";
    }
    certs_ = kcache::testing::make_tls_certificates(certs_dir_.path());
  }

  // A TLS server; with `mutual`, one that wants a client certificate too.
  BuildGridOptions tls_server(bool mutual = false) const {
    BuildGridOptions o;
    o.tls_server_cert = certs_.server_cert;
    o.tls_server_key = certs_.server_key;
    if (mutual) o.tls_client_ca = certs_.ca_cert;
    return o;
  }
  RemoteOptions remote_at(const std::string& url, bool trust_ca = true) const {
    RemoteOptions r;
    r.url = url;
    r.timeout = std::chrono::milliseconds(10000);
    if (trust_ca) r.tls_ca_file = certs_.ca_cert;
    return r;
  }
  RemoteOptions with_client_certificate(RemoteOptions r) const {
    r.tls_client_cert_file = certs_.client_cert;
    r.tls_client_key_file = certs_.client_key;
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
  // The remote failed once, with one warning, and the local store carried
  // the build: a miss, a local put, a local hit.
  void expect_fails_once_and_the_build_goes_on(const RemoteOptions& remote) {
    auto s = machine("m", remote);
    Entry e = entry_of("kernel");
    EXPECT_FALSE(s->get(e.key()));
    EXPECT_FALSE(s->remote_usable());
    s->put(e);
    EXPECT_TRUE(s->get(e.key()));
    EXPECT_EQ(counter(*s, "remote_errors"), 1);
    EXPECT_EQ(counter(*s, "remote_hits"), 0);
    EXPECT_EQ(counter(*s, "remote_stored"), 0);
    ASSERT_EQ(warnings_.size(), 1u);
  }
  void expect_warning_names(const std::vector<std::string>& parts) const {
    ASSERT_EQ(warnings_.size(), 1u);
    for (const std::string& p : parts) {
      EXPECT_NE(warnings_[0].find(p), std::string::npos)
          << "no \"" << p << "\" in: " << warnings_[0];
    }
  }

  TempDir dir_;
  TempDir certs_dir_;
  TlsCertificates certs_;
  std::vector<std::string> warnings_;
};

TEST_F(ReapiTlsTest, GrpcsWithTheCaFileRoundTripsAnEntry) {
  BuildGridServer server(tls_server());
  ASSERT_EQ(server.url().rfind("grpcs://", 0), 0u);
  Entry e = entry_of("kernel");
  machine("first", remote_at(server.url()))->put(e);
  auto second = machine("second", remote_at(server.url()));
  std::optional<Entry> got = second->get(e.key());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->encoded(), e.encoded());
  EXPECT_EQ(counter(*second, "remote_hits"), 1);
  EXPECT_TRUE(warnings_.empty()) << warnings_[0];
}

TEST_F(ReapiTlsTest, TheCertificatesDnsNameIsAcceptedToo) {
  BuildGridServer server(tls_server());
  const std::string url = "grpcs://localhost:" + std::to_string(server.port());
  Entry e = entry_of("kernel");
  machine("first", remote_at(url))->put(e);
  EXPECT_TRUE(machine("second", remote_at(url))->get(e.key()));
  EXPECT_TRUE(warnings_.empty()) << warnings_[0];
}

TEST_F(ReapiTlsTest, UntrustedServerCertificateFailsOnceWithATlsWarningAndTheBuildGoesOn) {
  BuildGridServer server(tls_server());
  // No remote_tls_ca_file: the system's CAs, which did not sign the server's.
  expect_fails_once_and_the_build_goes_on(remote_at(server.url(), /*trust_ca=*/false));
  expect_warning_names({server.url(), "TLS", "remote_tls_ca_file"});
}

TEST_F(ReapiTlsTest, GrpcsToAPlainTextServerFailsOnceWithATlsWarning) {
  BuildGridServer server;  // grpc:// only
  const std::string url = "grpcs://127.0.0.1:" + std::to_string(server.port());
  expect_fails_once_and_the_build_goes_on(remote_at(url));
  expect_warning_names({url, "TLS"});
  EXPECT_EQ(server.blob_count(), 0);
}

TEST_F(ReapiTlsTest, MutualTlsServerRefusesAClientWithoutACertificate) {
  BuildGridServer server(tls_server(/*mutual=*/true));
  expect_fails_once_and_the_build_goes_on(remote_at(server.url()));
  expect_warning_names({server.url(), "TLS", "remote_tls_client_cert_file"});
  EXPECT_EQ(server.blob_count(), 0);
}

TEST_F(ReapiTlsTest, MutualTlsServerAcceptsTheClientCertificate) {
  BuildGridServer server(tls_server(/*mutual=*/true));
  const RemoteOptions remote = with_client_certificate(remote_at(server.url()));
  Entry e = entry_of("kernel");
  auto first = machine("first", remote);
  first->put(e);
  EXPECT_EQ(counter(*first, "remote_stored"), 1);
  std::optional<Entry> got = machine("second", remote)->get(e.key());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->encoded(), e.encoded());
  EXPECT_TRUE(warnings_.empty()) << warnings_[0];
}

TEST_F(ReapiTlsTest, MissingCaFileTurnsTheRemoteOffWithOneWarning) {
  RemoteOptions remote =
      remote_at("grpcs://127.0.0.1:" + std::to_string(kcache::testing::unused_port()));
  remote.tls_ca_file = dir_ / "no-such-ca.pem";
  expect_fails_once_and_the_build_goes_on(remote);
  expect_warning_names({"no-such-ca.pem"});
}

}  // namespace
}  // namespace kcache::cache
