#include "runtime/stream.h"

#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/log.h"

namespace kcache::runtime {
namespace {

std::string stream_subject(CUstream s) { return detail::describe("stream", s); }
std::string event_subject(CUevent e) { return detail::describe("event", e); }

}  // namespace

// The hot queries: one indirect call and one compare on success, the message
// is only built on failure.
bool StreamRef::is_complete() const {
  CUresult r = driver().cuStreamQuery(stream_);
  if (r == CUDA_SUCCESS) return true;
  if (r == CUDA_ERROR_NOT_READY) return false;
  throw_driver_error(r, "cuStreamQuery", stream_subject(stream_));
}

void StreamRef::synchronize() const {
  CUresult r = driver().cuStreamSynchronize(stream_);
  if (r != CUDA_SUCCESS) throw_driver_error(r, "cuStreamSynchronize", stream_subject(stream_));
}

void StreamRef::wait(EventRef event) const {
  CUresult r = driver().cuStreamWaitEvent(stream_, event.get(), CU_EVENT_WAIT_DEFAULT);
  if (r != CUDA_SUCCESS) throw_driver_error(r, "cuStreamWaitEvent", stream_subject(stream_));
}

int StreamRef::priority() const {
  int priority = 0;
  CUresult r = driver().cuStreamGetPriority(stream_, &priority);
  if (r != CUDA_SUCCESS) throw_driver_error(r, "cuStreamGetPriority", stream_subject(stream_));
  return priority;
}

unsigned StreamRef::flags() const {
  unsigned flags = 0;
  CUresult r = driver().cuStreamGetFlags(stream_, &flags);
  if (r != CUDA_SUCCESS) throw_driver_error(r, "cuStreamGetFlags", stream_subject(stream_));
  return flags;
}

Stream Stream::create(const StreamOptions& options) {
  const Driver& d = driver();
  current_context();
  CUstream stream = nullptr;
  unsigned flags = options.non_blocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT;
  check(d.cuStreamCreateWithPriority(&stream, flags, options.priority),
        "cuStreamCreateWithPriority", "the current context");
  return Stream(stream);
}

std::pair<int, int> Stream::priority_range() {
  current_context();
  int least = 0, greatest = 0;
  check(driver().cuCtxGetStreamPriorityRange(&least, &greatest), "cuCtxGetStreamPriorityRange",
        "the current context");
  return {least, greatest};
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    Stream old(std::exchange(stream_, std::exchange(other.stream_, nullptr)));
  }
  return *this;
}

Stream::~Stream() {
  if (!stream_) return;
  // driver() cannot fail here: the stream exists, so the driver was loaded.
  CUresult r = driver().cuStreamDestroy(stream_);
  detail::log_failure(r, "cuStreamDestroy", stream_subject(stream_));
}

void EventRef::record(StreamRef stream) const {
  CUresult r = driver().cuEventRecord(event_, stream.get());
  if (r != CUDA_SUCCESS) {
    throw_driver_error(r, "cuEventRecord",
                       event_subject(event_) + " in " + stream_subject(stream.get()));
  }
}

bool EventRef::is_complete() const {
  CUresult r = driver().cuEventQuery(event_);
  if (r == CUDA_SUCCESS) return true;
  if (r == CUDA_ERROR_NOT_READY) return false;
  throw_driver_error(r, "cuEventQuery", event_subject(event_));
}

void EventRef::synchronize() const {
  CUresult r = driver().cuEventSynchronize(event_);
  if (r != CUDA_SUCCESS) throw_driver_error(r, "cuEventSynchronize", event_subject(event_));
}

Event Event::create(const EventOptions& options) {
  const Driver& d = driver();
  current_context();
  unsigned flags = CU_EVENT_DEFAULT;
  if (!options.timing) flags |= CU_EVENT_DISABLE_TIMING;
  if (options.blocking_sync) flags |= CU_EVENT_BLOCKING_SYNC;
  CUevent event = nullptr;
  check(d.cuEventCreate(&event, flags), "cuEventCreate", "the current context");
  return Event(event);
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    Event old(std::exchange(event_, std::exchange(other.event_, nullptr)));
  }
  return *this;
}

Event::~Event() {
  if (!event_) return;
  CUresult r = driver().cuEventDestroy(event_);
  detail::log_failure(r, "cuEventDestroy", event_subject(event_));
}

float elapsed_ms(EventRef start, EventRef end) {
  float ms = 0.0f;
  CUresult r = driver().cuEventElapsedTime(&ms, start.get(), end.get());
  if (r != CUDA_SUCCESS) {
    throw_driver_error(r, "cuEventElapsedTime",
                       event_subject(start.get()) + " and " + event_subject(end.get()));
  }
  return ms;
}

}  // namespace kcache::runtime
