//===- Trace.h - A timeline of spans, written as a Chrome trace -*- C++ -*-===//
//
// `mtrun --trace FILE` records what every rank does as spans (name, category, start,
// duration, arguments): each micro-batch's forward_backward, the data-parallel reduction,
// the optimizer step and checkpoint saves in today's loop; the pipeline executor's F, B, W
// and the time it waits for sends and receives (ScheduleExecutor.h). At the end the spans of
// every rank are gathered to rank 0 over the world communicator and written as one Chrome
// trace (the JSON that Perfetto and chrome://tracing load): a process per rank (pid = rank),
// one thread ("compute") per rank whose spans nest.
//
// Gathering over the communicator, rather than each rank writing a part for rank 0 to merge,
// works across hosts without a shared file system, and the job's one file appears at once.
//
// Clocks: every rank starts its clock when `TraceRecorder::start` returns after a barrier, so
// the ranks' timelines line up to within the barrier's skew even across hosts whose clocks
// differ (no wall clock is compared).
//
// A recorder is owned by one thread (the rank's training loop) and holds its spans in memory
// until the end; past kMaxTraceSpans it keeps counting but drops the rest (the file says how
// many were dropped).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_TRACE_H
#define MTC_RUNTIME_EXEC_TRACE_H

#include "runtime/comm/Communicator.h"
#include "runtime/support/Error.h"
#include "runtime/support/Json.h"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace mtc::rt {

/// The most spans one rank keeps (a few hundred bytes each in the file).
inline constexpr size_t kMaxTraceSpans = 1 << 20;

/// One recorded span, times in microseconds since the recorder's start.
struct TraceSpan {
  std::string name;     // "forward_backward", "F c1 m3"
  std::string category; // "compute", "communication", "optimizer", "checkpoint", "step"
  double startUs = 0;
  double durationUs = 0;
  JsonObject args;
};

class TraceRecorder {
public:
  using Clock = std::chrono::steady_clock;

  /// A recorder for `rank`, its clock started now (see start() for a common origin).
  explicit TraceRecorder(int rank) : rank_(rank), origin_(Clock::now()) {}

  /// Starts the clock of every rank of `world` together: after a barrier (collective; null:
  /// a job of one rank).
  Error start(Communicator *world);

  /// Records a span from `begin` to `end`.
  void record(std::string name, std::string category, Clock::time_point begin,
              Clock::time_point end, JsonObject args = {});

  /// Records the time from its creation to its destruction (or `finish`).
  class [[nodiscard]] Scope {
  public:
    Scope(TraceRecorder *recorder, std::string name, std::string category, JsonObject args = {})
        : recorder_(recorder), begin_(Clock::now()) {
      if (recorder_) {
        name_ = std::move(name);
        category_ = std::move(category);
        args_ = std::move(args);
      }
    }
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;
    ~Scope() { finish(); }
    void finish() {
      if (recorder_)
        recorder_->record(std::move(name_), std::move(category_), begin_, Clock::now(),
                          std::move(args_));
      recorder_ = nullptr;
    }

  private:
    TraceRecorder *recorder_;
    Clock::time_point begin_;
    std::string name_, category_;
    JsonObject args_;
  };

  const std::vector<TraceSpan> &spans() const { return spans_; }
  size_t dropped() const { return dropped_; }

  /// This rank's spans as Chrome trace events ("X" events with pid = rank, and the "M"
  /// events naming the process and thread).
  JsonArray events() const;

private:
  int rank_;
  Clock::time_point origin_;
  std::vector<TraceSpan> spans_;
  size_t dropped_ = 0;
};

/// Collective over `world` (null: one rank): rank 0 gathers every rank's events and writes
/// them to `file` as one Chrome trace; the others send theirs. Every rank calls it.
Error writeJobTrace(const TraceRecorder &recorder, Communicator *world,
                    const std::filesystem::path &file);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_TRACE_H
