//===- Stream.h - CUDA streams and events -----------------------*- C++ -*-===//
//
// RAII owners of a cudaStream_t and a cudaEvent_t (movable, not copyable). A rank's work runs
// on separate streams so that collectives and pipeline transfers overlap computation; the
// schedule's order between them is kept with events: record an event on the producing
// stream, make the consuming stream wait for it (no host round trip).
//
// Streams are created non-blocking (no implicit synchronisation with the legacy default
// stream, which cuBLASLt or NCCL must never be handed); the collective and transfer streams
// get the device's highest priority so that communication, on the critical path of the
// pipeline and of the gradient reduction, is not queued behind compute kernels.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_DEVICE_CUDA_STREAM_H
#define MTC_RUNTIME_DEVICE_CUDA_STREAM_H

#include "runtime/support/Error.h"

#include <cuda_runtime_api.h>

#include <string>

namespace mtc::rt::cuda {

class Event;

enum class StreamPriority { Normal, High };

class Stream {
public:
  /// A non-blocking stream on the current device; `name` says what it is for in errors.
  static Expected<Stream> create(std::string name,
                                 StreamPriority priority = StreamPriority::Normal);

  Stream(Stream &&other) noexcept;
  Stream &operator=(Stream &&other) noexcept;
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  ~Stream();

  /// Work enqueued on this stream after this call waits until `event` has completed.
  Error waitFor(const Event &event) const;
  /// Blocks the host until all work enqueued so far has completed.
  Error synchronize() const;

  cudaStream_t handle() const { return stream_; }
  const std::string &name() const { return name_; }

private:
  Stream(cudaStream_t stream, std::string name) : stream_(stream), name_(std::move(name)) {}

  cudaStream_t stream_ = nullptr;
  std::string name_;
};

class Event {
public:
  /// An event on the current device; with `timing`, elapsedMilliseconds works on it
  /// (timing costs a little, so synchronisation-only events are created without).
  static Expected<Event> create(bool timing = false);

  Event(Event &&other) noexcept;
  Event &operator=(Event &&other) noexcept;
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;
  ~Event();

  /// Captures the work enqueued on `stream` so far.
  Error record(const Stream &stream);
  /// Blocks the host until the captured work has completed.
  Error synchronize() const;
  /// Whether the captured work has completed (true for an event never recorded).
  Expected<bool> completed() const;

  cudaEvent_t handle() const { return event_; }

private:
  explicit Event(cudaEvent_t event) : event_(event) {}

  cudaEvent_t event_ = nullptr;
};

/// Milliseconds between two completed timing events.
Expected<float> elapsedMilliseconds(const Event &start, const Event &end);

/// The streams of one rank: computation, collectives over the mesh axes, and the pipeline's
/// activation/gradient sends and receives (separate, so that a stage can receive the next
/// micro-batch while it sends the last one).
struct RankStreams {
  Stream compute;
  Stream collectives;
  Stream send;
  Stream recv;

  /// Creates the four streams on the current device.
  static Expected<RankStreams> create();
};

} // namespace mtc::rt::cuda

#endif // MTC_RUNTIME_DEVICE_CUDA_STREAM_H
