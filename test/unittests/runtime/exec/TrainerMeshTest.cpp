//===- TrainerMeshTest.cpp - The trainer on a tensor-parallel mesh --------===//
//
// The Trainer with hand-written per-rank kernels (ToyMeshKernels.c) loaded with dlopen, their
// mesh collectives resolved against this executable's exports: tp2 and tp2 x dp2 (ranks as
// threads over loopback) against one rank, and a collective that fails the step.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/RankMesh.h"
#include "runtime/exec/Trainer.h"

#include "../comm/CommTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

namespace mtc::rt::test {
namespace {

/// w [rows=4, cols=2] (normal(1)), state m; mesh tp=`tp` with w split on rows when tp > 1
/// (a mesh axis of size 1 otherwise: the kernels always name axis 0).
Plan toyPlan(int64_t tp, const char *forwardBackward = "toy_forward_backward") {
  Plan plan;
  plan.dir = "toy.plan";
  plan.model = "toy";
  plan.seed = 5;
  plan.mesh = {MeshAxis{"tp", tp}};
  plan.train = JsonObject{{"global_batch", 4}};
  ParamInfo w;
  w.name = "w";
  w.tensorId = 0;
  w.dims = {{"rows", 4}, {"cols", 2}};
  w.init = InitSpec{InitKind::Normal, {1.0}};
  if (tp > 1)
    w.layout.splits = {DimSplit{0, {0}}};
  plan.params = {w};
  plan.states = {StateInfo{"w.m", "w", 0, w.dims, PlanDType::F32}};
  std::vector<Dim> local = plan.localDims(plan.params[0]);
  std::vector<Dim> tokens = {{"batch", 1}, {"seq", 4}};
  auto buffer = [](BufferKind kind, const char *name, PlanDType dtype, std::vector<Dim> dims) {
    return KernelBuffer{kind, name, dtype, std::move(dims)};
  };
  KernelFunction fb;
  fb.symbol = forwardBackward;
  fb.inputs = {buffer(BufferKind::Input, "tokens", PlanDType::I32, tokens),
               buffer(BufferKind::Input, "labels", PlanDType::I32, tokens),
               buffer(BufferKind::Param, "w", PlanDType::F32, local)};
  fb.outputs = {buffer(BufferKind::Loss, "loss", PlanDType::F32, {}),
                buffer(BufferKind::Grad, "w", PlanDType::F32, local)};
  KernelFunction opt;
  opt.symbol = "toy_optimizer_step";
  opt.inputs = {buffer(BufferKind::Step, "step", PlanDType::F32, {}),
                buffer(BufferKind::GradScale, "grad_scale", PlanDType::F32, {}),
                buffer(BufferKind::Grad, "w", PlanDType::F32, local),
                buffer(BufferKind::Param, "w", PlanDType::F32, local),
                buffer(BufferKind::State, "w.m", PlanDType::F32, local)};
  opt.outputs = {buffer(BufferKind::GradNorm, "grad_norm", PlanDType::F32, {}),
                 buffer(BufferKind::Lr, "lr", PlanDType::F32, {}),
                 buffer(BufferKind::Param, "w", PlanDType::F32, local),
                 buffer(BufferKind::State, "w.m", PlanDType::F32, local)};
  plan.x86Kernels = KernelsInfo{MTC_TOY_MESH_KERNELS, std::nullopt, fb, opt};
  return plan;
}

struct RunResult {
  std::vector<double> losses, gradNorms;
  std::vector<float> w, m; // whole, after the run
  std::string error;
};

/// Trains `steps` steps of `plan` on `n` thread-ranks; returns rank 0's view.
RunResult train(const Plan &plan, int n, int steps, const std::string &prefix) {
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
    Expected<TrainingState> state =
        mesh->partitioned()
            ? TrainingState::initializeShards(plan, mesh->placement().coordinates, 1)
            : TrainingState::initialize(plan, 1);
    ASSERT_TRUE(state.ok());
    Expected<Trainer> trainer =
        Trainer::create(plan, *kernels, std::move(*state), *data, 0, mesh->dataParallel(),
                        mesh->partitioned() ? &mesh->context() : nullptr);
    ASSERT_TRUE(trainer.ok()) << trainer.error().message();
    for (int s = 0; s < steps; ++s) {
      Expected<StepStats> stats = trainer->step();
      if (!stats) {
        run.error = stats.error().message();
        return;
      }
      run.losses.push_back(stats->loss);
      run.gradNorms.push_back(stats->gradNorm);
    }
    Expected<TrainingState> whole = gatherState(plan, trainer->state(), *mesh);
    ASSERT_TRUE(whole.ok()) << whole.error().message();
    run.w = whole->params[0].values;
    run.m = whole->states[0].values;
  });
  for (int r = 1; r < n; ++r) {
    EXPECT_EQ(runs[r].losses, runs[0].losses) << "rank " << r;
    EXPECT_EQ(runs[r].gradNorms, runs[0].gradNorms) << "rank " << r;
  }
  return runs[0];
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
  expectClose(tp2.w, one.w);
  expectClose(tp2.m, one.m);
  RunResult tp2dp2 = train(toyPlan(2), 4, 3, "tp2dp2");
  ASSERT_EQ(tp2dp2.error, "");
  expectClose(tp2dp2.losses, one.losses);
  expectClose(tp2dp2.gradNorms, one.gradNorms);
  expectClose(tp2dp2.w, one.w);
  expectClose(tp2dp2.m, one.m);
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

} // namespace
} // namespace mtc::rt::test
