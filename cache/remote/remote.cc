#include "cache/remote/remote.h"

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "cache/remote/curl_api.h"  // after curl.h and OpenSSL: redirects them to dlopen
#include "common/bytes.h"
#include "common/error.h"
#include "common/file_system.h"

namespace kcache::cache {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr uint8_t kAlgorithmHmacSha256 = 1;
constexpr size_t kMacSize = 32;
constexpr size_t kMinHmacKeySize = 16;
// Backoff before retry n (0-based): 50 ms, 100 ms, 200 ms, ... A server that
// is restarting gets a moment; a dead one is given up on quickly.
constexpr milliseconds kFirstBackoff{50};
// Idle connections kept per backend: enough for the precompiler's parallel
// per-arch lookups without holding sockets open for nothing.
constexpr size_t kMaxIdleHandles = 16;
constexpr const char* kUserAgent = "kcache/0.1";

std::string strip(std::string s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

void write_key_bytes(ByteWriter& w, const Hash128& key) {
  for (uint64_t half : {key.high, key.low}) {
    for (int shift = 56; shift >= 0; shift -= 8) w.u8(static_cast<uint8_t>(half >> shift));
  }
}

Hash128 read_key_bytes(ByteReader& r) {
  Hash128 key;
  for (uint64_t* half : {&key.high, &key.low}) {
    for (int i = 0; i < 8; ++i) *half = (*half << 8) | r.u8("key");
  }
  return key;
}

std::string hmac_sha256(std::string_view key, std::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac,
           &size) == nullptr ||
      size != kMacSize) {
    throw IoError("HMAC-SHA256 failed in OpenSSL's libcrypto");
  }
  return std::string(reinterpret_cast<const char*>(mac), size);
}

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      throw IoError("libcurl could not be initialized (curl_global_init failed)");
    }
  });
}

// curl errors worth another attempt: the connection failed or broke. Not
// timeouts (the time is spent), nor errors another attempt cannot change.
bool retryable(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

std::string status_hint(long status, RemoteLayout layout) {
  if (status == 400 && layout == RemoteLayout::bazel) {
    return " (bazel-remote refuses kcache entries under /ac/ unless it runs with "
           "--disable_http_ac_validation)";
  }
  switch (status) {
    case 401:
    case 403:
      return " (check the token or basic-auth file, and that this job may write)";
    case 405:
      return " (the server does not allow this method; for nginx add it to dav_methods)";
    case 413:
      return " (the server refuses bodies this large; for nginx raise client_max_body_size)";
    default:
      return "";
  }
}

// With CURLOPT_NOSIGNAL (required with threads) libcurl no longer ignores
// SIGPIPE itself, and a write to a TLS connection the server closed raises it:
// the default action would kill the build. Blocked in this thread for the
// transfer, and a SIGPIPE it caused is consumed, so the process's own signal
// handling is left alone (libpq's technique).
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe, &old_mask_);
  }
  ~SigpipeGuard() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      const timespec zero{0, 0};
      sigtimedwait(&pipe, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t old_mask_;
  bool was_pending_ = false;
};

class HttpBackend : public RemoteBackend {
 public:
  explicit HttpBackend(const RemoteOptions& options)
      : options_(options), base_url_(normalize_remote_url(options.url)) {
    init_curl_once();
    if (!options_.bearer_token_file.empty() && !options_.basic_auth_file.empty()) {
      throw InvalidArgument("both a bearer token file and a basic-auth file are configured for " +
                            base_url_ + "; give one");
    }
    if (!options_.bearer_token_file.empty()) {
      std::string token = read_secret_file(options_.bearer_token_file, "the remote's bearer token");
      auth_header_ = "Authorization: Bearer " + token;
    }
    if (!options_.basic_auth_file.empty()) {
      user_password_ = read_secret_file(options_.basic_auth_file, "the remote's user:password");
      if (user_password_.find(':') == std::string::npos) {
        throw InvalidArgument("the basic-auth file " + options_.basic_auth_file +
                              " must hold one line \"user:password\"");
      }
    }
  }

  ~HttpBackend() override {
    for (CURL* handle : idle_) curl_easy_cleanup(handle);
  }

  std::optional<std::string> get(const Hash128& key) override {
    Response r = perform(Method::get, key, {});
    if (r.status == 404) return std::nullopt;
    return std::move(r.body);
  }

  bool exists(const Hash128& key) override { return perform(Method::head, key, {}).status != 404; }

  void put(const Hash128& key, std::string_view object) override {
    perform(Method::put, key, object);
  }

  bool remove(const Hash128& key) override {
    return perform(Method::remove, key, {}).status != 404;
  }

  std::string url_of(const Hash128& key) const override {
    if (options_.layout == RemoteLayout::bazel) {
      return base_url_ + "/ac/" + key.hex() + std::string(32, '0');
    }
    return base_url_ + "/" + key.hex();
  }

 private:
  enum class Method { get, head, put, remove };
  static const char* name(Method m) {
    switch (m) {
      case Method::get:
        return "GET";
      case Method::head:
        return "HEAD";
      case Method::put:
        return "PUT";
      case Method::remove:
        return "DELETE";
    }
    return "?";
  }

  struct Response {
    long status = 0;  // 2xx, or 404 for GET, HEAD and DELETE
    std::string body;
  };

  // The request body being uploaded and the response body being received.
  struct Transfer {
    CURL* handle = nullptr;
    std::string_view upload;
    size_t uploaded = 0;
    std::string body;
    bool too_large = false;
  };

  static size_t on_write(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t n = size * count;
    if (t->body.size() + n > kMaxRemoteObjectSize) {
      t->too_large = true;
      return 0;  // makes curl fail the transfer with CURLE_WRITE_ERROR
    }
    if (t->body.empty()) {
      // One allocation of the announced size instead of doubling (fresh
      // pages are not free): a 200 KiB hit went from ~155 to ~70 µs in
      // bench/remote_bench.cc.
      curl_off_t length = -1;
      curl_easy_getinfo(t->handle, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
      if (length > 0 && static_cast<uint64_t>(length) <= kMaxRemoteObjectSize) {
        t->body.reserve(static_cast<size_t>(length));
      }
    }
    t->body.append(data, n);
    return n;
  }

  static size_t on_read(char* buffer, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const size_t n = std::min(size * count, t->upload.size() - t->uploaded);
    std::memcpy(buffer, t->upload.data() + t->uploaded, n);
    t->uploaded += n;
    return n;
  }

  // A handle from the pool, returned to it (keeping its connection) when done.
  class Handle {
   public:
    explicit Handle(HttpBackend& backend) : backend_(backend) {
      {
        std::lock_guard<std::mutex> lock(backend_.mutex_);
        if (!backend_.idle_.empty()) {
          handle_ = backend_.idle_.back();
          backend_.idle_.pop_back();
        }
      }
      if (handle_) {
        curl_easy_reset(handle_);  // keeps the connection cache
      } else {
        handle_ = curl_easy_init();
        if (!handle_) throw IoError("libcurl could not create a handle (out of memory?)");
      }
    }
    ~Handle() {
      std::lock_guard<std::mutex> lock(backend_.mutex_);
      if (backend_.idle_.size() < kMaxIdleHandles) {
        backend_.idle_.push_back(handle_);
      } else {
        curl_easy_cleanup(handle_);
      }
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    CURL* get() const { return handle_; }

   private:
    HttpBackend& backend_;
    CURL* handle_ = nullptr;
  };

  // Sends one request, retrying as RemoteOptions says, within one deadline.
  Response perform(Method method, const Hash128& key, std::string_view upload) {
    const std::string url = url_of(key);
    const std::string what = std::string(name(method)) + " " + url;
    const Clock::time_point deadline = Clock::now() + options_.timeout;
    std::string last_error;
    int attempts = 0;
    for (int attempt = 0; attempt <= std::max(0, options_.retries); ++attempt) {
      if (attempt > 0) {
        milliseconds backoff = kFirstBackoff * (1 << std::min(attempt - 1, 8));
        if (Clock::now() + backoff >= deadline) break;
        std::this_thread::sleep_for(backoff);
      }
      const auto remaining =
          std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
      if (remaining <= 0) break;
      ++attempts;

      Handle handle(*this);
      CURL* h = handle.get();
      Transfer transfer;
      transfer.handle = h;
      transfer.upload = upload;
      char error_buffer[CURL_ERROR_SIZE] = {0};
      curl_slist* headers = nullptr;
      // No "Expect: 100-continue" round trip before large uploads.
      headers = curl_slist_append(headers, "Expect:");
      if (!auth_header_.empty()) headers = curl_slist_append(headers, auth_header_.c_str());
      curl_easy_setopt(h, CURLOPT_URL, url.c_str());
      curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
      curl_easy_setopt(h, CURLOPT_USERAGENT, kUserAgent);
      curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
      curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // threads; timeouts without SIGALRM
      curl_easy_setopt(
          h, CURLOPT_CONNECTTIMEOUT_MS,
          static_cast<long>(std::min<int64_t>(options_.connect_timeout.count(), remaining)));
      curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(remaining));
      curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(kMaxRemoteObjectSize));
      curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &HttpBackend::on_write);
      curl_easy_setopt(h, CURLOPT_WRITEDATA, &transfer);
      if (!user_password_.empty()) {
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
        curl_easy_setopt(h, CURLOPT_USERPWD, user_password_.c_str());
      }
      switch (method) {
        case Method::get:
          break;
        case Method::head:
          curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
          break;
        case Method::put:
          curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
          curl_easy_setopt(h, CURLOPT_READFUNCTION, &HttpBackend::on_read);
          curl_easy_setopt(h, CURLOPT_READDATA, &transfer);
          curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(upload.size()));
          break;
        case Method::remove:
          curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "DELETE");
          break;
      }
      CURLcode code;
      {
        SigpipeGuard no_sigpipe;
        code = curl_easy_perform(h);
      }
      curl_slist_free_all(headers);

      if (code == CURLE_OK) {
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status < 300) return Response{status, std::move(transfer.body)};
        if (status == 404 && method != Method::put) return Response{status, {}};
        last_error = "HTTP " + std::to_string(status) + status_hint(status, options_.layout);
        if (status < 500) break;  // the request itself is wrong: asking again will not help
        continue;
      }
      if (transfer.too_large || code == CURLE_FILESIZE_EXCEEDED) {
        throw IoError(what + " failed: the object is larger than " +
                      std::to_string(kMaxRemoteObjectSize >> 20) + " MiB; refusing it");
      }
      last_error = error_buffer[0] ? error_buffer : curl_easy_strerror(code);
      if (code == CURLE_OPERATION_TIMEDOUT) {
        throw IoError(what + " timed out after " + std::to_string(options_.timeout.count()) +
                      " ms (" + last_error +
                      "); raise the remote timeout if the server is just slow");
      }
      if (!retryable(code)) break;
    }
    if (last_error.empty()) {
      throw IoError(what + " timed out after " + std::to_string(options_.timeout.count()) +
                    " ms before it could be sent");
    }
    throw IoError(what + " failed: " + last_error +
                  (attempts > 1 ? " (" + std::to_string(attempts) + " attempts)" : ""));
  }

  RemoteOptions options_;
  std::string base_url_;
  std::string auth_header_;
  std::string user_password_;
  std::mutex mutex_;
  std::vector<CURL*> idle_;
};

}  // namespace

const char* to_string(RemoteLayout layout) {
  return layout == RemoteLayout::bazel ? "bazel" : "flat";
}

std::optional<RemoteLayout> parse_remote_layout(std::string_view text) {
  if (text == "flat") return RemoteLayout::flat;
  if (text == "bazel") return RemoteLayout::bazel;
  return std::nullopt;
}

std::string normalize_remote_url(const std::string& url) {
  const size_t scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https" && !is_reapi_url(url)) {
    throw InvalidArgument("the remote URL \"" + url +
                          "\" must start with http://, https://, grpc:// or grpcs:// (e.g. "
                          "http://cache.example:8080/kcache, grpc://cache.example:9092)");
  }
  const size_t host_begin = scheme_end + 3;
  const size_t host_end = url.find('/', host_begin);
  const std::string authority = url.substr(host_begin, host_end - host_begin);
  if (authority.empty()) throw InvalidArgument("the remote URL \"" + url + "\" has no host");
  if (authority.find('@') != std::string::npos) {
    // Not echoing the URL: it holds a password.
    throw InvalidArgument(
        "the remote URL holds credentials (user:password@host); put them in a file and pass "
        "--remote-basic-auth-file (or KCACHE_REMOTE_BASIC_AUTH_FILE) instead");
  }
  std::string out = url;
  while (out.size() > host_begin && out.back() == '/') out.pop_back();
  return out;
}

std::string read_secret_file(const std::string& path, const std::string& what) {
  std::optional<std::string> content;
  try {
    content = read_file(path);
  } catch (const IoError& e) {
    throw IoError(std::string("cannot read ") + what + ": " + e.what());
  }
  if (!content) throw IoError("cannot read " + what + ": " + path + " does not exist");
  std::string value = strip(std::move(*content));
  if (value.empty()) throw InvalidArgument(what + " file " + path + " is empty");
  return value;
}

std::unique_ptr<RemoteBackend> make_http_backend(const RemoteOptions& options) {
  return std::make_unique<HttpBackend>(options);
}

namespace {

// The bytes inside a remote object (an entry or a manifest), the signature
// checked: see remote.h.
std::string open_remote_object(std::string object, const Hash128& key, std::string_view hmac_key,
                               const std::string& what) {
  std::string_view bytes(object);
  const bool is_signed = bytes.substr(0, kSignedObjectMagic.size()) == kSignedObjectMagic;
  if (!is_signed) {
    if (!hmac_key.empty()) {
      throw CorruptError(what + " is not signed, and an HMAC key is configured: rejected (it was " +
                         "written by a kcache without the key)");
    }
    return object;
  }

  ByteReader r(bytes, what);
  r.bytes(kSignedObjectMagic.size(), "magic");
  const uint16_t version = r.u16("format version");
  if (version == 0 || version > kSignedObjectVersion) {
    throw IncompatibleVersionError(what + " has signed-object version " + std::to_string(version) +
                                   ", newer than this kcache reads (" +
                                   std::to_string(kSignedObjectVersion) + ")");
  }
  if (r.u8("algorithm") != kAlgorithmHmacSha256) r.fail("unknown signature algorithm");
  if (r.u8("reserved") != 0) r.fail("reserved byte set");
  const Hash128 object_key = read_key_bytes(r);
  const uint64_t entry_size = r.u64("entry size");
  if (entry_size > r.remaining() || r.remaining() - entry_size != kMacSize) {
    r.fail("entry size " + std::to_string(entry_size) + " does not match the " +
           std::to_string(r.remaining()) + " bytes left");
  }
  const size_t entry_offset = r.offset();
  const std::string_view signed_part = bytes.substr(0, entry_offset + entry_size);
  if (!hmac_key.empty()) {
    const std::string expected = hmac_sha256(hmac_key, signed_part);
    if (CRYPTO_memcmp(expected.data(), bytes.data() + signed_part.size(), kMacSize) != 0) {
      throw CorruptError(what +
                         " has a signature that does not verify with the configured HMAC key: "
                         "rejected (tampered, or signed with another key)");
    }
  }
  if (object_key != key) throw CorruptError(what + " is signed for key " + object_key.hex());
  // In place: no second buffer for the entry.
  object.resize(entry_offset + entry_size);
  object.erase(0, entry_offset);
  return object;
}

std::string sign_remote_object(const Hash128& key, std::string_view payload,
                               std::string_view hmac_key) {
  ByteWriter w;
  w.bytes(kSignedObjectMagic);
  w.u16(kSignedObjectVersion);
  w.u8(kAlgorithmHmacSha256);
  w.u8(0);  // reserved
  write_key_bytes(w, key);
  w.u64(payload.size());
  w.bytes(payload);
  w.bytes(hmac_sha256(hmac_key, w.data()));
  return w.take();
}

}  // namespace

std::string encode_remote_object(const Entry& entry, std::string_view hmac_key) {
  if (hmac_key.empty()) return entry.encoded();
  return sign_remote_object(entry.key(), entry.encoded(), hmac_key);
}

Entry decode_remote_object(std::string object, const Hash128& key, std::string_view hmac_key) {
  const std::string what = "remote object " + key.hex();
  Entry entry = Entry::decode(open_remote_object(std::move(object), key, hmac_key, what), what);
  if (entry.key() != key) throw CorruptError(what + " holds the entry for " + entry.key().hex());
  return entry;
}

std::string encode_remote_manifest(const Manifest& manifest, std::string_view hmac_key) {
  std::string bytes = manifest.encode();
  return hmac_key.empty() ? bytes : sign_remote_object(manifest.key(), bytes, hmac_key);
}

Manifest decode_remote_manifest(std::string object, const Hash128& key, std::string_view hmac_key) {
  const std::string what = "remote manifest " + key.hex();
  return Manifest::decode(open_remote_object(std::move(object), key, hmac_key, what), key, what);
}

bool is_reapi_url(std::string_view url) {
  return url.rfind("grpc://", 0) == 0 || url.rfind("grpcs://", 0) == 0;
}

std::unique_ptr<RemoteBackend> make_remote_backend(const RemoteOptions& options) {
  return is_reapi_url(options.url) ? make_reapi_backend(options) : make_http_backend(options);
}

Remote::Remote(RemoteOptions options)
    : Remote(options, make_remote_backend(options),
             options.hmac_key_file.empty()
                 ? std::string()
                 : read_secret_file(options.hmac_key_file, "the remote's HMAC key")) {}

Remote::Remote(RemoteOptions options, std::unique_ptr<RemoteBackend> backend, std::string hmac_key)
    : options_(std::move(options)), backend_(std::move(backend)), hmac_key_(std::move(hmac_key)) {
  if (!hmac_key_.empty() && hmac_key_.size() < kMinHmacKeySize) {
    throw InvalidArgument("the HMAC key in " + options_.hmac_key_file + " has " +
                          std::to_string(hmac_key_.size()) + " bytes; use at least " +
                          std::to_string(kMinHmacKeySize) + " (e.g. `openssl rand -hex 32 > key`)");
  }
}

std::optional<Entry> Remote::get(const Hash128& key) {
  std::optional<std::string> object = backend_->get(key);
  if (!object) return std::nullopt;
  return decode_remote_object(std::move(*object), key, hmac_key_);
}

void Remote::put(const Entry& entry) {
  if (options_.read_only) {
    throw InvalidArgument("the remote " + options_.url + " is read-only; not uploading " +
                          entry.key().hex());
  }
  backend_->put(entry.key(), encode_remote_object(entry, hmac_key_));
}

std::optional<Manifest> Remote::get_manifest(const Hash128& key) {
  std::optional<std::string> object = backend_->get(key);
  if (!object) return std::nullopt;
  return decode_remote_manifest(std::move(*object), key, hmac_key_);
}

void Remote::put_manifest(const Manifest& manifest) {
  if (options_.read_only) {
    throw InvalidArgument("the remote " + options_.url + " is read-only; not uploading manifest " +
                          manifest.key().hex());
  }
  backend_->put(manifest.key(), encode_remote_manifest(manifest, hmac_key_));
}

}  // namespace kcache::cache
