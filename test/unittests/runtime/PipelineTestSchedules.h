//===- PipelineTestSchedules.h - Hand-built pipeline schedules for tests -*- C++ -*-===//
//
// Small builders of GPipe and 1F1B task lists (one chunk per stage), with the compute
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

/// Unit task times: F = B = W = 1, BW = 2.
inline int64_t unitTime(TaskOp op) { return op == TaskOp::Backward ? 2 : 1; }

/// Fills every compute task's `start` and each stage's bubble fraction by running the lists
/// with unit times: a task starts when its stage is free and its input is ready (the previous
/// or next chunk's task on its stage). One chunk per stage (chunk = stage).
inline void simulateStarts(PipelineSchedule &s) {
  const size_t p = s.stages.size();
  std::map<std::tuple<int, int, int>, int64_t> ends; // (op, chunk, micro-batch) -> end
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
            dep = {int(TaskOp::Forward), t.chunk - 1, t.microBatch};
          if (t.op == TaskOp::Backward && t.chunk + 1 < int(p))
            dep = {int(TaskOp::Backward), t.chunk + 1, t.microBatch};
          if (dep) {
            auto it = ends.find(*dep);
            if (it == ends.end())
              break;
            ready = std::max(ready, it->second);
          }
          t.start = ready;
          free[st] = ready + unitTime(t.op);
          busy[st] += unitTime(t.op);
          ends[{int(t.op), t.chunk, t.microBatch}] = free[st];
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
  simulateStarts(s);
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
