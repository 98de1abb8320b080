//===- ScheduleExecutorTest.cpp - Running stages' task lists over Gloo ----===//
//
// Stages run as threads of this process, each with its own Gloo communicator over loopback
// (CommTestUtil.h). The stages' "functions" are a fake: a chunk's forward adds chunk + 1 to
// every element, its backward multiplies by chunk + 2, and the last chunk's backward starts
// from its own forward output. Each stage checks the values it receives and the first stage
// the input gradients that come back, so a message that arrives late, twice, into the wrong
// buffer or for the wrong micro-batch fails the test. Schedules: hand-built GPipe and 1F1B
// (PipelineTestSchedules.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/ScheduleExecutor.h"

#include "runtime/exec/EvaluationSchedule.h"

#include "test/unittests/runtime/PipelineTestSchedules.h"
#include "test/unittests/runtime/comm/CommTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <thread>

using namespace mtc::rt;
using namespace mtc::rt::test;

namespace {

constexpr size_t kWidth = 1024;

/// The fake stage: runs the chunks `chunkStages` places on `stage`. Message buffers are shared
/// by the micro-batches with the same index modulo `ring`, so with a small ring the executor
/// must wait for a send before the next task overwrites its buffer. Consecutive chunks on this
/// stage hand over locally.
class FakeStage final : public StageCompute {
public:
  FakeStage(int stage, std::vector<int64_t> chunkStages, int ring)
      : stage_(stage), chunkStages_(std::move(chunkStages)),
        chunks_(static_cast<int>(chunkStages_.size())), ring_(ring) {}

  /// Called before each compute task; a failure it returns fails the task.
  std::function<Error(const ScheduleTask &)> hook;
  /// The first element of every micro-batch's input gradient (the stage of chunk 0).
  std::map<int, float> inputGradients;
  std::vector<std::string> mismatches;
  /// "post <recv op> <chunk> <micro-batch>" when the executor asks for a receive's buffer,
  /// "run <op> <chunk> <micro-batch>" when a compute task starts, "sent <send op> <chunk>
  /// <micro-batch>" when the executor gives a send's buffer back.
  std::vector<std::string> events;
  int reductions = 0, optimizerSteps = 0, weightGradients = 0;
  /// Seconds a forward sleeps (a whole backward twice as long), for the bubble measurement.
  double unitSeconds = 0;

  static float input(int micro, size_t j) { return float(micro + 1) + float(j % 7); }
  /// What chunk c's forward receives for micro-batch `micro` (c = chunks: the last output).
  static float activation(int c, int micro, size_t j) {
    return input(micro, j) + float(c * (c + 1) / 2);
  }

  Error compute(const ScheduleTask &t) override {
    events.push_back(concat("run ", taskOpName(t.op), ' ', t.chunk, ' ', t.microBatch));
    if (hook)
      if (Error err = hook(t); !err.ok())
        return err;
    if (unitSeconds > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(unitSlots(t.op) * unitSeconds));
    const int c = t.chunk, m = t.microBatch;
    if (t.op == TaskOp::Forward) {
      std::vector<float> x(kWidth);
      for (size_t j = 0; j < kWidth; ++j) {
        x[j] = c == 0         ? input(m, j)
               : local(c - 1) ? saved_[{c - 1, m}][j]
                              : buffer(TaskOp::RecvActivation, c, m)[j];
        expect(x[j], activation(c, m, j), "activation", m);
        x[j] += float(c + 1);
      }
      if (c + 1 < chunks_ && !local(c + 1))
        std::copy(x.begin(), x.end(), buffer(TaskOp::SendActivation, c, m).begin());
      saved_[{c, m}] = std::move(x);
      return Error::success();
    }
    if (t.op == TaskOp::BackwardWeight) {
      if (!inputDone_.count({c, m}))
        mismatches.push_back(concat("W of chunk ", c, " micro-batch ", m, " before its B"));
      ++weightGradients;
      return Error::success();
    }
    // The whole backward, or its input half.
    std::vector<float> g = c + 1 == chunks_ ? saved_[{c, m}]
                           : local(c + 1)   ? grads_[{c + 1, m}]
                                            : buffer(TaskOp::RecvGradient, c, m);
    float factor = 1;
    for (int k = c + 1; k < chunks_; ++k)
      factor *= float(k + 2);
    for (size_t j = 0; j < kWidth; ++j) {
      expect(g[j], activation(chunks_, m, j) * factor, "gradient", m);
      g[j] *= float(c + 2);
    }
    inputDone_.insert({c, m});
    if (c == 0)
      inputGradients[m] = g[0];
    else if (local(c - 1))
      grads_[{c, m}] = std::move(g);
    else
      std::copy(g.begin(), g.end(), buffer(TaskOp::SendGradient, c, m).begin());
    return Error::success();
  }
  Expected<MessageBuffer> message(const ScheduleTask &t) override {
    if (isRecvTask(t.op))
      events.push_back(concat("post ", taskOpName(t.op), ' ', t.chunk, ' ', t.microBatch));
    std::vector<float> &b = buffer(t.op, t.chunk, t.microBatch);
    return MessageBuffer{b.data(), b.size(), MTC_F32};
  }
  void sent(const ScheduleTask &t) override {
    events.push_back(concat("sent ", taskOpName(t.op), ' ', t.chunk, ' ', t.microBatch));
  }
  Error reduceGradients() override {
    ++reductions;
    return Error::success();
  }
  Error optimizerStep() override {
    ++optimizerSteps;
    return Error::success();
  }

private:
  bool local(int chunk) const { return chunkStages_[static_cast<size_t>(chunk)] == stage_; }
  std::vector<float> &buffer(TaskOp op, int chunk, int micro) {
    std::vector<float> &b = buffers_[{int(op), chunk, micro % ring_}];
    b.resize(kWidth);
    return b;
  }
  void expect(float got, float want, const char *what, int micro) {
    if (got != want && mismatches.size() < 5)
      mismatches.push_back(concat("stage ", stage_, " ", what, " micro-batch ", micro, ": ",
                                  double(got), " != ", double(want)));
  }

  int stage_;
  std::vector<int64_t> chunkStages_;
  int chunks_, ring_;
  std::map<std::tuple<int, int, int>, std::vector<float>> buffers_;
  std::map<std::pair<int, int>, std::vector<float>> saved_, grads_;
  std::set<std::pair<int, int>> inputDone_;
};

/// The first element of micro-batch m's input gradient at stage 0.
float expectedInputGradient(int chunks, int m) {
  float factor = 1;
  for (int k = 0; k < chunks; ++k)
    factor *= float(k + 2);
  return FakeStage::activation(chunks, m, 0) * factor;
}

/// One chunk per stage.
std::vector<int64_t> chunkPerStage(int stages) {
  std::vector<int64_t> placement;
  for (int s = 0; s < stages; ++s)
    placement.push_back(s);
  return placement;
}

struct StageResult {
  std::vector<Error> steps;
  std::map<int, float> inputGradients;
  std::vector<std::string> mismatches;
  int reductions = 0, optimizerSteps = 0, weightGradients = 0;
  std::vector<double> bubbles;
  std::vector<std::string> events;
  std::map<std::string, int> spans; // recorded spans by category

  std::chrono::steady_clock::duration took{}; // the steps
};

/// Runs `steps` steps of `schedule` on its stages (chunks placed by `chunkStages`, default one
/// per stage); `setup` adjusts each stage's fake. The links are made for `linksFor` (default:
/// `schedule`).
std::vector<StageResult> runPipeline(const PipelineSchedule &schedule, int steps, int ring,
                                     const std::string &prefix,
                                     std::chrono::milliseconds timeout = 2000ms,
                                     const std::function<void(int, FakeStage &)> &setup = {},
                                     std::vector<int64_t> chunkStages = {},
                                     const PipelineSchedule *linksFor = nullptr) {
  TestJob job;
  const int stages = static_cast<int>(schedule.stages.size());
  if (chunkStages.empty())
    chunkStages = chunkPerStage(stages);
  std::vector<StageResult> results(static_cast<size_t>(stages));
  runRanks(stages, [&](int stage) {
    auto comm = stages > 1 ? job.connect(stage, stages, prefix, timeout) : nullptr;
    ASSERT_TRUE(comm || stages == 1);
    FakeStage fake(stage, chunkStages, ring);
    if (setup)
      setup(stage, fake);
    TraceRecorder trace(stage);
    std::optional<PipelineLinks> links;
    if (comm) {
      Expected<PipelineLinks> made =
          PipelineLinks::create(*comm, std::span(linksFor ? linksFor : &schedule, 1));
      ASSERT_TRUE(made.ok()) << made.error().message();
      links.emplace(std::move(*made));
    }
    Expected<ScheduleExecutor> executor =
        ScheduleExecutor::create(schedule, stage, links ? &*links : nullptr, &trace);
    ASSERT_TRUE(executor.ok()) << executor.error().message();
    StageResult &r = results[static_cast<size_t>(stage)];
    std::vector<StageStepTimes> times;
    auto start = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) {
      Expected<StageStepTimes> t = executor->runStep(fake);
      r.steps.push_back(t.takeError());
      if (!r.steps.back().ok()) {
        links.reset(); // this stage is gone: its peers' operations fail
        comm.reset();
        break;
      }
      times.push_back(*t);
    }
    r.took = std::chrono::steady_clock::now() - start;
    if (r.steps.back().ok()) {
      Expected<std::vector<double>> bubbles = measureBubbleFractions(comm.get(), times);
      EXPECT_TRUE(bubbles.ok()) << bubbles.error().message();
      if (bubbles)
        r.bubbles = *bubbles;
    }
    r.inputGradients = fake.inputGradients;
    r.mismatches = fake.mismatches;
    r.reductions = fake.reductions;
    r.optimizerSteps = fake.optimizerSteps;
    r.weightGradients = fake.weightGradients;
    r.events = fake.events;
    for (const TraceSpan &span : trace.spans())
      ++r.spans[span.category];
  });
  return results;
}

void expectCorrect(const std::vector<StageResult> &results, int m, int steps, int chunks = 0) {
  const int stages = static_cast<int>(results.size());
  if (chunks == 0)
    chunks = stages;
  for (int s = 0; s < stages; ++s) {
    const StageResult &r = results[static_cast<size_t>(s)];
    for (const Error &e : r.steps)
      EXPECT_TRUE(e.ok()) << e.message();
    EXPECT_TRUE(r.mismatches.empty()) << r.mismatches.front();
    EXPECT_EQ(r.reductions, steps);
    EXPECT_EQ(r.optimizerSteps, steps);
  }
  ASSERT_EQ(results[0].inputGradients.size(), size_t(m));
  for (int i = 0; i < m; ++i)
    EXPECT_EQ(results[0].inputGradients.at(i), expectedInputGradient(chunks, i)) << i;
}

TEST(ScheduleExecutor, OneFOneBOnTwoAndFourStages) {
  for (int stages : {2, 4}) {
    PipelineSchedule s = buildSchedule(TestScheduleKind::OneFOneB, stages, 8);
    expectCorrect(runPipeline(s, 2, 8, concat("1f1b", stages)), 8, 2);
  }
}

// The executor gives each send's buffer back right before the compute task sendReleases
// names (PipelineSchedule.h), on every run: 1F1B on 2 stages, 4 micro-batches, stage 0's
// activation i before its backward i, stage 1's gradients 0 and 1 before its forwards 2 and
// 3; gradients 2 and 3 are never given back during the step (the compute frees them after).
TEST(ScheduleExecutor, GivesSendsBackWhereTheyAreKnownToHaveArrived) {
  PipelineSchedule s = buildSchedule(TestScheduleKind::OneFOneB, 2, 4);
  std::vector<StageResult> results = runPipeline(s, 2, 8, "sent");
  expectCorrect(results, 4, 2);
  auto before = [](const std::vector<std::string> &events, const std::string &what) {
    std::vector<std::string> found;
    for (size_t k = 0; k + 1 < events.size(); ++k)
      if (events[k].rfind("sent ", 0) == 0 && events[k + 1] == what)
        found.push_back(events[k]);
    return found;
  };
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(before(results[0].events, concat("run backward 0 ", i)),
              std::vector<std::string>(2, concat("sent send_activation 0 ", i)))
        << i;
  for (int i : {2, 3})
    EXPECT_EQ(before(results[1].events, concat("run forward 1 ", i)),
              std::vector<std::string>(2, concat("sent send_gradient 1 ", i - 2)))
        << i;
  auto count = [](const std::vector<std::string> &events, const std::string &what) {
    return std::count(events.begin(), events.end(), what);
  };
  EXPECT_EQ(count(results[1].events, "sent send_gradient 1 2"), 0);
  EXPECT_EQ(count(results[1].events, "sent send_gradient 1 3"), 0);
}

TEST(ScheduleExecutor, GPipeOnTwoAndFourStages) {
  for (int stages : {2, 4}) {
    PipelineSchedule s = buildSchedule(TestScheduleKind::GPipe, stages, 4);
    expectCorrect(runPipeline(s, 2, 4, concat("gpipe", stages)), 4, 2);
  }
}

TEST(ScheduleExecutor, SeveralChunksPerStage) {
  // Megatron's interleaved placement (chunk c on stage c % P), ZB-V's V shape (stage 1 holds
  // chunks 1 and 2 and hands over between them locally) with the B/W split, and one stage
  // holding two chunks (no communicator at all).
  struct Case {
    std::vector<int64_t> placement;
    int stages;
    bool split;
  };
  for (const Case &c : {Case{{0, 1, 0, 1}, 2, false}, Case{{0, 1, 1, 0}, 2, true},
                        Case{{0, 1, 2, 3, 3, 2, 1, 0}, 4, true}, Case{{0, 0}, 1, true}}) {
    const int m = 4, chunks = static_cast<int>(c.placement.size());
    PipelineSchedule s = buildChunkedGPipe(c.placement, c.stages, m, c.split);
    // The loader accepts the lists the executor is given here.
    PipelinePlan plan;
    plan.stages = c.stages;
    plan.virtualStages = chunks / c.stages;
    plan.schedule = c.split ? "zb-v" : "interleaved";
    plan.chunkLayers.assign(c.placement.size(), 1);
    plan.chunkStages = c.placement;
    plan.schedules.push_back(s);
    Expected<PipelinePlan> read = parsePipeline(pipelineJson(plan));
    ASSERT_TRUE(read.ok()) << read.error().message();
    auto results = runPipeline(s, 2, 2, concat("chunks", chunks, c.split), 2000ms, {},
                               c.placement);
    expectCorrect(results, m, 2, chunks);
    for (const StageResult &r : results)
      EXPECT_EQ(r.weightGradients, c.split ? 2 * m * chunks / c.stages : 0);
  }
}

TEST(ScheduleExecutor, RunsTheEvaluationLists) {
  // Forward-only lists (EvaluationSchedule.h) on the links of a training schedule, as a
  // pipeline plan evaluates: every forward gets its input (the fake checks the values), the
  // chunk forwards run in micro-batch order, and nothing else runs.
  struct Case {
    std::vector<int64_t> placement;
    int stages;
  };
  const std::vector<Case> cases = {Case{{0, 1}, 2}, Case{{0, 1, 2, 3}, 4}, Case{{0, 1, 0, 1}, 2},
                                   Case{{0, 1, 1, 0}, 2}};
  for (size_t n = 0; n < cases.size(); ++n) {
    const Case &c = cases[n];
    const int m = 4, chunks = static_cast<int>(c.placement.size());
    PipelineSchedule training = buildChunkedGPipe(c.placement, c.stages, m, false);
    PipelinePlan plan;
    plan.stages = c.stages;
    plan.chunkStages = c.placement;
    Expected<PipelineSchedule> evaluation = evaluationSchedule(plan, m);
    ASSERT_TRUE(evaluation.ok()) << evaluation.error().message();
    // Twice, as an evaluation of two batches runs the lists; ring 1: one buffer per kind.
    auto results =
        runPipeline(*evaluation, 2, 1, concat("eval", n), 2000ms, {}, c.placement, &training);
    for (size_t st = 0; st < results.size(); ++st) {
      const StageResult &r = results[st];
      ASSERT_EQ(r.steps.size(), 2u);
      for (const Error &e : r.steps)
        EXPECT_TRUE(e.ok()) << e.message();
      EXPECT_TRUE(r.mismatches.empty()) << r.mismatches.front();
      EXPECT_EQ(r.reductions + r.optimizerSteps + r.weightGradients, 0);
      EXPECT_TRUE(r.inputGradients.empty());
      std::vector<std::string> runs, want;
      for (const std::string &e : r.events)
        if (e.rfind("run ", 0) == 0)
          runs.push_back(e);
      for (int step = 0; step < 2; ++step)
        for (int i = 0; i < m; ++i)
          for (int k = 0; k < chunks; ++k)
            if (c.placement[size_t(k)] == int64_t(st))
              want.push_back(concat("run forward ", k, ' ', i));
      EXPECT_EQ(runs, want) << "stage " << st;
    }
  }
}

TEST(ScheduleExecutor, ReceivesArePostedBeforeTheyAreNeeded) {
  // GPipe's last stage: the activation of micro-batch 1 is awaited while micro-batch 0's
  // forward runs, and the next forward's input is posted before that forward starts.
  PipelineSchedule s = buildSchedule(TestScheduleKind::GPipe, 2, 4);
  auto results = runPipeline(s, 1, 4, "early");
  expectCorrect(results, 4, 1);
  const std::vector<std::string> &e = results[1].events;
  auto at = [&](const std::string &event) {
    return std::find(e.begin(), e.end(), event) - e.begin();
  };
  EXPECT_LT(at("post recv_activation 1 1"), at("run forward 1 0"));
  EXPECT_LT(at("post recv_activation 1 2"), at("run forward 1 1"));
  EXPECT_LT(at("run forward 1 0"), static_cast<ptrdiff_t>(e.size()));
}

TEST(ScheduleExecutor, RecordsItsSpans) {
  PipelineSchedule s = buildSchedule(TestScheduleKind::OneFOneB, 2, 4);
  auto results = runPipeline(s, 1, 4, "spans");
  expectCorrect(results, 4, 1);
  for (const StageResult &r : results) {
    EXPECT_EQ(r.spans.at("compute"), 8) << "4 forwards, 4 backwards";
    EXPECT_EQ(r.spans.at("optimizer"), 1);
    // reduce_gradients, plus one span per wait that found its message not there yet.
    EXPECT_GE(r.spans.at("communication"), 1);
  }
}

TEST(ScheduleExecutor, SharedBuffersWaitForTheirSends) {
  // One buffer per kind for all micro-batches: every forward overwrites the buffer of the
  // previous micro-batch's send, and every receive goes into the buffer of the last one.
  PipelineSchedule s = buildSchedule(TestScheduleKind::GPipe, 2, 4);
  expectCorrect(runPipeline(s, 2, 1, "ring1"), 4, 2);
  PipelineSchedule t = buildSchedule(TestScheduleKind::OneFOneB, 4, 6);
  expectCorrect(runPipeline(t, 1, 2, "ring2"), 6, 1);
}

TEST(ScheduleExecutor, MeasuresTheBubble) {
  // With unit times (F = 5 ms, BW = 10 ms) 1F1B idles (p - 1) / (m + p - 1) = 3 / 11 of the
  // span on every stage; communication and scheduling add a little.
  PipelineSchedule s = buildSchedule(TestScheduleKind::OneFOneB, 4, 8);
  auto results = runPipeline(s, 2, 8, "bubble", 2000ms,
                             [](int, FakeStage &fake) { fake.unitSeconds = 0.005; });
  expectCorrect(results, 8, 2);
  for (const StageResult &r : results) {
    ASSERT_EQ(r.bubbles.size(), 4u);
    // No timing bounds: a loaded machine stretches the stages unevenly, which widens one
    // stage's bubble and narrows another's below the schedule's 3 / 11 (the tests run beside
    // others). Every stage idles somewhere (the last waits for the first forward), so each
    // measured fraction is in (0, 1); the schedule's own figure is checked in the line below.
    for (double b : r.bubbles) {
      EXPECT_GT(b, 0.0);
      EXPECT_LT(b, 1.0);
    }
    EXPECT_EQ(r.bubbles, results[0].bubbles) << "every stage learns every stage's fraction";
  }
  std::string line = describeBubbles(s, results[0].bubbles);
  EXPECT_TRUE(std::regex_match(line, std::regex("pipeline bubble: stage 0 0\\.[0-9]{3} \\(schedule "
                                                "0\\.273\\), stage 1 .*, stage 3 0\\.[0-9]{3} "
                                                "\\(schedule 0\\.273\\)")))
      << line;
}

TEST(ScheduleExecutor, APeerThatDiesMidStepIsNamed) {
  PipelineSchedule s = buildSchedule(TestScheduleKind::OneFOneB, 2, 4);
  auto start = std::chrono::steady_clock::now();
  auto results = runPipeline(s, 1, 4, "dies", 500ms, [](int stage, FakeStage &fake) {
    if (stage == 1)
      fake.hook = [](const ScheduleTask &t) {
        return t.op == TaskOp::Forward && t.microBatch == 1 ? makeError("injected failure")
                                                            : Error::success();
      };
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  ASSERT_EQ(results[1].steps.size(), 1u);
  EXPECT_EQ(results[1].steps[0].message(), "stage 1: forward chunk 1 micro-batch 1: injected failure");
  ASSERT_EQ(results[0].steps.size(), 1u);
  // Stage 0 learns it from the receive of micro-batch 1's gradient, or from a send of a
  // later activation, whichever fails first.
  const std::string &m = results[0].steps[0].message();
  EXPECT_TRUE(std::regex_search(m, std::regex("^stage 0: (recv_gradient chunk 0 micro-batch 1 "
                                              "from|send_activation chunk 0 micro-batch [23] to) "
                                              "stage 1 failed: gloo (recv|send) \\(rank [01] of 2\\)")))
      << m;
}

TEST(ScheduleExecutor, AStoppedPeerFailsWithinTheTimeout) {
  PipelineSchedule s = buildSchedule(TestScheduleKind::OneFOneB, 2, 2);
  auto results = runPipeline(s, 1, 2, "stopped", 300ms, [&](int stage, FakeStage &fake) {
    if (stage == 1) // stopped in its first forward, for longer than the timeout
      fake.hook = [](const ScheduleTask &t) {
        if (t.op == TaskOp::Forward && t.microBatch == 0)
          std::this_thread::sleep_for(1500ms);
        return Error::success();
      };
  });
  ASSERT_FALSE(results[0].steps[0].ok());
  EXPECT_EQ(results[0].steps[0].message().rfind(
                "stage 0: recv_gradient chunk 0 micro-batch 0 from stage 1 failed: ", 0),
            0u)
      << results[0].steps[0].message();
  EXPECT_LT(results[0].took, 1s);
}

TEST(ScheduleExecutor, AReceiveIntoTheBufferOfAnUnconsumedOneIsRefused) {
  // GPipe's last stage with both receives first (a list the loader accepts), and a fake that
  // hands out one buffer for every micro-batch's activation (ring 1): the second receive
  // would overwrite the first before its forward reads it.
  PipelineSchedule s = buildSchedule(TestScheduleKind::GPipe, 2, 2);
  std::vector<ScheduleTask> &last = s.stages[1].tasks;
  ASSERT_EQ(last[1].op, TaskOp::Forward);
  ASSERT_EQ(last[2].op, TaskOp::RecvActivation);
  std::swap(last[1], last[2]); // recv mb0, recv mb1, forward mb0, forward mb1, ...
  PipelinePlan plan;
  plan.stages = 2;
  plan.virtualStages = 1;
  plan.schedule = "gpipe";
  plan.chunkLayers = {1, 1};
  plan.chunkStages = {0, 1};
  plan.schedules.push_back(s);
  Expected<PipelinePlan> read = parsePipeline(pipelineJson(plan));
  ASSERT_TRUE(read.ok()) << read.error().message();
  auto results = runPipeline(s, 1, 1, "overlap", 500ms);
  ASSERT_EQ(results[1].steps.size(), 1u);
  EXPECT_EQ(results[1].steps[0].message(),
            "stage 1: the buffer of recv_activation chunk 1 micro-batch 1 overlaps the buffer of "
            "a receive not yet consumed");
  // With a buffer per micro-batch the same list runs.
  expectCorrect(runPipeline(s, 1, 2, "nooverlap"), 2, 1);
}

TEST(ScheduleExecutor, TheInFlightBoundIsEnforced) {
  // One stage running GPipe holds both micro-batches' activations; a list that promises one
  // is refused at the second forward.
  PipelineSchedule s = buildSchedule(TestScheduleKind::GPipe, 1, 2);
  s.stages[0].inFlight = 1;
  Expected<ScheduleExecutor> executor = ScheduleExecutor::create(s, 0, nullptr);
  ASSERT_TRUE(executor.ok()) << executor.error().message();
  FakeStage fake(0, {0}, 2);
  Expected<StageStepTimes> t = executor->runStep(fake);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message(), "stage 0: forward chunk 0 micro-batch 1 would hold 2 "
                                 "activations, more than the schedule's in_flight 1");
  s.stages[0].inFlight = 2;
  Expected<ScheduleExecutor> enough = ScheduleExecutor::create(s, 0, nullptr);
  ASSERT_TRUE(enough.ok());
  Expected<StageStepTimes> ok = enough->runStep(fake);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(fake.inputGradients.at(1), expectedInputGradient(1, 1));
}

TEST(ScheduleExecutor, LinksOnlyWhereTheSchedulesSend) {
  // 1F1B on 3 stages: messages go between neighbours only, both ways.
  PipelineSchedule s = buildSchedule(TestScheduleKind::OneFOneB, 3, 2);
  TestJob job;
  std::vector<std::vector<bool>> to(3), from(3);
  runRanks(3, [&](int stage) {
    auto comm = job.connect(stage, 3, "links");
    ASSERT_TRUE(comm);
    Expected<PipelineLinks> links = PipelineLinks::create(*comm, std::span(&s, 1));
    ASSERT_TRUE(links.ok()) << links.error().message();
    EXPECT_EQ(links->stage(), stage);
    for (int peer = 0; peer < 3; ++peer) {
      to[stage].push_back(links->to(peer) != nullptr);
      from[stage].push_back(links->from(peer) != nullptr);
      if (Communicator *link = links->to(peer)) {
        EXPECT_EQ(link->size(), 2);
        EXPECT_EQ(link->rank(), PipelineLinks::kSenderRank);
      }
    }
  });
  EXPECT_EQ(to[0], (std::vector<bool>{false, true, false}));
  EXPECT_EQ(to[1], (std::vector<bool>{true, false, true}));
  EXPECT_EQ(to[2], (std::vector<bool>{false, true, false}));
  EXPECT_EQ(from, to);
}

TEST(ScheduleExecutor, LinksNeedAGroupOfTheSchedulesStages) {
  // A 2-stage schedule on a 3-rank pipeline group: refused before any link is made.
  PipelineSchedule s = buildSchedule(TestScheduleKind::OneFOneB, 2, 2);
  TestJob job;
  std::vector<std::string> errors(3);
  runRanks(3, [&](int rank) {
    auto comm = job.connect(rank, 3, "mismatch");
    ASSERT_TRUE(comm);
    Expected<PipelineLinks> links = PipelineLinks::create(*comm, std::span(&s, 1));
    ASSERT_FALSE(links.ok());
    errors[rank] = links.error().message();
  });
  for (const std::string &error : errors)
    EXPECT_EQ(error, "the pipeline group has 3 ranks, but the schedule for 2 micro-batches has "
                     "2 stages");
}

TEST(ScheduleExecutor, TheGroupMustFitTheSchedule) {
  PipelineSchedule s = buildSchedule(TestScheduleKind::GPipe, 2, 2);
  Expected<ScheduleExecutor> none = ScheduleExecutor::create(s, 0, nullptr);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message(), "a schedule of 2 stages needs the links between its stages");
  Expected<ScheduleExecutor> outside = ScheduleExecutor::create(s, 2, nullptr);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.error().message(), "stage 2 is not a stage of the schedule (2 stages)");
}

} // namespace
