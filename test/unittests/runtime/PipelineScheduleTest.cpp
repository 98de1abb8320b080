//===- PipelineScheduleTest.cpp - Reading plan.json's "pipeline" -----------===//
//
// Valid GPipe and 1F1B schedules (PipelineTestSchedules.h) read back as they were written;
// each rejection case breaks one thing of a 2-stage 1F1B schedule for 2 micro-batches:
//
//   stage 0: F0 SA0 F1 SA1 RG0 BW0 RG1 BW1 reduce optimizer
//   stage 1: RA0 F0 BW0 SG0 RA1 F1 BW1 SG1 reduce optimizer
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PipelineSchedule.h"

#include "PipelineTestSchedules.h"

#include <gtest/gtest.h>

#include <functional>

using namespace mtc::rt;
using namespace mtc::rt::test;

namespace {

void expectSameTasks(const PipelinePlan &a, const PipelinePlan &b) {
  ASSERT_EQ(a.schedules.size(), b.schedules.size());
  for (size_t i = 0; i < a.schedules.size(); ++i) {
    const PipelineSchedule &x = a.schedules[i], &y = b.schedules[i];
    EXPECT_EQ(x.microBatches, y.microBatches);
    ASSERT_EQ(x.stages.size(), y.stages.size());
    for (size_t s = 0; s < x.stages.size(); ++s) {
      EXPECT_DOUBLE_EQ(x.stages[s].bubbleFraction, y.stages[s].bubbleFraction);
      EXPECT_EQ(x.stages[s].inFlight, y.stages[s].inFlight);
      ASSERT_EQ(x.stages[s].tasks.size(), y.stages[s].tasks.size());
      for (size_t k = 0; k < x.stages[s].tasks.size(); ++k) {
        const ScheduleTask &t = x.stages[s].tasks[k], &u = y.stages[s].tasks[k];
        EXPECT_EQ(t.op, u.op);
        EXPECT_EQ(t.chunk, u.chunk);
        EXPECT_EQ(t.microBatch, u.microBatch);
        EXPECT_EQ(t.peer, u.peer);
        EXPECT_EQ(t.start, u.start);
      }
    }
  }
}

TEST(PipelineSchedule, ReadsGPipeAndOneFOneB) {
  for (TestScheduleKind kind : {TestScheduleKind::GPipe, TestScheduleKind::OneFOneB})
    for (int stages : {2, 4}) {
      PipelinePlan built = buildPipeline(kind, stages, {1, 2, 4, 8});
      Expected<PipelinePlan> read = parsePipeline(pipelineJson(built));
      ASSERT_TRUE(read.ok()) << read.error().message();
      EXPECT_EQ(read->stages, stages);
      EXPECT_EQ(read->virtualStages, 1);
      EXPECT_EQ(read->schedule, built.schedule);
      EXPECT_EQ(read->chunkStages, built.chunkStages);
      expectSameTasks(*read, built);
      Expected<const PipelineSchedule *> eight = read->forMicroBatches(8);
      ASSERT_TRUE(eight.ok());
      EXPECT_EQ((*eight)->microBatches, 8);
    }
}

TEST(PipelineSchedule, TheTestBuildersHaveTheTheoreticalBubble) {
  // 1F1B with unit times idles (p - 1) / (m + p - 1) of its span on every stage.
  PipelineSchedule s = buildSchedule(TestScheduleKind::OneFOneB, 4, 8);
  for (const StageTasks &stage : s.stages)
    EXPECT_DOUBLE_EQ(stage.bubbleFraction, 3.0 / 11.0);
  EXPECT_EQ(s.stages[0].inFlight, 4);
  EXPECT_EQ(s.stages[3].inFlight, 1);
  EXPECT_EQ(buildSchedule(TestScheduleKind::GPipe, 4, 8).stages[3].inFlight, 8);
}

TEST(PipelineSchedule, NoScheduleForTheMicroBatchCount) {
  Expected<PipelinePlan> p =
      parsePipeline(pipelineJson(buildPipeline(TestScheduleKind::OneFOneB, 2, {1, 2, 4})));
  ASSERT_TRUE(p.ok()) << p.error().message();
  Expected<const PipelineSchedule *> s = p->forMicroBatches(3);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(),
            "the plan's pipeline has no schedule for 3 micro-batches per step (it has schedules "
            "for 1, 2, 4; choose a global batch that gives one of them)");
}

class PipelineErrors : public ::testing::Test {
protected:
  /// The 2-stage 1F1B pipeline for 2 micro-batches changed by `edit`: its error message.
  static std::string errorOf(const std::function<void(JsonObject &)> &edit) {
    JsonValue v = pipelineJson(buildPipeline(TestScheduleKind::OneFOneB, 2, {2}));
    edit(*v.getObject());
    Expected<PipelinePlan> p = parsePipeline(v);
    EXPECT_FALSE(p.ok()) << "accepted: " << v.serialize();
    return p.ok() ? std::string() : p.error().message();
  }
  static JsonArray &tasks(JsonObject &o, size_t stage) {
    JsonObject &schedule = *(*o.find("schedules")->getArray())[0].getObject();
    JsonObject &s = *(*schedule.find("stages")->getArray())[stage].getObject();
    return *s.find("tasks")->getArray();
  }
  static JsonObject &stage(JsonObject &o, size_t stage) {
    JsonObject &schedule = *(*o.find("schedules")->getArray())[0].getObject();
    return *(*schedule.find("stages")->getArray())[stage].getObject();
  }
  static JsonObject &task(JsonObject &o, size_t s, size_t k) { return *tasks(o, s)[k].getObject(); }
  /// Reorders stage `s`'s tasks: the new list is the old tasks at `order`.
  static void reorder(JsonObject &o, size_t s, std::vector<size_t> order) {
    JsonArray old = tasks(o, s), now;
    for (size_t k : order)
      now.push_back(old[k]);
    tasks(o, s) = std::move(now);
  }
};

#define EXPECT_ERROR(edit, expected)                                                               \
  do {                                                                                             \
    std::string message = errorOf(edit);                                                           \
    EXPECT_NE(message.find(expected), std::string::npos)                                           \
        << "message: " << message << "\nexpected: " << (expected);                                 \
  } while (false)

constexpr const char *kStage0 = "pipeline.schedules[0].stages[0]";
constexpr const char *kStage1 = "pipeline.schedules[0].stages[1]";

TEST_F(PipelineErrors, Shapes) {
  EXPECT_ERROR([](JsonObject &o) { o.erase("schedules"); }, "pipeline: missing key 'schedules'");
  EXPECT_ERROR([](JsonObject &o) { o.set("schedules", JsonArray{}); },
               "pipeline.schedules: is empty");
  EXPECT_ERROR([](JsonObject &o) { o.set("stages", 0); },
               "pipeline.stages: expected an integer from 1 to 1024, found integer 0");
  EXPECT_ERROR([](JsonObject &o) { o.set("virtual_stages", "2"); },
               "pipeline.virtual_stages: expected an integer from 1 to 65536, found string \"2\"");
  EXPECT_ERROR([](JsonObject &o) { o.set("schedule", "zb-h3"); },
               "pipeline.schedule: unknown schedule string \"zb-h3\" (expected gpipe, 1f1b, "
               "interleaved, zb-h1 or zb-v)");
  EXPECT_ERROR([](JsonObject &o) { o.set("chunk_layers", JsonArray{2}); },
               "pipeline.chunk_layers: has 1 entries, expected 2 (stages x virtual_stages = 2 x 1)");
  EXPECT_ERROR([](JsonObject &o) { o.set("virtual_stages", 2); },
               "pipeline.chunk_layers: has 2 entries, expected 4 (stages x virtual_stages = 2 x 2)");
  EXPECT_ERROR([](JsonObject &o) { o.set("chunk_stages", JsonArray{0, 2}); },
               "pipeline.chunk_stages[1]: expected an integer from 0 to 1, found integer 2");
  EXPECT_ERROR([](JsonObject &o) { o.set("chunk_stages", JsonArray{0, 0}); },
               "pipeline.chunk_stages: stage 0 holds 2 chunks, expected virtual_stages = 1");
  EXPECT_ERROR(
      [](JsonObject &o) {
        JsonObject &s = *(*o.find("schedules")->getArray())[0].getObject();
        s.find("stages")->getArray()->pop_back();
      },
      "pipeline.schedules[0].stages: has 1 entries, expected one per stage (2)");
  EXPECT_ERROR(
      [](JsonObject &o) {
        JsonArray &s = *o.find("schedules")->getArray();
        s.push_back(s[0]);
      },
      "pipeline.schedules[1].micro_batches: 2 micro-batches has a schedule already "
      "(pipeline.schedules[0])");
  EXPECT_ERROR([](JsonObject &o) { stage(o, 0).set("bubble_fraction", 1.5); },
               std::string(kStage0) + ".bubble_fraction: expected a number from 0 to 1");
}

TEST_F(PipelineErrors, Tasks) {
  EXPECT_ERROR([](JsonObject &o) { task(o, 0, 0).set("op", "fwd"); },
               std::string(kStage0) +
                   ".tasks[0].op: unknown op string \"fwd\" (expected forward, backward, "
                   "backward_input, backward_weight, send_activation, recv_activation, "
                   "send_gradient, recv_gradient, reduce_gradients, optimizer_step)");
  EXPECT_ERROR([](JsonObject &o) { task(o, 0, 0).set("chunk", 2); },
               std::string(kStage0) +
                   ".tasks[0].chunk: expected an integer from 0 to 1, found integer 2");
  EXPECT_ERROR([](JsonObject &o) { task(o, 0, 0).set("micro_batch", 2); },
               std::string(kStage0) +
                   ".tasks[0].micro_batch: expected an integer from 0 to 1, found integer 2");
  EXPECT_ERROR([](JsonObject &o) { task(o, 0, 0).set("chunk", 1); },
               std::string(kStage0) + ".tasks[0].chunk: forward chunk 1 micro-batch 0: chunk 1 "
                                      "runs on stage 1, not on stage 0");
  EXPECT_ERROR([](JsonObject &o) { task(o, 0, 1).set("peer", 2); },
               std::string(kStage0) +
                   ".tasks[1].peer: expected an integer from 0 to 1, found integer 2");
  EXPECT_ERROR([](JsonObject &o) { task(o, 0, 1).set("peer", 0); },
               std::string(kStage0) + ".tasks[1].peer: send_activation chunk 0 micro-batch 0: "
                                      "peer 0, but the neighbouring chunk runs on stage 1");
  EXPECT_ERROR([](JsonObject &o) { task(o, 0, 1).erase("peer"); },
               std::string(kStage0) + ".tasks[1]: missing key 'peer'");
  EXPECT_ERROR([](JsonObject &o) { task(o, 1, 3).set("op", "send_activation"); },
               std::string(kStage1) + ".tasks[3]: send_activation chunk 1 micro-batch 0: chunk 1 "
                                      "has no neighbour in that direction (chunks 0 to 1)");
  EXPECT_ERROR([](JsonObject &o) { task(o, 0, 0).erase("start"); },
               std::string(kStage0) + ".tasks[0]: missing key 'start'");
}

TEST_F(PipelineErrors, CompletenessAndOrderOnAStage) {
  EXPECT_ERROR([](JsonObject &o) { reorder(o, 1, {0, 1, 3, 4, 5, 6, 7, 8, 9}); },
               std::string(kStage1) +
                   ".tasks: stage 1 has no backward (or backward_input) chunk 1 micro-batch 0");
  EXPECT_ERROR([](JsonObject &o) { reorder(o, 1, {0, 1}); },
               std::string(kStage1) + ".tasks: stage 1 has 2 tasks, too few for a forward and a "
                                      "backward of each of its 1 chunks x 2 micro-batches");
  EXPECT_ERROR([](JsonObject &o) { task(o, 0, 2).set("micro_batch", 0); },
               std::string(kStage0) +
                   ".tasks[2]: forward chunk 0 micro-batch 0 appears twice (also tasks[0])");
  EXPECT_ERROR([](JsonObject &o) { reorder(o, 1, {1, 0, 2, 3, 4, 5, 6, 7, 8, 9}); },
               std::string(kStage1) + ".tasks[0]: forward chunk 1 micro-batch 0 runs before "
                                      "recv_activation (tasks[1])");
  EXPECT_ERROR([](JsonObject &o) { reorder(o, 1, {0, 1, 3, 2, 4, 5, 6, 7, 8, 9}); },
               std::string(kStage1) + ".tasks[2]: send_gradient chunk 1 micro-batch 0 runs "
                                      "before its backward (tasks[3])");
  EXPECT_ERROR([](JsonObject &o) { reorder(o, 0, {0, 1, 2, 3, 4, 5, 6, 8, 7, 9}); },
               std::string(kStage0) +
                   ".tasks[7]: reduce_gradients runs before the last backward (tasks[8])");
  EXPECT_ERROR([](JsonObject &o) { reorder(o, 0, {0, 1, 2, 3, 4, 5, 6, 7, 9, 8}); },
               std::string(kStage0) + ".tasks[8]: optimizer_step is not the last task");
  EXPECT_ERROR([](JsonObject &o) { reorder(o, 0, {0, 1, 2, 3, 4, 5, 6, 7, 9}); },
               std::string(kStage0) + ".tasks: stage 0 has no reduce_gradients");
  EXPECT_ERROR([](JsonObject &o) { stage(o, 0).set("in_flight", 1); },
               std::string(kStage0) + ".in_flight: is 1, but the tasks hold up to 2 activations "
                                      "at once (forward done, backward not)");
  EXPECT_ERROR(
      [](JsonObject &o) {
        task(o, 1, 2).set("op", "backward_input");
        task(o, 1, 6).set("op", "backward_input");
      },
      std::string(kStage1) + ".tasks: stage 1 has no backward_weight chunk 1 micro-batch 0");
}

TEST_F(PipelineErrors, ReceivesOutOfOrderAndDeadlocks) {
  // Stage 0 receives the gradient of micro-batch 1 first; stage 1 sends micro-batch 0's.
  EXPECT_ERROR([](JsonObject &o) { reorder(o, 0, {0, 1, 2, 3, 6, 4, 5, 7, 8, 9}); },
               std::string(kStage0) + ".tasks[4]: stage 0's receive number 1 from stage 1 is "
                                      "recv_gradient chunk 0 micro-batch 1, but the message "
                                      "stage 1 sends there is send_gradient chunk 1 micro-batch 0");
  // Stage 0 waits for a gradient before it sends the activation stage 1 waits for.
  EXPECT_ERROR([](JsonObject &o) { reorder(o, 0, {0, 4, 1, 2, 3, 5, 6, 7, 8, 9}); },
               "pipeline.schedules[0]: the schedule deadlocks: stage 0 waits forever at tasks[1] "
               "(recv_gradient chunk 0 micro-batch 0 from stage 1)");
  EXPECT_ERROR([](JsonObject &o) { reorder(o, 1, {0, 1, 2, 4, 5, 6, 7, 8, 9}); },
               std::string(kStage1) +
                   ".tasks: stage 1 has no send_gradient chunk 1 micro-batch 0");
}

} // namespace

namespace {

TEST_F(PipelineErrors, StartSlots) {
  // Stage 0's compute tasks start at 0, 1, then BW0 at 4 (2 slots), BW1 at 6; the schedule's
  // whole work is 2 x (1 + 1 + 2 + 2) = 12 slots.
  EXPECT_ERROR([](JsonObject &o) { task(o, 0, 2).set("start", 0); },
               std::string(kStage0) + ".tasks[2].start: forward chunk 0 micro-batch 1 starts at "
                                      "slot 0, before the stage's previous compute task ends "
                                      "(slot 1)");
  EXPECT_ERROR([](JsonObject &o) { task(o, 0, 7).set("start", 11); },
               std::string(kStage0) + ".tasks[7].start: backward chunk 0 micro-batch 1 ends at "
                                      "slot 13, past the 12 slots of the schedule's whole work");
}

} // namespace

namespace {

TEST(PipelineSchedule, ReadsSharedParamsActivationAndPeakBytes) {
  JsonValue v = pipelineJson(buildPipeline(TestScheduleKind::OneFOneB, 2, {2}));
  JsonObject &o = *v.getObject();
  Expected<PipelinePlan> plain = parsePipeline(v);
  ASSERT_TRUE(plain.ok()) << plain.error().message();
  EXPECT_TRUE(plain->sharedParams.empty());
  EXPECT_EQ(plain->schedules[0].stages[0].activationBytes, -1) << "absent: -1";
  EXPECT_EQ(plain->schedules[0].stages[0].peakBytes, -1) << "absent: -1";

  o.set("shared_params", JsonObject{{"wte", JsonArray{0, 1}}, {"pos", JsonArray{0, 1}}});
  JsonObject &schedule = *(*o.find("schedules")->getArray())[0].getObject();
  (*schedule.find("stages")->getArray())[0].getObject()->set("activation_bytes", 0);
  (*schedule.find("stages")->getArray())[1].getObject()->set("activation_bytes", 123456789012);
  (*schedule.find("stages")->getArray())[1].getObject()->set("peak_bytes", 16629312);
  Expected<PipelinePlan> p = parsePipeline(v);
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_EQ(p->sharedParams.size(), 2u);
  // In the object's order.
  EXPECT_EQ(p->sharedParams[0].name, "wte");
  EXPECT_EQ(p->sharedParams[0].chunks, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(p->sharedParams[1].name, "pos");
  EXPECT_EQ(p->schedules[0].stages[0].activationBytes, 0);
  EXPECT_EQ(p->schedules[0].stages[1].activationBytes, 123456789012);
  EXPECT_EQ(p->schedules[0].stages[0].peakBytes, -1);
  EXPECT_EQ(p->schedules[0].stages[1].peakBytes, 16629312);
}

TEST_F(PipelineErrors, SharedParams) {
  auto shared = [](JsonValue value) {
    return [value](JsonObject &o) { o.set("shared_params", value); };
  };
  EXPECT_ERROR(shared(JsonArray{"wte"}),
               "pipeline.shared_params: expected an object, found array [\"wte\"]");
  EXPECT_ERROR(shared(JsonObject{{"wte", 0}}),
               "pipeline.shared_params.wte: expected an array, found integer 0");
  EXPECT_ERROR(shared(JsonObject{{"wte", JsonArray{0, 2}}}),
               "pipeline.shared_params.wte[1]: expected an integer from 0 to 1, found integer 2");
  EXPECT_ERROR(shared(JsonObject{{"wte", JsonArray{0, "1"}}}),
               "pipeline.shared_params.wte[1]: expected an integer from 0 to 1, found string "
               "\"1\"");
  const char *order = ": must list at least two distinct chunks in ascending order";
  EXPECT_ERROR(shared(JsonObject{{"wte", JsonArray{1}}}),
               std::string("pipeline.shared_params.wte") + order);
  EXPECT_ERROR(shared(JsonObject{{"wte", JsonArray{}}}),
               std::string("pipeline.shared_params.wte") + order);
  EXPECT_ERROR(shared(JsonObject{{"wte", JsonArray{1, 0}}}),
               std::string("pipeline.shared_params.wte") + order);
  EXPECT_ERROR(shared(JsonObject{{"ok", JsonArray{0, 1}}, {"wte", JsonArray{1, 1}}}),
               std::string("pipeline.shared_params.wte") + order);
}

TEST_F(PipelineErrors, ActivationBytes) {
  EXPECT_ERROR([](JsonObject &o) { stage(o, 1).set("activation_bytes", -1); },
               std::string(kStage1) + ".activation_bytes: expected an integer from 0 to "
                                      "9223372036854775807, found integer -1");
  EXPECT_ERROR([](JsonObject &o) { stage(o, 0).set("activation_bytes", 1.5); },
               std::string(kStage0) + ".activation_bytes: expected an integer from 0 to "
                                      "9223372036854775807, found number 1.5");
  EXPECT_ERROR([](JsonObject &o) { stage(o, 0).set("activation_bytes", "big"); },
               std::string(kStage0) + ".activation_bytes: expected an integer from 0 to "
                                      "9223372036854775807, found string \"big\"");
}

TEST_F(PipelineErrors, PeakBytes) {
  EXPECT_ERROR([](JsonObject &o) { stage(o, 1).set("peak_bytes", -1); },
               std::string(kStage1) + ".peak_bytes: expected an integer from 0 to "
                                      "9223372036854775807, found integer -1");
  EXPECT_ERROR([](JsonObject &o) { stage(o, 0).set("peak_bytes", "big"); },
               std::string(kStage0) + ".peak_bytes: expected an integer from 0 to "
                                      "9223372036854775807, found string \"big\"");
}

} // namespace
