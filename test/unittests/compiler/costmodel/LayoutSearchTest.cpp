//===- LayoutSearchTest.cpp - composing layouts over per-layer costs ------===//

#include "compiler/costmodel/LayoutSearch.h"

#include "compiler/costmodel/CollectiveModel.h"
#include "compiler/costmodel/ScheduleSimulation.h"

#include "gtest/gtest.h"

#include <map>

using namespace mtc::costmodel;
namespace rt = mtc::rt;

namespace {

/// A cluster whose numbers make times easy to follow: 1 TFLOP/s at full GEMM efficiency,
/// 1 TB/s memory, no kernel overhead, 8 devices of 1 GB per node.
Cluster plainCluster() {
  Cluster c;
  c.name = "plain";
  c.deviceName = "test device";
  c.devicesPerNode = 8;
  c.memoryBytes = int64_t(1) << 30;
  c.peakFlops = {{"f32", 1e12}};
  c.gemmEfficiency = {{1, 1.0}};
  c.memoryBandwidth = 1e12;
  c.kernelOverhead = 0;
  c.intraNode = {100e9, 1e-6};
  c.interNode = {10e9, 5e-6};
  return c;
}

/// 8 layers of one 1 GFLOP GEMM each (forward and backward together) and 1 MB of batched
/// traffic; an embedding of 1 MB of traffic and a head of one 2 GFLOP GEMM.
LayerCosts plainCosts(int64_t microBatch = 1, double factor = 1) {
  LayerCosts c;
  c.layout = {1, 1, 1, false, "none"};
  c.meshSize = 1;
  c.microBatch = microBatch;
  c.layers = 8;
  c.layer.gemms = {{1e9 * factor, 1}};
  c.layer.trafficBytes = 1e6 * factor + 1e5; // 1e5 bytes of parameter traffic stay
  c.layer.batchTrafficBytes = 1e6 * factor;
  // A third of it forward, a third of the backward (a third of the whole) weight gradients.
  c.layerForward.gemms = {{1e9 * factor / 3, 1}};
  c.layerForward.trafficBytes = c.layer.trafficBytes / 3;
  c.layerForward.batchTrafficBytes = c.layer.batchTrafficBytes / 3;
  c.layerBackwardWeight = c.layerForward;
  c.first.trafficBytes = 1e6 * factor;
  c.first.batchTrafficBytes = 1e6 * factor;
  c.last.gemms = {{2e9 * factor, 1}};
  c.optimizer.trafficBytes = 8e6;
  c.layerParamBytes = 1e6;
  c.restParamBytes = 2e6;
  c.paramTensors = 20;
  c.stateRatio = 2;
  c.layerSavedBytes = 4e6 * factor;
  c.largestValueBytes = 1e6 * factor;
  c.tokenBytes = 1e3 * factor;
  c.activationBytes = 0;
  return c;
}

/// 1F1B's task lists (Narayanan et al.: p - s - 1 forwards, then one forward and one
/// backward at a time), as compiler/pipeline/Schedules.cpp generates them.
rt::PipelineSchedule oneFOneB(int64_t p, int64_t m) {
  rt::PipelineSchedule schedule;
  schedule.microBatches = m;
  for (int32_t s = 0; s < p; ++s) {
    std::vector<rt::ScheduleTask> &tasks = schedule.stages.emplace_back().tasks;
    auto f = [&](int32_t i) {
      if (s > 0)
        tasks.push_back({rt::TaskOp::RecvActivation, s, i, s - 1});
      tasks.push_back({rt::TaskOp::Forward, s, i});
      if (s + 1 < p)
        tasks.push_back({rt::TaskOp::SendActivation, s, i, s + 1});
    };
    auto b = [&](int32_t i) {
      if (s + 1 < p)
        tasks.push_back({rt::TaskOp::RecvGradient, s, i, s + 1});
      tasks.push_back({rt::TaskOp::Backward, s, i});
      if (s > 0)
        tasks.push_back({rt::TaskOp::SendGradient, s, i, s - 1});
    };
    int32_t warmup = static_cast<int32_t>(std::min<int64_t>(m, p - s - 1)), nf = 0, nb = 0;
    for (; nf < warmup; ++nf)
      f(nf);
    for (; nf < m; ++nf, ++nb) {
      f(nf);
      b(nb);
    }
    for (; nb < m; ++nb)
      b(nb);
    tasks.push_back({rt::TaskOp::ReduceGradients});
    tasks.push_back({rt::TaskOp::OptimizerStep});
  }
  return schedule;
}

SearchOptions plainOptions(int64_t gpus, int64_t globalBatch) {
  SearchOptions o;
  o.schedules = [](llvm::StringRef kind, int64_t p, int64_t v,
                   int64_t m) -> llvm::Expected<const rt::PipelineSchedule *> {
    static std::map<std::pair<int64_t, int64_t>, rt::PipelineSchedule> made;
    if (kind != "1f1b" || v != 1)
      return llvm::createStringError("the test schedules 1F1B only");
    auto it = made.find({p, m});
    if (it == made.end())
      it = made.emplace(std::make_pair(p, m), oneFOneB(p, m)).first;
    return &it->second;
  };
  o.gpus = gpus;
  o.globalBatch = globalBatch;
  o.seq = 128;
  o.modelFlopsPerToken = 1e6;
  return o;
}

Candidate compose(const LayerCosts &costs, Layout layout, const SearchOptions &options,
                  const Cluster &cluster = plainCluster()) {
  llvm::Expected<Candidate> c = composeLayout(costs, layout, cluster, options);
  if (!c) {
    ADD_FAILURE() << llvm::toString(c.takeError());
    return {};
  }
  return *c;
}

// Tests that one stage without data parallelism is its micro-batches' forward_backward (the
// embedding, every layer, the head) and the optimizer step, as `mtc simulate` sums them.
TEST(LayoutSearch, OneStageIsTheSumOfItsParts) {
  LayerCosts costs = plainCosts();
  Layout layout;
  layout.schedule = "none";
  Candidate c = compose(costs, layout, plainOptions(1, 4));
  double microBatch = 1e-6 /*embedding*/ + 8 * (1e-3 + 1.1e-6) /*layers*/ + 2e-3 /*head*/;
  EXPECT_EQ(c.microBatchesPerRank, 4);
  EXPECT_NEAR(c.stepSeconds, 4 * microBatch + 8e-6 /*optimizer*/, 1e-12);
  EXPECT_NEAR(c.bubbleSeconds, 0, 1e-12);
  EXPECT_NEAR(c.mfu, 4 * 128 * 1e6 / c.stepSeconds / 1e12, 1e-12);
}

// Tests that a step compiled at one micro-batch and scaled to another equals the step
// compiled at the other: matrix products and batched bytes grow, parameter bytes stay.
TEST(LayoutSearch, MicroBatchScalingMatchesACompiledMicroBatch) {
  SearchOptions options = plainOptions(1, 8);
  Layout layout;
  layout.schedule = "none";
  layout.microBatch = 4;
  Candidate scaled = compose(plainCosts(1, 1), layout, options);
  Candidate compiled = compose(plainCosts(4, 4), layout, options);
  EXPECT_NEAR(scaled.stepSeconds, compiled.stepSeconds, 1e-12);
  EXPECT_NEAR(scaled.memoryBytes, compiled.memoryBytes, 1e-3);
}

// Tests that 1F1B over equal stages composes to (m + p - 1) stage times: its schedule
// simulated, each task its chunk's forward or backward (free messages), then each stage's
// optimizer step.
TEST(LayoutSearch, OneFOneBIsSimulated) {
  LayerCosts costs = plainCosts();
  costs.first = costs.firstForward = {};
  costs.last = costs.lastForward = {};
  costs.restParamBytes = 0;
  Cluster cluster = plainCluster();
  cluster.intraNode.latency = 0;
  const int64_t p = 4, m = 8;
  Layout layout;
  layout.pp = p;
  layout.schedule = "1f1b";
  Candidate c = compose(costs, layout, plainOptions(p, m), cluster);
  ASSERT_EQ(c.chunkLayers, (std::vector<int64_t>{2, 2, 2, 2}));
  double stage = 2 * (1e-3 + 1.1e-6); // two layers, forward and backward
  double optimizer = 8e6 / 4 / 1e12;  // a quarter of the parameters per stage
  double norm = collectiveTime(cluster, CollectiveKind::AllReduce, 16, placeGroup(p, 1, 8)).seconds;
  EXPECT_NEAR(c.stepSeconds, (m + p - 1) * stage + norm + optimizer, 1e-9);
  EXPECT_NEAR(c.bubbleSeconds, (p - 1) * stage, 1e-9);
  // Beyond 3 p micro-batches the steady state is extended: still (m + p - 1) stages.
  Candidate longer = compose(costs, layout, plainOptions(p, 64), cluster);
  EXPECT_NEAR(longer.stepSeconds, (64 + p - 1) * stage + norm + optimizer, 1e-9);
}

// Tests that the stage cut is balanced by the cost model: a heavy head leaves the last
// stage fewer layers.
TEST(LayoutSearch, StageCutBalancesTheHead) {
  LayerCosts costs = plainCosts();
  costs.last.gemms = {{4e9, 1}}; // four layers' worth
  Layout layout;
  layout.pp = 2;
  Candidate c = compose(costs, layout, plainOptions(2, 4));
  ASSERT_EQ(c.chunkLayers.size(), 2u);
  EXPECT_EQ(c.chunkLayers[0] + c.chunkLayers[1], 8);
  EXPECT_EQ(c.chunkLayers[1], 2); // 2 layers + the head = 6 layer times; 6 layers before
}

// Tests that ZeRO-3 shards the parameters, their gradients and optimizer state over dp and
// holds one layer gathered, and that each micro-batch gathers every layer's parameters twice
// and reduce-scatters the stack's gradients once, where ZeRO-1 reduce-scatters and gathers
// once per step.
TEST(LayoutSearch, ZeroThreeShardsParametersAndGathersThemPerMicroBatch) {
  LayerCosts costs = plainCosts();
  costs.paramTensors = 2;
  costs.layerParamTensors = 1;
  Layout layout;
  layout.schedule = "none";
  layout.dp = 2;
  layout.zeroStage = 1;
  Candidate one = compose(costs, layout, plainOptions(2, 8));
  layout.zeroStage = 3;
  Candidate three = compose(costs, layout, plainOptions(2, 8));
  double params = 8 * 1e6 + 2e6; // 8 layers and the rest
  // ZeRO-1: the parameters (once: the optimizer updates them in place) and the gradients'
  // two buffers whole; ZeRO-3: their halves, one gradient buffer, and a layer's parameters
  // and gradient gathered.
  EXPECT_NEAR(one.memoryBytes - three.memoryBytes,
              (params + params + params) - (params / 2 + params / 2 + 2 * 1e6), 1);
  Cluster cluster = plainCluster();
  auto time = [&](CollectiveKind kind, double bytes) {
    return collectiveTime(cluster, kind, bytes, placeGroup(2, 1, 8)).seconds;
  };
  double perMicroBatch =
      8 * 2 * time(CollectiveKind::AllGather, 1e6 / 2) + 2 * time(CollectiveKind::AllGather, 1e6) +
      time(CollectiveKind::ReduceScatter, 8e6) + time(CollectiveKind::ReduceScatter, 2e6);
  EXPECT_NEAR(three.layerCommunicationSeconds, 4 * perMicroBatch, 1e-9);
  EXPECT_EQ(three.microBatchesPerRank, 4);
}

// Tests that timing only the layouts whose lower bound matters gives the Pareto front and
// the two fastest layouts of timing every one.
TEST(LayoutSearch, BoundedTimingKeepsTheFrontAndTheFastest) {
  std::vector<LayerCosts> all = {plainCosts()};
  SearchOptions options = plainOptions(8, 64);
  SearchResult result = searchLayouts(all, plainCluster(), options);
  std::vector<Candidate> every;
  for (const Candidate &c : result.fitting) {
    llvm::Expected<Candidate> full = composeLayout(all[0], c.layout, plainCluster(), options);
    if (!full) { // a schedule the test does not generate: never timed
      EXPECT_FALSE(c.timed);
      llvm::consumeError(full.takeError());
      continue;
    }
    EXPECT_LE(c.stepSeconds, full->stepSeconds + 1e-12); // a bound or the time
    every.push_back(std::move(*full));
  }
  llvm::stable_sort(every, [](const Candidate &a, const Candidate &b) {
    return a.stepSeconds < b.stepSeconds ||
           (a.stepSeconds == b.stepSeconds && a.memoryBytes < b.memoryBytes);
  });
  SearchResult exact;
  exact.fitting = every;
  std::vector<Candidate> front = result.pareto(), exactFront = exact.pareto();
  ASSERT_EQ(front.size(), exactFront.size());
  for (size_t i = 0; i < front.size(); ++i) {
    EXPECT_TRUE(front[i].timed);
    EXPECT_NEAR(front[i].stepSeconds, exactFront[i].stepSeconds, 1e-12);
    EXPECT_EQ(front[i].memoryBytes, exactFront[i].memoryBytes);
  }
  ASSERT_GE(result.fitting.size(), 2u);
  EXPECT_NEAR(result.fitting[1].stepSeconds, every[1].stepSeconds, 1e-12);
  EXPECT_LT(llvm::count_if(result.fitting, [](const Candidate &c) { return c.timed; }),
            static_cast<std::ptrdiff_t>(result.fitting.size())); // some were left untimed
}

// Tests the errors of layouts that cannot run.
TEST(LayoutSearch, RefusesLayoutsThatCannotRun) {
  LayerCosts costs = plainCosts();
  SearchOptions options = plainOptions(4, 6);
  Layout layout;
  layout.dp = 4; // 6 sequences over 4 ranks
  llvm::Expected<Candidate> c = composeLayout(costs, layout, plainCluster(), options);
  ASSERT_FALSE(static_cast<bool>(c));
  EXPECT_NE(llvm::toString(c.takeError()).find("does not share"), std::string::npos);
  layout.dp = 2; // 2 ranks of a 4-rank job
  c = composeLayout(costs, layout, plainCluster(), options);
  ASSERT_FALSE(static_cast<bool>(c));
  EXPECT_NE(llvm::toString(c.takeError()).find("is not 4 ranks"), std::string::npos);
  layout = {};
  layout.dp = 4;
  layout.microBatch = 2; // a step whose products do not all grow with the micro-batch
  LayerCosts fixed = costs;
  fixed.scalesWithMicroBatch = false;
  options.globalBatch = 8;
  c = composeLayout(fixed, layout, plainCluster(), options);
  ASSERT_FALSE(static_cast<bool>(c));
  EXPECT_NE(llvm::toString(c.takeError()).find("compiled micro-batch (1) only"), std::string::npos);
}

// Tests ZeRO-2 with a pipeline: each stage holds one chunk call's gradients whole, their
// shards and the staging of the largest (a layer parameter stacked over the stage's layers)
// where ZeRO-1 holds two whole buffers; the gradients are reduce-scattered in the tasks,
// per micro-batch, not at the stage's end.
TEST(LayoutSearch, ZeroTwoWithAPipelineShardsTheGradientsInTheTasks) {
  LayerCosts costs = plainCosts();
  costs.paramTensors = 4;
  costs.layerParamTensors = 2;
  costs.largestLayerParamBytes = 0.5e6;
  costs.largestRestParamBytes = 1.5e6;
  Layout layout;
  layout.pp = 2;
  layout.dp = 2;
  layout.zeroStage = 1;
  SearchOptions options = plainOptions(4, 8); // 4 micro-batches per rank
  Candidate one = compose(costs, layout, options);
  layout.zeroStage = 2;
  Candidate two = compose(costs, layout, options);
  ASSERT_EQ(one.stageMemoryBytes.size(), 2u);
  ASSERT_EQ(two.stageMemoryBytes.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    double params = 4 * 1e6 + 2e6; // 4 layers; both stages hold the rest (a tied embedding)
    double staging = std::max(4 * 0.5e6, 1.5e6);
    EXPECT_NEAR(one.stageMemoryBytes[s] - two.stageMemoryBytes[s],
                2 * params - (params + params / 2 + staging), 1)
        << "stage " << s;
  }
  EXPECT_EQ(one.stageActivationBytes, two.stageActivationBytes);
  // The end of the step keeps the all-gather (and the loss); the reduce-scatters, once per
  // micro-batch and chunk in the backward tasks, make the step longer.
  EXPECT_LT(two.dataParallelSeconds, one.dataParallelSeconds);
  EXPECT_GT(two.layerCommunicationSeconds, one.layerCommunicationSeconds);
  EXPECT_GT(two.stepSeconds, one.stepSeconds);
  // The search takes it.
  SearchResult result = searchLayouts({costs}, plainCluster(), options);
  EXPECT_TRUE(llvm::any_of(result.fitting, [](const Candidate &c) {
    return c.layout.pp > 1 && c.layout.zeroStage == 2;
  }));
}

// Tests that the search's memo of the stages' buffer walks gives what walking gives, once.
TEST(LayoutSearch, StageBufferMemoWalksEachScheduleOnce) {
  rt::PipelineSchedule schedule = oneFOneB(2, 4);
  rt::ChunkBufferBytes bytes{{100, 200}, {0, 0}, {0, 0}, {10, 0}};
  StageBufferMemo memo;
  const std::vector<rt::StageBufferPeaks> &first = memo.peaks(schedule, {0, 1}, bytes);
  ASSERT_EQ(first.size(), 2u);
  for (int64_t s = 0; s < 2; ++s) {
    rt::StageBufferPeaks walked = rt::simulateStageBuffers(schedule.stages, s, {0, 1}, bytes);
    EXPECT_EQ(first[size_t(s)].saved, walked.saved);
    EXPECT_EQ(first[size_t(s)].held, walked.held);
  }
  EXPECT_EQ(&memo.peaks(schedule, {0, 1}, bytes), &first); // kept, not walked again
  bytes.residual[0] = 300;
  EXPECT_NE(&memo.peaks(schedule, {0, 1}, bytes), &first); // other sizes: another walk
  EXPECT_GT(memo.peaks(schedule, {0, 1}, bytes)[0].saved, first[0].saved);
}

// Tests the search's order: every fitting layout fastest first, the Pareto front fastest
// first with memory strictly falling, and nothing that fits is dominated on the front.
TEST(LayoutSearch, ParetoFrontIsOrdered) {
  std::vector<LayerCosts> all = {plainCosts()};
  SearchResult result = searchLayouts(all, plainCluster(), plainOptions(8, 64));
  ASSERT_FALSE(result.fitting.empty());
  for (size_t i = 1; i < result.fitting.size(); ++i)
    EXPECT_LE(result.fitting[i - 1].stepSeconds, result.fitting[i].stepSeconds);
  std::vector<Candidate> front = result.pareto();
  ASSERT_FALSE(front.empty());
  EXPECT_EQ(front.front().stepSeconds, result.fitting.front().stepSeconds);
  for (size_t i = 1; i < front.size(); ++i) {
    EXPECT_LT(front[i - 1].stepSeconds, front[i].stepSeconds + 1e-15);
    EXPECT_GT(front[i - 1].memoryBytes, front[i].memoryBytes);
  }
  for (const Candidate &c : result.fitting)
    for (const Candidate &f : front)
      EXPECT_FALSE(c.stepSeconds < f.stepSeconds && c.memoryBytes < f.memoryBytes);
}

// Tests that memory prunes first: on devices too small for any layout nothing fits, and the
// search names the smallest layout and what it needs.
TEST(LayoutSearch, NothingFitsOnTinyDevices) {
  Cluster tiny = plainCluster();
  tiny.memoryBytes = 1000;
  std::vector<LayerCosts> all = {plainCosts()};
  SearchResult result = searchLayouts(all, tiny, plainOptions(8, 64));
  EXPECT_TRUE(result.fitting.empty());
  EXPECT_GT(result.prunedByMemory, 0);
  ASSERT_TRUE(result.smallest.has_value());
  EXPECT_GT(result.smallest->memoryBytes, 1000);
}

} // namespace
