//===- EvaluationScheduleTest.cpp - Forward-only task lists for evaluation ---===//
//
// The lists' shape (every forward once, in micro-batch then chunk order, a receive before and
// a send after each crossing between stages, nothing else), that every link's receives come
// in the order of its sends, and that the unit-time slots and bubble fractions are those of
// an independent simulation (PipelineTestSchedules.h). Running them over Gloo is
// ScheduleExecutorTest's (RunsTheEvaluationLists).
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/EvaluationSchedule.h"

#include "test/unittests/runtime/PipelineTestSchedules.h"

#include <gtest/gtest.h>

#include <map>
#include <utility>

using namespace mtc::rt;
using namespace mtc::rt::test;

namespace {

PipelinePlan placement(std::vector<int64_t> chunkStages, int64_t stages) {
  PipelinePlan plan;
  plan.stages = stages;
  plan.virtualStages = static_cast<int64_t>(chunkStages.size()) / stages;
  plan.chunkLayers.assign(chunkStages.size(), 1);
  plan.chunkStages = std::move(chunkStages);
  return plan;
}

/// 1F1B's one chunk per stage, interleaved (c % P), ZB-V's V, a V over 4 stages, one stage.
std::vector<PipelinePlan> placements() {
  return {placement({0, 1}, 2),
          placement({0, 1, 2, 3}, 4),
          placement({0, 1, 0, 1}, 2),
          placement({0, 1, 1, 0}, 2),
          placement({0, 1, 2, 3, 3, 2, 1, 0}, 4),
          placement({0, 0}, 1)};
}

std::string describe(const PipelinePlan &plan) {
  std::string s = "chunk stages";
  for (int64_t st : plan.chunkStages)
    s += concat(' ', st);
  return s;
}

TEST(EvaluationSchedule, EveryForwardOnceInMicroBatchThenChunkOrder) {
  for (const PipelinePlan &plan : placements()) {
    SCOPED_TRACE(describe(plan));
    const int m = 3, chunks = static_cast<int>(plan.chunkStages.size());
    Expected<PipelineSchedule> s = evaluationSchedule(plan, m);
    ASSERT_TRUE(s.ok()) << s.error().message();
    EXPECT_EQ(s->microBatches, m);
    ASSERT_EQ(s->stages.size(), size_t(plan.stages));
    for (int st = 0; st < plan.stages; ++st) {
      // The list this stage must run, written out.
      std::vector<std::tuple<TaskOp, int, int, int>> want;
      for (int i = 0; i < m; ++i)
        for (int c = 0; c < chunks; ++c) {
          auto stageOf = [&](int k) { return static_cast<int>(plan.chunkStages[size_t(k)]); };
          if (stageOf(c) != st)
            continue;
          if (c > 0 && stageOf(c - 1) != st)
            want.emplace_back(TaskOp::RecvActivation, c, i, stageOf(c - 1));
          want.emplace_back(TaskOp::Forward, c, i, -1);
          if (c + 1 < chunks && stageOf(c + 1) != st)
            want.emplace_back(TaskOp::SendActivation, c, i, stageOf(c + 1));
        }
      std::vector<std::tuple<TaskOp, int, int, int>> got;
      int64_t forwards = 0;
      for (const ScheduleTask &t : s->stages[size_t(st)].tasks) {
        got.emplace_back(t.op, t.chunk, t.microBatch, t.peer);
        forwards += t.op == TaskOp::Forward;
      }
      EXPECT_EQ(got, want) << "stage " << st;
      // The executor counts every forward as held (no backward releases it).
      EXPECT_EQ(s->stages[size_t(st)].inFlight, forwards);
      EXPECT_EQ(peakInFlight(s->stages[size_t(st)].tasks), forwards);
    }
  }
}

TEST(EvaluationSchedule, EveryLinkReceivesInTheOrderItSends) {
  for (const PipelinePlan &plan : placements()) {
    SCOPED_TRACE(describe(plan));
    Expected<PipelineSchedule> s = evaluationSchedule(plan, 4);
    ASSERT_TRUE(s.ok()) << s.error().message();
    // (from, to) -> the (chunk of the receiver, micro-batch) of each message, in list order.
    std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> sent, received;
    for (int st = 0; st < plan.stages; ++st)
      for (const ScheduleTask &t : s->stages[size_t(st)].tasks) {
        if (t.op == TaskOp::SendActivation)
          sent[{st, t.peer}].emplace_back(t.chunk + 1, t.microBatch);
        if (t.op == TaskOp::RecvActivation)
          received[{t.peer, st}].emplace_back(t.chunk, t.microBatch);
      }
    EXPECT_EQ(sent, received);
    EXPECT_EQ(sent.empty(), plan.stages == 1);
  }
}

TEST(EvaluationSchedule, SlotsAndBubblesAreTheUnitTimeRun) {
  for (const PipelinePlan &plan : placements()) {
    SCOPED_TRACE(describe(plan));
    Expected<PipelineSchedule> s = evaluationSchedule(plan, 4);
    ASSERT_TRUE(s.ok()) << s.error().message();
    PipelineSchedule simulated = *s;
    for (StageTasks &stage : simulated.stages)
      for (ScheduleTask &t : stage.tasks)
        t.start = -1;
    simulateStarts(simulated, static_cast<int>(plan.chunkStages.size()));
    for (size_t st = 0; st < s->stages.size(); ++st) {
      EXPECT_DOUBLE_EQ(s->stages[st].bubbleFraction, simulated.stages[st].bubbleFraction);
      for (size_t k = 0; k < s->stages[st].tasks.size(); ++k)
        EXPECT_EQ(s->stages[st].tasks[k].start, simulated.stages[st].tasks[k].start)
            << "stage " << st << " task " << k;
    }
  }
  // Two stages, one chunk each, 4 micro-batches: stage 1 starts a slot late, and each idles
  // one slot of five.
  Expected<PipelineSchedule> two = evaluationSchedule(placement({0, 1}, 2), 4);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->stages[1].tasks[1].op, TaskOp::Forward);
  EXPECT_EQ(two->stages[1].tasks[1].start, 1);
  EXPECT_DOUBLE_EQ(two->stages[0].bubbleFraction, 0.2);
}

TEST(EvaluationSchedule, RefusesWhatCannotBeEvaluated) {
  Expected<PipelineSchedule> none = evaluationSchedule(placement({0, 1}, 2), 0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message(), "cannot evaluate 0 micro-batches of 2 chunks");
  Expected<PipelineSchedule> outside = evaluationSchedule(placement({0, 2}, 2), 1);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.error().message(), "chunk 1 runs on stage 2, not one of the 2 stages");
  PipelinePlan empty;
  empty.stages = 2;
  Expected<PipelineSchedule> chunkless = evaluationSchedule(empty, 1);
  ASSERT_FALSE(chunkless.ok());
  EXPECT_EQ(chunkless.error().message(),
            "the pipeline has 2 stages and 0 chunks: nothing to evaluate with");
}

} // namespace
