//===- RankMeshTest.cpp - The rank mesh's pipeline placement --------------===//
//
// RankMesh (runtime/exec/RankMesh.h) under pipeline parallelism, ranks as threads over
// loopback (../comm/CommTestUtil.h), on the toy pipeline plan (ToyPipelinePlan.h): pp2 x tp2
// x dp2 on 8 ranks (stage outermost: world rank = tp + 2 (dp + 2 stage)), pp2 with the
// distributed optimizer's data-parallel axis, the pipeline group (rank = stage), the stage
// leaders, the error for a world the stages cannot share, and gatherStages assembling the
// whole model from the two stages of a V placement. (The placement without a pipeline is
// tested in MeshCollectivesTest.)
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/RankMesh.h"

#include "../comm/CommTestUtil.h"
#include "ToyPipelinePlan.h"

#include <gtest/gtest.h>

#include <cstring>

namespace mtc::rt::test {
namespace {

/// The world ranks of the members of `comm`, in its rank order (from every member).
std::vector<float> worldRanksOf(Communicator *comm, int worldRank) {
  if (!comm)
    return {};
  float me = float(worldRank);
  std::vector<float> all(size_t(comm->size()));
  EXPECT_TRUE(comm->allGather(&me, all.data(), 1, MTC_F32).ok());
  return all;
}

/// What each rank saw.
struct Seen {
  int64_t stage = -1, stages = -1;
  bool leader = false;
  MeshPlacement placement;
  std::vector<float> pipeline, tp, dataParallel, modelGroup;
  int pipelineRank = -1;
};

std::vector<Seen> runPipelineMesh(TestJob &job, int n, const Plan &plan,
                                  const std::string &prefix) {
  std::vector<Seen> seen(static_cast<size_t>(n));
  runRanks(n, [&](int rank) {
    auto world = job.connect(rank, n, prefix);
    ASSERT_TRUE(world);
    Expected<RankMesh> mesh = RankMesh::create(plan, world.get());
    ASSERT_TRUE(mesh.ok()) << mesh.error().message();
    Seen &s = seen[size_t(rank)];
    s.stage = mesh->stage();
    s.stages = mesh->stages();
    s.leader = mesh->stageLeader();
    s.placement = mesh->placement();
    ASSERT_TRUE(mesh->pipeline());
    s.pipelineRank = mesh->pipeline()->rank();
    s.pipeline = worldRanksOf(mesh->pipeline(), rank);
    for (const MeshAxisGroup &axis : mesh->context().axes)
      if (axis.name == "tp")
        s.tp = worldRanksOf(axis.comm, rank);
    s.dataParallel = worldRanksOf(mesh->dataParallel(), rank);
    s.modelGroup = worldRanksOf(mesh->modelGroup(), rank);
  });
  return seen;
}

TEST(RankMeshTest, PipelineOutermostThenDataThenTensorParallel) {
  TestJob job;
  Plan plan = toyPipelinePlan({2, {0, 1}, {1, 1}, false, 0, /*tp=*/2});
  std::vector<Seen> seen = runPipelineMesh(job, 8, plan, "pp2tp2dp2");
  for (int r = 0; r < 8; ++r) {
    const Seen &s = seen[size_t(r)];
    SCOPED_TRACE(concat("rank ", r));
    const int stage = r / 4, dp = r % 4 / 2, tp = r % 2;
    EXPECT_EQ(s.stage, stage);
    EXPECT_EQ(s.stages, 2);
    EXPECT_EQ(s.leader, r % 4 == 0);
    EXPECT_EQ(s.placement.coordinates, std::vector<int64_t>{tp});
    EXPECT_EQ(s.placement.dpIndex, dp);
    EXPECT_EQ(s.placement.dpSize, 2);
    // The pipeline group: the ranks at this place of each stage, rank = stage.
    EXPECT_EQ(s.pipelineRank, stage);
    EXPECT_EQ(s.pipeline, (std::vector<float>{float(r % 4), float(r % 4 + 4)}));
    // Within the stage's block of 4: tp pairs, and data parallelism over the pairs.
    const float block = float(4 * stage);
    EXPECT_EQ(s.tp, (std::vector<float>{block + float(2 * dp), block + float(2 * dp + 1)}));
    EXPECT_EQ(s.dataParallel, (std::vector<float>{block + float(tp), block + float(tp + 2)}));
    EXPECT_EQ(s.modelGroup, s.tp);
  }
}

TEST(RankMeshTest, PipelineWithTheDistributedOptimizer) {
  TestJob job;
  Plan plan = toyPipelinePlan({2, {0, 1}, {1, 1}, false, /*dp=*/2});
  std::vector<Seen> seen = runPipelineMesh(job, 4, plan, "pp2dpaxis");
  for (int r = 0; r < 4; ++r) {
    const Seen &s = seen[size_t(r)];
    SCOPED_TRACE(concat("rank ", r));
    EXPECT_EQ(s.stage, r / 2);
    EXPECT_EQ(s.leader, r % 2 == 0);
    EXPECT_EQ(s.placement.coordinates, std::vector<int64_t>{r % 2});
    EXPECT_EQ(s.pipeline, (std::vector<float>{float(r % 2), float(r % 2 + 2)}));
    // The data-parallel axis' group is the stage's block, and so is one copy of the model.
    std::vector<float> block = {float(r / 2 * 2), float(r / 2 * 2 + 1)};
    EXPECT_EQ(s.dataParallel, block);
    EXPECT_EQ(s.modelGroup, block);
  }
}

TEST(RankMeshTest, PipelineStagesMustShareTheWorld) {
  Plan plan = toyPipelinePlan({2, {0, 1}, {1, 1}});
  Expected<RankMesh> alone = RankMesh::create(plan, nullptr);
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.error().message(),
            "the plan partitions the model over 2 pipeline stages, but the job has 1 rank: the "
            "number of ranks must be a multiple of 2 (data parallelism takes the rest)");
  TestJob job;
  std::vector<std::string> errors(3);
  runRanks(3, [&](int rank) {
    auto world = job.connect(rank, 3, "pp2of3");
    ASSERT_TRUE(world);
    Expected<RankMesh> mesh = RankMesh::create(plan, world.get());
    errors[size_t(rank)] = mesh ? "" : mesh.error().message();
  });
  for (const std::string &e : errors)
    EXPECT_EQ(e, "the plan partitions the model over 2 pipeline stages, but the job has 3 ranks: "
                 "the number of ranks must be a multiple of 2 (data parallelism takes the rest)");
}

// A world that pp divides but pp x tp does not (6 ranks for pp2 x tp2) is refused with the
// job's size, not the misleading size of one stage's block.
TEST(RankMeshTest, AWorldPpDividesButNotPpTimesTp) {
  Plan plan = toyPipelinePlan({2, {0, 1}, {1, 1}, false, 0, /*tp=*/2});
  TestJob job;
  std::vector<std::string> errors(6);
  runRanks(6, [&](int rank) {
    auto world = job.connect(rank, 6, "pp2tp2of6");
    ASSERT_TRUE(world);
    Expected<RankMesh> mesh = RankMesh::create(plan, world.get());
    errors[size_t(rank)] = mesh ? "" : mesh.error().message();
  });
  for (const std::string &e : errors)
    EXPECT_EQ(e, "the plan partitions the model over 2 pipeline stages of a mesh of 2 ranks "
                 "(tp=2), but the job has 6 ranks: the number of ranks must be a multiple of 4 "
                 "(data parallelism takes the rest)");
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(RankMeshTest, GatherStagesAssemblesTheModel) {
  // ZB-V's V over 6 layers: stage 0 holds chunks 0 and 3 (layers 0 and 5) and the tied
  // embedding, stage 1 chunks 1 and 2 (layers 1 to 4).
  Plan plan = toyPipelinePlan({2, {0, 1, 1, 0}, {1, 2, 2, 1}});
  Expected<TrainingState> initial = TrainingState::initialize(plan, 1);
  ASSERT_TRUE(initial.ok());
  TrainingState whole = std::move(*initial);
  for (size_t k = 0; k < whole.states.size(); ++k)
    for (size_t i = 0; i < whole.states[k].values.size(); ++i)
      whole.states[k].values[i] = float(100 * k + i) + 0.25f;
  whole.step = 9;
  TestJob job;
  std::vector<std::optional<TrainingState>> got(2);
  std::vector<std::string> errors(2);
  runRanks(2, [&](int rank) {
    auto world = job.connect(rank, 2, "gather");
    ASSERT_TRUE(world);
    Expected<RankMesh> mesh = RankMesh::create(plan, world.get());
    ASSERT_TRUE(mesh.ok()) << mesh.error().message();
    Expected<StageHoldings> holdings = stageHoldings(plan, mesh->stage());
    ASSERT_TRUE(holdings.ok());
    Expected<TrainingState> stage = takeStage(plan, *holdings, whole);
    ASSERT_TRUE(stage.ok());
    Expected<std::optional<TrainingState>> model = gatherStages(plan, *stage, *mesh);
    if (!model)
      errors[size_t(rank)] = model.error().message();
    else
      got[size_t(rank)] = std::move(*model);
  });
  EXPECT_EQ(errors, (std::vector<std::string>{"", ""}));
  EXPECT_FALSE(got[1]) << "stage 1 sends and gets nothing";
  ASSERT_TRUE(got[0]);
  const TrainingState &model = *got[0];
  EXPECT_EQ(model.step, 9);
  ASSERT_EQ(model.params.size(), whole.params.size());
  ASSERT_EQ(model.states.size(), whole.states.size());
  for (size_t k = 0; k < whole.params.size(); ++k) {
    EXPECT_EQ(model.params[k].name, whole.params[k].name);
    EXPECT_EQ(model.params[k].shape, whole.params[k].shape);
    EXPECT_TRUE(sameBits(model.params[k].values, whole.params[k].values)) << whole.params[k].name;
  }
  for (size_t k = 0; k < whole.states.size(); ++k) {
    EXPECT_EQ(model.states[k].name, whole.states[k].name);
    EXPECT_TRUE(sameBits(model.states[k].values, whole.states[k].values)) << whole.states[k].name;
  }

  // Without a pipeline group there is nothing to gather over.
  Plan single = plan;
  single.pipeline->stages = 1;
  single.pipeline->chunkStages = {0, 0, 0, 0};
  Expected<RankMesh> alone = RankMesh::create(single, nullptr);
  ASSERT_TRUE(alone.ok()) << alone.error().message();
  EXPECT_EQ(alone->stages(), 1);
  EXPECT_TRUE(alone->stageLeader());
  Expected<std::optional<TrainingState>> none = gatherStages(single, whole, *alone);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message(), "internal error: no pipeline group to gather the stages over");
}

} // namespace
} // namespace mtc::rt::test
