//===- TrainerMeshTest.cpp - The trainer on a tensor-parallel mesh --------===//
//
// The Trainer with hand-written per-rank kernels (ToyMeshKernels.c) loaded with dlopen, their
// mesh collectives resolved against this executable's exports: tp2 and tp2 x dp2 (ranks as
// threads over loopback) against one rank, and a collective that fails the step.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Checkpoint.h"
#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/RankMesh.h"
#include "runtime/exec/Trainer.h"

#include "test/unittests/runtime/TempDir.h"
#include "test/unittests/runtime/exec/ToyMeshPlan.h"
#include "../comm/CommTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

namespace mtc::rt::test {
namespace {

struct RunResult {
  std::vector<double> losses, gradNorms;
  TrainingState whole; // every tensor whole, after the run
  std::vector<std::vector<int64_t>> stateShapes; // rank 0's, local
  int64_t bufferBytes = 0;                       // rank 0's
  std::string error;
};

/// Trains `plan` on `n` thread-ranks from `start` (whole tensors; null: initialised) up to
/// step `until`; returns rank 0's view, the state gathered whole.
RunResult train(const Plan &plan, int n, int64_t until, const std::string &prefix,
                const TrainingState *start = nullptr) {
  TestJob job;
  std::vector<RunResult> runs(n);
  Expected<TokenSource> data = TokenSource::synthetic(16, plan.seed);
  EXPECT_TRUE(data.ok());
  runRanks(n, [&](int rank) {
    RunResult &run = runs[rank];
    std::unique_ptr<GlooCommunicator> world;
    if (n > 1) {
      world = job.connect(rank, n, prefix);
      ASSERT_TRUE(world);
    }
    Expected<RankMesh> mesh = RankMesh::create(plan, world.get());
    ASSERT_TRUE(mesh.ok()) << mesh.error().message();
    Expected<KernelLibrary> kernels = KernelLibrary::load(plan);
    ASSERT_TRUE(kernels.ok()) << kernels.error().message();
    const std::vector<int64_t> &coords = mesh->placement().coordinates;
    Expected<TrainingState> state =
        start                  ? shardState(plan, *start, coords)
        : mesh->partitioned() ? TrainingState::initializeShards(plan, coords, 1)
                               : TrainingState::initialize(plan, 1);
    ASSERT_TRUE(state.ok()) << state.error().message();
    Expected<Trainer> trainer =
        Trainer::create(plan, *kernels, std::move(*state), *data, 0, mesh->dataParallel(),
                        mesh->partitioned() ? &mesh->context() : nullptr);
    ASSERT_TRUE(trainer.ok()) << trainer.error().message();
    while (trainer->state().step < until) {
      Expected<StepStats> stats = trainer->step();
      if (!stats) {
        run.error = stats.error().message();
        return;
      }
      run.losses.push_back(stats->loss);
      run.gradNorms.push_back(stats->gradNorm);
    }
    for (const TrainingState::Tensor &t : trainer->state().states)
      run.stateShapes.push_back(t.shape);
    run.bufferBytes = trainer->bufferBytes();
    if (mesh->inFirstModelGroup()) {
      Expected<TrainingState> whole = gatherState(plan, trainer->state(), *mesh);
      ASSERT_TRUE(whole.ok()) << whole.error().message();
      run.whole = std::move(*whole);
    }
  });
  for (int r = 1; r < n; ++r) {
    // Every rank fails or none does (the messages name their ranks).
    EXPECT_EQ(runs[r].error.empty(), runs[0].error.empty()) << "rank " << r << ": " << runs[r].error;
    EXPECT_EQ(runs[r].losses, runs[0].losses) << "rank " << r;
    EXPECT_EQ(runs[r].gradNorms, runs[0].gradNorms) << "rank " << r;
  }
  return std::move(runs[0]);
}

void expectClose(const std::vector<double> &a, const std::vector<double> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 1e-5 * std::fabs(a[i])) << "step " << i + 1;
}

void expectClose(const std::vector<float> &a, const std::vector<float> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], 1e-5 * (std::fabs(a[i]) + 1e-3)) << "element " << i;
}

TEST(TrainerMeshTest, TensorParallelEqualsOneRank) {
  RunResult one = train(toyPlan(1), 1, 3, "one");
  ASSERT_EQ(one.error, "");
  ASSERT_EQ(one.losses.size(), 3u);
  EXPECT_LT(one.losses[2], one.losses[0]) << "the toy model learns";
  RunResult tp2 = train(toyPlan(2), 2, 3, "tp2");
  ASSERT_EQ(tp2.error, "");
  expectClose(tp2.losses, one.losses);
  expectClose(tp2.gradNorms, one.gradNorms);
  expectClose(tp2.whole.params[0].values, one.whole.params[0].values);
  expectClose(tp2.whole.states[0].values, one.whole.states[0].values);
  RunResult tp2dp2 = train(toyPlan(2), 4, 3, "tp2dp2");
  ASSERT_EQ(tp2dp2.error, "");
  expectClose(tp2dp2.losses, one.losses);
  expectClose(tp2dp2.gradNorms, one.gradNorms);
  expectClose(tp2dp2.whole.params[0].values, one.whole.params[0].values);
  expectClose(tp2dp2.whole.states[0].values, one.whole.states[0].values);
}

TEST(TrainerMeshTest, AFailedCollectiveFailsTheStep) {
  RunResult bad = train(toyPlan(2, "toy_bad_forward_backward"), 2, 1, "bad");
  EXPECT_EQ(bad.error, "step 1: forward_backward: mtc_all_reduce (sum, 1 f64 elements) on world "
                       "rank 0: mesh axis 3 is out of range (the plan's mesh has 1 axis)");
}

TEST(TrainerMeshTest, StateMustHoldTheShards) {
  Plan plan = toyPlan(2);
  Expected<KernelLibrary> kernels = KernelLibrary::load(plan);
  ASSERT_TRUE(kernels.ok()) << kernels.error().message();
  Expected<TokenSource> data = TokenSource::synthetic(16, plan.seed);
  ASSERT_TRUE(data.ok());
  Expected<TrainingState> whole = TrainingState::initialize(plan, 1);
  ASSERT_TRUE(whole.ok());
  MeshContext mesh;
  mesh.axes = {MeshAxisGroup{"tp", 2, 0, nullptr}};
  Expected<Trainer> t = Trainer::create(plan, *kernels, *whole, *data, 0, nullptr, &mesh);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message(), "toy.plan: parameter 'w' has 8 values in the training state, "
                                 "but this rank's shard is [rows=2, cols=2]");
  Expected<Trainer> noMesh = Trainer::create(plan, *kernels, *whole, *data);
  ASSERT_FALSE(noMesh.ok());
  EXPECT_EQ(noMesh.error().message(), "toy.plan: the plan is partitioned over a mesh of 2 ranks, "
                                      "but the trainer was given no mesh");
}

//===----------------------------------------------------------------------===//
// The distributed optimizer (ZeRO-1)
//===----------------------------------------------------------------------===//

/// The distributed-optimizer toy (ToyMeshKernels.c, toy_zero_*): w [rows=4, cols=8] split on
/// rows over tp, v [k=3] whole, states w.m and v.n; mesh dp x tp (axes 0 and 1). With
/// `distributed`, dp is the plan's data-parallel axis (size `dp`) and w's optimizer layout
/// also splits cols over it (v has none); otherwise the mesh's dp axis has size 1 and data
/// parallelism comes from the world, as before the distributed optimizer.
Plan zeroPlan(int64_t dp, int64_t tp, bool distributed, int64_t globalBatch = 4) {
  Plan plan;
  plan.dir = "zero.plan";
  plan.model = "zero";
  plan.seed = 9;
  plan.planSha256 = std::string(64, 'b');
  plan.mesh = {MeshAxis{"dp", distributed ? dp : 1}, MeshAxis{"tp", tp}};
  if (distributed)
    plan.dataParallelAxis = 0;
  plan.train = JsonObject{{"global_batch", globalBatch}};
  ParamInfo w;
  w.name = "w";
  w.tensorId = 0;
  w.dims = {{"rows", 4}, {"cols", 8}};
  w.init = InitSpec{InitKind::Normal, {1.0}};
  w.weightDecay = true;
  if (tp > 1)
    w.layout.splits = {DimSplit{0, {1}}};
  if (distributed) {
    w.optimizerLayout = w.layout;
    w.optimizerLayout->splits.push_back(DimSplit{1, {0}});
  }
  ParamInfo v;
  v.name = "v";
  v.tensorId = 1;
  v.dims = {{"k", 3}};
  v.init = InitSpec{InitKind::Uniform, {-1.0, 1.0}};
  plan.params = {w, v};
  plan.states = {StateInfo{"w.m", "w", 0, w.dims, PlanDType::F32},
                 StateInfo{"v.n", "v", 1, v.dims, PlanDType::F32}};
  std::vector<Dim> wLocal = plan.localDims(plan.params[0]);
  std::vector<Dim> wShard = plan.optimizerLocalDims(plan.params[0]);
  std::vector<Dim> tokens = {{"batch", 1}, {"seq", 4}};
  auto buffer = [](BufferKind kind, const char *name, std::vector<Dim> dims,
                   PlanDType dtype = PlanDType::F32) {
    return KernelBuffer{kind, name, dtype, std::move(dims)};
  };
  KernelFunction fb;
  fb.symbol = "toy_zero_forward_backward";
  fb.inputs = {buffer(BufferKind::Input, "tokens", tokens, PlanDType::I32),
               buffer(BufferKind::Input, "labels", tokens, PlanDType::I32),
               buffer(BufferKind::Param, "w", wLocal), buffer(BufferKind::Param, "v", v.dims)};
  fb.outputs = {buffer(BufferKind::Loss, "loss", {}), buffer(BufferKind::Grad, "w", wLocal),
                buffer(BufferKind::Grad, "v", v.dims)};
  KernelFunction opt;
  opt.symbol = "toy_zero_optimizer_step";
  opt.inputs = {buffer(BufferKind::Step, "step", {}),
                buffer(BufferKind::GradScale, "grad_scale", {}),
                buffer(BufferKind::Grad, "w", wShard),
                buffer(BufferKind::Grad, "v", v.dims),
                buffer(BufferKind::Param, "w", wLocal),
                buffer(BufferKind::Param, "v", v.dims),
                buffer(BufferKind::State, "w.m", wShard),
                buffer(BufferKind::State, "v.n", v.dims)};
  opt.outputs = {buffer(BufferKind::GradNorm, "grad_norm", {}), buffer(BufferKind::Lr, "lr", {})};
  KernelsInfo &kernels = plan.x86Kernels.emplace();
  kernels.file = MTC_TOY_MESH_KERNELS;
  kernels.forwardBackward = fb;
  kernels.optimizerStep = opt;
  return plan;
}

void expectSameState(const TrainingState &a, const TrainingState &b) {
  ASSERT_EQ(a.params.size(), b.params.size());
  ASSERT_EQ(a.states.size(), b.states.size());
  EXPECT_EQ(a.step, b.step);
  for (size_t i = 0; i < a.params.size(); ++i)
    expectClose(a.params[i].values, b.params[i].values);
  for (size_t i = 0; i < a.states.size(); ++i)
    expectClose(a.states[i].values, b.states[i].values);
}

TEST(TrainerMeshTest, DistributedOptimizerEqualsOneRank) {
  RunResult one = train(zeroPlan(1, 1, false), 1, 3, "z1");
  ASSERT_EQ(one.error, "");
  ASSERT_EQ(one.losses.size(), 3u);
  EXPECT_LT(one.losses[2], one.losses[0]) << "the toy model learns";
  struct Case {
    int64_t dp, tp;
    bool distributed;
    const char *name;
  };
  for (Case c : {Case{2, 1, true, "zdp2"}, Case{4, 1, true, "zdp4"}, Case{2, 2, true, "zdp2tp2"},
                 Case{2, 2, false, "dp2tp2"}}) {
    SCOPED_TRACE(c.name);
    Plan plan = zeroPlan(c.dp, c.tp, c.distributed);
    RunResult run = train(plan, int(c.dp * c.tp), 3, c.name);
    ASSERT_EQ(run.error, "");
    expectClose(run.losses, one.losses);
    expectClose(run.gradNorms, one.gradNorms);
    expectSameState(run.whole, one.whole);
    // The rank keeps its shard of w's state: rows over tp, cols over dp (when distributed).
    int64_t cols = c.distributed ? 8 / c.dp : 8;
    EXPECT_EQ(run.stateShapes[0], (std::vector<int64_t>{4 / c.tp, cols}));
    EXPECT_EQ(run.stateShapes[1], (std::vector<int64_t>{3}));
  }
  // One micro-batch: the packed blocks need their own buffer (a data-parallel axis of size 1).
  RunResult single = train(zeroPlan(1, 1, false, 1), 1, 3, "zs1");
  RunResult zeroSingle = train(zeroPlan(1, 1, true, 1), 1, 3, "zs2");
  ASSERT_EQ(zeroSingle.error, "");
  EXPECT_EQ(zeroSingle.losses, single.losses);
  EXPECT_EQ(zeroSingle.gradNorms, single.gradNorms);
  expectSameState(zeroSingle.whole, single.whole);
  EXPECT_EQ(zeroSingle.bufferBytes, single.bufferBytes + 32 * int64_t(sizeof(float)))
      << "w's packed blocks";
}

TEST(TrainerMeshTest, DistributedOptimizerCheckpointsAcrossLayouts) {
  TempDir dir;
  Plan one = zeroPlan(1, 1, false), zero = zeroPlan(2, 2, true);
  RunResult reference = train(one, 1, 3, "c1");
  ASSERT_EQ(reference.error, "");
  // Distributed optimizer -> checkpoint (whole tensors) -> one rank.
  RunResult first = train(zero, 4, 1, "c2");
  ASSERT_EQ(first.error, "");
  ASSERT_TRUE(saveCheckpoint(dir / "zero", zero, first.whole).ok());
  Expected<TrainingState> loaded = loadCheckpoint(dir / "zero", one);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  RunResult rest = train(one, 1, 3, "c3", &*loaded);
  ASSERT_EQ(rest.error, "");
  expectClose(rest.losses, std::vector<double>(reference.losses.begin() + 1, reference.losses.end()));
  expectSameState(rest.whole, reference.whole);
  // One rank -> checkpoint -> distributed optimizer (each rank takes its state shard).
  RunResult head = train(one, 1, 1, "c4");
  ASSERT_TRUE(saveCheckpoint(dir / "one", one, head.whole).ok());
  Expected<TrainingState> back = loadCheckpoint(dir / "one", zero);
  ASSERT_TRUE(back.ok()) << back.error().message();
  RunResult tail = train(zero, 4, 3, "c5", &*back);
  ASSERT_EQ(tail.error, "");
  expectClose(tail.losses, std::vector<double>(reference.losses.begin() + 1, reference.losses.end()));
  expectSameState(tail.whole, reference.whole);
}

TEST(TrainerMeshTest, DistributedOptimizerNeedsTheDataParallelAxisGroup) {
  Plan plan = zeroPlan(2, 1, true);
  Expected<KernelLibrary> kernels = KernelLibrary::load(plan);
  ASSERT_TRUE(kernels.ok()) << kernels.error().message();
  Expected<TokenSource> data = TokenSource::synthetic(16, plan.seed);
  ASSERT_TRUE(data.ok());
  MeshContext mesh;
  mesh.axes = {MeshAxisGroup{"dp", 2, 0, nullptr}, MeshAxisGroup{"tp", 1, 0, nullptr}};
  Expected<TrainingState> shards = TrainingState::initializeShards(plan, {0, 0}, 1);
  ASSERT_TRUE(shards.ok());
  Expected<Trainer> t = Trainer::create(plan, *kernels, *shards, *data, 0, nullptr, &mesh);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message(), "zero.plan: the plan's data-parallel axis 'dp' has 2 ranks, but "
                                 "the trainer's data-parallel group has 1");
  // The state must hold the optimizer state's shards, not the whole state.
  Expected<TrainingState> whole = TrainingState::initialize(plan, 1);
  ASSERT_TRUE(whole.ok());
  Expected<Trainer> w = Trainer::create(plan, *kernels, *whole, *data, 0, nullptr, &mesh);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().message(), "zero.plan: optimizer state 'w.m' has 32 values in the training "
                                 "state, but this rank's shard is [rows=4, cols=4]");
}

/// toyPlan(tp) with the toy `forward` (ToyMeshKernels.c) for evaluation.
Plan toyPlanWithForward(int64_t tp) {
  Plan plan = toyPlan(tp);
  KernelFunction forward;
  forward.symbol = "toy_forward";
  const KernelFunction &fb = *plan.x86Kernels->forwardBackward;
  forward.inputs = fb.inputs;
  forward.outputs = {fb.outputs[0]};
  plan.x86Kernels->forward = forward;
  return plan;
}

struct EvaluationRun {
  std::vector<double> losses;
  std::vector<float> params; // rank 0's, after the run
  std::vector<double> evaluations; // after each step, of batches [2 step, 2 step + 2)
  std::string error;
};

/// Trains `plan` on `n` thread-ranks for 3 steps, evaluating after each (`evaluate`) on a
/// validation source apart from the training data.
EvaluationRun trainAndEvaluate(const Plan &plan, int n, bool evaluate, const std::string &prefix) {
  TestJob job;
  std::vector<EvaluationRun> runs(n);
  Expected<TokenSource> data = TokenSource::synthetic(16, plan.seed);
  Expected<TokenSource> validation = TokenSource::synthetic(16, plan.seed + 1);
  EXPECT_TRUE(data.ok() && validation.ok());
  runRanks(n, [&](int rank) {
    EvaluationRun &run = runs[rank];
    std::unique_ptr<GlooCommunicator> world;
    if (n > 1) {
      world = job.connect(rank, n, prefix);
      ASSERT_TRUE(world);
    }
    Expected<RankMesh> mesh = RankMesh::create(plan, world.get());
    ASSERT_TRUE(mesh.ok()) << mesh.error().message();
    Expected<KernelLibrary> kernels = KernelLibrary::load(plan);
    ASSERT_TRUE(kernels.ok()) << kernels.error().message();
    Expected<TrainingState> state =
        mesh->partitioned()
            ? TrainingState::initializeShards(plan, mesh->placement().coordinates, 1)
            : TrainingState::initialize(plan, 1);
    ASSERT_TRUE(state.ok()) << state.error().message();
    Expected<Trainer> trainer = Trainer::create(
        plan, *kernels, std::move(*state), *data, 0, mesh->dataParallel(),
        mesh->partitioned() ? &mesh->context() : nullptr, evaluate ? &*validation : nullptr);
    ASSERT_TRUE(trainer.ok()) << trainer.error().message();
    while (trainer->state().step < 3) {
      Expected<StepStats> stats = trainer->step();
      ASSERT_TRUE(stats.ok()) << stats.error().message();
      run.losses.push_back(stats->loss);
      if (!evaluate)
        continue;
      Expected<double> loss = trainer->evaluate(2 * trainer->state().step, 2);
      ASSERT_TRUE(loss.ok()) << loss.error().message();
      run.evaluations.push_back(*loss);
    }
    run.params = trainer->state().params[0].values;
  });
  for (int r = 1; r < n; ++r)
    EXPECT_EQ(runs[r].evaluations, runs[0].evaluations) << "rank " << r;
  return std::move(runs[0]);
}

TEST(TrainerMeshTest, EvaluationRunsForwardWithoutDropoutAndLeavesTrainingAlone) {
  Plan plan = toyPlanWithForward(1);
  EvaluationRun plain = trainAndEvaluate(plan, 1, false, "plain");
  EvaluationRun one = trainAndEvaluate(plan, 1, true, "one");
  // Bit for bit: evaluation changes nothing a step reads.
  EXPECT_EQ(one.losses, plain.losses);
  EXPECT_EQ(one.params, plain.params);
  // The mean over 2 batches of 4 micro-batches of t * sum(w^2), without the toy's dropout
  // mark (1000): evaluation reads the validation source, whose batch b is its step b.
  Expected<TokenSource> validation = TokenSource::synthetic(16, plan.seed + 1);
  ASSERT_TRUE(validation.ok());
  double sumSquares = 0;
  for (float w : one.params)
    sumSquares += double(w) * double(w);
  double expected = 0;
  for (int64_t batch = 6; batch < 8; ++batch)
    for (int64_t m = 0; m < 4; ++m) {
      std::vector<int32_t> tokens(4), labels(4);
      ASSERT_TRUE(validation->batch(batch, m, 1, 4, tokens.data(), labels.data()).ok());
      expected += double(float(sumSquares * double(tokens[0] % 5 + 1)));
    }
  ASSERT_EQ(one.evaluations.size(), 3u);
  EXPECT_NEAR(one.evaluations[2], expected / 8, 1e-5 * expected / 8);
  // Data-parallel ranks share the batches, tensor-parallel ranks run forward's collectives.
  for (auto [name, tp, n] : {std::tuple{"dp2", 1, 2}, std::tuple{"tp2", 2, 2},
                             std::tuple{"tp2dp2", 2, 4}}) {
    EvaluationRun parallel = trainAndEvaluate(toyPlanWithForward(tp), n, true, name);
    SCOPED_TRACE(name);
    expectClose(parallel.evaluations, one.evaluations);
  }
}

TEST(TrainerMeshTest, EvaluationOfAnotherSourceReadsThatSource) {
  // The test split's evaluation (mtrun): the trainer's forward over other data, as a trainer
  // given that data as its validation data would evaluate it.
  Plan plan = toyPlanWithForward(1);
  Expected<KernelLibrary> kernels = KernelLibrary::load(plan);
  ASSERT_TRUE(kernels.ok()) << kernels.error().message();
  Expected<TokenSource> data = TokenSource::synthetic(16, plan.seed);
  Expected<TokenSource> validation = TokenSource::synthetic(16, plan.seed + 1);
  Expected<TokenSource> test = TokenSource::synthetic(16, plan.seed + 2);
  ASSERT_TRUE(data.ok() && validation.ok() && test.ok());
  Expected<TrainingState> state = TrainingState::initialize(plan, 1);
  ASSERT_TRUE(state.ok());
  Expected<Trainer> trainer =
      Trainer::create(plan, *kernels, *state, *data, 0, nullptr, nullptr, &*validation);
  Expected<Trainer> onTest = Trainer::create(plan, *kernels, *state, *data, 0, nullptr, nullptr,
                                             &*test);
  ASSERT_TRUE(trainer.ok() && onTest.ok());
  Expected<double> valid = trainer->evaluate(0, 2);
  Expected<double> other = trainer->evaluate(0, 2, &*test);
  Expected<double> expected = onTest->evaluate(0, 2);
  ASSERT_TRUE(valid.ok() && other.ok() && expected.ok());
  EXPECT_EQ(*other, *expected);
  EXPECT_NE(*other, *valid);
  // And the validation data again afterwards.
  Expected<double> again = trainer->evaluate(0, 2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *valid);
}

TEST(TrainerMeshTest, EvaluationNeedsAForward) {
  Plan plan = toyPlan(1);
  Expected<KernelLibrary> kernels = KernelLibrary::load(plan);
  ASSERT_TRUE(kernels.ok()) << kernels.error().message();
  Expected<TokenSource> data = TokenSource::synthetic(16, plan.seed);
  ASSERT_TRUE(data.ok());
  Expected<TrainingState> state = TrainingState::initialize(plan, 1);
  ASSERT_TRUE(state.ok());
  Expected<Trainer> t = Trainer::create(plan, *kernels, *state, *data, 0, nullptr, nullptr, &*data);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message(), "toy.plan: the plan has no `forward` function to evaluate with");
  Expected<Trainer> training = Trainer::create(plan, *kernels, *state, *data);
  ASSERT_TRUE(training.ok()) << training.error().message();
  Expected<double> loss = training->evaluate(0, 1);
  ASSERT_FALSE(loss.ok());
  EXPECT_EQ(loss.error().message(), "the trainer was given no validation data");
}

} // namespace
} // namespace mtc::rt::test
