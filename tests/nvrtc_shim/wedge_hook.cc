// Preloaded into kcache's compile process by a test's KCACHE_EXE wrapper
// (thin_client_test), never into kcache itself: wedges the process on
// purpose while it runs, neither stopped nor ended, as a bug (a lock never
// released, a loop) would. $KCACHE_TEST_WEDGE says where:
//   nvrtc   when the compile process starts NVRTC for a miss (its first
//           socketpair(), made for its first NVRTC child);
//   lookup  when a request arrives (its chdir() into the program's folder).
// $KCACHE_TEST_WEDGE_HOW says how: "block" (a futex wait nobody wakes) or
// "spin" (a busy loop).
#include <dlfcn.h>
#include <linux/futex.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace {

bool wedge_at(const char* where) {
  const char* at = std::getenv("KCACHE_TEST_WEDGE");
  return at && std::strcmp(at, where) == 0;
}

[[noreturn]] void wedge() {
  const char* how = std::getenv("KCACHE_TEST_WEDGE_HOW");
  if (how && std::strcmp(how, "spin") == 0) {
    for (volatile unsigned long i = 0;; i = i + 1) {
    }
  }
  static int never = 0;
  for (;;) ::syscall(SYS_futex, &never, FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0);
}

template <typename F>
F next_definition(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" int socketpair(int domain, int type, int protocol, int sv[2]) {
  if (wedge_at("nvrtc")) wedge();
  static auto real = next_definition<int (*)(int, int, int, int*)>("socketpair");
  return real(domain, type, protocol, sv);
}

extern "C" int chdir(const char* path) {
  if (wedge_at("lookup")) wedge();
  static auto real = next_definition<int (*)(const char*)>("chdir");
  return real(path);
}
