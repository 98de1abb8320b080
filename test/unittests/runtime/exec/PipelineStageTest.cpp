//===- PipelineStageTest.cpp - What one pipeline stage holds --------------===//
//
// stageHoldings, stagePlan, takeStage and putStage (runtime/exec/PipelineStage.h) on the toy
// pipeline plan (ToyPipelinePlan.h) cut as pp2 (even and uneven), interleaved pp2 x v2
// (stage 0 runs chunks 0 and 2), ZB-V's V (stage 0 runs chunk 0 and the last, so it holds the
// tied embedding once) and with a stage of 0 layers; the distributed optimizer's layout of a
// stage's tensors; the state split into stages and put back, whole or as tensor-parallel
// shards; and the errors.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/PipelineStage.h"
#include "runtime/exec/RankMesh.h"

#include "ToyPipelinePlan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace mtc::rt::test {
namespace {

using Chunk = StageHoldings::Chunk;

/// (chunk, first layer, layers, offset) of each of the stage's chunks.
std::vector<std::vector<int64_t>> chunksOf(const StageHoldings &h) {
  std::vector<std::vector<int64_t>> out;
  for (const Chunk &c : h.chunks)
    out.push_back({c.chunk, c.firstLayer, c.numLayers, c.offset});
  return out;
}

StageHoldings holdingsOf(const Plan &plan, int64_t stage) {
  Expected<StageHoldings> h = stageHoldings(plan, stage);
  EXPECT_TRUE(h.ok()) << h.error().message();
  return h ? *h : StageHoldings();
}

using Rows = std::vector<std::vector<int64_t>>;
using Indices = std::vector<size_t>;

TEST(PipelineStageTest, EvenSplit) {
  Plan plan = toyPipelinePlan({2, {0, 1}, {2, 2}});
  StageHoldings s0 = holdingsOf(plan, 0), s1 = holdingsOf(plan, 1);
  EXPECT_EQ(s0.stage, 0);
  EXPECT_EQ(chunksOf(s0), (Rows{{0, 0, 2, 0}}));
  EXPECT_EQ(s0.layers, 2);
  EXPECT_EQ(s0.params, (Indices{0, 1, 2}));
  EXPECT_EQ(s1.stage, 1);
  EXPECT_EQ(chunksOf(s1), (Rows{{1, 2, 2, 0}}));
  EXPECT_EQ(s1.layers, 2);
  EXPECT_EQ(s1.params, (Indices{0, 1, 2, 3})) << "the head's tied embedding and lnf.g";
}

TEST(PipelineStageTest, InterleavedStagesHoldEveryOtherChunk) {
  Plan plan = toyPipelinePlan({2, {0, 1, 0, 1}, {1, 1, 1, 1}});
  StageHoldings s0 = holdingsOf(plan, 0), s1 = holdingsOf(plan, 1);
  // Stage 0 runs layers 0 and 2, packed as its layers 0 and 1.
  EXPECT_EQ(chunksOf(s0), (Rows{{0, 0, 1, 0}, {2, 2, 1, 1}}));
  EXPECT_EQ(s0.layers, 2);
  EXPECT_EQ(s0.chunkOffset(0), 0);
  EXPECT_EQ(s0.chunkOffset(2), 1);
  EXPECT_EQ(s0.params, (Indices{0, 1, 2}));
  EXPECT_EQ(chunksOf(s1), (Rows{{1, 1, 1, 0}, {3, 3, 1, 1}}));
  EXPECT_EQ(s1.chunkOffset(3), 1);
  EXPECT_EQ(s1.params, (Indices{0, 1, 2, 3}));
}

TEST(PipelineStageTest, ZeroBubbleVHoldsTheTiedEmbeddingOnce) {
  Plan plan = toyPipelinePlan({2, {0, 1, 1, 0}, {1, 2, 2, 1}, /*splitBackward=*/true});
  StageHoldings s0 = holdingsOf(plan, 0), s1 = holdingsOf(plan, 1);
  EXPECT_EQ(chunksOf(s0), (Rows{{0, 0, 1, 0}, {3, 5, 1, 1}}));
  EXPECT_EQ(s0.layers, 2);
  EXPECT_EQ(s0.params, (Indices{0, 1, 2, 3})) << "wte once, though chunks 0 and 3 read it";
  EXPECT_EQ(chunksOf(s1), (Rows{{1, 1, 2, 0}, {2, 3, 2, 2}}));
  EXPECT_EQ(s1.layers, 4);
  EXPECT_EQ(s1.params, (Indices{1, 2})) << "the middle of the V holds no model parameter";
}

TEST(PipelineStageTest, UnevenSplitAndAStageOfNoLayers) {
  Plan uneven = toyPipelinePlan({2, {0, 1}, {3, 1}});
  EXPECT_EQ(chunksOf(holdingsOf(uneven, 0)), (Rows{{0, 0, 3, 0}}));
  EXPECT_EQ(chunksOf(holdingsOf(uneven, 1)), (Rows{{1, 3, 1, 0}}));
  EXPECT_EQ(stagePlan(uneven, holdingsOf(uneven, 0)).params[1].dims.front().size, 3);
  EXPECT_EQ(stagePlan(uneven, holdingsOf(uneven, 1)).params[1].dims.front().size, 1);

  // Stage 1 runs no layer: it holds no layer parameter, though its functions list them.
  Plan empty = toyPipelinePlan({2, {0, 1}, {2, 0}});
  StageHoldings s1 = holdingsOf(empty, 1);
  EXPECT_EQ(chunksOf(s1), (Rows{{1, 2, 0, 0}}));
  EXPECT_EQ(s1.layers, 0);
  EXPECT_EQ(s1.params, (Indices{0, 3}));
  Plan tables = stagePlan(empty, s1);
  ASSERT_EQ(tables.params.size(), 2u);
  EXPECT_EQ(tables.params[0].name, "wte");
  EXPECT_EQ(tables.params[1].name, "lnf.g");
  ASSERT_EQ(tables.states.size(), 2u);
  EXPECT_EQ(tables.states[0].name, "wte.m");
  EXPECT_EQ(tables.states[1].name, "lnf.g.m");
}

TEST(PipelineStageTest, Errors) {
  Plan plan = toyPipelinePlan({2, {0, 1}, {1, 1}});
  Plan noPipeline = plan;
  noPipeline.pipeline.reset();
  Expected<StageHoldings> none = stageHoldings(noPipeline, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message(), "pipe.plan: the plan has no pipeline with compiled chunks");
  Plan noKernels = plan;
  noKernels.x86Kernels.reset();
  EXPECT_FALSE(stageHoldings(noKernels, 0).ok());

  Plan missing = plan;
  missing.x86Kernels->chunks[1].forward.reset();
  EXPECT_TRUE(stageHoldings(missing, 0).ok()) << "stage 0 does not run chunk 1";
  Expected<StageHoldings> s1 = stageHoldings(missing, 1);
  ASSERT_FALSE(s1.ok());
  EXPECT_EQ(s1.error().message(),
            "pipe.plan: the plan's kernels have no 'chunk1.forward' function");
  missing.x86Kernels->chunks.pop_back();
  s1 = stageHoldings(missing, 1);
  ASSERT_FALSE(s1.ok());
  EXPECT_EQ(s1.error().message(),
            "pipe.plan: the plan's kernels have no 'chunk1.forward' function");
}

//===----------------------------------------------------------------------===//
// stagePlan
//===----------------------------------------------------------------------===//

TEST(PipelineStageTest, StagePlanResizesLayersAndReindexesStates) {
  Plan plan = toyPipelinePlan({2, {0, 1, 1, 0}, {1, 2, 2, 1}});
  // Stage 1 holds block.w and block.b (plan indices 1, 2) over 4 layers.
  Plan s1 = stagePlan(plan, holdingsOf(plan, 1));
  ASSERT_EQ(s1.params.size(), 2u);
  EXPECT_EQ(s1.params[0].name, "block.w");
  EXPECT_EQ(s1.params[0].dims, (std::vector<Dim>{{"layers", 4}, {"hidden", 4}, {"ffn", 6}}));
  EXPECT_EQ(s1.params[1].name, "block.b");
  EXPECT_EQ(s1.params[1].dims, (std::vector<Dim>{{"layers", 4}, {"odd", 3}}));
  // The states of the held parameters in the plan's table order, pointing into the stage's.
  ASSERT_EQ(s1.states.size(), 3u);
  EXPECT_EQ(s1.states[0].name, "block.b.m");
  EXPECT_EQ(s1.states[0].paramIndex, 1u);
  EXPECT_EQ(s1.states[1].name, "block.w.m");
  EXPECT_EQ(s1.states[1].paramIndex, 0u);
  EXPECT_EQ(s1.states[2].name, "block.w.v");
  EXPECT_EQ(s1.states[2].paramIndex, 0u);
  for (const StateInfo &s : s1.states)
    EXPECT_EQ(s.dims, s1.params[s.paramIndex].dims) << s.name;
  // Model parameters keep their dims; the rest of the plan is the plan's.
  Plan s0 = stagePlan(plan, holdingsOf(plan, 0));
  ASSERT_EQ(s0.params.size(), 4u);
  EXPECT_EQ(s0.params[0].dims, plan.params[0].dims);
  EXPECT_EQ(s0.params[1].dims.front().size, 2);
  EXPECT_EQ(s0.states.size(), 5u);
  EXPECT_EQ(s0.states[1].paramIndex, 0u) << "wte.m";
  EXPECT_EQ(s0.states[3].paramIndex, 3u) << "lnf.g.m";
  EXPECT_EQ(s0.mesh, plan.mesh);
  EXPECT_TRUE(s0.pipeline);
  EXPECT_FALSE(s0.params[1].optimizerLayout) << "no distributed optimizer: no optimizer layout";
}

TEST(PipelineStageTest, DistributedOptimizerLayoutOfAStageOfOneLayer) {
  // pp2 x dp2, one layer per stage: `layers` (1) cannot be split over dp2, so block.w's
  // gradient and state are split on the next divisible dim (hidden); block.b's others (odd=3)
  // are not divisible either: whole on every data-parallel rank.
  Plan plan = toyPipelinePlan({2, {0, 1}, {1, 1}, false, /*dp=*/2});
  ASSERT_TRUE(plan.dataParallelAxis);
  Plan s1 = stagePlan(plan, holdingsOf(plan, 1));
  ASSERT_EQ(s1.params.size(), 4u);
  auto dpOn = [](size_t dim) { return ParamLayout{{DimSplit{dim, {0}}}}; };
  EXPECT_EQ(s1.params[0].optimizerLayout, dpOn(0)) << "wte by vocab";
  EXPECT_EQ(s1.params[1].optimizerLayout, dpOn(1)) << "block.w by hidden";
  EXPECT_FALSE(s1.params[2].optimizerLayout) << "block.b has no dim dp2 divides";
  EXPECT_EQ(s1.params[3].optimizerLayout, dpOn(0)) << "lnf.g by hidden";
  EXPECT_EQ(s1.dataParallelShardDim(s1.params[1]), 1u);
  EXPECT_EQ(s1.optimizerLocalDims(s1.params[1]),
            (std::vector<Dim>{{"layers", 1}, {"hidden", 2}, {"ffn", 6}}));
  EXPECT_EQ(s1.dataParallelShardDim(s1.params[2]), std::nullopt);
}

TEST(PipelineStageTest, DistributedOptimizerLayoutOfAStageWhoseLayersDivide) {
  // Two layers per stage: the stage's gradients and states are split on `layers`.
  Plan plan = toyPipelinePlan({2, {0, 1}, {2, 2}, false, /*dp=*/2});
  Plan s0 = stagePlan(plan, holdingsOf(plan, 0));
  EXPECT_EQ(s0.params[1].optimizerLayout, (ParamLayout{{DimSplit{0, {0}}}}));
  EXPECT_EQ(s0.params[2].optimizerLayout, (ParamLayout{{DimSplit{0, {0}}}}));
  EXPECT_EQ(s0.optimizerLocalDims(s0.params[2]), (std::vector<Dim>{{"layers", 1}, {"odd", 3}}));
}

TEST(PipelineStageTest, DistributedOptimizerLayoutKeepsTheTensorParallelSplits) {
  // dp2 x tp2, one layer per stage: block.w's hidden is split over tp, so dp takes ffn; the
  // splits stay in dim order.
  Plan plan = toyPipelinePlan({2, {0, 1}, {1, 1}, false, /*dp=*/2, /*tp=*/2});
  Plan s0 = stagePlan(plan, holdingsOf(plan, 0));
  EXPECT_EQ(s0.params[1].layout, (ParamLayout{{DimSplit{1, {1}}}}));
  EXPECT_EQ(s0.params[1].optimizerLayout,
            (ParamLayout{{DimSplit{1, {1}}, DimSplit{2, {0}}}}));
  EXPECT_EQ(s0.optimizerLocalDims(s0.params[1]),
            (std::vector<Dim>{{"layers", 1}, {"hidden", 2}, {"ffn", 3}}));
}

//===----------------------------------------------------------------------===//
// takeStage / putStage
//===----------------------------------------------------------------------===//

/// The plan's initial state with every optimizer state set to distinct values.
TrainingState distinctState(const Plan &plan) {
  Expected<TrainingState> whole = TrainingState::initialize(plan, 1);
  EXPECT_TRUE(whole.ok());
  TrainingState state = whole ? std::move(*whole) : TrainingState();
  for (size_t k = 0; k < state.states.size(); ++k)
    for (size_t i = 0; i < state.states[k].values.size(); ++i)
      state.states[k].values[i] = float(1000 * k + i) + 0.5f;
  state.step = 17;
  return state;
}

/// `state` with every value NaN.
TrainingState poisoned(TrainingState state) {
  for (auto *table : {&state.params, &state.states})
    for (TrainingState::Tensor &t : *table)
      std::fill(t.values.begin(), t.values.end(), std::nanf(""));
  return state;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Takes every stage of `model` (a state of `plan`'s tables at tp `coordinates`) and puts
/// them all into a poisoned copy: the copy must be `model` again, bit for bit.
void expectRoundTrip(const Plan &plan, const TrainingState &model) {
  TrainingState rebuilt = poisoned(model);
  for (int64_t s = 0; s < plan.pipeline->stages; ++s) {
    SCOPED_TRACE(concat("stage ", s));
    StageHoldings h = holdingsOf(plan, s);
    Plan tables = stagePlan(plan, h);
    Expected<TrainingState> stage = takeStage(plan, h, model);
    ASSERT_TRUE(stage.ok()) << stage.error().message();
    EXPECT_EQ(stage->step, model.step);
    ASSERT_EQ(stage->params.size(), tables.params.size());
    ASSERT_EQ(stage->states.size(), tables.states.size());
    // The stage table's dims, local to the tensor-parallel rank.
    for (size_t k = 0; k < tables.params.size(); ++k) {
      EXPECT_EQ(stage->params[k].name, tables.params[k].name);
      EXPECT_EQ(stage->params[k].shape, dimSizes(plan.localDims(tables.params[k])));
    }
    for (size_t k = 0; k < tables.states.size(); ++k)
      EXPECT_EQ(stage->states[k].name, tables.states[k].name);
    Error err = putStage(plan, h, *stage, rebuilt);
    ASSERT_TRUE(err.ok()) << err.message();
  }
  for (size_t k = 0; k < model.params.size(); ++k)
    EXPECT_TRUE(sameBits(rebuilt.params[k].values, model.params[k].values)) << model.params[k].name;
  for (size_t k = 0; k < model.states.size(); ++k)
    EXPECT_TRUE(sameBits(rebuilt.states[k].values, model.states[k].values)) << model.states[k].name;
}

TEST(PipelineStageTest, TakeAndPutEveryStageRoundTrips) {
  for (ToyPipeline t : {ToyPipeline{2, {0, 1}, {2, 2}}, ToyPipeline{2, {0, 1}, {3, 1}},
                        ToyPipeline{2, {0, 1}, {2, 0}}, ToyPipeline{2, {0, 1, 0, 1}, {1, 1, 1, 1}},
                        ToyPipeline{2, {0, 1, 1, 0}, {1, 2, 2, 1}},
                        ToyPipeline{3, {0, 1, 2, 2, 1, 0}, {1, 1, 2, 1, 0, 1}}}) {
    SCOPED_TRACE(concat("chunk_layers ", t.chunkLayers.size(), " chunks, ", t.chunkLayers[0],
                        " layers first"));
    Plan plan = toyPipelinePlan(t);
    expectRoundTrip(plan, distinctState(plan));
  }
}

TEST(PipelineStageTest, TakeStagePacksTheStagesChunksInOrder) {
  // Interleaved: stage 0's block.b is layers 0 and 2 of the stack, stage 1's 1 and 3.
  Plan plan = toyPipelinePlan({2, {0, 1, 0, 1}, {1, 1, 1, 1}});
  TrainingState model = distinctState(plan);
  const std::vector<float> &b = model.params[2].values; // [layers=4, odd=3]
  for (int64_t s = 0; s < 2; ++s) {
    Expected<TrainingState> stage = takeStage(plan, holdingsOf(plan, s), model);
    ASSERT_TRUE(stage.ok());
    std::vector<float> expected(b.begin() + 3 * s, b.begin() + 3 * s + 3);
    expected.insert(expected.end(), b.begin() + 3 * (s + 2), b.begin() + 3 * (s + 2) + 3);
    EXPECT_EQ(stage->params[2].values, expected) << "stage " << s;
    EXPECT_EQ(stage->params[2].shape, (std::vector<int64_t>{2, 3}));
    // block.b.m (states[0]) follows its parameter.
    const std::vector<float> &m = model.states[0].values;
    std::vector<float> expectedState(m.begin() + 3 * s, m.begin() + 3 * s + 3);
    expectedState.insert(expectedState.end(), m.begin() + 3 * (s + 2), m.begin() + 3 * (s + 2) + 3);
    EXPECT_EQ(stage->states[0].values, expectedState) << "stage " << s;
  }
}

TEST(PipelineStageTest, TakeAndPutTensorParallelShards) {
  // tp2 splits block.w's hidden: each tp rank's shards split into stages and back.
  Plan plan = toyPipelinePlan({2, {0, 1, 1, 0}, {1, 2, 2, 1}, false, 0, /*tp=*/2});
  TrainingState whole = distinctState(plan);
  for (int64_t c = 0; c < 2; ++c) {
    SCOPED_TRACE(concat("tp coordinate ", c));
    Expected<TrainingState> local = shardState(plan, whole, {c});
    ASSERT_TRUE(local.ok()) << local.error().message();
    ASSERT_EQ(local->params[1].shape, (std::vector<int64_t>{6, 2, 6}));
    expectRoundTrip(plan, *local);
  }
}

TEST(PipelineStageTest, TakeAndPutErrors) {
  Plan plan = toyPipelinePlan({2, {0, 1}, {2, 2}});
  TrainingState model = distinctState(plan);
  StageHoldings h = holdingsOf(plan, 1);
  Expected<TrainingState> stage = takeStage(plan, h, model);
  ASSERT_TRUE(stage.ok());

  TrainingState short_ = model;
  short_.states.pop_back();
  Expected<TrainingState> bad = takeStage(plan, h, short_);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "the state does not match the plan's tables");
  EXPECT_EQ(putStage(plan, h, *stage, short_).message(),
            "the state does not match the plan's tables");

  TrainingState wrongSize = *stage;
  wrongSize.params[1].values.pop_back();
  EXPECT_EQ(putStage(plan, h, wrongSize, model).message(),
            "stage 1's tensor 'block.w' has 47 values, expected 48 for 'block.w'");
  TrainingState wrongState = *stage;
  wrongState.states[2].values.push_back(0);
  EXPECT_EQ(putStage(plan, h, wrongState, model).message(),
            "stage 1's tensor 'block.w.m' has 49 values, expected 48 for 'block.w.m'");
  TrainingState swapped = *stage;
  std::swap(swapped.params[0], swapped.params[3]);
  EXPECT_EQ(putStage(plan, h, swapped, model).message(),
            "stage 1's tensor 'lnf.g' has 4 values, expected 24 for 'wte'");

  TrainingState fewParams = *stage;
  fewParams.params.pop_back();
  EXPECT_EQ(putStage(plan, h, fewParams, model).message(),
            "stage 1 sent fewer parameters than it holds");
  TrainingState fewStates = *stage;
  fewStates.states.pop_back();
  EXPECT_EQ(putStage(plan, h, fewStates, model).message(),
            "stage 1 sent fewer optimizer states than it holds");
}

//===----------------------------------------------------------------------===//
// pipelineExpertLoad
//===----------------------------------------------------------------------===//

/// Adds to every chunk's forward an expert_load output per entry of `experts`, of the
/// chunk's layers.
void addExpertLoads(Plan &plan, const std::vector<int64_t> &experts) {
  for (ChunkKernels &chunk : plan.x86Kernels->chunks)
    for (int64_t e : experts)
      chunk.forward->outputs.push_back(KernelBuffer{BufferKind::ExpertLoad, "expert_load",
                                                    PlanDType::I64,
                                                    {{"layers", chunk.numLayers}, {"experts", e}}});
}

TEST(PipelineStageTest, ExpertLoadRowsOfEveryChunkInTheStack) {
  // Interleaved pp2 x v2 over 5 layers (2, 1, 1, 1): two dispatches per layer.
  Plan plan = toyPipelinePlan({2, {0, 1, 0, 1}, {2, 1, 1, 1}});
  addExpertLoads(plan, {4, 3});
  Expected<PipelineExpertLoad> load = pipelineExpertLoad(*plan.x86Kernels);
  ASSERT_TRUE(load) << load.error().message();
  EXPECT_EQ(load->layers, 5);
  EXPECT_EQ(load->experts, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(load->size(), size_t(5 * 4 + 5 * 3));
  // Output after output, each [layers, experts].
  EXPECT_EQ(load->rowOffset(0, 0), size_t(0));
  EXPECT_EQ(load->rowOffset(0, 3), size_t(12));
  EXPECT_EQ(load->rowOffset(1, 0), size_t(20));
  EXPECT_EQ(load->rowOffset(1, 4), size_t(32));
}

TEST(PipelineStageTest, DenseModelHasNoExpertLoad) {
  Plan plan = toyPipelinePlan({});
  Expected<PipelineExpertLoad> load = pipelineExpertLoad(*plan.x86Kernels);
  ASSERT_TRUE(load) << load.error().message();
  EXPECT_TRUE(load->experts.empty());
  EXPECT_EQ(load->layers, 2);
  EXPECT_EQ(load->size(), size_t(0));
}

TEST(PipelineStageTest, ExpertLoadErrors) {
  Plan plan = toyPipelinePlan({2, {0, 1}, {2, 1}});
  addExpertLoads(plan, {4});
  Plan fewer = plan;
  fewer.x86Kernels->chunks[1].forward->outputs.pop_back();
  Expected<PipelineExpertLoad> load = pipelineExpertLoad(*fewer.x86Kernels);
  ASSERT_FALSE(load);
  EXPECT_EQ(load.error().message(), "chunk1.forward returns 0 expert_load outputs of experts [], "
                                    "but chunk0.forward 1 of experts [4]");
  Plan otherExperts = plan;
  otherExperts.x86Kernels->chunks[1].forward->outputs.back().dims[1].size = 8;
  load = pipelineExpertLoad(*otherExperts.x86Kernels);
  ASSERT_FALSE(load);
  EXPECT_EQ(load.error().message(), "chunk1.forward returns 1 expert_load outputs of experts [8], "
                                    "but chunk0.forward 1 of experts [4]");
  Plan otherRows = plan;
  otherRows.x86Kernels->chunks[0].forward->outputs.back().dims[0].size = 3;
  load = pipelineExpertLoad(*otherRows.x86Kernels);
  ASSERT_FALSE(load);
  EXPECT_EQ(load.error().message(), "chunk0.forward: expert_load [layers=3, experts=4] is not "
                                    "the tokens per expert of the chunk's 2 layers");
  Plan missing = plan;
  missing.x86Kernels->chunks[1].forward.reset();
  load = pipelineExpertLoad(*missing.x86Kernels);
  ASSERT_FALSE(load);
  EXPECT_EQ(load.error().message(), "the plan's kernels have no 'chunk1.forward' function");
}

} // namespace
} // namespace mtc::rt::test
