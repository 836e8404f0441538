// Follows the supervisor's rule (supervisor.h): its buffers are made by the
// constructor, and it calls the kernel directly.
#include "compiler/seal/cpu_keeper.h"

#include <fcntl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "compiler/seal/raw_calls.h"

namespace kcache::compiler::seal {
namespace {

// Keeps thread `tid` (0: the calling one) on `cpu`.
bool pin(long tid, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return raw_syscall(SYS_sched_setaffinity, tid, sizeof set, reinterpret_cast<long>(&set)) == 0;
}

// The vDSO's clock (no system call: it runs at every path call), bound by
// the constructor's first call.
uint64_t monotonic_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(t.tv_nsec);
}

// Reads `path` into buf (at most cap - 1 bytes, NUL-terminated); its length.
size_t read_text(const char* path, char* buf, size_t cap) {
  long fd = raw_syscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t len = 0;
  for (long n; len + 1 < cap && (n = raw_syscall(SYS_read, fd, reinterpret_cast<long>(buf + len),
                                                 static_cast<long>(cap - 1 - len))) != 0;) {
    if (n == -EINTR) continue;
    if (n < 0) break;
    len += static_cast<size_t>(n);
  }
  raw_syscall(SYS_close, fd);
  buf[len] = '\0';
  return len;
}

// The decimal number at *at (skipping blanks), moving past it.
uint64_t number(const char*& at) {
  while (*at == ' ') ++at;
  uint64_t v = 0;
  for (; *at >= '0' && *at <= '9'; ++at) v = v * 10 + static_cast<uint64_t>(*at - '0');
  return v;
}

// Nanoseconds thread `tid` (0: the calling one) has run
// (/proc/self/task/TID/schedstat: "run_ns wait_ns slices").
uint64_t run_ns(long tid) {
  char path[64] = "/proc/thread-self/schedstat";
  if (tid != 0) {
    constexpr char kTask[] = "/proc/self/task/";
    std::memcpy(path, kTask, sizeof kTask);
    char digits[24];
    int n = 0;
    for (uint64_t v = static_cast<uint64_t>(tid); n == 0 || v; v /= 10) {
      digits[n++] = static_cast<char>('0' + v % 10);
    }
    size_t at = sizeof kTask - 1;
    while (n) path[at++] = digits[--n];
    std::memcpy(path + at, "/schedstat", sizeof "/schedstat");
  }
  char text[128];
  if (read_text(path, text, sizeof text) == 0) return 0;
  const char* p = text;
  return number(p);
}

}  // namespace

CpuKeeper::CpuKeeper(int cpu, const cpu_set_t& allowed, long tid)
    : cpu_(cpu), tid_(tid), allowed_(allowed) {
  if (cpu_ < 0) return;
  monotonic_ns();  // bound now: a first call through the PLT would enter the loader
  stat_.resize(size_t{1} << 18);
  idle_.assign(CPU_SETSIZE, 0);
  total_.assign(CPU_SETSIZE, 0);
}

void CpuKeeper::enter() const {
  if (cpu_ >= 0) pin(0, cpu_);  // refused: the pair crosses CPUs, slower, still answered
}

void CpuKeeper::judge(long caller) {
  if (cpu_ < 0 || caller != tid_) return;
  const uint64_t now = monotonic_ns();
  if (now - judged_ns_ < kJudgeEveryNs) return;
  const uint64_t ran = run_ns(tid_) + run_ns(0);
  const bool crowded =
      judged_ns_ != 0 && ran >= ran_ns_ && 4 * (ran - ran_ns_) < 3 * (now - judged_ns_);
  judged_ns_ = now;
  ran_ns_ = ran;
  if (!crowded) {
    sampled_ = false;
    return;
  }
  const int idlest = idlest_cpu();  // since the last look: used only if that was crowded too
  if (!sampled_) {
    sampled_ = true;
    return;
  }
  if (idlest < 0 || idlest == cpu_) return;
  // This thread first: the answer wakes the sealed thread on this CPU.
  if (!pin(0, idlest)) return;
  if (!pin(tid_, idlest)) {
    pin(0, cpu_);  // the sealed thread stays: so does this one
    return;
  }
  cpu_ = idlest;
  moves_++;
}

// The allowed CPU idlest since the last call, by /proc/stat's
//   cpuN user nice system idle iowait irq softirq steal ...
// lines; -1 where none was idle half that time (or at the first call).
int CpuKeeper::idlest_cpu() {
  const size_t len = read_text("/proc/stat", stat_.data(), stat_.size());
  if (len == 0) return -1;
  int best = -1;
  uint64_t best_idle = 0, best_total = 1;
  const char* const stop = stat_.data() + len;
  for (const char* line = stat_.data(); line < stop;) {
    const char* end =
        static_cast<const char*>(std::memchr(line, '\n', static_cast<size_t>(stop - line)));
    if (stop - line > 3 && line[0] == 'c' && line[1] == 'p' && line[2] == 'u' && line[3] >= '0' &&
        line[3] <= '9') {
      const char* p = line + 3;
      const uint64_t cpu = number(p);
      uint64_t field[8] = {};
      for (uint64_t& f : field) f = number(p);
      const uint64_t idle = field[3] + field[4];
      uint64_t total = 0;
      for (uint64_t f : field) total += f;
      if (cpu < CPU_SETSIZE && CPU_ISSET(cpu, &allowed_)) {
        // (iowait may go back: such a CPU is skipped this time.)
        const bool forward = idle >= idle_[cpu] && total >= total_[cpu];
        const uint64_t d_idle = idle - idle_[cpu], d_total = total - total_[cpu];
        // idle/total above best_idle/best_total, and at least half.
        if (forward && total_[cpu] != 0 && d_total > 0 && d_idle <= d_total &&
            2 * d_idle >= d_total && d_idle * best_total > best_idle * d_total) {
          best = static_cast<int>(cpu);
          best_idle = d_idle;
          best_total = d_total;
        }
        idle_[cpu] = idle;
        total_[cpu] = total;
      }
    }
    if (!end) break;
    line = end + 1;
  }
  return best;
}

}  // namespace kcache::compiler::seal
