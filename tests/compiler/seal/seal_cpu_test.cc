// SealPolicy::one_cpu (issue 27): the sealed thread and its supervisor share
// one CPU, and move when another thread holds it. Two compiles pinned to the
// CPU each started on shared it for their whole length on a lent host (each
// at twice NVRTC's time) while other CPUs idled.
#include "compiler/seal/seal.h"

#include <sched.h>
#include <sys/stat.h>

#include <atomic>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
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

// Per CPU: idle and total ticks so far (/proc/stat).
std::map<int, std::pair<uint64_t, uint64_t>> cpu_ticks() {
  std::map<int, std::pair<uint64_t, uint64_t>> out;
  std::ifstream stat("/proc/stat");
  for (std::string line; std::getline(stat, line);) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 ||
        !std::isdigit(static_cast<unsigned char>(line[3])))
      continue;
    std::istringstream fields(line.substr(3));
    int cpu;
    uint64_t f[8] = {};
    fields >> cpu;
    for (uint64_t& v : f) fields >> v;
    uint64_t total = 0;
    for (uint64_t v : f) total += v;
    out[cpu] = {f[3] + f[4], total};
  }
  return out;
}

// A thread that spins on the sealed thread's CPU, which keeps naming
// paths: the pair moves to another CPU, and ends there. (It can only where
// another CPU is idle at least half the time: on a loaded machine the test
// tries again, and says it could not try where no CPU ever was.)
TEST_F(SealCpuTest, ThePairMovesOffACpuAnotherThreadHolds) {
  if (cpus_in(allowed_) < 2) GTEST_SKIP() << "one CPU: nowhere to move";
  SealPolicy policy;
  policy.one_cpu = true;
  const std::string file = dir_ / "x";
  for (int attempt = 0; attempt < 5; ++attempt) {
    int first = -1, last = -1;
    std::atomic<bool> stop{false};
    std::thread spinner;
    const auto before = cpu_ticks();
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
      for (auto end = Clock::now() + std::chrono::milliseconds(800); Clock::now() < end;) {
        ::stat(file.c_str(), &st);
      }
      last = ::sched_getcpu();
      stop = true;
      spinner.join();
    });
    ASSERT_TRUE(r.sealed) << r.why;
    if (r.cpu_moves >= 1) {
      EXPECT_NE(last, first) << "moves: " << r.cpu_moves;
      return;
    }
    // No move: was another allowed CPU idle (three quarters of the time)?
    const auto after = cpu_ticks();
    for (const auto& [cpu, ticks] : after) {
      auto was = before.find(cpu);
      if (cpu == first || was == before.end() || !CPU_ISSET(cpu, &allowed_)) continue;
      const uint64_t idle = ticks.first - was->second.first,
                     total = ticks.second - was->second.second;
      EXPECT_FALSE(total > 0 && 4 * idle >= 3 * total)
          << "CPU " << cpu << " was idle " << idle << " of " << total
          << " ticks, and the pair stayed on CPU " << first;
    }
    if (HasFailure()) return;
  }
  GTEST_SKIP() << "no other CPU was idle in five tries: the move could not be tried";
}

}  // namespace
}  // namespace kcache::compiler
