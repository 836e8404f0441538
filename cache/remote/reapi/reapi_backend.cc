// The Remote Execution API backend (libkcache_reapi.so): kcache objects in a
// REAPI v2 cache (bazel-remote, BuildBuddy, Buildbarn, NativeLink, EngFlow,
// BuildGrid) over gRPC, as a well-behaved cache client.
//
// Mapping (one object, whatever kind: entry, signed entry, manifest):
//   action digest  SHA-256 of "kcache object v1\n<32 hex key>\n" (kActionLabel):
//                  the AC key. kcache uploads no Action message: these
//                  digests name kcache keys, and never collide with Bazel's
//                  action digests (a different preimage).
//   ActionResult   exit_code 0, one OutputFile {path "kcache/object",
//                  digest = SHA-256 of the object}: a valid result that
//                  servers validating ACs (every referenced blob exists) accept.
//   CAS blob       the object's bytes, byte for byte.
//
// get:  GetActionResult -> NOT_FOUND is a miss; the blob by BatchReadBlobs when
//       it fits the server's max_batch_total_size_bytes, else ByteStream.Read;
//       its SHA-256 and size must match the digest (else CorruptError). A blob
//       the AC names but the CAS no longer has is a miss (compiled again and
//       uploaded again, which repairs the entry).
// put:  FindMissingBlobs, then BatchUpdateBlobs or ByteStream.Write when
//       missing, then UpdateActionResult: the AC never names a blob that was
//       not stored first.
// GetCapabilities is asked once per backend, on first use: SHA-256 must be
// among the digest functions; the batch limit is obeyed (0 means none).
//
// Every call carries a deadline: the whole operation (all its RPCs and
// retries) ends by options.timeout. UNAVAILABLE (connection refused or
// broken) and RESOURCE_EXHAUSTED (a server's concurrency limit) are retried
// with backoff within that budget; nothing else is. Before its first call, a
// channel must become ready within options.connect_timeout (a peer that
// accepts TCP and never answers the HTTP/2 handshake costs that, not the
// whole timeout).
//
// A lying server costs bounded memory: every reply is received under a limit
// set by what was asked. BatchReadBlobs goes through a channel whose receive
// limit is the blob's size rounded up to a power of 4 (from 64 KiB; capped by
// the server's advertised batch limit), so at most 4x the blob plus 64 KiB is
// accepted; other replies (action results, capabilities, ByteStream chunks)
// are held to gRPC's usual 4 MiB. gRPC checks that limit only after a whole
// message has arrived, so each channel also has a memory quota: the receive
// limits of the calls in flight on it, plus slack (ReplyBudget). A reply that
// outgrows it is cut off while it arrives. A reply over its limit is a lying
// remote (IoError: the remote is not used again in this process), as is a
// ByteStream that sends more than the digest says.
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <openssl/sha.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "cache/remote/reapi/bytestream.grpc.pb.h"
#include "cache/remote/reapi/headers.h"
#include "cache/remote/reapi/remote_execution.grpc.pb.h"
#include "cache/remote/reapi_plugin.h"
#include "cache/remote/remote.h"
#include "common/error.h"

namespace kcache::cache {
namespace {

namespace re = build::bazel::remote::execution::v2;
namespace bs = google::bytestream;
using Clock = std::chrono::steady_clock;

constexpr const char* kActionLabel = "kcache object v1\n";
constexpr const char* kOutputPath = "kcache/object";
// Bytes a batch request spends on framing besides the data (digest, field
// tags); kept out of the server's limit.
constexpr int64_t kBatchOverhead = 1024;
// ByteStream chunks: well below gRPC's 4 MiB default message limit.
constexpr size_t kChunkSize = 1 << 20;
// Any reply but a batch read: gRPC's default limit, which servers already
// respect for every client (their ByteStream chunks are smaller), plus room
// for framing.
constexpr int kSmallReplyLimit = (4 << 20) + (64 << 10);
// A channel's memory quota beyond the replies in flight: the transport's own
// buffers.
constexpr int64_t kQuotaSlack = 4 << 20;
// The smallest batch-read receive limit; larger ones are 4x steps up from it.
constexpr int64_t kBatchReplyFloor = 64 << 10;

const char* status_name(int code) {
  static const char* names[] = {"OK",
                                "CANCELLED",
                                "UNKNOWN",
                                "INVALID_ARGUMENT",
                                "DEADLINE_EXCEEDED",
                                "NOT_FOUND",
                                "ALREADY_EXISTS",
                                "PERMISSION_DENIED",
                                "RESOURCE_EXHAUSTED",
                                "FAILED_PRECONDITION",
                                "ABORTED",
                                "OUT_OF_RANGE",
                                "UNIMPLEMENTED",
                                "INTERNAL",
                                "UNAVAILABLE",
                                "DATA_LOSS",
                                "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? names[code] : "an unknown status code";
}

// gRPC refused a reply larger than the channel's receive limit ("Received
// message larger than max (N vs. M)"), or cut it off while it arrived because
// it outgrew the channel's memory quota ("Buffers full").
bool reply_over_limit(const grpc::Status& status) {
  const std::string& m = status.error_message();
  return status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
         (m.find("larger than max") != std::string::npos ||
          m.find("Buffers full") != std::string::npos);
}

// The receive limit of a batch read of `size` bytes (see the top).
int64_t batch_reply_limit(int64_t size, int64_t max_batch) {
  int64_t limit = kBatchReplyFloor;
  while (limit < size + kBatchOverhead) limit *= 4;
  if (max_batch > 0) limit = std::min(limit, max_batch + kBatchOverhead);
  return limit;
}

std::string sha256_hex(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  static const char* hex = "0123456789abcdef";
  std::string out(2 * SHA256_DIGEST_LENGTH, '0');
  for (int i = 0; i < SHA256_DIGEST_LENGTH; ++i) {
    out[2 * i] = hex[digest[i] >> 4];
    out[2 * i + 1] = hex[digest[i] & 15];
  }
  return out;
}

re::Digest digest_of(std::string_view data) {
  re::Digest d;
  d.set_hash(sha256_hex(data));
  d.set_size_bytes(static_cast<int64_t>(data.size()));
  return d;
}

re::Digest action_digest(const Hash128& key) {
  return digest_of(std::string(kActionLabel) + key.hex() + "\n");
}

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string read_file_or_throw(const std::string& path, const std::string& what) {
  return read_secret_file(path, what) + "\n";
}

// The memory one channel may hold for replies: the receive limits of the
// calls in flight on it (what was asked), plus slack. gRPC's memory quota
// enforces it while bytes arrive: the transport cancels a call whose reply
// outgrows it ("Buffers full"). Thread-safe.
class ReplyBudget {
 public:
  ReplyBudget() : quota_("kcache-reapi-replies") { quota_.Resize(kQuotaSlack); }
  grpc::ResourceQuota& quota() { return quota_; }

  // Room for one reply of up to `limit` bytes while it lives.
  class Hold {
   public:
    Hold(ReplyBudget& budget, int64_t limit) : budget_(budget), limit_(limit) {
      budget_.add(limit_);
    }
    ~Hold() { budget_.add(-limit_); }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    ReplyBudget& budget_;
    int64_t limit_;
  };

 private:
  // The quota shrinks only when no call is in flight: a reply that has just
  // arrived may still hold the transport's buffers while the next ones come
  // in, and shrinking under it cut an honest reply off ("Buffers full") on a
  // loaded machine (reapi_reply_budget_test, 1 run in 3 under load 8).
  void add(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_ += bytes;
    high_ = in_flight_ == 0 ? 0 : std::max(high_, in_flight_);
    quota_.Resize(static_cast<size_t>(high_ + kQuotaSlack));
  }

  std::mutex mutex_;
  int64_t in_flight_ = 0;
  int64_t high_ = 0;  // the most in flight since none was
  grpc::ResourceQuota quota_;
};

class ReapiBackend : public RemoteBackend {
 public:
  explicit ReapiBackend(const RemoteOptions& options) : options_(options) {
    check_reapi_options(options);
    const bool tls = options.url.rfind("grpcs://", 0) == 0;
    tls_ = tls;
    target_ = options.url.substr(tls ? 8 : 7);
    while (!target_.empty() && target_.back() == '/') target_.pop_back();
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    if (tls) {
      grpc::SslCredentialsOptions ssl;
      if (!options.tls_ca_file.empty()) {
        ssl.pem_root_certs =
            read_file_or_throw(options.tls_ca_file, "the remote's CA certificates");
      }
      if (!options.tls_client_cert_file.empty()) {
        ssl.pem_cert_chain =
            read_file_or_throw(options.tls_client_cert_file, "the TLS client certificate");
        ssl.pem_private_key = read_file_or_throw(options.tls_client_key_file, "the TLS client key");
      }
      credentials = grpc::SslCredentials(ssl);
    } else {
      credentials = grpc::InsecureChannelCredentials();
    }
    if (!options.bearer_token_file.empty()) {
      headers_.emplace_back(
          "authorization",
          "Bearer " + read_secret_file(options.bearer_token_file, "the remote's bearer token"));
    }
    if (!options.headers_file.empty()) {
      for (auto& h :
           parse_remote_headers(read_file_or_throw(options.headers_file, "the remote's headers"),
                                options.headers_file)) {
        headers_.push_back(std::move(h));
      }
    }
    credentials_ = credentials;
    channel_ = make_channel(kSmallReplyLimit, budget_);
    ac_ = re::ActionCache::NewStub(channel_);
    cas_ = re::ContentAddressableStorage::NewStub(channel_);
    capabilities_ = re::Capabilities::NewStub(channel_);
    bytestream_ = bs::ByteStream::NewStub(channel_);
  }

  std::optional<std::string> get(const Hash128& key) override {
    const Clock::time_point deadline = Clock::now() + options_.timeout;
    const int64_t max_batch = batch_limit(deadline);
    std::optional<re::ActionResult> result = get_action_result(key, deadline);
    if (!result) return std::nullopt;
    const re::OutputFile* file = nullptr;
    for (const re::OutputFile& f : result->output_files()) {
      if (f.path() == kOutputPath) file = &f;
    }
    if (!file) {
      throw CorruptError("the action result at " + url_of(key) + " has no output file " +
                         kOutputPath + " (not written by kcache)");
    }
    const re::Digest& digest = file->digest();
    if (!is_sha256_hex(digest.hash()) || digest.size_bytes() < 0 ||
        static_cast<uint64_t>(digest.size_bytes()) > kMaxRemoteObjectSize) {
      throw CorruptError("the action result at " + url_of(key) + " names a bad blob digest " +
                         digest.hash() + "/" + std::to_string(digest.size_bytes()));
    }
    std::optional<std::string> data = fits_batch(digest.size_bytes(), max_batch)
                                          ? batch_read(digest, max_batch, deadline)
                                          : stream_read(digest, deadline);
    if (!data) return std::nullopt;  // the AC names a blob the CAS lost: a miss
    if (static_cast<int64_t>(data->size()) != digest.size_bytes() ||
        sha256_hex(*data) != digest.hash()) {
      throw CorruptError("the CAS blob " + digest.hash() + " for " + url_of(key) +
                         " does not match its digest (" + std::to_string(data->size()) +
                         " bytes received); the server returned altered data");
    }
    return data;
  }

  bool exists(const Hash128& key) override {
    const Clock::time_point deadline = Clock::now() + options_.timeout;
    batch_limit(deadline);
    return get_action_result(key, deadline).has_value();
  }

  void put(const Hash128& key, std::string_view object) override {
    if (options_.read_only) {
      throw InvalidArgument("the remote " + options_.url + " is read-only; not uploading " +
                            key.hex());
    }
    if (object.size() > kMaxRemoteObjectSize) {
      throw InvalidArgument("object " + key.hex() + " is larger than kcache's remote limit");
    }
    const Clock::time_point deadline = Clock::now() + options_.timeout;
    const int64_t max_batch = batch_limit(deadline);
    if (!update_enabled_) {
      throw IoError("the server at " + options_.url +
                    " does not allow action cache updates (its capabilities say so); use it "
                    "read-only (remote_read_only = true)");
    }
    const re::Digest digest = digest_of(object);
    if (blob_missing(digest, deadline)) {
      if (fits_batch(digest.size_bytes(), max_batch)) {
        batch_write(digest, object, deadline);
      } else {
        stream_write(digest, object, deadline);
      }
    }
    re::UpdateActionResultRequest request;
    request.set_instance_name(options_.instance_name);
    *request.mutable_action_digest() = action_digest(key);
    request.set_digest_function(re::DigestFunction::SHA256);
    re::OutputFile* file = request.mutable_action_result()->add_output_files();
    file->set_path(kOutputPath);
    *file->mutable_digest() = digest;
    re::ActionResult response;
    call("UpdateActionResult " + url_of(key), deadline, [&](grpc::ClientContext* context) {
      return ac_->UpdateActionResult(context, request, &response);
    });
  }

  bool remove(const Hash128& key) override {
    throw IoError("the Remote Execution API has no delete; " + url_of(key) +
                  " stays until the server evicts it");
  }

  std::string url_of(const Hash128& key) const override {
    const std::string instance = options_.instance_name.empty() ? "" : options_.instance_name + "/";
    return options_.url + "/" + instance + "ac/" + action_digest(key).hash() + " (kcache key " +
           key.hex() + ")";
  }

 private:
  static bool fits_batch(int64_t size, int64_t max_batch) {
    return max_batch == 0 || size + kBatchOverhead <= max_batch;
  }

  std::shared_ptr<grpc::Channel> make_channel(int64_t receive_limit, ReplyBudget& budget) const {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(static_cast<int>(receive_limit));
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);  // ours are bounded by the operation's deadline
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
                static_cast<int>(options_.connect_timeout.count()));
    args.SetUserAgentPrefix("kcache");
    args.SetResourceQuota(budget.quota());
    return grpc::CreateCustomChannel(target_, credentials_, args);
  }

  struct BatchReadChannel {
    ReplyBudget budget;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<re::ContentAddressableStorage::Stub> stub;
    bool connected = false;
  };

  // The batch-read channel that accepts replies up to `limit` bytes; made
  // (and connected) on first use. A few exist at most (4x steps).
  BatchReadChannel& batch_read_channel(int64_t limit, Clock::time_point deadline) {
    std::shared_ptr<grpc::Channel> channel;
    BatchReadChannel* c = nullptr;
    {
      std::lock_guard<std::mutex> lock(channels_mutex_);
      std::unique_ptr<BatchReadChannel>& slot = batch_read_channels_[limit];
      if (!slot) {
        slot = std::make_unique<BatchReadChannel>();
        slot->channel = make_channel(limit, slot->budget);
        slot->stub = re::ContentAddressableStorage::NewStub(slot->channel);
      }
      c = slot.get();
      if (c->connected) return *c;
      channel = c->channel;
    }
    wait_until_connected(*channel, "BatchReadBlobs " + options_.url, deadline);
    std::lock_guard<std::mutex> lock(channels_mutex_);
    c->connected = true;
    return *c;
  }

  // Waits until `channel` is ready, or has failed (the first call then says
  // why: refused, TLS, ...), for at most the connect timeout. Still
  // connecting then is a failure: nothing that speaks gRPC answered.
  void wait_until_connected(grpc::Channel& channel, const std::string& what,
                            Clock::time_point deadline) {
    const Clock::time_point start = Clock::now();
    const Clock::time_point give_up = std::min(deadline, start + options_.connect_timeout);
    for (;;) {
      const grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
      if (state == GRPC_CHANNEL_READY || state == GRPC_CHANNEL_TRANSIENT_FAILURE ||
          state == GRPC_CHANNEL_SHUTDOWN) {
        return;
      }
      if (Clock::now() >= give_up) break;
      channel.WaitForStateChange(state,
                                 std::chrono::system_clock::now() + (give_up - Clock::now()));
    }
    if (deadline < start + options_.connect_timeout) {
      throw IoError(what + " timed out after " + std::to_string(options_.timeout.count()) +
                    " ms (remote_timeout) while connecting");
    }
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", options_.connect_timeout.count() / 1000.0);
    throw IoError(what + ": could not connect within " + seconds +
                  " s (remote_connect_timeout): the peer accepted no gRPC connection (it may "
                  "accept TCP and never answer the " +
                  (tls_ ? "TLS" : "HTTP/2") +
                  " handshake: not a REAPI/gRPC server, or a hung one)");
  }

  // Runs `rpc` (one attempt per call, each with a fresh context) until it
  // succeeds, fails for good, or the deadline passes. Returns the final
  // status when it is NOT_FOUND (for callers to whom that is an answer);
  // throws IoError for any other failure.
  template <typename Rpc>
  grpc::Status call(const std::string& what, Clock::time_point deadline, Rpc&& rpc) {
    return call_within(budget_, kSmallReplyLimit, what, deadline, std::forward<Rpc>(rpc));
  }

  // The same, on a channel with `budget`, for a reply of up to `limit` bytes.
  template <typename Rpc>
  grpc::Status call_within(ReplyBudget& budget, int64_t limit, const std::string& what,
                           Clock::time_point deadline, Rpc&& rpc) {
    const ReplyBudget::Hold hold(budget, limit);
    std::chrono::milliseconds backoff(50);
    for (int attempt = 0;; ++attempt) {
      grpc::ClientContext context;
      prepare(context, deadline);
      grpc::Status status = rpc(&context);
      if (status.ok() || status.error_code() == grpc::StatusCode::NOT_FOUND) return status;
      if (reply_over_limit(status)) throw IoError(lying_reply(what, status));
      // UNAVAILABLE: connection refused or broken; RESOURCE_EXHAUSTED: the
      // server's concurrency limit (BuildGrid's "Concurrent RPC limit
      // exceeded"), which the spec asks clients to retry.
      const bool transient = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                             status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
      const bool retry =
          transient && attempt < options_.retries && Clock::now() + backoff < deadline;
      if (!retry) throw IoError(describe(what, status));
      std::this_thread::sleep_for(backoff);
      backoff *= 2;
    }
  }

  void prepare(grpc::ClientContext& context, Clock::time_point deadline) const {
    context.set_deadline(std::chrono::system_clock::now() + (deadline - Clock::now()));
    for (const auto& [name, value] : headers_) context.AddMetadata(name, value);
  }

  std::string lying_reply(const std::string& what, const grpc::Status& status) const {
    return what + ": the server at " + options_.url + " answered with more than was asked for (" +
           status_name(status.error_code()) + ": " + status.error_message() +
           "); a lying or broken remote";
  }

  std::string describe(const std::string& what, const grpc::Status& status) const {
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return what + " timed out after " + std::to_string(options_.timeout.count()) +
             " ms (remote_timeout)";
    }
    const int code = static_cast<int>(status.error_code());
    std::string text = what + " failed: " + status_name(code);
    if (code < 0 || code > 16) text += " " + std::to_string(code);
    if (!status.error_message().empty()) text += ": " + status.error_message();
    const std::string not_grpc = not_grpc_hint(status);
    if (!not_grpc.empty()) return text + not_grpc;
    if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
        status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      text += " (check remote_token_file / remote_headers_file)";
    }
    // BuildGrid: "Invalid instance name: [x]"; Buildbarn: "Unknown instance name".
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
        status.error_message().find("nstance") != std::string::npos) {
      text += " (remote_instance_name is \"" + options_.instance_name +
              "\": set it to an instance the server serves)";
    }
    if (tls_ && status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      text += tls_hint(status.error_message());
    }
    return text;
  }

  // What gRPC says when the peer is not a gRPC server at all (an HTTP/1.1
  // server, or something sending bytes that are not HTTP/2): name that.
  std::string not_grpc_hint(const grpc::Status& status) const {
    const std::string& m = status.error_message();
    auto has = [&](const char* part) { return m.find(part) != std::string::npos; };
    const bool http1 = has("http1") || has("HTTP/1");
    const bool garbage =
        (status.error_code() == grpc::StatusCode::UNIMPLEMENTED && has("No message returned")) ||
        // Only gRPC's words for a handshake that was not HTTP/2 at all: a
        // real server's protocol errors keep their own message.
        (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
         (has("Failed parsing HTTP/2") || has("last error: OK") || has("Connection prefix")));
    if (http1) {
      return " (the peer at " + options_.url +
             " speaks HTTP/1.1: not a REAPI/gRPC server; for an HTTP cache use an http:// URL)";
    }
    if (garbage && !(tls_ && has("SSL"))) {
      return " (the peer at " + options_.url +
             " does not speak gRPC: not a REAPI/gRPC server, or the wrong port)";
    }
    return "";
  }

  // gRPC reports a failed TLS handshake as UNAVAILABLE with OpenSSL's words;
  // say what they mean for a grpcs:// remote and which setting to fix.
  std::string tls_hint(const std::string& message) const {
    auto has = [&](const char* part) { return message.find(part) != std::string::npos; };
    if (has("certificate verify failed") || has("CERTIFICATE_VERIFY_FAILED")) {
      return std::string(
                 " (TLS: the server's certificate is not signed by a CA kcache trusts; "
                 "set remote_tls_ca_file to the PEM file of the CA that signed it") +
             (options_.tls_ca_file.empty() ? ")" : ", not " + options_.tls_ca_file + ")");
    }
    if (has("wrong version number") || has("WRONG_VERSION_NUMBER")) {
      return " (TLS: the server does not speak TLS on this port; use grpc:// for a plain-text "
             "server)";
    }
    if (has("Peer name") || has("peer name")) {
      return " (TLS: the server's certificate does not name the host in the URL)";
    }
    // A mutual-TLS server may drop the client after a TLS 1.3 handshake the
    // client already thinks complete: "Socket closed", or a reset.
    if (has("andshake") || has("Socket closed") || has("ssl") || has("SSL") ||
        has("reset by peer") || has("Broken pipe")) {
      return options_.tls_client_cert_file.empty()
                 ? " (TLS: the server closed the connection during or after the handshake; a "
                   "server that requires mutual TLS does that to a client without a "
                   "certificate: set remote_tls_client_cert_file and remote_tls_client_key_file)"
                 : " (TLS: the server closed the connection during or after the handshake; "
                   "check that it accepts the client certificate in " +
                       options_.tls_client_cert_file + ")";
    }
    return "";
  }

  // Asks GetCapabilities once; returns the batch limit (0: none).
  int64_t batch_limit(Clock::time_point deadline) {
    std::lock_guard<std::mutex> lock(capabilities_mutex_);
    if (max_batch_) return *max_batch_;
    wait_until_connected(*channel_, "GetCapabilities " + options_.url, deadline);
    re::GetCapabilitiesRequest request;
    request.set_instance_name(options_.instance_name);
    re::ServerCapabilities response;
    grpc::Status status =
        call("GetCapabilities " + options_.url, deadline, [&](grpc::ClientContext* context) {
          return capabilities_->GetCapabilities(context, request, &response);
        });
    if (!status.ok()) throw IoError("GetCapabilities " + options_.url + " failed: NOT_FOUND");
    const re::CacheCapabilities& cache = response.cache_capabilities();
    bool sha256 = false;
    for (int f : cache.digest_functions()) sha256 |= f == re::DigestFunction::SHA256;
    if (!sha256) {
      throw IoError("the server at " + options_.url +
                    " does not offer SHA-256 digests (its capabilities list other digest "
                    "functions); kcache needs SHA-256");
    }
    update_enabled_ = cache.action_cache_update_capabilities().update_enabled();
    max_batch_ = std::max<int64_t>(0, cache.max_batch_total_size_bytes());
    return *max_batch_;
  }

  std::optional<re::ActionResult> get_action_result(const Hash128& key,
                                                    Clock::time_point deadline) {
    re::GetActionResultRequest request;
    request.set_instance_name(options_.instance_name);
    *request.mutable_action_digest() = action_digest(key);
    request.set_digest_function(re::DigestFunction::SHA256);
    re::ActionResult result;
    grpc::Status status =
        call("GetActionResult " + url_of(key), deadline, [&](grpc::ClientContext* context) {
          return ac_->GetActionResult(context, request, &result);
        });
    if (!status.ok()) return std::nullopt;
    return result;
  }

  std::optional<std::string> batch_read(const re::Digest& digest, int64_t max_batch,
                                        Clock::time_point deadline) {
    const int64_t limit = batch_reply_limit(digest.size_bytes(), max_batch);
    BatchReadChannel& channel = batch_read_channel(limit, deadline);
    re::BatchReadBlobsRequest request;
    request.set_instance_name(options_.instance_name);
    *request.add_digests() = digest;
    request.set_digest_function(re::DigestFunction::SHA256);
    re::BatchReadBlobsResponse response;
    const std::string what = "BatchReadBlobs " + digest.hash();
    grpc::Status status =
        call_within(channel.budget, limit, what, deadline, [&](grpc::ClientContext* context) {
          return channel.stub->BatchReadBlobs(context, request, &response);
        });
    if (!status.ok()) return std::nullopt;
    for (re::BatchReadBlobsResponse::Response& r : *response.mutable_responses()) {
      if (r.digest().hash() != digest.hash()) continue;
      if (r.status().code() == static_cast<int>(grpc::StatusCode::NOT_FOUND)) return std::nullopt;
      if (r.status().code() != 0) {
        throw IoError(what + " failed: " + status_name(r.status().code()) + ": " +
                      r.status().message());
      }
      if (r.compressor() != re::Compressor::IDENTITY) {
        throw CorruptError(what + ": the server sent compressed data kcache did not ask for");
      }
      return std::move(*r.mutable_data());
    }
    throw CorruptError(what + ": the server's answer does not hold the blob asked for");
  }

  std::optional<std::string> stream_read(const re::Digest& digest, Clock::time_point deadline) {
    bs::ReadRequest request;
    request.set_resource_name(resource_prefix() + "blobs/" + digest.hash() + "/" +
                              std::to_string(digest.size_bytes()));
    const ReplyBudget::Hold hold(budget_, kSmallReplyLimit);
    grpc::ClientContext context;
    prepare(context, deadline);
    std::unique_ptr<grpc::ClientReader<bs::ReadResponse>> reader =
        bytestream_->Read(&context, request);
    std::string data;
    bs::ReadResponse chunk;
    while (reader->Read(&chunk)) {
      // A lying server cannot make us buffer more than the digest says.
      if (data.size() + chunk.data().size() > static_cast<size_t>(digest.size_bytes())) {
        context.TryCancel();
        reader->Finish();
        throw IoError("ByteStream.Read " + digest.hash() + ": the server at " + options_.url +
                      " sent more than the " + std::to_string(digest.size_bytes()) +
                      " bytes its digest says; a lying or broken remote");
      }
      data += chunk.data();
    }
    grpc::Status status = reader->Finish();
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) return std::nullopt;
    if (reply_over_limit(status)) {
      throw IoError(lying_reply("ByteStream.Read " + digest.hash(), status));
    }
    if (!status.ok()) throw IoError(describe("ByteStream.Read " + digest.hash(), status));
    return data;
  }

  bool blob_missing(const re::Digest& digest, Clock::time_point deadline) {
    re::FindMissingBlobsRequest request;
    request.set_instance_name(options_.instance_name);
    *request.add_blob_digests() = digest;
    request.set_digest_function(re::DigestFunction::SHA256);
    re::FindMissingBlobsResponse response;
    call("FindMissingBlobs " + digest.hash(), deadline, [&](grpc::ClientContext* context) {
      return cas_->FindMissingBlobs(context, request, &response);
    });
    return response.missing_blob_digests_size() > 0;
  }

  void batch_write(const re::Digest& digest, std::string_view data, Clock::time_point deadline) {
    re::BatchUpdateBlobsRequest request;
    request.set_instance_name(options_.instance_name);
    request.set_digest_function(re::DigestFunction::SHA256);
    re::BatchUpdateBlobsRequest::Request* blob = request.add_requests();
    *blob->mutable_digest() = digest;
    blob->set_data(data.data(), data.size());
    re::BatchUpdateBlobsResponse response;
    const std::string what = "BatchUpdateBlobs " + digest.hash();
    call(what, deadline, [&](grpc::ClientContext* context) {
      return cas_->BatchUpdateBlobs(context, request, &response);
    });
    for (const auto& r : response.responses()) {
      if (r.status().code() != 0) {
        throw IoError(what + " failed: " + status_name(r.status().code()) + ": " +
                      r.status().message());
      }
    }
  }

  void stream_write(const re::Digest& digest, std::string_view data, Clock::time_point deadline) {
    const std::string name = resource_prefix() + "uploads/" + uuid4() + "/blobs/" + digest.hash() +
                             "/" + std::to_string(digest.size_bytes());
    const std::string what = "ByteStream.Write " + digest.hash();
    const ReplyBudget::Hold hold(budget_, kSmallReplyLimit);
    grpc::ClientContext context;
    prepare(context, deadline);
    bs::WriteResponse response;
    std::unique_ptr<grpc::ClientWriter<bs::WriteRequest>> writer =
        bytestream_->Write(&context, &response);
    size_t offset = 0;
    do {
      bs::WriteRequest request;
      if (offset == 0) request.set_resource_name(name);
      request.set_write_offset(static_cast<int64_t>(offset));
      const size_t n = std::min(kChunkSize, data.size() - offset);
      request.set_data(data.data() + offset, n);
      offset += n;
      request.set_finish_write(offset == data.size());
      // A failed Write means the server closed the stream (it may already
      // have the blob); Finish says why.
      if (!writer->Write(request)) break;
    } while (offset < data.size());
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    if (!status.ok()) throw IoError(describe(what, status));
    if (response.committed_size() != digest.size_bytes()) {
      throw IoError(what + ": the server committed " + std::to_string(response.committed_size()) +
                    " of " + std::to_string(digest.size_bytes()) + " bytes");
    }
  }

  std::string resource_prefix() const {
    return options_.instance_name.empty() ? "" : options_.instance_name + "/";
  }

  static std::string uuid4() {
    static thread_local std::mt19937_64 rng(std::random_device{}());
    const uint64_t a = rng(), b = rng();
    char out[37];
    std::snprintf(out, sizeof out, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                  static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                  static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3fff)),
                  static_cast<unsigned long long>(b & 0xffffffffffffull));
    return out;
  }

  RemoteOptions options_;
  bool tls_ = false;
  std::string target_;
  std::vector<std::pair<std::string, std::string>> headers_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  ReplyBudget budget_;                      // channel_'s
  std::shared_ptr<grpc::Channel> channel_;  // every call but batch reads
  std::mutex channels_mutex_;
  std::map<int64_t, std::unique_ptr<BatchReadChannel>> batch_read_channels_;  // by receive limit
  std::unique_ptr<re::ActionCache::Stub> ac_;
  std::unique_ptr<re::ContentAddressableStorage::Stub> cas_;
  std::unique_ptr<re::Capabilities::Stub> capabilities_;
  std::unique_ptr<bs::ByteStream::Stub> bytestream_;
  std::mutex capabilities_mutex_;
  std::optional<int64_t> max_batch_;
  std::atomic<bool> update_enabled_{false};
};

}  // namespace
}  // namespace kcache::cache

extern "C" kcache::cache::RemoteBackend* kcache_make_reapi_backend(
    const kcache::cache::RemoteOptions& options) {
  return new kcache::cache::ReapiBackend(options);
}
