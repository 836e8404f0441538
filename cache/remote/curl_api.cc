// Deliberately not including cache/remote/curl_api.h's macros here: this file calls
// the real libraries through pointers.
#include <curl/curl.h>
#include <dlfcn.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdarg>
#include <mutex>
#include <string>

#include "common/error.h"

namespace kcache::cache::dynamic {
namespace {

// Debian's libcurl4 (OpenSSL flavour, as libcurl4-openssl-dev's headers) and
// OpenSSL 3's libcrypto.
constexpr const char* kCurl = "libcurl.so.4";
constexpr const char* kCrypto = "libcrypto.so.3";

struct Api {
  decltype(&::curl_global_init) global_init;
  decltype(&::curl_easy_init) easy_init;
  decltype(&::curl_easy_cleanup) easy_cleanup;
  decltype(&::curl_easy_reset) easy_reset;
  decltype(&::curl_easy_perform) easy_perform;
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  decltype(&::curl_easy_strerror) easy_strerror;
  decltype(&::curl_slist_append) slist_append;
  decltype(&::curl_slist_free_all) slist_free_all;
  decltype(&::HMAC) hmac;
  decltype(&::EVP_sha256) evp_sha256;
  decltype(&::CRYPTO_memcmp) crypto_memcmp;
};

template <typename F>
void resolve(void* library, const char* library_name, const char* symbol, F& out) {
  out = reinterpret_cast<F>(::dlsym(library, symbol));
  if (!out) {
    throw IoError(std::string(library_name) + " has no " + symbol +
                  "; the remote tier needs libcurl 7.62 or newer and OpenSSL 3");
  }
}

void* open_library(const char* name) {
  void* handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    throw IoError(std::string("cannot load ") + name + " for the remote tier: " +
                  (why ? why : "unknown error") + " (install libcurl4 and libssl3)");
  }
  return handle;
}

// Loaded once, never unloaded; a failure is remembered and thrown again.
const Api& api() {
  static std::once_flag once;
  static Api table;
  static std::string failure;
  std::call_once(once, [] {
    try {
      void* curl = open_library(kCurl);
      void* crypto = open_library(kCrypto);
      resolve(curl, kCurl, "curl_global_init", table.global_init);
      resolve(curl, kCurl, "curl_easy_init", table.easy_init);
      resolve(curl, kCurl, "curl_easy_cleanup", table.easy_cleanup);
      resolve(curl, kCurl, "curl_easy_reset", table.easy_reset);
      resolve(curl, kCurl, "curl_easy_perform", table.easy_perform);
      resolve(curl, kCurl, "curl_easy_setopt", table.easy_setopt);
      resolve(curl, kCurl, "curl_easy_getinfo", table.easy_getinfo);
      resolve(curl, kCurl, "curl_easy_strerror", table.easy_strerror);
      resolve(curl, kCurl, "curl_slist_append", table.slist_append);
      resolve(curl, kCurl, "curl_slist_free_all", table.slist_free_all);
      resolve(crypto, kCrypto, "HMAC", table.hmac);
      resolve(crypto, kCrypto, "EVP_sha256", table.evp_sha256);
      resolve(crypto, kCrypto, "CRYPTO_memcmp", table.crypto_memcmp);
    } catch (const IoError& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) throw IoError(failure);
  return table;
}

}  // namespace

CURLcode curl_global_init(long flags) { return api().global_init(flags); }
CURL* curl_easy_init() { return api().easy_init(); }
void curl_easy_cleanup(CURL* handle) { api().easy_cleanup(handle); }
void curl_easy_reset(CURL* handle) { api().easy_reset(handle); }
CURLcode curl_easy_perform(CURL* handle) { return api().easy_perform(handle); }

// The one variadic argument's type follows from the option's range (curl.h's
// CURLOPTTYPE_*): long, a pointer (objects and functions), curl_off_t, a blob.
CURLcode curl_easy_setopt(CURL* handle, CURLoption option, ...) {
  va_list ap;
  va_start(ap, option);
  CURLcode code;
  if (option < CURLOPTTYPE_OBJECTPOINT) {
    code = api().easy_setopt(handle, option, va_arg(ap, long));
  } else if (option < CURLOPTTYPE_OFF_T || option >= CURLOPTTYPE_BLOB) {
    code = api().easy_setopt(handle, option, va_arg(ap, void*));
  } else {
    code = api().easy_setopt(handle, option, va_arg(ap, curl_off_t));
  }
  va_end(ap);
  return code;
}

// Every CURLINFO takes one pointer to where the value goes.
CURLcode curl_easy_getinfo(CURL* handle, CURLINFO info, ...) {
  va_list ap;
  va_start(ap, info);
  void* out = va_arg(ap, void*);
  va_end(ap);
  return api().easy_getinfo(handle, info, out);
}

const char* curl_easy_strerror(CURLcode code) { return api().easy_strerror(code); }
curl_slist* curl_slist_append(curl_slist* list, const char* text) {
  return api().slist_append(list, text);
}
void curl_slist_free_all(curl_slist* list) { api().slist_free_all(list); }

unsigned char* HMAC(const EVP_MD* md, const void* key, int key_len, const unsigned char* data,
                    size_t data_len, unsigned char* out, unsigned int* out_len) {
  return api().hmac(md, key, key_len, data, data_len, out, out_len);
}
const EVP_MD* EVP_sha256() { return api().evp_sha256(); }
int CRYPTO_memcmp(const void* a, const void* b, size_t len) {
  return api().crypto_memcmp(a, b, len);
}

}  // namespace kcache::cache::dynamic
