#include "compiler/nvrtc/nvrtc_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <cstring>
#include <cerrno>
#include <cstdio>
#include <iterator>
#include <limits>
#include <thread>

#include "common/error.h"
#include "common/file_system.h"
#include "compiler/nvrtc/nvrtc_worker.h"
#include "compiler/nvrtc/pch.h"

extern char** environ;

namespace kcache::compiler {

// How long a new worker has to say it is one (kcache starts in milliseconds).
constexpr int kHelloMs = 5000;

namespace {

// The environment a worker starts with (spawn_worker's: no LD_PRELOAD, its
// own PWD), hashed: a child started before the program changed its
// environment reads other settings (the store, the time zone) than the
// program now would, so it is not used again.
size_t environment_hash() {
  std::string all;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "LD_PRELOAD=", 11) == 0 || std::strncmp(*e, "PWD=", 4) == 0) continue;
    all += *e;
    all += '\0';
  }
  return std::hash<std::string>()(all);
}

// Whether process `pid` is stopped (by a signal, or traced): its state in
// /proc/PID/stat, after the last ')' of its name.
bool process_stopped(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* paren = std::strrchr(buf, ')');
  return paren && paren[1] == ' ' && (paren[2] == 'T' || paren[2] == 't');
}

enum class Wait { ready, stopped, timed_out };

// Waits until `fd`, process `pid`'s output, has something to read (or
// hung up), at most `limit_ms` (-1: no limit); `stopped` once `pid` was
// found stopped at two checks in a row: a stopped process answers nobody
// until someone continues it, which may be never.
Wait wait_readable(int fd, pid_t pid, int limit_ms, int check_ms) {
  int waited = 0, stopped_checks = 0;
  for (;;) {
    int slice = limit_ms < 0 ? check_ms : std::min(check_ms, limit_ms - waited);
    pollfd p{fd, POLLIN, 0};
    int polled = ::poll(&p, 1, slice);
    if (polled < 0 && errno == EINTR) continue;
    if (polled != 0) return Wait::ready;  // readable, hung up, or a bad descriptor: read says
    waited += slice;
    stopped_checks = pid > 0 && process_stopped(pid) ? stopped_checks + 1 : 0;
    if (stopped_checks >= 2) return Wait::stopped;
    if (limit_ms >= 0 && waited >= limit_ms) return Wait::timed_out;
  }
}

}  // namespace

struct NvrtcPool::Child {
  pid_t pid = -1;
  int to = -1;      // its stdin (a socket: writes never raise SIGPIPE)
  int from = -1;    // its stdout
  // Routed (compile()): the PCH key of the PCH it holds, or empty; else the
  // options it compiled with last.
  std::string key;
  dev_t to_dev = 0, from_dev = 0;  // what `to` and `from` were when made
  ino_t to_ino = 0, from_ino = 0;
  size_t environment = 0;  // environment_hash() when it started

  void remember_ends() {
    struct stat st;
    if (::fstat(to, &st) == 0) to_dev = st.st_dev, to_ino = st.st_ino;
    if (::fstat(from, &st) == 0) from_dev = st.st_dev, from_ino = st.st_ino;
  }
  // Whether it ended while idle (its stdout hung up, or says something
  // nobody asked for).
  bool ended() const {
    pollfd out{from, POLLIN, 0};
    return ::poll(&out, 1, 0) != 0;
  }

  // Whether `to` and `from` are still the ends made for this child. A host
  // that closed descriptors it did not open (close_range) and opened its own
  // may hold those numbers now: writing, reading or closing them would be
  // done to the host's files (issue 27's review).
  bool ends_are_ours() const {
    struct stat a, b;
    return ::fstat(to, &a) == 0 && a.st_dev == to_dev && a.st_ino == to_ino &&
           ::fstat(from, &b) == 0 && b.st_dev == from_dev && b.st_ino == from_ino;
  }

  // Closes its ends: the child exits at once (it watches its stdin for the
  // other end's close, even mid-compile: run_nvrtc_worker_loop). It is not
  // this process's child (spawn_worker), so there is nothing to reap. Ends
  // that are no longer ours are left alone: the host's close already ended
  // the child.
  void stop() {
    if (ends_are_ours()) {
      ::close(to);
      ::close(from);
    }
    to = from = -1;
    pid = -1;
  }
};

NvrtcPool::NvrtcPool(std::vector<std::string> argv, std::string scratch, int max_children)
    : argv_(std::move(argv)),
      scratch_(std::move(scratch)),
      owner_(::getpid()),
      max_children_(max_children > 0
                        ? max_children
                        : std::max(4, static_cast<int>(std::thread::hardware_concurrency()))),
      cpus_(std::max(1, static_cast<int>(std::thread::hardware_concurrency()))) {}

NvrtcPool::~NvrtcPool() {
  for (auto& c : idle_) c->stop();
}

int NvrtcPool::started() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return started_;
}

std::unique_ptr<NvrtcPool::Child> NvrtcPool::take(const std::string& key, Route* route) {
  int n;
  const size_t environment = environment_hash();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (::getpid() != owner_) forget_the_parents_children();
    if (route) wait_for_holder(lock, *route);
    while (std::unique_ptr<Child> c = take_idle(key, route != nullptr)) {
      if (!c->ended() && c->environment == environment) {
        taken_.insert(c.get());
        if (route) route_to(*c, *route);
        return c;
      }
      // Ended idle (NvrtcPool's idle exit), or started with another
      // environment: not a death.
      c->stop();
      --live_;
    }
    n = started_++;
    ++live_;
    // Starting, it counts as the key's holder: compiles of the key that
    // come meanwhile wait for it rather than start children of their own.
    if (route) ++starting_[key];
  }
  try {
    // A new child holds no PCH yet, whatever it is started for.
    std::unique_ptr<Child> c = start_child(n, route ? "" : key);
    std::lock_guard<std::mutex> lock(mutex_);
    taken_.insert(c.get());
    if (route) {
      --starting_[key];
      route_to(*c, *route);
    }
    return c;
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --live_;
      ++deaths_in_a_row_;  // a child that never started counts as one that died
      if (route) --starting_[key];
    }
    returned_.notify_all();
    throw;
  }
}

// This is a fork() of the process that started the children: they answer
// the parent, whose frames would mix with ours. Forget them (closing our
// copies only: neither killed nor waited for, they are not our children) and
// start our own. Under mutex_.
void NvrtcPool::forget_the_parents_children() {
  auto forget = [](Child* c) {
    if (c->ends_are_ours()) {
      ::close(c->to);
      ::close(c->from);
    }
    c->to = c->from = -1;
    c->pid = -1;
  };
  for (auto& c : idle_) forget(c.get());
  // Taken by threads of the parent, which are not in this process: their
  // objects are left to them (never freed here), only the ends are closed.
  for (Child* c : taken_) forget(c);
  taken_.clear();
  idle_.clear();
  live_ = 0;
  owner_ = ::getpid();
}

// An idle child whose key is `key`; else, `routed`, one that holds no PCH
// still wanted (still_to_come); else (all children live) the one idle the
// longest; else null. Routed, a child's key is the PCH key it holds, which
// route_to sets; else the options it last compiled with. Under mutex_.
std::unique_ptr<NvrtcPool::Child> NvrtcPool::take_idle(const std::string& key, bool routed) {
  // idle_ is ordered from the least recently used.
  auto match = std::find_if(idle_.rbegin(), idle_.rend(),
                            [&](const std::unique_ptr<Child>& c) { return c->key == key; });
  if (match == idle_.rend() && routed) {
    match = std::find_if(idle_.rbegin(), idle_.rend(), [&](const std::unique_ptr<Child>& c) {
      return c->key.empty() || still_to_come(c->key) == 0;
    });
  }
  if (match == idle_.rend() && live_ >= max_children_ && !idle_.empty()) {
    match = std::prev(idle_.rend());  // the oldest
  }
  if (match == idle_.rend()) return nullptr;
  std::unique_ptr<Child> c = std::move(*match);
  idle_.erase(std::next(match).base());
  if (!routed) c->key = key;
  return c;
}

// Where every CPU has a compile, another child would only share them: the
// holder's queue of uses (each about a quarter of a plain compile) costs
// less than any compile elsewhere. Where a CPU is free, a compile there
// may end sooner than the holder's current one (perhaps its PCH's making)
// and the uses queued before it, but only a new PCH is worth it: where
// elsewhere would compile without PCH (few of the key left), the wait for
// the holder costs less CPU than the plain compile (about four uses). With
// limit_cpus(), a compile that finds every CPU at work waits for one even
// where nothing holds its PCH, with no time limit: every child taken comes
// back or is retired (a stopped one too), and either wakes the waiters.
// Under mutex_.
void NvrtcPool::wait_for_holder(std::unique_lock<std::mutex>& lock, const Route& route) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitForPchMs);
  bool counted = false;
  for (;;) {
    const bool held = holders(route.key) > 0;
    if (held && holder_idle(route.key)) return;
    if (!held && !limited_) return;
    const bool stay = held && (elsewhere_plain(route.key) || !room_for_another(route.key));
    if (cpus_in_use() < cpus_ && !stay) return;
    if (held && !counted) ++counts_.waited;
    counted = counted || held;
    ++waiting_[route.key];
    bool woke = true;
    if (limited_) {
      returned_.wait(lock);
    } else {
      woke = returned_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    }
    --waiting_[route.key];
    if (!woke) return;
  }
}

// Whether a compile of `key` not yet routed, sent to a child that does not
// hold its PCH, would compile without PCH (route_to). Under mutex_.
bool NvrtcPool::elsewhere_plain(const std::string& key) const {
  const int after_this = still_to_come(key) - 1;
  return after_this <= kQueuedPerPch * holders(key);
}

// Whether `key` may have one more holder: with limit_cpus() and
// expect_all(), its share of the CPUs is its share of the compiles still to
// come, so a CPU left free for a moment (another option set's compiles not
// yet sent) does not make a second PCH of one that its holder will serve.
// Under mutex_.
bool NvrtcPool::room_for_another(const std::string& key) const {
  if (!limited_ || all_expected_ == 0) return true;
  const int left = std::max(1, all_expected_ - all_begun_);
  const int share = static_cast<int>(static_cast<int64_t>(cpus_) * still_to_come(key) / left);
  return holders(key) < std::max(1, share);
}

void NvrtcPool::expect_all(int compiles) {
  std::lock_guard<std::mutex> lock(mutex_);
  all_expected_ += compiles;
}

void NvrtcPool::limit_cpus(int cpus) {
  std::lock_guard<std::mutex> lock(mutex_);
  cpus_ = std::max(1, cpus);
  limited_ = true;
}

// Compiles that run now (children at work or starting), and those about to:
// an idle holder that compiles of its key wait for is taken at once by one
// of them (each wake-up sees the CPU its return freed, but it is theirs).
int NvrtcPool::cpus_in_use() const {
  int n = static_cast<int>(taken_.size());
  for (const auto& [key, starting] : starting_) n += starting;
  for (const auto& c : idle_) {
    auto w = waiting_.find(c->key);
    n += w != waiting_.end() && w->second > 0;
  }
  return n;
}

bool NvrtcPool::holder_idle(const std::string& key) const {
  return std::any_of(idle_.begin(), idle_.end(),
                     [&](const std::unique_ptr<Child>& c) { return c->key == key; });
}

int NvrtcPool::holders(const std::string& key) const {
  auto holds = [&](const Child* c) { return c->key == key; };
  auto starting = starting_.find(key);
  int n = starting == starting_.end() ? 0 : starting->second;
  for (const auto& c : idle_) n += holds(c.get());
  for (const Child* c : taken_) n += holds(c);
  return n;
}

// How many compiles of PCH key `key` (options, then '\0', then the prefix)
// are still to be routed: as many as expect() said less those routed, or
// unknown (INT_MAX) where it said nothing.
int NvrtcPool::still_to_come(const std::string& key) const {
  const size_t cut = key.find('\0');
  if (cut == std::string::npos) return 0;  // a program child's: no PCH
  auto expected = expected_.find(key.substr(cut + 1));
  if (expected == expected_.end()) return std::numeric_limits<int>::max();
  auto begun = begun_.find(key);
  return std::max(0, expected->second - (begun == begun_.end() ? 0 : begun->second));
}

// `child`, just taken for `route`: it uses the PCH it holds, or makes the
// route's where more compiles of it are still to come than the children
// already holding it would serve soon (kQueuedPerPch each), or compiles
// without. Under mutex_.
void NvrtcPool::route_to(Child& child, Route& route) {
  ++begun_[route.key];
  ++all_begun_;
  if (child.key == route.key) {
    route.pch = true;
    ++counts_.reused;
    return;
  }
  route.pch = still_to_come(route.key) > kQueuedPerPch * holders(route.key);
  if (route.pch) {
    child.key = route.key;
    ++counts_.made;
  } else {
    ++counts_.plain;
  }
}

void NvrtcPool::expect(const std::string& prefix, int compiles) {
  std::lock_guard<std::mutex> lock(mutex_);
  expected_[prefix] += compiles;
}

NvrtcPool::PchCounts NvrtcPool::pch_counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

namespace {

// What a worker's process needs between clone() and execve(), all made
// before: the processes below share this one's memory until the worker
// execs, so they only make system calls.
struct SpawnPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  const char* cwd;
  int in, out;
  char* worker_stack;  // its top
  int error = 0;       // an errno from any step, for the parent
  pid_t worker = -1;
};

int exec_worker(void* arg) {
  auto* plan = static_cast<SpawnPlan*>(arg);
  // Its own copy of the signal dispositions (no CLONE_SIGHAND): every one
  // back at its default, then none blocked (the parent blocked all around
  // clone(), so no handler of the host's ran here in between).
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::setpgid(0, 0);
  // The two ends above 2 first, so that 0 and 1 can take them whatever
  // numbers they had (a host that closed its stdio gave us 0 and 1).
  int in = ::fcntl(plan->in, F_DUPFD, 3), out = ::fcntl(plan->out, F_DUPFD, 3);
  if (in < 0 || out < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::chdir(plan->cwd) != 0) {
    plan->error = errno;
    ::_exit(127);
  }
  ::close(in);
  ::close(out);
  ::execve(plan->path, plan->argv, plan->envp);
  plan->error = errno;
  ::_exit(127);
}

// Between this process and its worker: starts the worker and ends, so that
// the worker is this process's grandchild, adopted by init (or a subreaper)
// at once. It never execs, so its exit signal stays 0.
int start_worker(void* arg) {
  auto* plan = static_cast<SpawnPlan*>(arg);
  pid_t worker = ::clone(exec_worker, plan->worker_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, plan);
  if (worker < 0 && plan->error == 0) plan->error = errno;
  plan->worker = worker;
  ::_exit(0);
}

// Starts `args` in `cwd` with `in` as its stdin and `out` as its stdout.
// The child is kcache's own process, not a copy of this one's state: every
// signal at its default and none blocked (a host may block or ignore some),
// a process group of its own (a terminal's Ctrl-C is for the program, which
// decides), and no LD_PRELOAD (kcache run preloads the drop-in into the
// program, not into kcache). $PWD names the child's own working folder
// (NVRTC looks at it), not the folder of whatever started it.
//
// It is not this process's child. A host that waits for all its children,
// or counts them, must never meet the drop-in's workers (issue 27's review:
// a host looping on wait() hung while they lived). So a go-between starts
// it and ends: the go-between is a "clone" child (it sends no signal when
// it ends and never execs), which neither wait() nor waitpid(-1) sees and
// which is reaped here with __WALL; the worker is adopted by init. Both are
// started as posix_spawn starts its children, vfork-like, sharing memory
// until execve, so a large host is not copied. The worker ends when its
// stdin's other end closes (run_nvrtc_worker_loop). Returns an errno, 0 on
// success.
int spawn_worker(std::vector<std::string> args, const std::string& cwd, int in, int out,
                 pid_t* pid) {
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(&a[0]);
  cargs.push_back(nullptr);
  std::string pwd = "PWD=" + cwd;
  std::vector<char*> env;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0 && std::strncmp(*e, "PWD=", 4) != 0) {
      env.push_back(*e);
    }
  }
  env.push_back(&pwd[0]);
  env.push_back(nullptr);
  std::vector<char> stacks(size_t{128} << 10);
  auto top = [](char* end) {
    return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(end) & ~uintptr_t{15});
  };
  SpawnPlan plan{cargs[0], cargs.data(), env.data(), cwd.c_str(), in, out,
                 top(stacks.data() + stacks.size())};
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  // Exit signal 0 (no SIGCHLD in the flags): a clone child.
  pid_t between = ::clone(start_worker, top(stacks.data() + stacks.size() / 2),
                          CLONE_VM | CLONE_VFORK, &plan);
  const int clone_error = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (between < 0) return clone_error;
  int status;
  while (::waitpid(between, &status, __WALL) < 0 && errno == EINTR) {
  }
  if (plan.error != 0) return plan.error;
  *pid = plan.worker;
  return 0;
}

// `fd` itself, or where it is 0-2, a copy above 2 (close-on-exec), `fd`
// closed.
int above_stdio(int fd) {
  if (fd > 2) return fd;
  int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (moved < 0) return fd;
  ::close(fd);
  return moved;
}

}  // namespace

// The pool's child number `n`: with a scratch folder, an empty working
// folder and a PCH folder of its own there; without one, no folder and no PCH.
std::unique_ptr<NvrtcPool::Child> NvrtcPool::start_child(int n, const std::string& key) {
  std::vector<std::string> args = argv_;
  args.push_back("--loop");
  // A program that adopts orphans (PID 1 of a container, a subreaper) gets
  // the workers spawn_worker hands to init as its own children: its wait()
  // for all of them would wait for good. There they end after a second
  // without work, and a new one starts with the next compile.
  int subreaper = 0;
  if (::getpid() == 1 || (::prctl(PR_GET_CHILD_SUBREAPER, &subreaper) == 0 && subreaper)) {
    args.insert(args.end(), {"--idle-exit-ms", "1000"});
  }
  std::string cwd = "/";
  if (!scratch_.empty()) {
    std::string home = scratch_ + "/nvrtc-" + std::to_string(n);
    for (const std::string& d : {home, home + "/cwd", home + "/pch"}) {
      if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) {
        throw IoError(errno_message("cannot create the NVRTC worker's folder", d, errno));
      }
    }
    args.insert(args.end(), {"--pch-dir", home + "/pch"});
    cwd = home + "/cwd";
  }
  int in[2], out[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) {
    throw IoError(errno_message("cannot create a socket pair", "", errno));
  }
  if (::pipe2(out, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(in[0]);
    ::close(in[1]);
    throw IoError(errno_message("cannot create a pipe", "", err));
  }
  auto c = std::make_unique<Child>();
  c->environment = environment_hash();
  int rc = spawn_worker(std::move(args), cwd, in[0], out[1], &c->pid);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    throw IoError(errno_message("cannot start the NVRTC worker", argv_[0], rc));
  }
  // Above 2: a host that closed its stdio must find 0-2 free again.
  c->to = above_stdio(in[1]);
  c->from = above_stdio(out[0]);
  c->key = key;
  c->remember_ends();
  // Its first frame says it is kcache's worker: a KCACHE_EXE that is some
  // other program (or hangs) must not hold the program's compile for good.
  Wait waited = wait_readable(c->from, c->pid, kHelloMs, kStoppedCheckMs);
  std::string hello;
  if (waited != Wait::ready || read_frame(c->from, hello) != Frame::ok || hello != kWorkerHello) {
    // Not kcache's worker: it may never read its input (so never end by
    // itself). Just started and alive, so its pid is still its own.
    if (c->pid > 0) ::kill(c->pid, SIGKILL);
    c->stop();
    throw IoError(argv_[0] + " did not start as kcache's compile process (no answer within " +
                  std::to_string(kHelloMs / 1000) + " s)");
  }
  return c;
}

void NvrtcPool::give_back(std::unique_ptr<Child> child) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    taken_.erase(child.get());
    idle_.push_back(std::move(child));
  }
  returned_.notify_all();
}

void NvrtcPool::retire(std::unique_ptr<Child> child) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    taken_.erase(child.get());
  }
  child->stop();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --live_;
  }
  returned_.notify_all();  // a waiter for its PCH waits no more
}

// A child of ours to send `key`'s request to. Idle children whose ends the
// host took are dropped (their processes ended with the host's close); a
// new child's ends are ours, unless the host is closing descriptors under
// us right now: then this throws and the caller answers otherwise.
std::unique_ptr<NvrtcPool::Child> NvrtcPool::take_ours(const std::string& key, Route* route) {
  std::unique_ptr<Child> child = take(key, route);
  for (int tries = 0; !child->ends_are_ours(); ++tries) {
    retire(std::move(child));
    if (tries > max_children_) {
      throw IoError("the program closed or replaced the compile processes' descriptors");
    }
    child = take(key, route);
  }
  return child;
}

// Sends `request` to `child`; false (the child retired, counted as a
// death) where it cannot be written: the child ended.
bool NvrtcPool::send(std::unique_ptr<Child>& child, const std::string& request) {
  if (write_frame(child->to, request, /*socket=*/true)) return true;
  retire(std::move(child));
  ++deaths_in_a_row_;
  return false;
}

std::optional<std::string> NvrtcPool::await_frame(std::unique_ptr<Child>& child, int limit_ms) {
  const pid_t pid = child->pid;
  const Wait waited = wait_readable(child->from, pid, limit_ms, kStoppedCheckMs);
  if (waited == Wait::timed_out) return std::nullopt;
  if (waited == Wait::stopped) {
    // Stopped, so still alive: `pid` is still its own.
    ::kill(pid, SIGKILL);
    retire(std::move(child));
    ++deaths_in_a_row_;
    throw CompileProcessStopped("kcache's compile process (pid " + std::to_string(pid) +
                                ") was stopped (SIGSTOP, a debugger or a cgroup freezer) and "
                                "was given up");
  }
  std::string frame;
  if (read_frame(child->from, frame) == Frame::ok &&
      (!is_memfd_note(frame) || receive_memfd_frame(child->to, frame))) {
    return frame;
  }
  retire(std::move(child));
  ++deaths_in_a_row_;
  throw ended_without_answering();
}

IoError NvrtcPool::ended_without_answering() {
  // It died (NVRTC crashed, out of memory) or broke the framing: this
  // request fails; the next one starts a new child.
  return IoError("kcache's compile process ended without answering (crashed, out of memory or "
                 "killed)");
}

std::string NvrtcPool::await_answer(std::unique_ptr<Child>& child, const std::string& request) {
  if (!send(child, request)) throw ended_without_answering();
  return *await_frame(child, -1);
}

NvrtcPool::Call::Call(NvrtcPool& pool, std::unique_ptr<Child> child)
    : pool_(pool), child_(std::move(child)) {}

NvrtcPool::Call::~Call() {
  if (child_) give_up();
}

std::optional<std::string> NvrtcPool::Call::next(int limit_ms) {
  if (!child_) throw ended_without_answering();
  return pool_.await_frame(child_, limit_ms);
}

void NvrtcPool::Call::done() {
  pool_.deaths_in_a_row_ = 0;
  pool_.give_back(std::move(child_));
}

pid_t NvrtcPool::Call::give_up() {
  const pid_t pid = child_->pid;
  // Alive unless its output hung up just now: only then is `pid` surely
  // still its own (it is not our child: nothing holds the pid for us).
  if (!child_->ended() && pid > 0) ::kill(pid, SIGKILL);
  pool_.retire(std::move(child_));
  ++pool_.deaths_in_a_row_;
  return pid;
}

std::unique_ptr<NvrtcPool::Call> NvrtcPool::call(const std::string& request) {
  std::unique_ptr<Child> child = take_ours("program");
  if (!send(child, request)) throw ended_without_answering();
  return std::unique_ptr<Call>(new Call(*this, std::move(child)));
}

std::string NvrtcPool::exchange(const std::string& request) {
  // One kind of child for every program compile (no PCH: nothing to prefer).
  std::unique_ptr<Child> child = take_ours("program");
  std::string response = await_answer(child, request);
  deaths_in_a_row_ = 0;
  give_back(std::move(child));
  return response;
}

NvrtcOutput NvrtcPool::compile(const std::string& nvrtc_path, const NvrtcInput& input) {
  if (on_compile_) on_compile_();
  Route route;
  for (const std::string& o : input.options) route.key += o + '\n';
  route.key += '\0';
  route.key += pch_prefix(input.source);
  // Children without a PCH folder, and programs (pch.h), use no PCH.
  const bool routed = !scratch_.empty() && !input.program;
  std::unique_ptr<Child> child = take_ours(route.key, routed ? &route : nullptr);
  std::string request = encode_worker_request(nvrtc_path, input);
  if (!route.pch) request.insert(0, kNoPchMark);
  std::string response;
  try {
    response = await_answer(child, request);
  } catch (const CompileProcessStopped&) {
    throw;
  } catch (const IoError&) {
    return decode_worker_response("", kWorkerGone, input);  // throws what happened
  }
  try {
    NvrtcOutput out = decode_worker_response(response, 0, input);
    deaths_in_a_row_ = 0;
    give_back(std::move(child));
    return out;
  } catch (const CompileError&) {
    deaths_in_a_row_ = 0;
    give_back(std::move(child));  // a wrong source: the child is fine
    throw;
  } catch (...) {
    retire(std::move(child));
    throw;
  }
}

}  // namespace kcache::compiler
