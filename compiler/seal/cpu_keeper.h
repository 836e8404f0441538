// Keeping the sealed thread and its supervisor on one CPU. Private to
// compiler/seal.
#pragma once

#include <sched.h>

#include <cstdint>
#include <vector>

namespace kcache::compiler::seal {

// SealPolicy::one_cpu, on the supervisor's side: it and the sealed thread
// share one CPU, and where the sealed thread waits for that CPU (another
// thread pinned there too) both move to the allowed CPU idlest since the
// last look. Follows the supervisor's invariant: its buffers are made by the
// constructor, and it calls the kernel directly.
class CpuKeeper {
 public:
  // `cpu`: the one both start on (-1: none kept); `allowed`: the CPUs the
  // sealed thread (`tid`) could use before it was pinned.
  CpuKeeper(int cpu, const cpu_set_t& allowed, long tid);

  // On the supervisor's thread, before its first answer.
  void enter() const;

  // At a path call of thread `caller` (stopped until it is answered): every
  // kJudgeEveryNs of the sealed thread's calls, whether the pair ran less
  // than 3/4 of that time. (Alone on its CPU a compiling pair runs all the
  // time, one thread or the other; the sealed thread's run-queue wait alone
  // says little: the scheduler favours a thread that sleeps at every path
  // call.) Crowded twice running, both move to the CPU idlest between the
  // two looks (/proc/stat is read only then).
  void judge(long caller);

  int moves() const { return moves_; }

 private:
  static constexpr uint64_t kJudgeEveryNs = 50'000'000;

  int idlest_cpu();

  int cpu_;
  long tid_;
  cpu_set_t allowed_;
  uint64_t judged_ns_ = 0, ran_ns_ = 0;
  bool sampled_ = false;  // the last look was crowded too: /proc/stat read then
  int moves_ = 0;
  std::vector<char> stat_;
  std::vector<uint64_t> idle_, total_;  // per CPU, at the last look
};

}  // namespace kcache::compiler::seal
