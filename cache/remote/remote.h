// The remote tier: cache entries shared by many machines through an existing
// HTTP store (nginx with WebDAV, bazel-remote, any server that takes GET and
// PUT), not a server of our own.
//
// Two layers, as in ccache's storage/remote:
//   RemoteBackend  bytes by key over HTTP (libcurl): layout, timeouts, retries,
//                  credentials. A miss is a value (nullopt), not an error.
//   Remote         entries over a backend: every fetched object is decoded and
//                  checked (checksum, key, and signature when an HMAC key is
//                  configured) before anyone sees it.
//
// Remote object format (what is stored at an object's URL; integers
// little-endian):
//
//   object   ::= entry | manifest | signed
//   entry    ::= an encoded cache entry, byte for byte (cache/format/entry.h, "KCENTRY\0" ...)
//   manifest ::= an encoded manifest, byte for byte (cache/format/manifest.h, "KCMANIF\0" ...),
//                filed under its manifest key
//   signed   ::= magic:"KCSIGNED"(8 bytes) format_version:u16 algorithm:u8(1=HMAC-SHA256)
//                reserved:u8(=0) key:bytes(16, high half first, as in the entry)
//                entry_size:u64 (entry | manifest):bytes(entry_size) mac:bytes(32)
//   mac      =  HMAC-SHA256(hmac key, every byte of `signed` before mac)
//
// What the MAC covers: the magic, version and algorithm (no downgrade to
// another format), the key the object is filed under, the entry's length and
// every byte of the entry (which itself holds the key again, the kind, arch,
// payload and its XXH3 checksum). So a valid signature proves that a holder of
// the key wrote exactly this entry for exactly this key: it cannot be moved to
// another key, altered, truncated or extended.
//
// Writers with an HMAC key upload `signed` objects; writers without one upload
// plain entries. Readers with a key accept only `signed` objects whose MAC
// verifies; readers without a key accept both (they check the entry's
// checksum and key, but have chosen not to check who wrote it).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cache/format/entry.h"
#include "cache/format/manifest.h"
#include "common/hash.h"

namespace kcache::cache {

// Bump me when the bytes of a `signed` object change; readers reject newer
// versions as they would a corrupt object (then the entry is compiled again).
constexpr uint16_t kSignedObjectVersion = 1;
constexpr std::string_view kSignedObjectMagic{"KCSIGNED", 8};

enum class RemoteLayout {
  flat,   // <url>/<32 hex digits>
  bazel,  // <url>/ac/<64 hex digits>: the key right-padded with zeros to a SHA-256's
          // length, which bazel-remote serves with --disable_http_ac_validation
};
const char* to_string(RemoteLayout layout);
// "flat" or "bazel"; nullopt for anything else.
std::optional<RemoteLayout> parse_remote_layout(std::string_view text);

// A slow server costs at most `timeout` per operation, retries included; the
// defaults suit a CI fleet next to its cache (ccache uses the same 10 s).
constexpr std::chrono::milliseconds kDefaultRemoteConnectTimeout{1000};
constexpr std::chrono::milliseconds kDefaultRemoteTimeout{10000};
constexpr int kDefaultRemoteRetries = 2;
// An object larger than this is refused as it streams in (a lying server
// cannot make us buffer without bound). Cubins are at most a few MB.
constexpr uint64_t kMaxRemoteObjectSize = 256ull << 20;

struct RemoteOptions {
  // "http://host:port/some/prefix" or https; objects live below it. Or
  // "grpc://host:port" / "grpcs://host:port": a Remote Execution API cache. No
  // credentials in the URL: they would end up in logs and process listings.
  std::string url;
  RemoteLayout layout = RemoteLayout::flat;
  // Never write: for untrusted jobs (pull requests) that may read the cache.
  bool read_only = false;
  std::chrono::milliseconds connect_timeout = kDefaultRemoteConnectTimeout;
  // The whole operation, every retry included.
  std::chrono::milliseconds timeout = kDefaultRemoteTimeout;
  // Extra attempts after a 5xx or a failed connection, with backoff; never
  // after a 4xx (the request is wrong) or a timeout (the budget is spent).
  int retries = kDefaultRemoteRetries;
  // Files, never values: secrets stay off command lines and out of configs
  // that are checked in. Each file's content has surrounding whitespace
  // stripped.
  std::string bearer_token_file;  // sends "Authorization: Bearer <token>"
  std::string basic_auth_file;    // one line "user:password"
  std::string hmac_key_file;      // at least 16 bytes; `openssl rand -hex 32` makes a good one
  // grpc:// and grpcs:// remotes (the Remote Execution API, cache/remote/reapi/):
  std::string instance_name;         // REAPI instance name; empty for the default instance
  std::string tls_ca_file;           // grpcs: PEM roots; empty: the system's
  std::string tls_client_cert_file;  // grpcs: PEM client certificate (mTLS), with the key:
  std::string tls_client_key_file;
  // Lines "name: value" sent as gRPC metadata with every call (e.g. BuildBuddy's
  // "x-buildbuddy-api-key: ..."); a file, since values are usually secrets.
  std::string headers_file;
};

// Whether `url` names a Remote Execution API server (grpc:// or grpcs://).
bool is_reapi_url(std::string_view url);

// Checks `url` (scheme, no credentials) and returns it without trailing
// slashes. Throws InvalidArgument saying what is wrong.
std::string normalize_remote_url(const std::string& url);

// Bytes by key (ccache's RemoteStorage::Backend). Thread-safe: any number of
// threads may call one backend at once (each call uses its own connection;
// idle connections are kept for reuse).
//
// Failure: IoError naming the method, the URL and what went wrong (HTTP
// status, connection refused, timed out after N ms). A miss is not a failure.
class RemoteBackend {
 public:
  virtual ~RemoteBackend() = default;
  // The object stored under `key`, or nullopt if the server has none (404).
  virtual std::optional<std::string> get(const Hash128& key) = 0;
  // HEAD: whether the server has an object under `key`.
  virtual bool exists(const Hash128& key) = 0;
  // Stores (or replaces) the object under `key`.
  virtual void put(const Hash128& key, std::string_view object) = 0;
  // True if an object was removed, false if there was none. Servers that do
  // not allow DELETE (bazel-remote) throw IoError.
  virtual bool remove(const Hash128& key) = 0;
  // Where `key` lives, for messages.
  virtual std::string url_of(const Hash128& key) const = 0;
};

// The libcurl backend. Credential files are read here: throws IoError if one
// cannot be read, InvalidArgument for a bad URL or an empty credential.
std::unique_ptr<RemoteBackend> make_http_backend(const RemoteOptions& options);

// The Remote Execution API backend (grpc://, grpcs://): loads
// libkcache_reapi.so with dlopen (gRPC stays out of processes that never use
// it; see cache/remote/reapi/reapi_backend.h). Throws IoError if the library cannot
// be found or loaded, or a credential file cannot be read.
std::unique_ptr<RemoteBackend> make_reapi_backend(const RemoteOptions& options);

// The backend `options.url`'s scheme asks for.
std::unique_ptr<RemoteBackend> make_remote_backend(const RemoteOptions& options);

// Encodes `entry` as a remote object: a `signed` object if `hmac_key` is not
// empty, the plain entry otherwise.
std::string encode_remote_object(const Entry& entry, std::string_view hmac_key);

// Decodes an object fetched for `key`. Throws CorruptError if it is damaged,
// holds another key, or (with a non-empty `hmac_key`) is unsigned or carries a
// signature that does not verify; IncompatibleVersionError if it was written
// by a newer kcache.
Entry decode_remote_object(std::string object, const Hash128& key, std::string_view hmac_key);

// The same for manifests (the `manifest` alternative), filed under
// manifest.key(); decoding also checks the manifest names `key`.
std::string encode_remote_manifest(const Manifest& manifest, std::string_view hmac_key);
Manifest decode_remote_manifest(std::string object, const Hash128& key, std::string_view hmac_key);

// Entries over a backend. Thread-safe, like the backend.
class Remote {
 public:
  // Opens the HTTP backend and reads the HMAC key file. Throws IoError if a
  // file cannot be read, InvalidArgument for bad options or a key shorter
  // than 16 bytes.
  explicit Remote(RemoteOptions options);
  // Over any backend (tests, benchmarks); the key is the key file's content.
  Remote(RemoteOptions options, std::unique_ptr<RemoteBackend> backend, std::string hmac_key);

  // A miss is nullopt. Throws IoError if the server could not be asked, and
  // CorruptError / IncompatibleVersionError (see decode_remote_object) if it
  // answered with something that must not be used.
  std::optional<Entry> get(const Hash128& key);
  // Uploads `entry` (signed if a key is configured). Throws IoError;
  // InvalidArgument if the remote is read-only.
  void put(const Entry& entry);
  // The same for manifests, under their manifest key (cache/format/manifest.h).
  std::optional<Manifest> get_manifest(const Hash128& key);
  void put_manifest(const Manifest& manifest);

  bool signing() const { return !hmac_key_.empty(); }
  const RemoteOptions& options() const { return options_; }
  RemoteBackend& backend() { return *backend_; }

 private:
  RemoteOptions options_;
  std::unique_ptr<RemoteBackend> backend_;
  std::string hmac_key_;
};

// A file's content with surrounding whitespace removed, for credentials and
// keys. Throws IoError naming the file and `what` it was meant to hold.
std::string read_secret_file(const std::string& path, const std::string& what);

}  // namespace kcache::cache
