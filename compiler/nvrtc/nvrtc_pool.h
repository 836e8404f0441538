// Long-lived NVRTC worker processes, for long-lived kcache processes (the
// Bazel persistent worker, `kcache prewarm`).
//
// compile_in_worker() (nvrtc_worker.h) starts a child per compile: it loads
// NVRTC and parses every header from scratch. A pool keeps its children
// (`kcache __nvrtc-worker --loop --pch-dir DIR`) between compiles, so each
// reuses its NVRTC and its precompiled headers (pch.h): the archs a kernel
// compiles for beyond the first get the same speed-up as the first.
//
// Same semantics per compile as compile_in_worker: the same request in, the
// same output or error out. A child that dies (NVRTC crashed) fails that
// compile only; the next compile starts a fresh child. Each child runs with
// its working directory in an empty private folder and its PCH files in
// another, under the pool's scratch folder. Children die with the pool: on
// destruction their stdin closes and they exit (and they ask the kernel to
// kill them if this process dies: PR_SET_PDEATHSIG in the __nvrtc-worker
// verb).
#pragma once

#include <unistd.h>

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "compiler/nvrtc/nvrtc.h"

namespace kcache::compiler {

// A compile process that stopped answering: stopped (SIGSTOP, a debugger, a
// cgroup freezer) while this process waited for it. It is killed; the
// caller answers otherwise (the drop-in: the real NVRTC).
class CompileProcessStopped : public IoError {
 public:
  explicit CompileProcessStopped(const std::string& message) : IoError(message) {}
};

class NvrtcPool {
  struct Child;

 public:
  // `argv`: the child command before "--loop", e.g. {"/usr/bin/kcache",
  // "__nvrtc-worker"}. `scratch`: an existing folder private to this process,
  // or empty for children without PCH that work in "/" (the drop-in's: it
  // leaves nothing behind in someone else's program). `max_children`: 0
  // means max(4, CPUs).
  //
  // Children start as posix_spawn starts them (never a fork of this
  // process; "clone" children, which wait() and SIGCHLD do not see), with
  // default signals, a process group of their own and no LD_PRELOAD. A
  // fork() of this process does not share them: its first compile starts
  // children of its own.
  NvrtcPool(std::vector<std::string> argv, std::string scratch, int max_children = 0);
  ~NvrtcPool();
  NvrtcPool(const NvrtcPool&) = delete;
  NvrtcPool& operator=(const NvrtcPool&) = delete;

  // Thread-safe. A PCH serves only compiles with the same options (-arch
  // included) and the same pch_prefix() (pch.h), and a child holds one
  // usable PCH at a time (the last it made: NVRTC's PCH heap is its
  // process's), so compiles are routed by that pair, their PCH key:
  // - to an idle child that holds the key's PCH;
  // - else, where a child holding it is busy and every CPU has a compile
  //   (children at work or starting, or idle holders that compiles wait
  //   for), this call waits for it, at most
  //   kWaitForPchMs: a use costs about a quarter of a plain compile, a new
  //   PCH more than one, and another child would only share the CPUs; it
  //   also waits where a CPU is free but the child it would go to would
  //   compile without PCH (see below): the uses queued cost less;
  // - else to an idle child that holds no PCH still wanted, else a new
  //   child while fewer than `max_children` live, else the idle child
  //   unused the longest. That child makes the key's PCH only where more
  //   compiles of the key are still to come (expect(); unknown counts as
  //   many) than kQueuedPerPch per child already holding it; otherwise it
  //   compiles without PCH and keeps the one it holds.
  NvrtcOutput compile(const std::string& nvrtc_path, const NvrtcInput& input);

  // Thread-safe. Says that `compiles` compiles (per option set) of sources
  // whose pch_prefix() is `prefix` will come (`kcache prewarm` knows its
  // whole list). Where nothing was said for a prefix, every compile may
  // make a PCH (the Bazel worker cannot know what comes).
  void expect(const std::string& prefix, int compiles);

  // What the routing asked the children for so far, for tests and benchmarks.
  struct PchCounts {
    int made = 0;    // compiles sent with -pch to a child that held no PCH for them
    int reused = 0;  // compiles sent to the child that held their PCH
    int plain = 0;   // compiles sent without PCH (none of their key was still to come)
    int waited = 0;  // compiles that waited for a busy holder
  };
  PchCounts pch_counts() const;

  // Thread-safe. At most `cpus` routed compiles run at once (prewarm's -j):
  // one that finds them all at work waits for a child to come back (with
  // no time limit, kWaitForPchMs included), so a caller may send more
  // compiles than CPUs and let each wait here for its PCH's holder rather
  // than compile elsewhere.
  // Without it, `cpus` is hardware_concurrency and decides only whether a
  // compile waits for its PCH's busy holder.
  void limit_cpus(int cpus);

  // Thread-safe. Says that `compiles` compiles will come in all (every
  // prefix and option set): with limit_cpus(), a compile leaves its PCH's
  // busy holder for a free CPU (to make a second PCH) only where its option
  // set's share of what is left is more than its holders' share of the CPUs.
  void expect_all(int compiles);

  // For tests: how many compiles at once fill the CPUs (hardware_concurrency).
  void set_cpus_for_testing(int cpus) { cpus_ = cpus; }

  static constexpr int kQueuedPerPch = 3;
  static constexpr int kWaitForPchMs = 30000;

  // Thread-safe. Sends one request of another kind (a program compile,
  // program_service.h) to a child and returns its answer. Throws IoError if
  // the child died or broke the framing (counted in deaths_in_a_row), and
  // CompileProcessStopped if it stopped (counted too).
  std::string exchange(const std::string& request);

  // One such request under way, for a caller that bounds each step of the
  // answer (the drop-in: a child may say "NVRTC starts" before it answers,
  // and a child that says nothing within a bound is wedged). Thread-safe
  // across calls; one Call belongs to one thread.
  class Call {
   public:
    ~Call();  // not done(): the child is given up, as by give_up()
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    // The child's next frame, or nothing if none came within `limit_ms`
    // (-1: no limit); then the child is still at work, or wedged. Throws as
    // exchange() does (the child is then retired already).
    std::optional<std::string> next(int limit_ms);
    // The last frame was the answer: the child goes back to the pool.
    void done();
    // Kills the child (it is alive: it answered nothing, and had not hung
    // up) and retires it, counted in deaths_in_a_row. Returns its pid.
    pid_t give_up();

   private:
    friend class NvrtcPool;
    Call(NvrtcPool& pool, std::unique_ptr<Child> child);
    NvrtcPool& pool_;
    std::unique_ptr<Child> child_;
  };
  // Sends `request` to a child; throws IoError as exchange() does.
  std::unique_ptr<Call> call(const std::string& request);

  // Runs `hook` at the start of each compile(), on the compiling thread
  // (program_service.h: the compile process tells the host that NVRTC
  // starts). Set before the first compile.
  void on_compile(std::function<void()> hook) { on_compile_ = std::move(hook); }

  // While a child works, this process checks it every this many
  // milliseconds: a child found stopped twice in a row is given up.
  static constexpr int kStoppedCheckMs = 100;

  // Children started so far (restarts included), for tests.
  int started() const;
  // Exchanges in a row in which a child died or answered nothing (0 after
  // any answer): a caller that sees it grow gives up on the pool.
  int deaths_in_a_row() const { return deaths_in_a_row_.load(); }

  // A host's fork() (pthread_atfork, nvrtc_shim/shim.cc): held across it so
  // the child never inherits the pool mid-change under a lock no thread of
  // its own will release. In the child, the parent's children are forgotten
  // and their ends closed at once (idle ones, and those another thread of
  // the parent was compiling with): a child that lives on (a daemon) must not
  // keep them open, or the parent's compile processes would never see their
  // input end.
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork(bool child = false) {
    if (child && ::getpid() != owner_) forget_the_parents_children();
    mutex_.unlock();
  }

 private:
  // A compile's PCH key and, once taken, whether its child makes or uses
  // the key's PCH (else it compiles without).
  struct Route {
    std::string key, prefix;
    bool pch = true;
  };
  std::unique_ptr<Child> take(const std::string& key, Route* route = nullptr);
  std::unique_ptr<Child> take_ours(const std::string& key, Route* route = nullptr);
  // Under mutex_ (held by `lock`): waits while routing says to wait for a
  // busy child that holds `route`'s PCH.
  void wait_for_holder(std::unique_lock<std::mutex>& lock, const Route& route);
  bool holder_idle(const std::string& key) const;
  int cpus_in_use() const;
  int holders(const std::string& key) const;
  int still_to_come(const std::string& key) const;
  bool elsewhere_plain(const std::string& key) const;
  bool room_for_another(const std::string& key) const;
  void route_to(Child& child, Route& route);
  // Its answer's frame, or throws (see exchange); retires a failed child.
  std::string await_answer(std::unique_ptr<Child>& child, const std::string& request);
  bool send(std::unique_ptr<Child>& child, const std::string& request);
  // The next frame within `limit_ms` (-1: no limit), or nothing; throws
  // (the child retired) where it stopped, ended or broke the framing.
  std::optional<std::string> await_frame(std::unique_ptr<Child>& child, int limit_ms);
  static IoError ended_without_answering();
  void forget_the_parents_children();
  std::unique_ptr<Child> take_idle(const std::string& key, bool routed);
  std::unique_ptr<Child> start_child(int n, const std::string& key);
  void give_back(std::unique_ptr<Child> child);
  void retire(std::unique_ptr<Child> child);  // kills and reaps a broken child

  std::vector<std::string> argv_;
  std::string scratch_;
  pid_t owner_;  // the process the children answer (a fork() is another)
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Child>> idle_;
  // Children out of idle_ for a compile right now (their threads own them):
  // a fork's child closes their ends too (unlock_after_fork).
  std::set<Child*> taken_;
  int started_ = 0;
  std::atomic<int> deaths_in_a_row_{0};
  int live_ = 0;
  int max_children_;
  int cpus_;
  bool limited_ = false;  // limit_cpus() was called
  int all_expected_ = 0;  // expect_all()
  int all_begun_ = 0;     // routed compiles so far
  std::function<void()> on_compile_;
  // Routing (compile()): a child back in idle_ or retired wakes waiters.
  std::condition_variable returned_;
  std::map<std::string, int> waiting_;   // per PCH key
  std::map<std::string, int> starting_;  // children being started, per PCH key
  std::map<std::string, int> begun_;     // compiles routed so far, per PCH key
  std::map<std::string, int> expected_;  // per prefix (expect())
  PchCounts counts_;
};

}  // namespace kcache::compiler
