//===- PipelineTestSchedules.h - Hand-built pipeline schedules for tests -*- C++ -*-===//
//
// Small builders of GPipe and 1F1B task lists (one chunk per stage) and of GPipe over several
// chunks per stage (any placement, optionally with the B/W split), with the compute
// tasks' unit-time start slots and bubble fractions from a simulation of the lists, and the
// "pipeline" JSON of a PipelinePlan, so that tests of the loader, the executor and the chart
// do not depend on the compiler's generator.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TEST_UNITTESTS_RUNTIME_PIPELINETESTSCHEDULES_H
#define MTC_TEST_UNITTESTS_RUNTIME_PIPELINETESTSCHEDULES_H

#include "runtime/plan/PipelineSchedule.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace mtc::rt::test {

enum class TestScheduleKind { GPipe, OneFOneB };

/// Fills every compute task's `start` and each stage's bubble fraction by running the lists
/// with unit times (F = B = W = 1, BW = 2): a task starts when its stage is free and its input
/// is ready (the forward of the chunk before, the backward of the chunk after, on whichever
/// stage). `chunks` is the number of model chunks.
inline void simulateStarts(PipelineSchedule &s, int chunks) {
  const size_t p = s.stages.size();
  // (F = 0 or backward = 1, chunk, micro-batch) -> end slot.
  std::map<std::tuple<int, int, int>, int64_t> ends;
  std::vector<size_t> next(p, 0);
  std::vector<int64_t> free(p, 0), busy(p, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t st = 0; st < p; ++st) {
      auto &tasks = s.stages[st].tasks;
      while (next[st] < tasks.size()) {
        ScheduleTask &t = tasks[next[st]];
        if (isComputeTask(t.op)) {
          int64_t ready = free[st];
          std::optional<std::tuple<int, int, int>> dep;
          if (t.op == TaskOp::Forward && t.chunk > 0)
            dep = {0, t.chunk - 1, t.microBatch};
          if ((t.op == TaskOp::Backward || t.op == TaskOp::BackwardInput) &&
              t.chunk + 1 < chunks)
            dep = {1, t.chunk + 1, t.microBatch};
          if (dep) {
            auto it = ends.find(*dep);
            if (it == ends.end())
              break;
            ready = std::max(ready, it->second);
          }
          t.start = ready;
          free[st] = ready + unitSlots(t.op);
          busy[st] += unitSlots(t.op);
          if (t.op != TaskOp::BackwardWeight)
            ends[{t.op == TaskOp::Forward ? 0 : 1, t.chunk, t.microBatch}] = free[st];
        }
        ++next[st];
        progress = true;
      }
    }
  }
  int64_t span = *std::max_element(free.begin(), free.end());
  for (size_t st = 0; st < p; ++st)
    s.stages[st].bubbleFraction = double(span - busy[st]) / double(span);
}

/// GPipe (all forwards, then all backwards) or 1F1B (warm-up forwards, then one forward one
/// backward, then the remaining backwards) on `stages` stages for `m` micro-batches.
inline PipelineSchedule buildSchedule(TestScheduleKind kind, int stages, int m) {
  PipelineSchedule s;
  s.microBatches = m;
  for (int st = 0; st < stages; ++st) {
    StageTasks stage;
    auto forward = [&](int i) {
      if (st > 0)
        stage.tasks.push_back({TaskOp::RecvActivation, st, i, st - 1});
      stage.tasks.push_back({TaskOp::Forward, st, i});
      if (st + 1 < stages)
        stage.tasks.push_back({TaskOp::SendActivation, st, i, st + 1});
    };
    auto backward = [&](int i) {
      if (st + 1 < stages)
        stage.tasks.push_back({TaskOp::RecvGradient, st, i, st + 1});
      stage.tasks.push_back({TaskOp::Backward, st, i});
      if (st > 0)
        stage.tasks.push_back({TaskOp::SendGradient, st, i, st - 1});
    };
    if (kind == TestScheduleKind::GPipe) {
      for (int i = 0; i < m; ++i)
        forward(i);
      for (int i = 0; i < m; ++i)
        backward(i);
    } else {
      int warmup = std::min(stages - 1 - st, m);
      for (int i = 0; i < warmup; ++i)
        forward(i);
      for (int k = 0; k + warmup < m; ++k) {
        forward(warmup + k);
        backward(k);
      }
      for (int i = m - warmup; i < m; ++i)
        backward(i);
    }
    stage.tasks.push_back({TaskOp::ReduceGradients});
    stage.tasks.push_back({TaskOp::OptimizerStep});
    stage.inFlight = peakInFlight(stage.tasks);
    s.stages.push_back(std::move(stage));
  }
  simulateStarts(s, stages);
  return s;
}

/// GPipe over model chunks placed on stages by `chunkStages` (any placement: Megatron's
/// interleaved c % P, ZB-V's V shape with its local hand-over between consecutive chunks on
/// one stage): each stage runs the forwards of its chunks in ascending chunk order, then
/// their backwards in descending order, every micro-batch at each. With `splitBackward` the
/// backwards are B, and every W comes after all of them, before the reduction.
inline PipelineSchedule buildChunkedGPipe(const std::vector<int64_t> &chunkStages, int stages,
                                          int m, bool splitBackward) {
  const int chunks = static_cast<int>(chunkStages.size());
  auto stageOf = [&](int c) { return static_cast<int>(chunkStages[static_cast<size_t>(c)]); };
  PipelineSchedule s;
  s.microBatches = m;
  for (int st = 0; st < stages; ++st) {
    StageTasks stage;
    for (int c = 0; c < chunks; ++c) {
      if (stageOf(c) != st)
        continue;
      for (int i = 0; i < m; ++i) {
        if (c > 0 && stageOf(c - 1) != st)
          stage.tasks.push_back({TaskOp::RecvActivation, c, i, stageOf(c - 1)});
        stage.tasks.push_back({TaskOp::Forward, c, i});
        if (c + 1 < chunks && stageOf(c + 1) != st)
          stage.tasks.push_back({TaskOp::SendActivation, c, i, stageOf(c + 1)});
      }
    }
    for (int c = chunks - 1; c >= 0; --c) {
      if (stageOf(c) != st)
        continue;
      for (int i = 0; i < m; ++i) {
        if (c + 1 < chunks && stageOf(c + 1) != st)
          stage.tasks.push_back({TaskOp::RecvGradient, c, i, stageOf(c + 1)});
        stage.tasks.push_back({splitBackward ? TaskOp::BackwardInput : TaskOp::Backward, c, i});
        if (c > 0 && stageOf(c - 1) != st)
          stage.tasks.push_back({TaskOp::SendGradient, c, i, stageOf(c - 1)});
      }
    }
    if (splitBackward)
      for (int c = chunks - 1; c >= 0; --c)
        if (stageOf(c) == st)
          for (int i = 0; i < m; ++i)
            stage.tasks.push_back({TaskOp::BackwardWeight, c, i});
    stage.tasks.push_back({TaskOp::ReduceGradients});
    stage.tasks.push_back({TaskOp::OptimizerStep});
    stage.inFlight = peakInFlight(stage.tasks);
    s.stages.push_back(std::move(stage));
  }
  simulateStarts(s, chunks);
  return s;
}

inline PipelinePlan buildPipeline(TestScheduleKind kind, int stages, std::vector<int> ms) {
  PipelinePlan plan;
  plan.stages = stages;
  plan.schedule = kind == TestScheduleKind::GPipe ? "gpipe" : "1f1b";
  for (int st = 0; st < stages; ++st) {
    plan.chunkLayers.push_back(1);
    plan.chunkStages.push_back(st);
  }
  for (int m : ms)
    plan.schedules.push_back(buildSchedule(kind, stages, m));
  return plan;
}

/// The plan.json "pipeline" object of `plan`.
inline JsonValue pipelineJson(const PipelinePlan &plan) {
  JsonArray layers, placement, schedules;
  for (int64_t l : plan.chunkLayers)
    layers.push_back(l);
  for (int64_t s : plan.chunkStages)
    placement.push_back(s);
  for (const PipelineSchedule &s : plan.schedules) {
    JsonArray stages;
    for (const StageTasks &st : s.stages) {
      JsonArray tasks;
      for (const ScheduleTask &t : st.tasks) {
        JsonObject o{{"op", taskOpName(t.op)}};
        if (t.op != TaskOp::ReduceGradients && t.op != TaskOp::OptimizerStep) {
          o.set("chunk", t.chunk);
          o.set("micro_batch", t.microBatch);
        }
        if (isSendTask(t.op) || isRecvTask(t.op))
          o.set("peer", t.peer);
        if (isComputeTask(t.op))
          o.set("start", t.start);
        tasks.push_back(std::move(o));
      }
      stages.push_back(JsonObject{{"bubble_fraction", st.bubbleFraction},
                                  {"in_flight", st.inFlight},
                                  {"tasks", std::move(tasks)}});
    }
    schedules.push_back(
        JsonObject{{"micro_batches", s.microBatches}, {"stages", std::move(stages)}});
  }
  return JsonObject{{"stages", plan.stages},
                    {"virtual_stages", plan.virtualStages},
                    {"schedule", plan.schedule},
                    {"chunk_layers", std::move(layers)},
                    {"chunk_stages", std::move(placement)},
                    {"schedules", std::move(schedules)}};
}

} // namespace mtc::rt::test

#endif // MTC_TEST_UNITTESTS_RUNTIME_PIPELINETESTSCHEDULES_H
