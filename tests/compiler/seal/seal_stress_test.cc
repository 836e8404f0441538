// The seal's invariant (compiler/seal/seal.cc): its supervisor never waits for a
// lock the sealed thread may hold while stopped in a system call. glibc opens
// files under its own locks: free() -> heap_trim -> shrink_heap ->
// check_may_shrink_heap opens /proc/sys/vm/overcommit_memory holding the
// malloc arena's lock (once per process), dlopen opens a library holding the
// loader's. A supervisor that allocated then would wait on the arena for good.
//
// glibc's own case is timing-dependent (the supervisor must share the arena),
// so this test makes it certain: the test binary interposes malloc and its
// family, and the sealed function holds a stand-in "arena lock" across path
// calls, which every allocation of any other thread waits for. A supervisor
// that allocated while answering would wait for good.
// Around that, what glibc does for real: fresh processes
// (check_may_shrink_heap asks once per process), each running many sealed
// functions that churn the heap and the loader, with glibc tunables that put
// every thread on one shared arena and make large frees trim it. Each process
// must finish within its time limit; a hang is a failure that names the round
// it stopped in.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/seal/seal.h"
#include "tests/testing/temp_dir.h"

extern char** environ;

// ---- The stand-in arena lock --------------------------------------------------
// Held (by thread id) by the sealed function across a path call; every
// allocation or free on another thread waits while it is held, as glibc's
// would on a locked arena.
namespace {
std::atomic<long> g_holder{0};
long this_tid() { return ::syscall(SYS_gettid); }
void wait_for_arena() {
  long holder = g_holder.load(std::memory_order_acquire);
  if (holder == 0) return;
  long me = this_tid();
  while (holder != 0 && holder != me) {
    struct timespec ms = {0, 1000000};
    ::syscall(SYS_nanosleep, &ms, nullptr);
    holder = g_holder.load(std::memory_order_acquire);
  }
}
}  // namespace

extern "C" {
void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void* malloc(size_t n) {
  wait_for_arena();
  return __libc_malloc(n);
}
void free(void* p) {
  if (p) wait_for_arena();
  __libc_free(p);
}
void* calloc(size_t n, size_t size) {
  wait_for_arena();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  wait_for_arena();
  return __libc_realloc(p, n);
}
void* memalign(size_t align, size_t n) {
  wait_for_arena();
  return __libc_memalign(align, n);
}
void* aligned_alloc(size_t align, size_t n) { return memalign(align, n); }
int posix_memalign(void** out, size_t align, size_t n) {
  void* p = memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
}

namespace kcache::compiler {
namespace {

constexpr int kRoundsPerProcess = 40;
constexpr int kProcesses = 12;
constexpr auto kProcessLimit = std::chrono::seconds(60);
// One arena for every thread but the main one, no mmap for large blocks,
// and a trim on every free() that leaves free memory at the heap's top.
constexpr const char kTunables[] =
    "GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=0:"
    "glibc.malloc.top_pad=0:glibc.malloc.mmap_threshold=33554432";

// What the sealed function does: small allocations and file calls the
// supervisor must answer in every round, from the sealed thread and threads
// it starts (NVRTC starts threads; with two arenas they share them with the
// supervisor's), the loader (a library opened and closed), and from round
// kFirstTrimRound on, large blocks freed at the top of a thread's heap: a
// trim each, the first of which opens /proc/sys/vm/overcommit_memory under
// the arena's lock.
constexpr int kFirstTrimRound = 3;
constexpr int kHelperThreads = 3;

void churn(const std::string& folder, int round) {
  for (int i = 0; i < 8; ++i) {
    std::vector<std::string> small;
    for (int j = 0; j < 64; ++j) small.push_back(std::string(40 + j, 'x'));
    if (round >= kFirstTrimRound) {
      std::vector<char*> blocks;
      for (int j = 0; j < 4; ++j) {
        auto* p = static_cast<char*>(std::malloc(size_t{256} << 10));
        if (p) std::memset(p, j, 4096);
        blocks.push_back(p);
      }
      for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) std::free(*it);
    }
    std::string name = folder + "/f" + std::to_string(i);
    // A path call under the stand-in arena lock, as glibc makes them.
    long me = this_tid();
    long none = 0;
    while (!g_holder.compare_exchange_weak(none, me, std::memory_order_acq_rel)) {
      none = 0;
      struct timespec ms = {0, 100000};
      ::syscall(SYS_nanosleep, &ms, nullptr);
    }
    int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
    g_holder.store(0, std::memory_order_release);
    if (fd >= 0) ::close(fd);
    if (i == 0) {
      if (void* z = ::dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL)) ::dlclose(z);
    }
  }
}

int child_main(const char* folder) {
  for (int round = 0; round < kRoundsPerProcess; ++round) {
    // The round in progress, for the parent to name if this hangs.
    std::string mark = std::string(folder) + "/round." + std::to_string(::getpid());
    int fd = ::open(mark.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      std::string r = std::to_string(round);
      if (::write(fd, r.data(), r.size()) < 0) {
      }
      ::close(fd);
    }
    SealPolicy policy{{folder, "/usr/lib", "/lib"}, {}};
    policy.one_cpu = round % 2 == 1;  // the CPU keeper's looks (/proc reads) under the same stress
    SealResult r = run_sealed(policy, [&] {
      std::vector<std::thread> helpers;
      for (int i = 0; i < kHelperThreads; ++i) helpers.emplace_back([&] { churn(folder, round); });
      churn(folder, round);
      for (std::thread& t : helpers) t.join();
    });
    if (!r.sealed) return 3;  // the parent checked the seal is available
    if (r.probes.empty()) return 4;
  }
  return 0;
}

std::string self_path() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

TEST(SealStressTest, SupervisorNeverWaitsOnTheSealedThreadsLocks) {
  std::string why;
  if (!seal_available(&why)) GTEST_SKIP() << "no seal on this kernel: " << why;
  testing::TempDir dir;
  for (int i = 0; i < 8; ++i) testing::write_file(dir / ("f" + std::to_string(i)), "x");
  std::string exe = self_path();
  ASSERT_FALSE(exe.empty());

  std::string child_env = std::string("KCACHE_SEAL_STRESS_CHILD=") + dir.path();
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "GLIBC_TUNABLES=", 15) != 0) env.push_back(*e);
  }
  env.push_back(const_cast<char*>(kTunables));
  env.push_back(&child_env[0]);
  env.push_back(nullptr);

  // Two at a time (the machines have two cores).
  for (int first = 0; first < kProcesses; first += 2) {
    std::vector<pid_t> pids;
    for (int i = first; i < first + 2 && i < kProcesses; ++i) {
      char* argv[] = {&exe[0], nullptr};
      pid_t pid;
      ASSERT_EQ(::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, env.data()), 0);
      pids.push_back(pid);
    }
    auto deadline = std::chrono::steady_clock::now() + kProcessLimit;
    for (pid_t pid : pids) {
      int status = 0;
      pid_t done = 0;
      while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (done == 0) {
        std::string round = testing::read_file_or_die(dir / ("round." + std::to_string(pid)));
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        ADD_FAILURE() << "a sealed process hung in round " << round << " of "
                      << kRoundsPerProcess << " (the supervisor waited on a lock the sealed "
                      << "thread held?)";
        continue;
      }
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "a sealed process ended with status " << status;
    }
  }
}

}  // namespace
}  // namespace kcache::compiler

int main(int argc, char** argv) {
  if (const char* folder = std::getenv("KCACHE_SEAL_STRESS_CHILD")) {
    return kcache::compiler::child_main(folder);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
