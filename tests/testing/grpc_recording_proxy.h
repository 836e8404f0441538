// A gRPC proxy for the grpc:// remote's tests: it forwards every call, as raw
// bytes, to a real server (BuildGrid) and records what the client sent — the
// method, the metadata (headers) and the request messages — so tests can see
// what a server would: the bearer token, the headers file's headers, the
// instance name, and which RPCs a read-only client makes. Built on gRPC's
// generic API (AsyncGenericService + GenericStub): no knowledge of REAPI.
//
// Calls are forwarded half-duplex: all request messages first, then all
// responses. Every REAPI and ByteStream method (unary, client- or
// server-streaming) works that way; a true bidirectional stream would not.
#pragma once

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kcache::testing {

class GrpcRecordingProxy {
 public:
  struct Call {
    std::string method;  // "/build.bazel.remote.execution.v2.ActionCache/GetActionResult"
    std::multimap<std::string, std::string> metadata;  // as received, keys lowercase
    std::vector<std::string> requests;                 // serialized request messages
    grpc::StatusCode status = grpc::StatusCode::OK;    // the upstream's answer
  };

  // `upstream`: "grpc://127.0.0.1:PORT" (or "127.0.0.1:PORT") of a
  // plain-text server. Listens on a free loopback port. Throws
  // std::runtime_error if it cannot listen.
  explicit GrpcRecordingProxy(const std::string& upstream);
  // Cancels calls in flight and joins every thread.
  ~GrpcRecordingProxy();
  GrpcRecordingProxy(const GrpcRecordingProxy&) = delete;
  GrpcRecordingProxy& operator=(const GrpcRecordingProxy&) = delete;

  // "grpc://127.0.0.1:PORT".
  std::string url() const;
  // Every call the server has answered, in that order; a call is recorded
  // before its answer is passed on to the client. Thread-safe.
  std::vector<Call> calls() const;
  // How many recorded calls named this method's last component (e.g.
  // "BatchUpdateBlobs", "Write"), or the whole method name.
  int count(const std::string& method) const;

 private:
  struct Pending;
  void accept_loop();
  void forward(Pending* call);

  std::shared_ptr<grpc::Channel> upstream_;
  grpc::AsyncGenericService service_;
  std::unique_ptr<grpc::ServerCompletionQueue> queue_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::thread acceptor_;
  mutable std::mutex mutex_;
  std::vector<Call> calls_;
  std::vector<std::thread> workers_;
};

}  // namespace kcache::testing
