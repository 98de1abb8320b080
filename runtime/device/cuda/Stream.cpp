//===- Stream.cpp - CUDA streams and events ------------------------------===//

#include "runtime/device/cuda/Stream.h"

#include "runtime/device/cuda/CudaError.h"

#include <utility>

namespace mtc::rt::cuda {

//===----------------------------------------------------------------------===//
// Stream
//===----------------------------------------------------------------------===//

Expected<Stream> Stream::create(std::string name, StreamPriority priority) {
  int least = 0, greatest = 0;
  if (Error e = cudaStatus(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                           concat("creating the ", name, " stream"));
      !e.ok())
    return e;
  cudaStream_t stream = nullptr;
  if (Error e = cudaStatus(
          cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking,
                                       priority == StreamPriority::High ? greatest : least),
          concat("creating the ", name, " stream"));
      !e.ok())
    return e;
  return Stream(stream, std::move(name));
}

Stream::Stream(Stream &&other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), name_(std::move(other.name_)) {}

Stream &Stream::operator=(Stream &&other) noexcept {
  if (this != &other) {
    if (stream_)
      (void)cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
    name_ = std::move(other.name_);
  }
  return *this;
}

Stream::~Stream() {
  // Work still queued completes; the stream's resources are released afterwards.
  if (stream_)
    (void)cudaStreamDestroy(stream_);
}

Error Stream::waitFor(const Event &event) const {
  return cudaStatus(cudaStreamWaitEvent(stream_, event.handle(), 0),
                    concat("making the ", name_, " stream wait for an event"));
}

Error Stream::synchronize() const {
  return cudaStatus(cudaStreamSynchronize(stream_), concat("synchronizing the ", name_, " stream"));
}

//===----------------------------------------------------------------------===//
// Event
//===----------------------------------------------------------------------===//

Expected<Event> Event::create(bool timing) {
  cudaEvent_t event = nullptr;
  if (Error e = cudaStatus(
          cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming),
          "creating an event");
      !e.ok())
    return e;
  return Event(event);
}

Event::Event(Event &&other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

Event &Event::operator=(Event &&other) noexcept {
  if (this != &other) {
    if (event_)
      (void)cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

Event::~Event() {
  if (event_)
    (void)cudaEventDestroy(event_);
}

Error Event::record(const Stream &stream) {
  return cudaStatus(cudaEventRecord(event_, stream.handle()),
                    concat("recording an event on the ", stream.name(), " stream"));
}

Error Event::synchronize() const {
  return cudaStatus(cudaEventSynchronize(event_), "waiting for an event");
}

Expected<bool> Event::completed() const {
  cudaError_t status = cudaEventQuery(event_);
  if (status == cudaSuccess)
    return true;
  if (status == cudaErrorNotReady)
    return false;
  return cudaStatus(status, "querying an event");
}

Expected<float> elapsedMilliseconds(const Event &start, const Event &end) {
  float ms = 0;
  if (Error e = cudaStatus(cudaEventElapsedTime(&ms, start.handle(), end.handle()),
                           "measuring the time between two events");
      !e.ok())
    return e;
  return ms;
}

//===----------------------------------------------------------------------===//
// RankStreams
//===----------------------------------------------------------------------===//

Expected<RankStreams> RankStreams::create() {
  Expected<Stream> compute = Stream::create("compute");
  if (!compute)
    return compute.takeError();
  Expected<Stream> collectives = Stream::create("collectives", StreamPriority::High);
  if (!collectives)
    return collectives.takeError();
  Expected<Stream> send = Stream::create("pipeline send", StreamPriority::High);
  if (!send)
    return send.takeError();
  Expected<Stream> recv = Stream::create("pipeline recv", StreamPriority::High);
  if (!recv)
    return recv.takeError();
  return RankStreams{std::move(*compute), std::move(*collectives), std::move(*send),
                     std::move(*recv)};
}

} // namespace mtc::rt::cuda
