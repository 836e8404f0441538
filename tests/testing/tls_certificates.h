// Throw-away X.509 certificates for the grpcs:// tests, made by the `openssl`
// command at test time (nothing checked in that could expire): a CA, a server
// certificate it signs for 127.0.0.1 and localhost, and a client certificate
// for mutual TLS. EC P-256 keys, valid for two days.
#pragma once

#include <string>

namespace kcache::testing {

struct TlsCertificates {
  std::string ca_cert;      // PEM: the CA that signed the two below
  std::string server_cert;  // PEM: SAN IP:127.0.0.1 and DNS:localhost, serverAuth
  std::string server_key;   // PEM, unencrypted
  std::string client_cert;  // PEM: CN "kcache test client", clientAuth
  std::string client_key;   // PEM, unencrypted
};

// Writes the files into `dir` (which must exist) and returns their paths.
// Throws std::runtime_error with openssl's own messages if a step fails.
TlsCertificates make_tls_certificates(const std::string& dir);

// The `openssl` program: on PATH or /usr/bin/openssl; empty if there is none.
std::string find_openssl();

}  // namespace kcache::testing
