// A real Remote Execution API server for the grpc:// remote's tests and
// benchmark: BuildGrid (PyPI `buildgrid`, installed into a venv by
// tools/install_deps.sh) on a free loopback port, with a disk CAS in a fresh
// folder (so tests can alter or delete blobs behind the client's back) and an
// in-memory action cache. Killed by the destructor, and by the kernel if the
// test dies first. Optionally behind TLS (BuildGrid's `!channel` credentials:
// tls-server-key, tls-server-cert, and tls-client-certs for mutual TLS),
// checking bearer tokens (JWTs), and under a non-empty instance name.
#pragma once

#include <sys/types.h>

#include <string>

#include "tests/testing/temp_dir.h"

namespace kcache::testing {

struct BuildGridOptions {
  // false: the action cache refuses UpdateActionResult.
  bool allow_updates = true;
  // The one instance the server serves ("" is BuildGrid's default instance);
  // requests naming another instance fail with INVALID_ARGUMENT.
  std::string instance_name;
  // Both set: TLS only (grpcs://). PEM file paths.
  std::string tls_server_cert;
  std::string tls_server_key;
  // Set (with the two above): mutual TLS, clients must present a certificate
  // signed by one of these PEM CA certificates.
  std::string tls_client_ca;
  // Set: every call must carry "authorization: Bearer <JWT>", a JSON Web
  // Token signed with this HS256 secret and with an "exp" claim (BuildGrid's
  // `authorization: {method: jwt}`); others get UNAUTHENTICATED.
  std::string jwt_hs256_secret;
};

// An HS256 JSON Web Token for a server with `jwt_hs256_secret` = `secret`:
// subject "kcache-ci", expiring in an hour.
std::string make_jwt(const std::string& secret);

class BuildGridServer {
 public:
  // `allow_updates` false: the action cache refuses UpdateActionResult.
  // Throws std::runtime_error (with BuildGrid's log) if it does not start.
  explicit BuildGridServer(bool allow_updates = true);
  explicit BuildGridServer(const BuildGridOptions& options);
  ~BuildGridServer();
  BuildGridServer(const BuildGridServer&) = delete;
  BuildGridServer& operator=(const BuildGridServer&) = delete;

  // "grpc://127.0.0.1:PORT", or "grpcs://127.0.0.1:PORT" with TLS.
  std::string url() const;
  int port() const { return port_; }
  // Where the disk CAS keeps the blob with this SHA-256 (it may not exist).
  std::string blob_path(const std::string& sha256_hex) const;
  // How many blobs the CAS holds.
  int blob_count() const;
  // SIGKILL now, as a crashing server would die.
  void kill_now();

  // The `bgd` program: $KCACHE_BUILDGRID_VENV/bin/bgd or
  // /opt/kcache-buildgrid/bin/bgd; empty if neither exists.
  static std::string find_bgd();

 private:
  TempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  bool tls_ = false;
};

}  // namespace kcache::testing
