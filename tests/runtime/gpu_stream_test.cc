// Streams and events on a real GPU, timed against a kernel that spins on the
// GPU's global timer for a given time.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "common/error.h"
#include "runtime/device.h"
#include "runtime/module.h"
#include "runtime/registry.h"
#include "runtime/stream.h"
#include "tests/runtime/gpu_test_util.h"

namespace kcache::runtime {
namespace {

using testing::DeviceBuffer;

class GpuStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KCACHE_REQUIRE_GPU();
    Device(0).set_current();
    done_ = std::make_unique<DeviceBuffer>(sizeof(int));
    done_->zero();
  }

  // Queues a one-thread kernel that runs for `ms` milliseconds of GPU time.
  void spin(StreamRef stream, double ms) {
    LaunchConfig config;  // 1 block of 1 thread
    unsigned long long ns = static_cast<unsigned long long>(ms * 1e6);
    launch(stream, config, embedded_module("kcache_tests_runtime_saxpy").function("spin"), ns,
           done_->get());
  }

  int done() const { return done_->to_vector<int>(1)[0]; }

  std::unique_ptr<DeviceBuffer> done_;
};

TEST_F(GpuStreamTest, IsCompleteIsFalseWhileALongKernelRunsAndTrueAfter) {
  Stream s = Stream::create();
  Event e = Event::create();
  EXPECT_TRUE(s.is_complete());
  spin(s, 300);
  e.record(s);
  EXPECT_FALSE(s.is_complete());
  EXPECT_FALSE(e.is_complete());
  s.synchronize();
  EXPECT_TRUE(s.is_complete());
  EXPECT_TRUE(e.is_complete());
  EXPECT_EQ(done(), 1);
}

TEST_F(GpuStreamTest, EventSynchronizeWaitsForTheRecordedWork) {
  Stream s = Stream::create();
  Event e = Event::create({/*timing=*/false, /*blocking_sync=*/true});
  spin(s, 100);
  e.record(s);
  EXPECT_FALSE(e.is_complete());
  e.synchronize();
  EXPECT_TRUE(e.is_complete());
}

TEST_F(GpuStreamTest, ElapsedIsPositiveAndConsistent) {
  Stream s = Stream::create();
  Event start = Event::create(), middle = Event::create(), end = Event::create();
  start.record(s);
  spin(s, 20);
  middle.record(s);
  spin(s, 30);
  end.record(s);
  s.synchronize();
  float first = elapsed_ms(start, middle), second = elapsed_ms(middle, end);
  float total = elapsed_ms(start, end);
  std::printf("elapsed: %.3f + %.3f = %.3f ms (spins of 20 and 30 ms)\n", first, second, total);
  EXPECT_GE(first, 20.0f);
  EXPECT_LT(first, 40.0f);
  EXPECT_GE(second, 30.0f);
  EXPECT_LT(second, 50.0f);
  EXPECT_NEAR(first + second, total, 0.01f);
  EXPECT_FLOAT_EQ(elapsed(start, end).count(), total);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed(start, end)).count(),
            static_cast<long>(total));
}

TEST_F(GpuStreamTest, ElapsedBeforeTheEndEventCompletesThrowsNotReady) {
  Stream s = Stream::create();
  Event start = Event::create(), end = Event::create();
  start.record(s);
  spin(s, 200);
  end.record(s);
  try {
    elapsed_ms(start, end);
    FAIL() << "expected DriverError";
  } catch (const DriverError& e) {
    EXPECT_EQ(e.result(), CUDA_ERROR_NOT_READY);
    EXPECT_EQ(e.result_name(), "CUDA_ERROR_NOT_READY");
  }
  s.synchronize();
  EXPECT_GT(elapsed_ms(start, end), 0.0f);
}

TEST_F(GpuStreamTest, AStreamWaitsForAnEventOfAnother) {
  Stream first = Stream::create(), second = Stream::create();
  Event e = Event::create(), after = Event::create();
  spin(first, 200);
  e.record(first);
  second.wait(e);
  after.record(second);
  EXPECT_FALSE(after.is_complete());
  second.synchronize();
  EXPECT_TRUE(first.is_complete());
  EXPECT_EQ(done(), 1);
}

TEST_F(GpuStreamTest, PrioritiesAndTheNonBlockingFlagReachTheStream) {
  auto [least, greatest] = Stream::priority_range();
  std::printf("stream priorities: least %d, greatest %d\n", least, greatest);
  EXPECT_LE(greatest, least);
  Stream high = Stream::create({/*non_blocking=*/true, greatest});
  EXPECT_EQ(high.priority(), greatest);
  EXPECT_EQ(high.flags(), static_cast<unsigned>(CU_STREAM_NON_BLOCKING));
  Stream low = Stream::create({/*non_blocking=*/false, least});
  EXPECT_EQ(low.priority(), least);
  EXPECT_EQ(low.flags(), static_cast<unsigned>(CU_STREAM_DEFAULT));
}

TEST_F(GpuStreamTest, DefaultStreamViewsWork) {
  spin(StreamRef::legacy_default(), 50);
  EXPECT_FALSE(StreamRef::legacy_default().is_complete());
  StreamRef::legacy_default().synchronize();
  EXPECT_TRUE(StreamRef::legacy_default().is_complete());
  spin(StreamRef::per_thread_default(), 1);
  StreamRef::per_thread_default().synchronize();
  EXPECT_TRUE(StreamRef::per_thread_default().is_complete());
}

TEST_F(GpuStreamTest, MovedFromOwnersAreEmptyAndTheNewOwnerWorks) {
  Stream a = Stream::create();
  Stream b = std::move(a);
  EXPECT_EQ(a.get(), nullptr);
  spin(b, 1);
  b.synchronize();
  Event e = Event::create();
  Event f = std::move(e);
  EXPECT_EQ(e.get(), nullptr);
  f.record(b);
  f.synchronize();
  EXPECT_TRUE(f.is_complete());
}

}  // namespace
}  // namespace kcache::runtime
