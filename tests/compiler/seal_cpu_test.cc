// SealPolicy::one_cpu (issue 27): the sealed thread and its supervisor share
// one CPU, and move when another thread holds it. Two compiles pinned to the
// CPU each started on shared it for their whole length on a lent host (each
// at twice NVRTC's time) while other CPUs idled.
#include "compiler/seal/seal.h"

#include <sched.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "tests/testing/temp_dir.h"

namespace kcache::compiler {
namespace {

using Clock = std::chrono::steady_clock;

class SealCpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!seal_available(&why)) GTEST_SKIP() << "no seal on this kernel: " << why;
    ASSERT_EQ(::sched_getaffinity(0, sizeof allowed_, &allowed_), 0);
  }
  cpu_set_t allowed_;
  testing::TempDir dir_;
};

int cpus_in(const cpu_set_t& set) { return CPU_COUNT(&set); }

TEST_F(SealCpuTest, OneCpuPinsTheSealedThreadAndOnlyThen) {
  cpu_set_t pinned, free;
  SealPolicy policy;
  policy.one_cpu = true;
  ASSERT_TRUE(run_sealed(policy, [&] { ::sched_getaffinity(0, sizeof pinned, &pinned); }).sealed);
  EXPECT_EQ(cpus_in(pinned), 1);
  policy.one_cpu = false;
  ASSERT_TRUE(run_sealed(policy, [&] { ::sched_getaffinity(0, sizeof free, &free); }).sealed);
  EXPECT_TRUE(CPU_EQUAL(&free, &allowed_));
}

// A thread that spins on the sealed thread's CPU, which keeps naming
// paths: the pair moves to another CPU, and ends there.
TEST_F(SealCpuTest, ThePairMovesOffACpuAnotherThreadHolds) {
  if (cpus_in(allowed_) < 2) GTEST_SKIP() << "one CPU: nowhere to move";
  SealPolicy policy;
  policy.one_cpu = true;
  const std::string file = dir_ / "x";
  int first = -1, last = -1;
  std::atomic<bool> stop{false};
  std::thread spinner;
  SealResult r = run_sealed(policy, [&] {
    first = ::sched_getcpu();
    spinner = std::thread([&, cpu = first] {  // sealed too: it names no path
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      ::sched_setaffinity(0, sizeof one, &one);
      while (!stop) {
      }
    });
    struct stat st;
    for (auto end = Clock::now() + std::chrono::milliseconds(600); Clock::now() < end;) {
      ::stat(file.c_str(), &st);
    }
    last = ::sched_getcpu();
    stop = true;
    spinner.join();
  });
  ASSERT_TRUE(r.sealed) << r.why;
  EXPECT_GE(r.cpu_moves, 1);
  EXPECT_NE(last, first) << "moves: " << r.cpu_moves;
}

}  // namespace
}  // namespace kcache::compiler
