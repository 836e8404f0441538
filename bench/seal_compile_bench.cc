// Where a sealed NVRTC compile's time goes (issue 27): one source compiled by
// NVRTC in this process, on a thread of its own, in turn under
//   thread         no seal (the baseline)
//   filter         a seccomp filter that allows every call (the filter's tax
//                  on each system call, Spectre mitigations waived)
//   filter-spec    the same filter without SECCOMP_FILTER_FLAG_SPEC_ALLOW
//                  (what the kernel's seccomp mitigations cost on this host)
//   recorded       the recording seal (Landlock lets NVRTC read everything;
//                  every path call goes to the supervisor, which continues it)
//   served         the serving seal as the drop-in runs it (every open outside
//                  NVRTC's own folder served from a snapshot), on one CPU
//   trap           no seal, but every path call traps (SECCOMP_RET_TRAP) to a
//                  SIGSYS handler on the compiling thread, which makes the call
//                  itself from one allowed instruction: a path call's cost
//                  without a switch to another thread
//   trap-ping      the same, the handler also waking a helper thread on the
//                  same CPU and waiting for its answer (an eventfd round trip):
//                  a supervisor's two switches per call without seccomp's
//                  user notification
//   trap-read      trap-ping, the helper also reading the call's path out of
//                  the compiling thread's memory (process_vm_readv), as the
//                  supervisor does
//   landlock       no seccomp: only a Landlock domain that allows reading
//                  everything (what a domain costs by itself)
//   landlock-HEX   the same, the domain handling the rights HEX (bits of
//                  LANDLOCK_ACCESS_FS_*; ffff: every one up to ABI 5)
//   main           no seal, on the process's main thread (as NVRTC alone in a
//                  program; every other mode runs on a thread of its own)
//   notify         the seal's transport alone: every path call stops for a
//                  user-notification helper on the same CPU, which reads its
//                  path and lets it continue (no Landlock, no working folder)
//   notify-spread  the same, the helper on any CPU
//   notify-sync    notify with SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (as the seal)
//   notify-landlock notify in a Landlock domain handling every right of the
//                  kernel's ABI, reading allowed beneath "/" (as `recorded`)
//   workdir        no seccomp: only the sealed thread's own working folder
//                  (unshare(CLONE_FS) and a chdir, as the seal does)
//   workdir-deleted the same into a folder then deleted (as `recorded`'s chain)
//   notify-all     notify-sync, notify-landlock and workdir-deleted at once:
//                  everything the seal does but its own supervisor's code
//   arena          thread, with the seal's 256 MiB record mapping reserved
//                  meanwhile (MAP_NORESERVE, untouched)
// For each: the median wall time, and the compiling thread's user and system
// CPU time, context switches and minor page faults (getrusage RUSAGE_THREAD),
// with ratios to the first mode; its CPU migrations and run-queue wait
// (/proc/thread-self), the TLB-shootdown and rescheduling interrupts of all
// CPUs meanwhile (/proc/interrupts), and the whole process's CPU time (the
// supervisor's included). (`served` refuses the thread those /proc files, as
// any: its columns read 0 and it says so on stderr.) The modes take turns, ROUNDS times;
// SEAL_BENCH_MODES=thread,served runs only those (one per process for perf).
//
//   bazel run -c opt //bench:seal_compile_bench -- LIBNVRTC SOURCE ROUNDS [NVRTC options...]
#include <dlfcn.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "compiler/seal/seal.h"

namespace {

using CreateFn = int (*)(void**, const char*, const char*, int, const char* const*,
                         const char* const*);
using CompileFn = int (*)(void*, int, const char* const*);
using DestroyFn = int (*)(void**);
using SizeFn = int (*)(void*, size_t*);
using GetFn = int (*)(void*, char*);

struct Nvrtc {
  CreateFn create;
  CompileFn compile;
  DestroyFn destroy;
  SizeFn cubin_size;
  GetFn cubin;
};

struct Sample {
  double wall_ms = 0, user_ms = 0, sys_ms = 0, vcsw = 0, ivcsw = 0, minflt = 0;
  double process_ms = 0;  // CPU time of the whole process (the supervisor's too)
  double migrations = 0, wait_ms = 0, tlb = 0, res = 0;  // the thread's CPU moves, run-queue wait; IPIs
  size_t cubin_hash = 0;  // the compile's CUBIN (minus nothing: compared across modes)
};

double ms(const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; }

// The calling thread's scheduler counts: CPU migrations and nanoseconds spent
// waiting on a run queue (/proc/thread-self/sched and schedstat).
void sched_counts(double* migrations, double* wait_ns) {
  std::ifstream sched("/proc/thread-self/sched");
  for (std::string line; std::getline(sched, line);) {
    if (line.rfind("se.nr_migrations", 0) == 0) *migrations = std::atof(line.substr(line.find(':') + 1).c_str());
  }
  std::ifstream stat("/proc/thread-self/schedstat");
  double run = 0;
  stat >> run >> *wait_ns;
}

// Interrupts of one row of /proc/interrupts ("TLB:" shootdowns, "RES:"
// rescheduling: a wake-up sent to another CPU) taken by all CPUs so far.
double interrupts(const char* row) {
  std::ifstream in("/proc/interrupts");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    if (name != row) continue;
    double sum = 0;
    for (std::string f; fields >> f && std::isdigit(static_cast<unsigned char>(f[0]));) sum += std::atof(f.c_str());
    return sum;
  }
  return 0;
}

// Compiles on the calling thread; fills the thread's resource use.
void compile(const Nvrtc& nvrtc, const std::string& source, const std::vector<const char*>& options,
             Sample* s) {
  rusage before, after;
  double mig0 = 0, wait0 = 0, mig1 = 0, wait1 = 0;
  sched_counts(&mig0, &wait0);
  const double tlb0 = interrupts("TLB:"), res0 = interrupts("RES:");
  rusage self0, self1;
  ::getrusage(RUSAGE_SELF, &self0);
  ::getrusage(RUSAGE_THREAD, &before);
  void* prog = nullptr;
  nvrtc.create(&prog, source.c_str(), "bench.cu", 0, nullptr, nullptr);
  int result = nvrtc.compile(prog, static_cast<int>(options.size()), options.data());
  ::getrusage(RUSAGE_THREAD, &after);
  ::getrusage(RUSAGE_SELF, &self1);
  s->process_ms = ms(self1.ru_utime) + ms(self1.ru_stime) - ms(self0.ru_utime) - ms(self0.ru_stime);
  s->tlb = interrupts("TLB:") - tlb0;
  s->res = interrupts("RES:") - res0;
  sched_counts(&mig1, &wait1);
  s->migrations = mig1 - mig0;
  s->wait_ms = (wait1 - wait0) / 1e6;
  size_t size = 0;
  if (result == 0 && nvrtc.cubin_size(prog, &size) == 0 && size > 0) {
    std::string cubin(size, '\0');
    nvrtc.cubin(prog, &cubin[0]);
    s->cubin_hash = std::hash<std::string>()(cubin);
  }
  nvrtc.destroy(&prog);
  if (result != 0) std::fprintf(stderr, "compile failed: %d\n", result);
  s->user_ms = ms(after.ru_utime) - ms(before.ru_utime);
  s->sys_ms = ms(after.ru_stime) - ms(before.ru_stime);
  s->vcsw = static_cast<double>(after.ru_nvcsw - before.ru_nvcsw);
  s->ivcsw = static_cast<double>(after.ru_nivcsw - before.ru_nivcsw);
  s->minflt = static_cast<double>(after.ru_minflt - before.ru_minflt);
}

// A seccomp filter that allows every call, on the calling thread.
bool allow_all_filter(bool spec_allow) {
  sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  sock_fprog prog{1, &allow};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  unsigned long flags = spec_allow ? (1UL << 2) : 0;  // SECCOMP_FILTER_FLAG_SPEC_ALLOW
  return ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog) == 0;
}

// The one instruction from which path calls are allowed in the trap modes.
extern "C" long bench_trampoline(long nr, long a, long b, long c, long d, long e, long f);
extern "C" char bench_trampoline_after[];
asm(R"(.text
.globl bench_trampoline
.type bench_trampoline, @function
bench_trampoline:
  mov %rdi, %rax
  mov %rsi, %rdi
  mov %rdx, %rsi
  mov %rcx, %rdx
  mov %r8, %r10
  mov %r9, %r8
  mov 8(%rsp), %r9
  syscall
.globl bench_trampoline_after
bench_trampoline_after:
  ret
)");

int ping_request = -1, ping_answer = -1;  // trap-ping: the helper's eventfds
int cpu_of_helper = -1;                    // notify: the CPU its helper shares
uint64_t ping_path = 0;                    // trap-read: the path for the helper to read

void on_sigsys(int, siginfo_t* info, void* context) {
  greg_t* r = static_cast<ucontext_t*>(context)->uc_mcontext.gregs;
  if (ping_request >= 0) {
    ping_path = static_cast<uint64_t>(info->si_syscall == SYS_openat || info->si_syscall == SYS_newfstatat ||
                                              info->si_syscall == SYS_faccessat ||
                                              info->si_syscall == SYS_statx
                                          ? r[REG_RSI]
                                          : r[REG_RDI]);
    uint64_t one = 1;
    bench_trampoline(SYS_write, ping_request, reinterpret_cast<long>(&one), 8, 0, 0, 0);
    bench_trampoline(SYS_read, ping_answer, reinterpret_cast<long>(&one), 8, 0, 0, 0);
  }
  r[REG_RAX] = bench_trampoline(info->si_syscall, r[REG_RDI], r[REG_RSI], r[REG_RDX], r[REG_R10],
                                r[REG_R8], r[REG_R9]);
}

// Ends filter `f` (the call's number loaded): `action` for a path call, allow
// the rest.
void ends_on_path_calls(std::vector<sock_filter>* f, uint32_t action) {
  const int calls[] = {SYS_open,     SYS_openat,    SYS_stat,     SYS_lstat,     SYS_access,
                       SYS_faccessat, SYS_readlink, SYS_readlinkat, SYS_newfstatat, SYS_statx};
  const size_t n = sizeof calls / sizeof *calls;
  for (size_t i = 0; i < n; ++i) {
    f->push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(calls[i]),
                          static_cast<uint8_t>(n - i), 0));
  }
  f->push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  f->push_back(BPF_STMT(BPF_RET | BPF_K, action));
}

// Every path call on the calling thread traps, unless made by the trampoline.
bool trap_filter() {
  const uint64_t after = reinterpret_cast<uint64_t>(bench_trampoline_after);
  std::vector<sock_filter> f = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, instruction_pointer)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(after), 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, instruction_pointer) + 4),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(after >> 32), 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
  };
  ends_on_path_calls(&f, SECCOMP_RET_TRAP);
  sock_fprog prog{static_cast<unsigned short>(f.size()), f.data()};
  struct sigaction sa = {};
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO;
  ::sigaction(SIGSYS, &sa, nullptr);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 1UL << 2, &prog) == 0;
}

// Every path call on the calling thread stops for a user-notification
// listener (as the seal's filter does); returns the listener.
int notify_filter(bool sync_wake_up) {
  std::vector<sock_filter> f = {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr))};
  ends_on_path_calls(&f, SECCOMP_RET_USER_NOTIF);
  sock_fprog prog{static_cast<unsigned short>(f.size()), f.data()};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  const int fd = static_cast<int>(::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                                           SECCOMP_FILTER_FLAG_NEW_LISTENER | (1UL << 2), &prog));
  if (fd >= 0 && sync_wake_up) {  // SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
    if (::ioctl(fd, _IOW('!', 4, uint64_t), 1UL) != 0) std::fprintf(stderr, "no sync wake-up\n");
  }
  return fd;
}

// A Landlock domain handling the file-system rights `handled`, reading and
// executing allowed beneath "/".
bool landlock_readable(uint64_t handled) {
  struct {
    uint64_t handled;
  } attr{handled};
  long ruleset = ::syscall(444, &attr, sizeof attr, 0);
  int root = ::open("/", O_PATH | O_CLOEXEC);
  struct __attribute__((packed)) {
    uint64_t allowed;
    int32_t fd;
  } rule{handled & ((1ULL << 0) | (1ULL << 2) | (1ULL << 3)), root};  // execute, read file, read dir
  const bool ok = ruleset >= 0 && ::syscall(445, ruleset, 1, &rule, 0) == 0 &&
                  ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && ::syscall(446, ruleset, 0) == 0;
  ::close(root);
  if (ruleset >= 0) ::close(static_cast<int>(ruleset));
  return ok;
}

// Every file-system right of the kernel's ABI handled (as the seal's domain).
bool landlock_everything_readable() {
  const long abi = ::syscall(444, nullptr, 0, 1UL /* LANDLOCK_CREATE_RULESET_VERSION */);
  uint64_t handled = (1ULL << 13) - 1;
  if (abi >= 2) handled |= 1ULL << 13;
  if (abi >= 3) handled |= 1ULL << 14;
  if (abi >= 5) handled |= 1ULL << 15;
  return landlock_readable(handled);
}

// Answers `listener`'s notifications "continue" (reading each call's path as
// the supervisor does) until it hangs up.
void continue_all(int listener, pid_t pid) {
  seccomp_notif_sizes sizes{};
  ::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes);
  std::vector<char> req(std::max<size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)));
  std::vector<char> resp(std::max<size_t>(sizes.seccomp_notif_resp, sizeof(seccomp_notif_resp)));
  char path[4096];
  for (;;) {
    std::fill(req.begin(), req.end(), 0);
    auto* r = reinterpret_cast<seccomp_notif*>(req.data());
    if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, r) != 0) {
      if (errno == EINTR) continue;
      return;
    }
    const bool at = r->data.nr == SYS_openat || r->data.nr == SYS_newfstatat ||
                    r->data.nr == SYS_faccessat || r->data.nr == SYS_statx || r->data.nr == SYS_readlinkat;
    iovec local{path, 256};
    iovec remote{reinterpret_cast<void*>(r->data.args[at ? 1 : 0]), 256};
    ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    std::fill(resp.begin(), resp.end(), 0);
    auto* a = reinterpret_cast<seccomp_notif_resp*>(resp.data());
    a->id = r->id;
    a->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    ::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, a);
  }
}

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  ::sched_setaffinity(0, sizeof set, &set);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: seal_compile_bench LIBNVRTC SOURCE ROUNDS [options...]\n");
    return 2;
  }
  const std::string library = argv[1];
  std::ifstream in(argv[2]);
  std::stringstream text;
  text << in.rdbuf();
  const int rounds = std::atoi(argv[3]);
  std::vector<const char*> options(argv + 4, argv + argc);
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::fprintf(stderr, "%s\n", ::dlerror());
    return 1;
  }
  Nvrtc nvrtc{reinterpret_cast<CreateFn>(::dlsym(handle, "nvrtcCreateProgram")),
              reinterpret_cast<CompileFn>(::dlsym(handle, "nvrtcCompileProgram")),
              reinterpret_cast<DestroyFn>(::dlsym(handle, "nvrtcDestroyProgram")),
              reinterpret_cast<SizeFn>(::dlsym(handle, "nvrtcGetCUBINSize")),
              reinterpret_cast<GetFn>(::dlsym(handle, "nvrtcGetCUBIN"))};
  // SEAL_BENCH_PRELOAD_CUDA=1: load the driver library first, as a compile
  // process may before sealing (NVRTC looks for it while compiling).
  if (std::getenv("SEAL_BENCH_PRELOAD_CUDA")) {
    std::fprintf(stderr, "libcuda.so.1 %s\n",
                 ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL) ? "preloaded" : "not found");
  }
  const std::string library_dir = library.substr(0, library.rfind('/'));

  std::vector<std::string> modes = {"thread", "filter",        "filter-spec", "recorded",
                                    "served", "trap",        "trap-ping"};
  if (const char* only = std::getenv("SEAL_BENCH_MODES")) {  // e.g. "thread,served"
    modes.clear();
    std::stringstream list(only);
    for (std::string m; std::getline(list, m, ',');) modes.push_back(m);
  }
  std::map<std::string, std::vector<Sample>> got;
  int serial = 0;
  const bool same_ptx = std::getenv("SEAL_BENCH_SAME_PTX") != nullptr;
  auto run = [&](const std::string& mode) {
    // Every compile is a new kernel: new PTX (a device variable of its own,
    // named by this process and the compile), so NVRTC cannot take its
    // machine code from the driver's JIT cache (~/.nv/ComputeCache: NVRTC
    // starts the driver where there is one, and a sealed NVRTC is not given
    // that cache). SEAL_BENCH_SAME_PTX=1: a numbered comment only (the PTX
    // repeats).
    const std::string unique = std::to_string(::getpid()) + "_" + std::to_string(serial++);
    const std::string source = text.str() + (same_ptx ? "\n// " + unique + "\n"
                                                      : "\n__device__ int seal_bench_" + unique + ";\n");
    Sample s;
    auto start = std::chrono::steady_clock::now();
    if (mode.rfind("notify", 0) == 0) {
      // The seal's transport alone: no Landlock, no working folder, a
      // helper that continues every call (on the thread's CPU for `notify`).
      int listener = -1;
      std::mutex m;
      std::condition_variable cv;
      std::thread t([&] {
        const int cpu = ::sched_getcpu();
        if (mode != "notify-spread") pin_to(cpu);
        if (mode == "notify-all") {
          char dir[] = "/tmp/seal-bench-XXXXXX";
          if (::unshare(CLONE_FS) != 0 || !::mkdtemp(dir) || ::chdir(dir) != 0) {
            std::fprintf(stderr, "unshare refused\n");
          }
          ::rmdir(dir);
        }
        if ((mode == "notify-landlock" || mode == "notify-all") && !landlock_everything_readable()) {
          std::fprintf(stderr, "landlock refused\n");
        }
        int fd = notify_filter(mode == "notify-sync" || mode == "notify-all");
        {
          std::lock_guard<std::mutex> lock(m);
          listener = fd < 0 ? -2 : fd;
          cpu_of_helper = mode != "notify-spread" ? cpu : -1;
        }
        cv.notify_all();
        if (fd < 0) std::fprintf(stderr, "seccomp refused\n");
        compile(nvrtc, source, options, &s);
      });
      {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return listener != -1; });
      }
      std::thread helper([&, fd = listener] {
        if (cpu_of_helper >= 0) pin_to(cpu_of_helper);
        if (fd >= 0) continue_all(fd, ::getpid());
      });
      t.join();
      if (listener >= 0) ::close(listener);  // the helper's RECV fails: it ends
      helper.join();
    } else if (mode == "main") {
      compile(nvrtc, source, options, &s);
    } else if (mode == "workdir" || mode == "workdir-deleted") {
      std::thread t([&] {
        char dir[] = "/tmp/seal-bench-XXXXXX";
        const char* to = mode == "workdir" ? "/tmp" : ::mkdtemp(dir);
        if (::unshare(CLONE_FS) != 0 || !to || ::chdir(to) != 0) std::fprintf(stderr, "unshare refused\n");
        if (to == dir) ::rmdir(dir);  // as the seal's chain: a folder deleted under the thread
        compile(nvrtc, source, options, &s);
      });
      t.join();
    } else if (mode == "landlock" || mode.rfind("landlock-", 0) == 0) {
      // "landlock": ABI 1's read rights; "landlock-HEX": the rights HEX.
      const uint64_t handled =
          mode == "landlock" ? (1ULL << 2) | (1ULL << 3) : std::strtoull(mode.c_str() + 9, nullptr, 16);
      std::thread t([&] {
        if (!landlock_readable(handled)) std::fprintf(stderr, "landlock refused\n");
        compile(nvrtc, source, options, &s);
      });
      t.join();
    } else if (mode == "trap" || mode == "trap-ping" || mode == "trap-read") {
      std::thread t([&] {
        std::thread helper;
        if (mode != "trap") {
          const bool read_path = mode == "trap-read";
          const int cpu = ::sched_getcpu();
          pin_to(cpu);
          ping_request = ::eventfd(0, EFD_CLOEXEC);
          ping_answer = ::eventfd(0, EFD_CLOEXEC);
          helper = std::thread([cpu, read_path] {
            pin_to(cpu);
            const pid_t pid = ::getpid();
            char path[4096];
            for (uint64_t v; ::read(ping_request, &v, 8) == 8 && v < 1000;) {
              if (read_path) {
                iovec local{path, 256};
                iovec remote{reinterpret_cast<void*>(ping_path), 256};
                ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
              }
              uint64_t one = 1;
              if (::write(ping_answer, &one, 8) != 8) break;
            }
          });
        }
        if (!trap_filter()) std::fprintf(stderr, "seccomp refused\n");
        compile(nvrtc, source, options, &s);
        if (helper.joinable()) {
          uint64_t stop = 1000;
          bench_trampoline(SYS_write, ping_request, reinterpret_cast<long>(&stop), 8, 0, 0, 0);
          helper.join();
          ::close(ping_request);
          ::close(ping_answer);
          ping_request = ping_answer = -1;
        }
      });
      t.join();
    } else if (mode == "thread" || mode == "filter" || mode == "filter-spec" || mode == "arena") {
      void* arena = mode == "arena" ? ::mmap(nullptr, size_t{256} << 20, PROT_READ | PROT_WRITE,
                                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                                    : nullptr;
      std::thread t([&] {
        if ((mode == "filter" || mode == "filter-spec") && !allow_all_filter(mode == "filter")) {
          std::fprintf(stderr, "seccomp refused\n");
        }
        compile(nvrtc, source, options, &s);
      });
      t.join();
      if (arena && arena != MAP_FAILED) ::munmap(arena, size_t{256} << 20);
    } else {
      kcache::compiler::SealPolicy policy;
      if (mode == "recorded") {
        policy.readable = {"/"};
      } else {
        policy.serve = true;
        policy.readable = {library_dir, "/etc/localtime", "/usr/share/zoneinfo",
                           "/usr/lib/x86_64-linux-gnu/gconv"};
        policy.one_cpu = true;  // as the drop-in's compile
      }
      kcache::compiler::SealResult r =
          kcache::compiler::run_sealed(policy, [&] { compile(nvrtc, source, options, &s); });
      if (!r.sealed) std::fprintf(stderr, "%s: not sealed: %s\n", mode.c_str(), r.why.c_str());
      if (!r.refused.empty()) std::fprintf(stderr, "%s: refused %s\n", mode.c_str(), r.refused.c_str());
      if (serial <= static_cast<int>(modes.size()) + 1) {
        std::fprintf(stderr, "%s: %zu path calls named, %zu files served, %d CPU moves\n",
                     mode.c_str(), r.probes.size(), r.served.size(), r.cpu_moves);
      }
    }
    s.wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return s;
  };
  run("thread");  // NVRTC's first compile (its start-up) is left out
  // (Two modes at once on two threads of this process do not compare: the
  // two compiles' allocators then fight over the address space's lock,
  // which the supervisor needs to read each path. Run two processes at
  // once instead, SEAL_BENCH_MODES=thread and =served.)
  std::vector<double> ratios;  // per round: last mode / first mode
  for (int r = 0; r < rounds; ++r) {
    for (const std::string& mode : modes) got[mode].push_back(run(mode));
    ratios.push_back(got[modes.back()].back().wall_ms / got[modes.front()].back().wall_ms);
  }
  auto median = [](std::vector<Sample> v, double Sample::*field) {
    std::sort(v.begin(), v.end(),
              [&](const Sample& a, const Sample& b) { return a.*field < b.*field; });
    return v[v.size() / 2].*field;
  };
  const double base = median(got[modes.front()], &Sample::wall_ms);
  std::printf("%-14s %10s %7s %10s %10s %8s %8s %9s %6s %8s %8s %8s %9s\n", "mode", "wall ms", "ratio",
              "user ms", "sys ms", "vcsw", "ivcsw", "minflt", "migr", "rq ms", "tlb", "res",
              "proc ms");
  for (const std::string& mode : modes) {
    const double wall = median(got[mode], &Sample::wall_ms);
    std::printf("%-14s %10.0f %7.3f %10.0f %10.0f %8.0f %8.0f %9.0f %6.0f %8.1f %8.0f %8.0f %9.0f\n",
                mode.c_str(), wall, wall / base, median(got[mode], &Sample::user_ms),
                median(got[mode], &Sample::sys_ms), median(got[mode], &Sample::vcsw),
                median(got[mode], &Sample::ivcsw), median(got[mode], &Sample::minflt),
                median(got[mode], &Sample::migrations), median(got[mode], &Sample::wait_ms),
                median(got[mode], &Sample::tlb), median(got[mode], &Sample::res),
                median(got[mode], &Sample::process_ms));
  }
  std::sort(ratios.begin(), ratios.end());
  std::printf("%s/%s per round: median %.3f, range %.3f-%.3f (%zu rounds)\n",
              modes.back().c_str(), modes.front().c_str(),
              ratios[ratios.size() / 2], ratios.front(), ratios.back(), ratios.size());
  for (const std::string& mode : modes) {
    std::printf("  %-13s cubin %016zx", mode.c_str(), got[mode].front().cubin_hash);
    for (const Sample& s : got[mode]) std::printf(" %.0f", s.wall_ms);
    std::printf("\n");
  }
  return 0;
}
