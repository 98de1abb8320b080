//===- CudaTrainerTest.cpp - The training step loop on one GPU ------------===//
//
// gpt-tiny compiled with --target=cuda (test/CMakeLists.txt). Everywhere: what CudaTrainer
// refuses before it touches a device (a mesh larger than the job, a pipeline, the
// distributed optimizer, a batch the kernels' micro-batches do not divide, a loss mask
// without the data's end of document) and, without a GPU, the device layer's "no CUDA
// device" error. On a GPU (skipped without one; never run so far): three steps of two
// micro-batches each against the CPU's Trainer on the x86 plan of the same model (same
// initial parameters, same data), and an evaluation, within fp32's 1e-5 with TF32 off. On
// two GPUs (skipped with fewer; never run so far): two data-parallel ranks as threads over
// NCCL, one micro-batch each, against the same single-rank CPU Trainer, and a rank that
// stops taking part failing its peer's step within the communicator timeout.

#include "runtime/device/cuda/CudaTrainer.h"

#include "runtime/exec/Trainer.h"

#include "../../comm/CommTestUtil.h"
#include "CudaTestSupport.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <string_view>
#include <thread>

namespace mtc::rt::cuda::test {
namespace {

Expected<Plan> loadBuiltPlan(const char *path) {
  std::filesystem::path dir = path;
  if (!std::filesystem::exists(dir / "MANIFEST"))
    return makeError(dir.string(), ": not built (cmake --build build --target MTCTestPlans)");
  return loadPlan(dir);
}

/// The CUDA plan, its host code, its initial state and the synthetic task. The plan is held
/// where it stays: the library points into it.
struct CudaPlanFixture {
  std::unique_ptr<Plan> owned;
  const Plan &plan;
  KernelLibrary kernels;
  TrainingState state;
  TokenSource data;

  static Expected<std::unique_ptr<CudaPlanFixture>> load() {
    Expected<Plan> loaded = loadBuiltPlan(MTC_TEST_CUDA_PLAN);
    if (!loaded)
      return loaded.takeError();
    auto plan = std::make_unique<Plan>(std::move(*loaded));
    Expected<KernelLibrary> kernels = KernelLibrary::loadCudaHost(*plan);
    if (!kernels)
      return kernels.takeError();
    Expected<TrainingState> state = TrainingState::initialize(*plan);
    if (!state)
      return state.takeError();
    Expected<TokenSource> data = TokenSource::synthetic(*plan->vocabularySize(), plan->seed);
    if (!data)
      return data.takeError();
    const Plan &ref = *plan;
    return std::unique_ptr<CudaPlanFixture>(new CudaPlanFixture{
        std::move(plan), ref, std::move(*kernels), std::move(*state), std::move(*data)});
  }

  /// A trainer's inputs for `plan` (this plan or a changed copy of it).
  DeviceTrainerInputs inputs(const Plan &forPlan, int64_t globalBatch = 0,
                             const TokenSource *validation = nullptr) const {
    return DeviceTrainerInputs{forPlan, kernels, state, data, globalBatch, validation,
                               LossScaleOptions{}, std::nullopt};
  }

  /// Why CudaTrainer::create refuses `forPlan` (a message no refusal test expects when it
  /// creates a trainer instead).
  std::string refusal(const Plan &forPlan, int64_t globalBatch = 0) const {
    Expected<std::unique_ptr<CudaTrainer>> trainer =
        CudaTrainer::create(inputs(forPlan, globalBatch));
    return trainer ? std::string("(a trainer was created)") : trainer.error().message();
  }
};

/// Whether `message` contains `part`, for EXPECT_TRUE with the message shown.
::testing::AssertionResult mentions(const std::string &message, std::string_view part) {
  if (message.find(part) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << message << "' does not say '" << part << "'";
}

TEST(CudaTrainer, RefusesAPartitionedPlanBeforeLookingForADevice) {
  Expected<std::unique_ptr<CudaPlanFixture>> fixture = CudaPlanFixture::load();
  ASSERT_TRUE(fixture.ok()) << fixture.error().message();
  CudaPlanFixture *f = fixture->get();
  Plan partitioned = f->plan;
  partitioned.mesh.push_back(MeshAxis{"tp", 2});
  EXPECT_TRUE(mentions(f->refusal(partitioned),
                       "partitioned over a mesh of 2 ranks, which the job's 1 rank cannot hold"));
}

// checkCudaPlan reads the plan's tables only: a plan in memory, no built plan needed.
TEST(CudaTrainer, RefusesPipelinesAndTheDistributedOptimizer) {
  Plan pipelined;
  pipelined.dir = "p.plan";
  pipelined.pipeline.emplace();
  Error err = checkCudaPlan(pipelined, 2);
  EXPECT_EQ(err.message(), "p.plan: a pipeline plan; the CUDA trainer does not run pipeline "
                           "parallelism (train it with --device cpu)");
  Plan zero;
  zero.dir = "z.plan";
  zero.mesh.push_back(MeshAxis{"dp", 2});
  zero.dataParallelAxis = 0;
  zero.zeroStage = 2;
  err = checkCudaPlan(zero, 2);
  EXPECT_EQ(err.message(), "z.plan: the plan's mesh has a data-parallel axis 'dp' (the "
                           "distributed optimizer, ZeRO-2); the CUDA trainer does not shard "
                           "the optimizer (train it with --device cpu)");
}

TEST(CudaTrainer, AMeshFitsAJobOfItsMultiples) {
  Plan tp;
  tp.dir = "tp.plan";
  tp.mesh.push_back(MeshAxis{"tp", 2});
  EXPECT_TRUE(checkCudaPlan(tp, 2).ok());
  EXPECT_TRUE(checkCudaPlan(tp, 4).ok()) << "tp 2 x dp 2";
  EXPECT_EQ(checkCudaPlan(tp, 3).message(),
            "tp.plan: the plan is partitioned over a mesh of 2 ranks, which the job's 3 ranks "
            "cannot hold (give a multiple of 2)");
  EXPECT_FALSE(checkCudaPlan(tp, 1).ok());
  EXPECT_TRUE(checkCudaPlan(Plan{}, 2).ok()) << "data parallelism alone";
}

TEST(CudaTrainer, RefusesABatchTheMicroBatchesDoNotDivide) {
  Expected<std::unique_ptr<CudaPlanFixture>> fixture = CudaPlanFixture::load();
  ASSERT_TRUE(fixture.ok()) << fixture.error().message();
  CudaPlanFixture *f = fixture->get();
  // gpt-tiny's micro-batch is 8 sequences.
  EXPECT_TRUE(mentions(f->refusal(f->plan, 12),
                       "the global batch (12) is not a multiple of the kernels' micro-batch (8)"));
}

TEST(CudaTrainer, RefusesALossMaskWithoutAnEndOfDocument) {
  Expected<std::unique_ptr<CudaPlanFixture>> fixture = CudaPlanFixture::load();
  ASSERT_TRUE(fixture.ok()) << fixture.error().message();
  CudaPlanFixture *f = fixture->get();
  Plan masked = f->plan;
  masked.eodMaskLoss = true;
  EXPECT_TRUE(mentions(f->refusal(masked), "masks the loss at end-of-document tokens "
                                           "(eod_mask_loss), but the data has no "
                                           "end-of-document id"));
}

TEST(CudaTrainer, RefusesPositionIdsWithoutAnEndOfDocument) {
  // The position ids are computed from the tokens' documents (data/Documents.h), as on the
  // CPU: a plan taking them needs the data's end-of-document id.
  Expected<std::unique_ptr<CudaPlanFixture>> fixture = CudaPlanFixture::load();
  ASSERT_TRUE(fixture.ok()) << fixture.error().message();
  CudaPlanFixture *f = fixture->get();
  Plan reset = f->plan;
  reset.resetPositionIds = true;
  EXPECT_TRUE(mentions(f->refusal(reset), "restarts the positions at each document "
                                          "(reset_position_ids), but the data has no "
                                          "end-of-document id"));
  Plan mask = f->plan;
  mask.resetAttentionMask = true;
  EXPECT_TRUE(mentions(f->refusal(mask), "attends within each document (reset_attention_mask), "
                                         "but the data has no end-of-document id"));
}

TEST(CudaTrainer, WithoutADeviceSaysSo) {
  if (haveCudaDevice())
    GTEST_SKIP() << "a CUDA device is visible";
  Expected<std::unique_ptr<CudaPlanFixture>> fixture = CudaPlanFixture::load();
  ASSERT_TRUE(fixture.ok()) << fixture.error().message();
  CudaPlanFixture *f = fixture->get();
  std::string message = f->refusal(f->plan);
  EXPECT_EQ(message.rfind("no CUDA device: ", 0), 0u) << message;
}

class CudaTrainerOnDevice : public CudaDeviceTest {};

TEST_F(CudaTrainerOnDevice, TrainsAsTheCpuTrainer) {
  Expected<std::unique_ptr<CudaPlanFixture>> fixture = CudaPlanFixture::load();
  ASSERT_TRUE(fixture.ok()) << fixture.error().message();
  CudaPlanFixture *f = fixture->get();
  Expected<Plan> cpuPlan = loadBuiltPlan(MTC_TEST_X86_PLAN);
  ASSERT_TRUE(cpuPlan.ok()) << cpuPlan.error().message();
  Expected<KernelLibrary> cpuKernels = KernelLibrary::load(*cpuPlan);
  ASSERT_TRUE(cpuKernels.ok()) << cpuKernels.error().message();
  Expected<TrainingState> cpuState = TrainingState::initialize(*cpuPlan);
  ASSERT_TRUE(cpuState.ok()) << cpuState.error().message();
  // The same model and seed: the same initial parameters.
  ASSERT_EQ(cpuState->params.size(), f->state.params.size());
  for (size_t i = 0; i < f->state.params.size(); ++i)
    ASSERT_EQ(cpuState->params[i].values, f->state.params[i].values) << f->state.params[i].name;

  // gpt-tiny's global batch is two micro-batches: the second goes through the saxpy.
  Expected<std::unique_ptr<CudaTrainer>> gpu =
      CudaTrainer::create(f->inputs(f->plan, 0, &f->data));
  ASSERT_TRUE(gpu.ok()) << gpu.error().message();
  ASSERT_EQ((*gpu)->microBatches(), 2);
  Expected<Trainer> cpu = Trainer::create(*cpuPlan, *cpuKernels, std::move(*cpuState), f->data, 0,
                                          nullptr, nullptr, &f->data);
  ASSERT_TRUE(cpu.ok()) << cpu.error().message();
  for (int s = 0; s < 3; ++s) {
    Expected<StepStats> g = (*gpu)->step();
    ASSERT_TRUE(g.ok()) << g.error().message();
    Expected<StepStats> c = cpu->step();
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_NEAR(g->loss, c->loss, 1e-5 * std::abs(c->loss)) << "step " << s + 1;
    EXPECT_NEAR(g->gradNorm, c->gradNorm, 1e-4 * std::abs(c->gradNorm)) << "step " << s + 1;
    EXPECT_EQ(g->lr, c->lr);
  }
  EXPECT_EQ((*gpu)->state().step, 3);
  ASSERT_TRUE((*gpu)->syncState().ok());
  for (size_t i = 0; i < cpu->state().params.size(); ++i) {
    const std::vector<float> &a = (*gpu)->state().params[i].values;
    const std::vector<float> &b = cpu->state().params[i].values;
    ASSERT_EQ(a.size(), b.size());
    for (size_t j = 0; j < a.size(); ++j)
      ASSERT_NEAR(a[j], b[j], 1e-5) << cpu->state().params[i].name << "[" << j << "]";
  }
  Expected<double> gpuEval = (*gpu)->evaluate(0, 1);
  ASSERT_TRUE(gpuEval.ok()) << gpuEval.error().message();
  Expected<double> cpuEval = cpu->evaluate(0, 1);
  ASSERT_TRUE(cpuEval.ok()) << cpuEval.error().message();
  EXPECT_NEAR(*gpuEval, *cpuEval, 1e-5 * std::abs(*cpuEval));
  // Everything lives in the arena plus cuBLASLt's workspace.
  EXPECT_GT((*gpu)->peakBytes(), 2 * cpu->state().bytes());
}

/// Two ranks on GPUs 0 and 1 (skipped where fewer are visible), each on its own thread.
class CudaTrainerOnTwoDevices : public testing::Test {
protected:
  void SetUp() override {
    Expected<int> count = visibleDeviceCount();
    if (!count)
      GTEST_SKIP() << "needs two CUDA devices: " << count.error().message();
    if (*count < 2)
      GTEST_SKIP() << "needs two CUDA devices; " << *count << " visible";
  }
  rt::test::TestJob job;

  CudaJob rankOf(int rank, std::chrono::milliseconds timeout) {
    CudaJob j;
    j.store = job.storeFor(rank, timeout);
    j.rank = rank;
    j.size = 2;
    j.localRank = rank;
    j.timeout = timeout;
    return j;
  }
};

TEST_F(CudaTrainerOnTwoDevices, DataParallelTrainsAsOneCpuRank) {
  Expected<std::unique_ptr<CudaPlanFixture>> fixture = CudaPlanFixture::load();
  ASSERT_TRUE(fixture.ok()) << fixture.error().message();
  CudaPlanFixture *f = fixture->get();
  Expected<Plan> cpuPlan = loadBuiltPlan(MTC_TEST_X86_PLAN);
  ASSERT_TRUE(cpuPlan.ok()) << cpuPlan.error().message();
  Expected<KernelLibrary> cpuKernels = KernelLibrary::load(*cpuPlan);
  ASSERT_TRUE(cpuKernels.ok()) << cpuKernels.error().message();
  Expected<TrainingState> cpuState = TrainingState::initialize(*cpuPlan);
  ASSERT_TRUE(cpuState.ok()) << cpuState.error().message();
  Expected<Trainer> cpu = Trainer::create(*cpuPlan, *cpuKernels, std::move(*cpuState), f->data, 0,
                                          nullptr, nullptr, &f->data);
  ASSERT_TRUE(cpu.ok()) << cpu.error().message();
  std::vector<StepStats> cpuSteps;
  for (int s = 0; s < 3; ++s) {
    Expected<StepStats> c = cpu->step();
    ASSERT_TRUE(c.ok()) << c.error().message();
    cpuSteps.push_back(*c);
  }
  Expected<double> cpuEval = cpu->evaluate(0, 1);
  ASSERT_TRUE(cpuEval.ok()) << cpuEval.error().message();

  // gpt-tiny's global batch is two micro-batches: one per rank, all-reduced over NCCL.
  std::vector<std::vector<StepStats>> steps(2);
  std::vector<double> evals(2);
  std::vector<std::vector<float>> firstParam(2);
  std::vector<std::string> errors(2);
  rt::test::runRanks(2, [&](int rank) {
    auto fail = [&](const Error &e) { errors[size_t(rank)] = e.message(); };
    Expected<std::unique_ptr<CudaTrainer>> gpu =
        CudaTrainer::create(f->inputs(f->plan, 0, &f->data), rankOf(rank, std::chrono::seconds(60)));
    if (!gpu)
      return fail(gpu.error());
    if ((*gpu)->microBatches() != 2 || (*gpu)->dataParallelSize() != 2 ||
        (*gpu)->dataParallelRank() != rank)
      return fail(makeError("the data-parallel group is not the two ranks"));
    for (int s = 0; s < 3; ++s) {
      Expected<StepStats> g = (*gpu)->step();
      if (!g)
        return fail(g.error());
      steps[size_t(rank)].push_back(*g);
    }
    Expected<double> eval = (*gpu)->evaluate(0, 1);
    if (!eval)
      return fail(eval.error());
    evals[size_t(rank)] = *eval;
    if (Error e = (*gpu)->syncState(); !e.ok())
      return fail(e);
    firstParam[size_t(rank)] = (*gpu)->state().params[0].values;
    EXPECT_GT((*gpu)->bytesSent(), 0u) << "the gradients went over NCCL";
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[size_t(r)], "") << "rank " << r;
    for (int s = 0; s < 3; ++s) {
      const StepStats &g = steps[size_t(r)][size_t(s)], &c = cpuSteps[size_t(s)];
      EXPECT_NEAR(g.loss, c.loss, 1e-5 * std::abs(c.loss)) << "rank " << r << " step " << s + 1;
      EXPECT_NEAR(g.gradNorm, c.gradNorm, 1e-4 * std::abs(c.gradNorm)) << "step " << s + 1;
      EXPECT_EQ(g.loss, steps[0][size_t(s)].loss) << "every rank logs the same loss";
    }
    EXPECT_NEAR(evals[size_t(r)], *cpuEval, 1e-5 * std::abs(*cpuEval));
    EXPECT_EQ(firstParam[size_t(r)], firstParam[0]) << "the ranks' parameters stay replicated";
  }
  const std::vector<float> &want = cpu->state().params[0].values;
  ASSERT_EQ(firstParam[0].size(), want.size());
  for (size_t j = 0; j < want.size(); ++j)
    ASSERT_NEAR(firstParam[0][j], want[j], 1e-5) << cpu->state().params[0].name << "[" << j << "]";
}

TEST_F(CudaTrainerOnTwoDevices, APeerThatStopsFailsTheStepWithinTheTimeout) {
  Expected<std::unique_ptr<CudaPlanFixture>> fixture = CudaPlanFixture::load();
  ASSERT_TRUE(fixture.ok()) << fixture.error().message();
  CudaPlanFixture *f = fixture->get();
  std::string error;
  std::atomic<bool> done{false};
  rt::test::runRanks(2, [&](int rank) {
    Expected<std::unique_ptr<CudaTrainer>> gpu =
        CudaTrainer::create(f->inputs(f->plan), rankOf(rank, std::chrono::seconds(3)));
    ASSERT_TRUE(gpu.ok()) << gpu.error().message();
    if (rank == 1) {
      // Rank 1 stops taking part: it never steps, and keeps its communicators until its
      // peer has given up.
      while (!done)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    Expected<StepStats> step = (*gpu)->step();
    done = true;
    ASSERT_FALSE(step.ok());
    error = step.error().message();
  });
  EXPECT_NE(error.find("step 1: all-reduce of the gradients over the data-parallel ranks"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("timed out after 3000 ms"), std::string::npos) << error;
}

} // namespace
} // namespace mtc::rt::cuda::test
