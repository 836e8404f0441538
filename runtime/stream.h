// Streams and events, after CCCL's cuda::stream_ref / cuda::stream.
//
// StreamRef and EventRef are non-owning views (a pointer's worth, copy freely);
// functions take them. Stream and Event own what they create, are move-only,
// and derive from the views, so an owner passes wherever a view is expected.
// Views cannot be built from 0 or nullptr: a literal 0 meaning "the legacy
// default stream" is a classic source of accidental serialisation; say
// StreamRef::legacy_default() when that is meant.
//
// Errors: every call that can fail throws DriverError naming the call, the
// object and the CUresult. Destructors never throw: a failure there is logged
// to stderr (except after the driver has shut down at process exit, when the
// resources are gone anyway).
//
// Thread safety: as the driver's: distinct objects from any thread; one
// object's const methods from several threads at once.
#pragma once

#include "common/cxx17.h"  // first: says so in one line below C++17

#include <cuda.h>

#include <chrono>
#include <cstddef>
#include <utility>

namespace kcache::runtime {

class EventRef;

class StreamRef {
 public:
  constexpr StreamRef(CUstream stream) noexcept : stream_(stream) {}  // NOLINT: implicit, like CCCL
  StreamRef(int) = delete;
  StreamRef(std::nullptr_t) = delete;

  // CU_STREAM_LEGACY: synchronises with every blocking stream of the context.
  static StreamRef legacy_default() noexcept { return StreamRef(CU_STREAM_LEGACY); }
  // CU_STREAM_PER_THREAD: the calling thread's default stream.
  static StreamRef per_thread_default() noexcept { return StreamRef(CU_STREAM_PER_THREAD); }

  CUstream get() const noexcept { return stream_; }

  // True when all work queued so far has finished (cuStreamQuery success),
  // false while some is pending (CUDA_ERROR_NOT_READY). Any other result, such
  // as a fault in an earlier kernel, throws DriverError with its name.
  bool is_complete() const;
  // Blocks until all queued work has finished; throws on failure as above.
  void synchronize() const;
  // Work queued on this stream after this call waits for `event` (as last
  // recorded) to complete. Does not block the host.
  void wait(EventRef event) const;
  // Lower numbers are higher priority (see Stream::priority_range()).
  int priority() const;
  // CU_STREAM_DEFAULT or CU_STREAM_NON_BLOCKING.
  unsigned flags() const;

  friend bool operator==(StreamRef a, StreamRef b) noexcept { return a.stream_ == b.stream_; }
  friend bool operator!=(StreamRef a, StreamRef b) noexcept { return a.stream_ != b.stream_; }

 protected:
  CUstream stream_;
};

struct StreamOptions {
  // Not synchronised with the legacy default stream (cuda.core's default).
  bool non_blocking = true;
  // Lower is higher priority; clamped by the driver to priority_range().
  int priority = 0;
};

class Stream : public StreamRef {
 public:
  // A new stream in the calling thread's current context (see
  // current_context()). Throws DriverError.
  static Stream create(const StreamOptions& options = {});

  // {least, greatest} priority of the current context, e.g. {0, -5}.
  static std::pair<int, int> priority_range();

  // Takes ownership of `stream`, which must have been created by
  // cuStreamCreate*; it is destroyed with this object.
  static Stream adopt(CUstream stream) noexcept { return Stream(stream); }

  Stream(Stream&& other) noexcept : StreamRef(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  // Destroys the stream without waiting for queued work (the driver finishes it).
  ~Stream();

  // Gives up ownership: the caller must destroy the returned stream.
  CUstream release() noexcept { return std::exchange(stream_, nullptr); }

 private:
  explicit Stream(CUstream stream) noexcept : StreamRef(stream) {}
};

class EventRef {
 public:
  constexpr EventRef(CUevent event) noexcept : event_(event) {}  // NOLINT: implicit, like CCCL
  EventRef(int) = delete;
  EventRef(std::nullptr_t) = delete;

  CUevent get() const noexcept { return event_; }

  // Captures the work queued on `stream` so far.
  void record(StreamRef stream) const;
  // True once the captured work has finished (or if never recorded), false
  // while pending (CUDA_ERROR_NOT_READY); any other result throws DriverError.
  bool is_complete() const;
  void synchronize() const;

  friend bool operator==(EventRef a, EventRef b) noexcept { return a.event_ == b.event_; }
  friend bool operator!=(EventRef a, EventRef b) noexcept { return a.event_ != b.event_; }

 protected:
  CUevent event_;
};

struct EventOptions {
  // Needed for elapsed(); events without timing are cheaper to record.
  bool timing = true;
  // synchronize() sleeps instead of spinning (CU_EVENT_BLOCKING_SYNC).
  bool blocking_sync = false;
};

class Event : public EventRef {
 public:
  // A new event in the calling thread's current context. Throws DriverError.
  static Event create(const EventOptions& options = {});

  // Takes ownership of `event`, created by cuEventCreate.
  static Event adopt(CUevent event) noexcept { return Event(event); }

  Event(Event&& other) noexcept : EventRef(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  CUevent release() noexcept { return std::exchange(event_, nullptr); }

 private:
  explicit Event(CUevent event) noexcept : EventRef(event) {}
};

// Time between two recorded, completed timing events, in milliseconds (about
// 0.5 us resolution). Throws DriverError: CUDA_ERROR_NOT_READY if either has
// not completed, CUDA_ERROR_INVALID_HANDLE if either was never recorded or has
// no timing.
float elapsed_ms(EventRef start, EventRef end);

// The same as a std::chrono duration.
inline std::chrono::duration<float, std::milli> elapsed(EventRef start, EventRef end) {
  return std::chrono::duration<float, std::milli>(elapsed_ms(start, end));
}

}  // namespace kcache::runtime
