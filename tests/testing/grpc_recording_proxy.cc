#include "tests/testing/grpc_recording_proxy.h"

#include <grpcpp/generic/generic_stub.h>

#include <stdexcept>

namespace kcache::testing {
namespace {

// Large enough for BuildGrid's 4 MiB batches and kcache's biggest object.
constexpr int kMaxMessage = 300 << 20;

// Headers gRPC itself sets on every call; the rest are the client's own.
bool is_transport_header(const std::string& name) {
  return name.empty() || name[0] == ':' || name.rfind("grpc-", 0) == 0 || name == "user-agent" ||
         name == "te" || name == "content-type";
}

std::string to_string(const grpc::string_ref& s) { return std::string(s.data(), s.size()); }

std::string bytes_of(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// Runs one operation already started on `queue` to completion: every call
// has at most one operation outstanding on its own queue.
bool finished(grpc::CompletionQueue& queue) {
  void* tag = nullptr;
  bool ok = false;
  return queue.Next(&tag, &ok) && ok;
}

}  // namespace

// One incoming call: its context, stream and the queue its operations (and
// its upstream call's) complete on.
struct GrpcRecordingProxy::Pending {
  grpc::GenericServerContext context;
  grpc::GenericServerAsyncReaderWriter stream{&context};
  grpc::CompletionQueue queue;
  ~Pending() {
    queue.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (queue.Next(&tag, &ok)) {
    }
  }
};

GrpcRecordingProxy::GrpcRecordingProxy(const std::string& upstream_url) {
  const std::string upstream =
      upstream_url.rfind("grpc://", 0) == 0 ? upstream_url.substr(7) : upstream_url;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessage);
  args.SetMaxSendMessageSize(kMaxMessage);
  upstream_ = grpc::CreateCustomChannel(upstream, grpc::InsecureChannelCredentials(), args);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterAsyncGenericService(&service_);
  builder.SetMaxReceiveMessageSize(kMaxMessage);
  builder.SetMaxSendMessageSize(kMaxMessage);
  queue_ = builder.AddCompletionQueue();
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) throw std::runtime_error("the gRPC proxy could not listen");
  acceptor_ = std::thread([this] { accept_loop(); });
}

GrpcRecordingProxy::~GrpcRecordingProxy() {
  server_->Shutdown(std::chrono::system_clock::now());  // cancels calls in flight
  queue_->Shutdown();
  acceptor_.join();
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    workers.swap(workers_);
  }
  for (std::thread& t : workers) t.join();
}

std::string GrpcRecordingProxy::url() const { return "grpc://127.0.0.1:" + std::to_string(port_); }

std::vector<GrpcRecordingProxy::Call> GrpcRecordingProxy::calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return calls_;
}

int GrpcRecordingProxy::count(const std::string& method) const {
  std::lock_guard<std::mutex> lock(mutex_);
  int n = 0;
  for (const Call& c : calls_) {
    const std::string last = c.method.substr(c.method.rfind('/') + 1);
    n += c.method == method || last == method;
  }
  return n;
}

void GrpcRecordingProxy::accept_loop() {
  for (;;) {
    auto call = std::make_unique<Pending>();
    service_.RequestCall(&call->context, &call->stream, &call->queue, queue_.get(), call.get());
    void* tag = nullptr;
    bool ok = false;
    if (!queue_->Next(&tag, &ok) || !ok) break;  // shutting down
    Pending* started = call.release();
    std::lock_guard<std::mutex> lock(mutex_);
    workers_.emplace_back([this, started] {
      std::unique_ptr<Pending> owned(started);
      forward(started);
    });
  }
  // Drain the queue (the last RequestCall's tag, if it is still there).
  void* tag = nullptr;
  bool ok = false;
  while (queue_->Next(&tag, &ok)) {
  }
}

void GrpcRecordingProxy::forward(Pending* call) {
  grpc::CompletionQueue& q = call->queue;
  void* const tag = call;  // one operation at a time: any tag will do
  Call record;
  record.method = call->context.method();
  for (const auto& [name, value] : call->context.client_metadata()) {
    record.metadata.emplace(to_string(name), to_string(value));
  }
  std::vector<grpc::ByteBuffer> requests;
  for (;;) {
    grpc::ByteBuffer message;
    call->stream.Read(&message, tag);
    if (!finished(q)) break;  // the client half-closed
    record.requests.push_back(bytes_of(message));
    requests.push_back(std::move(message));
  }

  grpc::ClientContext upstream_context;
  upstream_context.set_deadline(call->context.deadline());
  for (const auto& [name, value] : record.metadata) {
    if (!is_transport_header(name)) upstream_context.AddMetadata(name, value);
  }
  grpc::GenericStub stub(upstream_);
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> upstream =
      stub.PrepareCall(&upstream_context, record.method, &q);
  upstream->StartCall(tag);
  std::vector<grpc::ByteBuffer> responses;
  grpc::Status status;
  if (finished(q)) {
    for (const grpc::ByteBuffer& m : requests) {
      upstream->Write(m, tag);
      if (!finished(q)) break;
    }
    upstream->WritesDone(tag);
    finished(q);
    for (;;) {
      grpc::ByteBuffer message;
      upstream->Read(&message, tag);
      if (!finished(q)) break;
      responses.push_back(std::move(message));
    }
  }
  upstream->Finish(&status, tag);
  finished(q);
  record.status = status.error_code();
  {
    // Recorded before the client has its answer: a test that checks the
    // record after the call returns always finds it.
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.push_back(record);
  }

  for (const grpc::ByteBuffer& m : responses) {
    call->stream.Write(m, tag);
    if (!finished(q)) break;
  }
  call->stream.Finish(status, tag);
  finished(q);
}

}  // namespace kcache::testing
