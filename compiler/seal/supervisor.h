// The seal's supervisor: the thread that answers a sealed thread's path
// calls (seccomp user notification), records them and, serving, answers
// opens with snapshots (snapshots.h). Private to compiler/seal.
//
// THE SEAL'S INVARIANT. While a sealed thread is stopped inside a system call,
// the supervisor that must answer it waits for nothing that thread may hold.
// glibc opens files while holding its own locks (a malloc arena's, in
// heap_trim -> check_may_shrink_heap; the loader's, in dlopen; locale's), and
// the sealed thread is stopped until the answer comes: a supervisor that then
// allocated, used stdio, threw, or entered the loader could wait on the very
// lock the stopped thread holds, for good (found in a prewarm: both threads
// on the arena's futex). So the supervisor's code (this file's, and what it
// calls: raw_calls.h, cpu_keeper.h, record.h's append, snapshots.h's
// SnapshotCache and SnapshotServer), from the moment the sealed thread may
// run until it has been joined:
//  - touches only memory allocated before (RecordArena, mapped with mmap; the
//    Supervisor object) and its own stack;
//  - calls the kernel directly (raw_syscall: no libc wrapper, no errno, no
//    lazy binding) and otherwise only memcpy/memset/memchr and the vDSO's
//    clock_gettime (bound before), which lock nothing;
//  - never allocates, throws, logs or formats with libc.
// Everything that allocates (resolving names, removing repeats) runs after
// the sealed thread has been joined, on the arena's bytes.
// tests/compiler/seal_stress_test holds it to that under glibc tunables that
// make every free() trim a heap.
#pragma once

#include <linux/seccomp.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/seal/cpu_keeper.h"
#include "compiler/seal/record.h"
#include "compiler/seal/seal.h"
#include "compiler/seal/snapshots.h"

namespace kcache::compiler::seal {

// Where the dynamic loader's code lies in this process (its executable
// segments): a system call made from there is the loader's own.
struct LoaderCode {
  static constexpr size_t kMax = 4;
  uint64_t begin[kMax] = {}, end[kMax] = {};
  size_t count = 0;
};

// Found before the seal: dl_iterate_phdr takes the loader's lock.
LoaderCode find_loader_code();

// The sealed thread's call after `fn` (run_sealed): an openat of this
// descriptor, naming the run's Goodbye, which the filter sends to the
// supervisor like every path call; the supervisor answers it EBADF. Until
// then the supervisor waits in SECCOMP_IOCTL_NOTIF_RECV, where the kernel
// hands the CPU straight over (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP wakes only
// a RECV, not a poll()), but where nothing wakes it when the filter goes
// away; after it, in poll(), which sees that.
constexpr int kGoodbyeFd = -4127;
struct Goodbye {
  unsigned char token[16];  // random, per run: no other openat names it
};

// Answers the sealed thread's path calls (each runs as asked: the Landlock
// domain is the boundary, this only records) until, after its goodbye, the
// filter goes away with the thread (or the listener fails). Follows the
// invariant above: everything it uses is made by its constructor.
class Supervisor {
 public:
  // `policy` and `cwd_fd` (the sealed thread's working directory, open) only
  // matter when serving (SealPolicy::serve).
  Supervisor(int listener, const Goodbye& goodbye, RecordArena* arena, const SealPolicy& policy,
             int cwd_fd, const std::string& cwd, const LoaderCode& loader, CpuKeeper* keeper,
             const std::atomic<bool>* joined, SnapshotCache* known);

  // No allocation from here on (the invariant).
  void run();

  // Whether it gave up on a thread or process `fn` started, still alive.
  bool outlived() const { return outlived_; }

 private:
  static constexpr int kStragglerPolls = 10;  // a second

  bool from_loader(uint64_t ip) const;
  bool is_goodbye(const seccomp_data& d) const;
  size_t record(const seccomp_data& d, bool* at);

  int listener_;
  Goodbye goodbye_;
  RecordArena* arena_;
  const SealPolicy& policy_;
  LoaderCode loader_;
  CpuKeeper* keeper_;
  const std::atomic<bool>* joined_;  // run_sealed joined the sealed thread
  SnapshotServer server_;            // serving: the opens it answers with snapshots
  bool outlived_ = false;
  long pid_ = 0;
  std::vector<char> req_, resp_, path_, base_;  // sized before run()
};

}  // namespace kcache::compiler::seal
