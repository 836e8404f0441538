// A Remote Execution API cache that lies on purpose (hostile_reapi_server.py,
// run with the BuildGrid venv's Python, whose grpcio and buildgrid._protos it
// uses) on a free loopback port: it stores uploads honestly and misbehaves in
// one way when asked to read, or is not gRPC at all. The modes are listed in
// the script. Killed by the destructor, and by the kernel if the test dies.
#pragma once

#include <sys/types.h>

#include <string>

#include "tests/testing/temp_dir.h"

namespace kcache::testing {

class HostileReapiServer {
 public:
  // Throws std::runtime_error (with the script's output) if it does not start.
  explicit HostileReapiServer(const std::string& mode);
  ~HostileReapiServer();
  HostileReapiServer(const HostileReapiServer&) = delete;
  HostileReapiServer& operator=(const HostileReapiServer&) = delete;

  // "grpc://127.0.0.1:PORT"
  std::string url() const;

  // The BuildGrid venv's Python; empty if it is not installed.
  static std::string find_python();

 private:
  TempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace kcache::testing
