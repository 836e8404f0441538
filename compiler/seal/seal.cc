// run_sealed: the orchestration. The sealed thread's working folder, the
// order in which it is sealed (kernel_setup.h) and supervised
// (supervisor.h), and what the run's record becomes (record.h,
// snapshots.h).
#include "common/environment.h"
#include "compiler/seal/seal.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "common/error.h"
#include "common/stamp_trust.h"
#include "compiler/seal/cpu_keeper.h"
#include "compiler/seal/kernel_setup.h"
#include "compiler/seal/raw_calls.h"
#include "compiler/seal/record.h"
#include "compiler/seal/snapshots.h"
#include "compiler/seal/supervisor.h"

namespace kcache::compiler {
namespace {

// Blocks every signal the calling thread may block (glibc keeps its own).
void block_signals() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
}

// Keeps the calling thread on `cpu`.
bool run_on_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

// Gives the calling thread a working directory of its own, the innermost of
// a chain of freshly made folders, all deleted again. Returns its path (and
// the chain's root), or an empty string where that cannot be done.
std::string seal_working_directory(std::string* root_out) {
  if (::unshare(CLONE_FS) != 0) return "";
  const char* tmp = env::read(env::Var::tmpdir);
  char real[PATH_MAX];
  std::string parent = ::realpath(tmp && *tmp ? tmp : "/tmp", real) ? real : "/tmp";
  std::string root = parent + "/kcache-seal-XXXXXX";
  if (!::mkdtemp(&root[0])) return "";
  std::vector<std::string> made{root};
  bool ok = true;
  for (int i = 0; i < kSealDepth && ok; ++i) {
    std::string next = made.back() + "/d";
    ok = ::mkdir(next.c_str(), 0700) == 0;
    if (ok) made.push_back(next);
  }
  ok = ok && ::chdir(made.back().c_str()) == 0;
  for (auto it = made.rbegin(); it != made.rend(); ++it) ::rmdir(it->c_str());
  if (!ok) return "";
  *root_out = root;
  return made.back();
}

// Where the sealed thread works: the deleted chain, or (serving) the folder
// the compile asked for, open, with its real name.
struct WorkingFolder {
  const SealPolicy& policy;
  seal::Fd served_fd;
  std::string served_name;

  explicit WorkingFolder(const SealPolicy& p)
      : policy(p), served_fd(p.serve ? ::open(dir(), O_PATH | O_DIRECTORY | O_CLOEXEC) : -1) {
    if (!policy.serve) return;
    char real[PATH_MAX];
    if (served_fd.get() < 0 || !::realpath(dir(), real)) {
      throw IoError("cannot open the working folder " + policy.working_dir + ": " +
                    std::strerror(errno));
    }
    served_name = real;
  }

  const char* dir() const { return policy.working_dir.empty() ? "." : policy.working_dir.c_str(); }

  // Enters it on the calling thread (unshare(CLONE_FS): its own). Returns
  // its name (and the chain's root), empty where that failed.
  std::string enter(std::string* root) const {
    if (!policy.serve) return seal_working_directory(root);
    if (::unshare(CLONE_FS) != 0 || ::fchdir(served_fd.get()) != 0) return "";
    return served_name;
  }
};

// Runs `fn` on a thread of its own with no boundary (the kernel refused it).
void run_unsealed(const WorkingFolder& folder, const std::function<void()>& fn) {
  std::exception_ptr error;
  std::thread plain([&] {
    try {
      std::string root;
      folder.enter(&root);
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  });
  plain.join();
  if (error) std::rethrow_exception(error);
}

// The start of the sealed thread, and what it tells the thread that
// supervises it.
struct SealedStart {
  std::mutex m;
  std::condition_variable changed;
  int listener = -2;        // -2: not yet; -1: failed (`why`)
  bool supervised = false;  // the supervisor runs: `fn` may start
  bool abandoned = false;   // no supervisor could be started: skip `fn`
  std::string why;
  int cpu = -1;           // policy.one_cpu: the CPU the thread and its supervisor share
  cpu_set_t allowed{};    // the CPUs it could use before
  long tid = 0;           // the sealed thread's
  std::string cwd, root;  // its working folder (and the deleted chain's root)

  // On the thread to seal: its CPU, folder, Landlock domain and filter;
  // then waits until the supervisor runs (from here on every path call of
  // this thread waits for it).
  // Returns false where the seal was abandoned (`fn` must not run).
  bool seal_this_thread(const SealPolicy& policy, const WorkingFolder& folder) {
    std::string failed;
    tid = seal::raw_syscall(SYS_gettid);
    if (policy.one_cpu && ::sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
      cpu = ::sched_getcpu();
      if (cpu >= 0 && !run_on_cpu(cpu)) cpu = -1;
    }
    cwd = folder.enter(&root);
    if (cwd.empty())
      failed = "unshare(CLONE_FS) refused: the compile could read the working folder";
    if (failed.empty()) failed = seal::restrict_with_landlock(policy);
    int fd = -1;
    if (failed.empty()) fd = seal::install_supervision(&failed);
    std::unique_lock<std::mutex> lock(m);
    listener = fd;
    why = failed;
    changed.notify_all();
    if (fd >= 0) changed.wait(lock, [&] { return supervised || abandoned; });
    return !abandoned;
  }

  // On the supervising thread: the listener, once the sealed thread has one.
  int wait_for_listener() {
    std::unique_lock<std::mutex> lock(m);
    changed.wait(lock, [&] { return listener != -2; });
    return listener;
  }

  void let_it_run() {
    {
      std::lock_guard<std::mutex> lock(m);
      supervised = true;
    }
    changed.notify_all();
  }

  void abandon() {
    {
      std::lock_guard<std::mutex> lock(m);
      abandoned = true;
    }
    changed.notify_all();
  }
};

// The sealed thread: seals itself (`start`), runs `fn` once its supervisor
// runs, and says goodbye; an exception of `fn`'s goes to `error`.
void run_sealed_thread(const SealPolicy& policy, const WorkingFolder& folder,
                       const seal::Goodbye& goodbye, SealedStart* start,
                       const std::function<void()>& fn, std::exception_ptr* error) {
  // No signal of the program's on this thread: none interrupts a call of
  // `fn` (a stopped path call is interruptible, the call itself is not)
  // or its goodbye.
  block_signals();
  if (!start->seal_this_thread(policy, folder)) return;
  // Sealed, the thread's last call is its goodbye (the supervisor then
  // waits for the filter to go), whichever way it leaves `fn`.
  struct SayGoodbye {
    const seal::Goodbye* to;
    ~SayGoodbye() {
      if (!to) return;
      while (seal::raw_syscall(SYS_openat, seal::kGoodbyeFd, reinterpret_cast<long>(to->token),
                               O_RDONLY) == -EINTR) {
      }
    }
  } say{start->listener >= 0 ? &goodbye : nullptr};
  try {
    fn();
  } catch (...) {
    *error = std::current_exception();
  }
}

// What a supervised run recorded, as its result.
SealResult result_of(const seal::Supervisor& supervisor, const seal::RecordArena& arena,
                     const SealedStart& start, const seal::CpuKeeper& keeper) {
  SealResult out;
  if (supervisor.outlived()) {
    out.why =
        "a thread or process the sealed code started outlived it (what it names next "
        "goes unrecorded)";
  } else if (arena.overflowed()) {
    out.why = "NVRTC named more paths than the seal records (" +
              std::to_string(seal::RecordArena::kBytes >> 20) + " MiB of names)";
  } else {
    out.probes = seal::probes_of(arena, start.cwd, start.root, &out);
    out.cpu_moves = keeper.moves();
    seal::served_of(arena, &out);
    seal::check_known_files(&out);
    out.sealed = true;
  }
  return out;
}

seal::Goodbye make_goodbye() {
  seal::Goodbye goodbye{};
  if (::getrandom(goodbye.token, sizeof goodbye.token, 0) != sizeof goodbye.token) {
    throw IoError(std::string("cannot make the seal's token (getrandom): ") + std::strerror(errno));
  }
  return goodbye;
}

}  // namespace

void set_snapshot_settle_margin_for_testing(int64_t ns) { set_writeback_window_for_testing(ns); }

SealResult run_sealed(const SealPolicy& policy, const std::function<void()>& fn) {
  // Everything the supervisor will use is made before the sealed thread can
  // run `fn` (supervisor.h: the invariant).
  seal::RecordArena arena;
  WorkingFolder folder(policy);
  const seal::LoaderCode loader = policy.serve ? seal::find_loader_code() : seal::LoaderCode{};
  std::string why;
  if (!arena.ok()) why = "cannot reserve memory for the seal's record (mmap failed)";
  if (!arena.ok() || !seal_available(&why)) {
    run_unsealed(folder, fn);
    SealResult result;
    result.why = why;
    return result;
  }

  const seal::Goodbye goodbye = make_goodbye();
  // Serving, the files whose bytes this process knows (SnapshotCache).
  struct Known {
    seal::SnapshotCache* cache;
    ~Known() {
      if (cache) cache->release();
    }
    seal::SnapshotCache* get() const { return cache; }
  } known{policy.serve ? seal::SnapshotCache::acquire() : nullptr};
  SealedStart start;
  std::exception_ptr error;
  std::thread sealed([&] { run_sealed_thread(policy, folder, goodbye, &start, fn, &error); });
  const int fd = start.wait_for_listener();
  SealResult out;
  if (fd >= 0) {
    std::optional<seal::CpuKeeper> keeper;
    std::optional<seal::Supervisor> supervisor;
    std::atomic<bool> joined{false};
    std::thread watch;
    try {  // (the sealed thread waits, in no path call, holding nothing)
      keeper.emplace(start.cpu, start.allowed, start.tid);
      supervisor.emplace(fd, goodbye, &arena, policy, folder.served_fd.get(), folder.served_name,
                         loader, &*keeper, &joined, known.get());
      watch = std::thread([&] {
        block_signals();  // no program's handler runs here while a sealed thread is stopped
        supervisor->run();
      });
    } catch (...) {
      ::close(fd);  // its path calls now fail at once (ENOSYS): it skips `fn` and ends
      start.abandon();
      sealed.join();
      throw;
    }
    start.let_it_run();
    sealed.join();
    joined = true;
    watch.join();
    ::close(fd);
    out = result_of(*supervisor, arena, start, *keeper);
  } else {
    sealed.join();
    out.why = start.why;
    seal::mark_refused(start.why);
  }
  if (error) std::rethrow_exception(error);
  return out;
}

std::vector<std::string> driver_cache_folders() {
  // Folded as the names they are compared with are (join_lexically):
  // HOME=/home/u/ or HOME=/ would otherwise match nothing.
  std::vector<std::string> folders;
  if (const char* cache = env::read(env::Var::cuda_cache_path)) {
    if (*cache == '/') folders.push_back(resolve_lexically("/", cache));
  }
  if (const char* home = env::read(env::Var::home)) {
    if (*home == '/') {
      folders.push_back(resolve_lexically("/", std::string(home) + "/.nv/ComputeCache"));
    }
  }
  return folders;
}

}  // namespace kcache::compiler
