//===- ScheduleExecutor.cpp - One pipeline stage's task list, run for a step ---===//

#include "runtime/exec/ScheduleExecutor.h"

#include "runtime/comm/ElementTypes.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

namespace mtc::rt {

StageCompute::~StageCompute() = default;

namespace {

using Clock = std::chrono::steady_clock;

double secondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// "F c1 mb3": the short name of a compute task on the timeline.
std::string spanName(const ScheduleTask &t) {
  std::string_view letter = t.op == TaskOp::Forward         ? "F"
                            : t.op == TaskOp::Backward      ? "BW"
                            : t.op == TaskOp::BackwardInput ? "B"
                                                            : "W";
  return concat(letter, " c", t.chunk, " mb", t.microBatch);
}

bool sameMessage(const ScheduleTask &a, TaskOp op, int32_t chunk, int32_t microBatch) {
  return a.op == op && a.chunk == chunk && a.microBatch == microBatch;
}

bool overlaps(const MessageBuffer &a, const MessageBuffer &b) {
  auto *x = static_cast<const std::byte *>(a.data), *y = static_cast<const std::byte *>(b.data);
  size_t xn = a.count * elementSize(a.type), yn = b.count * elementSize(b.type);
  return xn > 0 && yn > 0 && x < y + yn && y < x + xn;
}

/// A send or receive in flight.
struct InFlight {
  const ScheduleTask *task;
  MessageBuffer buffer;
  Work work;
};

/// The state of one step on one stage.
class StepRun {
public:
  StepRun(const StageTasks &tasks, int stage, const PipelineLinks *links, TraceRecorder *trace,
          StageCompute &compute, const std::vector<std::vector<size_t>> &releasedAt)
      : tasks_(tasks.tasks), inFlightLimit_(tasks.inFlight), stage_(stage), links_(links),
        trace_(trace), compute_(compute), releasedAt_(releasedAt) {}

  Expected<StageStepTimes> run();

private:
  /// "stage 1: <what>".
  Error stageError(std::string_view what, const Error &cause) const {
    return makeError("stage ", stage_, ": ", what, ": ", cause.message());
  }
  /// The failure of a send or receive, naming its peer.
  Error messageError(const ScheduleTask &t, const Error &cause) const {
    return makeError("stage ", stage_, ": ", describeTask(t), isSendTask(t.op) ? " to" : " from",
                     " stage ", t.peer, " failed: ", cause.message());
  }
  Expected<MessageBuffer> bufferOf(const ScheduleTask &t) {
    Expected<MessageBuffer> b = compute_.message(t);
    if (!b)
      return stageError(concat("the buffer of ", describeTask(t)), b.error());
    return b;
  }
  /// Whether `buffer` overlaps a buffer the executor holds.
  bool held(const MessageBuffer &buffer) const {
    auto hit = [&](const InFlight &m) { return overlaps(m.buffer, buffer); };
    return std::any_of(receives_.begin(), receives_.end(), hit) ||
           std::any_of(sends_.begin(), sends_.end(), hit);
  }
  /// Waits for `m` (recording the wait); its error names the task and peer.
  Error wait(InFlight &m);
  /// Waits for the sends whose buffers overlap `buffer` and drops those finished.
  Error releaseSends(const std::optional<MessageBuffer> &buffer);
  /// Posts the receives ahead of task `current` whose buffers are free, in list order.
  Error postReceives(size_t current);
  /// Runs compute task `current`.
  Error runCompute(size_t current);

  const std::vector<ScheduleTask> &tasks_;
  int64_t inFlightLimit_;
  int stage_;
  const PipelineLinks *links_;
  TraceRecorder *trace_;
  StageCompute &compute_;
  const std::vector<std::vector<size_t>> &releasedAt_;

  size_t nextReceive_ = 0; // the next task to look at for an early receive
  std::vector<InFlight> receives_, sends_;
  int64_t activations_ = 0;
  Clock::time_point start_;
  StageStepTimes times_;
};

Error StepRun::wait(InFlight &m) {
  if (m.work.test()) { // finished already: no wait to record
    Error err = m.work.wait();
    return err.ok() ? Error::success() : messageError(*m.task, err);
  }
  TraceRecorder::Scope span(trace_, concat("wait ", describeTask(*m.task)), "communication",
                            {{"peer", m.task->peer}});
  Error err = m.work.wait();
  return err.ok() ? Error::success() : messageError(*m.task, err);
}

Error StepRun::releaseSends(const std::optional<MessageBuffer> &buffer) {
  for (auto it = sends_.begin(); it != sends_.end();) {
    bool mustWait = buffer && overlaps(it->buffer, *buffer);
    if (!mustWait && !it->work.test()) {
      ++it;
      continue;
    }
    if (Error err = wait(*it); !err.ok())
      return err;
    it = sends_.erase(it);
  }
  return Error::success();
}

Error StepRun::postReceives(size_t current) {
  for (size_t limit = receiveWindowEnd(tasks_, current); nextReceive_ < limit; ++nextReceive_) {
    const ScheduleTask &t = tasks_[nextReceive_];
    if (!isRecvTask(t.op))
      continue;
    Expected<MessageBuffer> buffer = bufferOf(t);
    if (!buffer)
      return buffer.takeError();
    if (held(*buffer))
      return Error::success(); // posted once the buffer is free
    receives_.push_back(InFlight{&t, *buffer,
                                 links_->from(t.peer)->startRecv(buffer->data, buffer->count,
                                                                 buffer->type,
                                                                 PipelineLinks::kSenderRank)});
  }
  return Error::success();
}

Error StepRun::runCompute(size_t current) {
  const ScheduleTask &t = tasks_[current];
  // Its input: a received activation (forward) or gradient (backward, backward_input).
  std::optional<InFlight> input;
  TaskOp inputOp = t.op == TaskOp::Forward ? TaskOp::RecvActivation : TaskOp::RecvGradient;
  if (t.op != TaskOp::BackwardWeight)
    for (auto it = receives_.begin(); it != receives_.end(); ++it)
      if (sameMessage(*it->task, inputOp, t.chunk, t.microBatch)) {
        if (Error err = wait(*it); !err.ok())
          return err;
        input.emplace(std::move(*it));
        receives_.erase(it);
        break;
      }
  // The sends known to have arrived now (the message just waited for was sent after their
  // peer read them): their waits return at once, and the compute frees their buffers, at
  // this fixed point of the list (which the stage's predicted memory counts on).
  for (size_t k : releasedAt_[current]) {
    const ScheduleTask *send = &tasks_[k];
    for (auto it = sends_.begin(); it != sends_.end(); ++it)
      if (it->task == send) {
        if (Error err = wait(*it); !err.ok())
          return err;
        sends_.erase(it);
        break;
      }
    compute_.sent(*send);
  }
  // Its output: the buffer of its send, which a send still in flight may be reading. The
  // send comes after the task (the loader checks it), usually right after.
  std::optional<MessageBuffer> output;
  TaskOp outputOp = t.op == TaskOp::Forward ? TaskOp::SendActivation : TaskOp::SendGradient;
  if (t.op != TaskOp::BackwardWeight)
    for (const ScheduleTask &s : std::span(tasks_).subspan(current + 1))
      if (sameMessage(s, outputOp, t.chunk, t.microBatch)) {
        Expected<MessageBuffer> b = bufferOf(s);
        if (!b)
          return b.takeError();
        output = *b;
        break;
      }
  if (Error err = releaseSends(output); !err.ok())
    return err;

  if (t.op == TaskOp::Forward && ++activations_ > inFlightLimit_)
    return makeError("stage ", stage_, ": ", describeTask(t), " would hold ", activations_,
                     " activations, more than the schedule's in_flight ", inFlightLimit_);
  if (t.op == TaskOp::Backward || t.op == TaskOp::BackwardInput)
    --activations_;

  TraceRecorder::Scope span(trace_, spanName(t), "compute",
                            {{"chunk", t.chunk}, {"micro_batch", t.microBatch}});
  Clock::time_point begin = Clock::now();
  Error err = compute_.compute(t);
  Clock::time_point end = Clock::now();
  times_.busy += secondsBetween(begin, end);
  times_.computeSpan = secondsBetween(start_, end);
  return err.ok() ? Error::success() : stageError(describeTask(t), err);
}

Expected<StageStepTimes> StepRun::run() {
  start_ = Clock::now();
  for (const ScheduleTask &t : tasks_) {
    const size_t current = static_cast<size_t>(&t - tasks_.data());
    if (Error err = postReceives(current); !err.ok())
      return err;
    switch (t.op) {
    case TaskOp::RecvActivation:
    case TaskOp::RecvGradient: {
      // Posted early unless its buffer was held: then by a send (a receive into the buffer of
      // an unconsumed receive would be a StageCompute that hands out one buffer twice).
      if (nextReceive_ > current)
        break;
      Expected<MessageBuffer> buffer = bufferOf(t);
      if (!buffer)
        return buffer.takeError();
      if (Error err = releaseSends(*buffer); !err.ok())
        return err;
      if (held(*buffer))
        return makeError("stage ", stage_, ": the buffer of ", describeTask(t),
                         " overlaps the buffer of a receive not yet consumed");
      if (Error err = postReceives(current); !err.ok())
        return err;
      break;
    }
    case TaskOp::SendActivation:
    case TaskOp::SendGradient: {
      Expected<MessageBuffer> buffer = bufferOf(t);
      if (!buffer)
        return buffer.takeError();
      sends_.push_back(InFlight{&t, *buffer,
                                links_->to(t.peer)->startSend(buffer->data, buffer->count,
                                                              buffer->type,
                                                              PipelineLinks::kReceiverRank)});
      break;
    }
    case TaskOp::ReduceGradients: {
      TraceRecorder::Scope span(trace_, "reduce_gradients", "communication");
      if (Error err = compute_.reduceGradients(); !err.ok())
        return stageError("reduce_gradients", err);
      break;
    }
    case TaskOp::OptimizerStep: {
      TraceRecorder::Scope span(trace_, "optimizer_step", "optimizer");
      if (Error err = compute_.optimizerStep(); !err.ok())
        return stageError("optimizer_step", err);
      break;
    }
    default:
      if (Error err = runCompute(current); !err.ok())
        return err;
      break;
    }
  }
  for (InFlight &m : sends_)
    if (Error err = wait(m); !err.ok())
      return err;
  sends_.clear();
  return times_;
}

} // namespace

Expected<ScheduleExecutor> ScheduleExecutor::create(const PipelineSchedule &schedule, int stage,
                                                    const PipelineLinks *links,
                                                    TraceRecorder *trace) {
  int stages = static_cast<int>(schedule.stages.size());
  if (stage < 0 || stage >= stages)
    return makeError("stage ", stage, " is not a stage of the schedule (", stages, " stages)");
  if (stages > 1 && !links)
    return makeError("a schedule of ", stages, " stages needs the links between its stages");
  if (links && (links->stages() != stages || links->stage() != stage))
    return makeError("the links are stage ", links->stage(), "'s of ", links->stages(),
                     " stages, but the schedule has ", stages, " stages and this is stage ",
                     stage);
  // Every send and receive has its link (links made for other schedules may lack one).
  for (const ScheduleTask &t : schedule.stages[static_cast<size_t>(stage)].tasks)
    if ((isSendTask(t.op) && !links->to(t.peer)) || (isRecvTask(t.op) && !links->from(t.peer)))
      return makeError("stage ", stage, ": no link ", isSendTask(t.op) ? "to" : "from",
                       " stage ", t.peer, " for ", describeTask(t),
                       " (the links were made for other schedules)");
  const std::vector<ScheduleTask> &tasks = schedule.stages[static_cast<size_t>(stage)].tasks;
  std::vector<size_t> releases = sendReleases(schedule.stages, stage);
  std::vector<std::vector<size_t>> releasedAt(tasks.size());
  for (size_t k = 0; k < tasks.size(); ++k)
    if (releases[k] < tasks.size())
      releasedAt[releases[k]].push_back(k);
  return ScheduleExecutor(schedule.stages[static_cast<size_t>(stage)], stage, links, trace,
                          std::move(releasedAt));
}

Expected<StageStepTimes> ScheduleExecutor::runStep(StageCompute &compute) {
  return StepRun(*tasks_, stage_, links_, trace_, compute, releasedAt_).run();
}

Expected<std::vector<double>> measureBubbleFractions(Communicator *pipeline,
                                                     std::span<const StageStepTimes> steps) {
  std::vector<double> spans;
  double busy = 0;
  for (const StageStepTimes &s : steps) {
    spans.push_back(s.computeSpan);
    busy += s.busy;
  }
  if (pipeline && !spans.empty())
    if (Error err = pipeline->allReduce(spans.data(), spans.size(), MTC_F64, MTC_MAX); !err.ok())
      return std::move(err).withContext("measuring the pipeline bubble");
  double span = 0;
  for (double s : spans)
    span += s;
  double fraction = span > 0 ? std::clamp(1.0 - busy / span, 0.0, 1.0) : 0.0;
  std::vector<double> all(pipeline ? static_cast<size_t>(pipeline->size()) : 1, fraction);
  if (pipeline)
    if (Error err = pipeline->allGather(&fraction, all.data(), 1, MTC_F64); !err.ok())
      return std::move(err).withContext("measuring the pipeline bubble");
  return all;
}

std::string describeBubbles(const PipelineSchedule &schedule, std::span<const double> measured) {
  auto fixed = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    return std::string(buf);
  };
  std::string out = "pipeline bubble:";
  for (size_t s = 0; s < measured.size() && s < schedule.stages.size(); ++s)
    out.append(s ? ", " : " ")
        .append(concat("stage ", s, ' ', fixed(measured[s]), " (schedule ",
                       fixed(schedule.stages[s].bubbleFraction), ")"));
  return out;
}

} // namespace mtc::rt
