// A real Remote Execution API server for the grpc:// remote's tests and
// benchmark: BuildGrid (PyPI `buildgrid`, installed into a venv by
// tools/install_deps.sh) on a free loopback port, with a disk CAS in a fresh
// folder (so tests can alter or delete blobs behind the client's back) and an
// in-memory action cache. Killed by the destructor, and by the kernel if the
// test dies first.
#pragma once

#include <sys/types.h>

#include <string>

#include "tests/testing/temp_dir.h"

namespace kcache::testing {

class BuildGridServer {
 public:
  // `allow_updates` false: the action cache refuses UpdateActionResult.
  // Throws std::runtime_error (with BuildGrid's log) if it does not start.
  explicit BuildGridServer(bool allow_updates = true);
  ~BuildGridServer();
  BuildGridServer(const BuildGridServer&) = delete;
  BuildGridServer& operator=(const BuildGridServer&) = delete;

  // "grpc://127.0.0.1:PORT".
  std::string url() const;
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
};

}  // namespace kcache::testing
