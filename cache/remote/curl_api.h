// libcurl and libcrypto, opened with dlopen the first time the remote tier is
// used, instead of linked: linking libcurl makes every kcache process load it
// and ~30 libraries it needs (GnuTLS, Kerberos, LDAP, ...), 2.8 ms per process
// start measured on the build machine, against a whole `kcache compile` hit of
// ~3.3 ms. Most processes never touch a remote.
//
// Include after <curl/curl.h> and the OpenSSL headers: the names remote.cc
// calls are redirected to functions here that forward to the loaded library.
// If it cannot be loaded, the first call (curl_global_init) throws IoError
// naming the library and dlerror(), which Storage turns into "no remote".
#pragma once

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace kcache::cache::dynamic {

CURLcode curl_global_init(long flags);
CURL* curl_easy_init();
void curl_easy_cleanup(CURL* handle);
void curl_easy_reset(CURL* handle);
CURLcode curl_easy_perform(CURL* handle);
CURLcode curl_easy_setopt(CURL* handle, CURLoption option, ...);
CURLcode curl_easy_getinfo(CURL* handle, CURLINFO info, ...);
const char* curl_easy_strerror(CURLcode code);
curl_slist* curl_slist_append(curl_slist* list, const char* text);
void curl_slist_free_all(curl_slist* list);

unsigned char* HMAC(const EVP_MD* md, const void* key, int key_len, const unsigned char* data,
                    size_t data_len, unsigned char* out, unsigned int* out_len);
const EVP_MD* EVP_sha256();
int CRYPTO_memcmp(const void* a, const void* b, size_t len);

}  // namespace kcache::cache::dynamic

// curl.h may define these two as type-checking macros.
#undef curl_easy_setopt
#undef curl_easy_getinfo
#define curl_global_init ::kcache::cache::dynamic::curl_global_init
#define curl_easy_init ::kcache::cache::dynamic::curl_easy_init
#define curl_easy_cleanup ::kcache::cache::dynamic::curl_easy_cleanup
#define curl_easy_reset ::kcache::cache::dynamic::curl_easy_reset
#define curl_easy_perform ::kcache::cache::dynamic::curl_easy_perform
#define curl_easy_setopt ::kcache::cache::dynamic::curl_easy_setopt
#define curl_easy_getinfo ::kcache::cache::dynamic::curl_easy_getinfo
#define curl_easy_strerror ::kcache::cache::dynamic::curl_easy_strerror
#define curl_slist_append ::kcache::cache::dynamic::curl_slist_append
#define curl_slist_free_all ::kcache::cache::dynamic::curl_slist_free_all
#define HMAC ::kcache::cache::dynamic::HMAC
#define EVP_sha256 ::kcache::cache::dynamic::EVP_sha256
#define CRYPTO_memcmp ::kcache::cache::dynamic::CRYPTO_memcmp
