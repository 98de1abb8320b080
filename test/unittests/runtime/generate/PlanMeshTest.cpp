//===- PlanMeshTest.cpp - the mesh a generation function runs over --------===//

#include "runtime/generate/PlanMesh.h"

#include <gtest/gtest.h>

using namespace mtc::rt;

namespace {

Plan planWithMesh(std::vector<MeshAxis> axes) {
  Plan plan;
  plan.dir = "some.plan";
  plan.mesh = std::move(axes);
  return plan;
}

TEST(PlanMeshTest, APlanOfOneRankGetsItsOwnMeshWithoutCommunicators) {
  Plan plan = planWithMesh({{"dp", 1}, {"tp", 1}});
  Expected<PlanMesh> mesh = PlanMesh::create(plan, nullptr, "its logits function");
  ASSERT_TRUE(mesh) << mesh.error().message();
  const MeshContext &context = mesh->context();
  ASSERT_EQ(context.axes.size(), 2u);
  EXPECT_EQ(context.axes[1].name, "tp");
  EXPECT_EQ(context.axes[1].size, 1);
  EXPECT_EQ(context.axes[1].comm, nullptr);
  // Moved (as the functions holding it are), it still answers its own mesh.
  PlanMesh moved = std::move(*mesh);
  EXPECT_EQ(moved.context().axes.size(), 2u);
}

TEST(PlanMeshTest, AGivenMeshIsTheOneUsed) {
  Plan plan = planWithMesh({{"tp", 2}});
  MeshContext given;
  given.axes.push_back(MeshAxisGroup{"tp", 2, 1, nullptr});
  Expected<PlanMesh> mesh = PlanMesh::create(plan, &given, "its cached generation");
  ASSERT_TRUE(mesh) << mesh.error().message();
  EXPECT_EQ(&mesh->context(), &given);
}

TEST(PlanMeshTest, APartitionedPlanNeedsTheRanksMesh) {
  Plan plan = planWithMesh({{"tp", 2}});
  Expected<PlanMesh> mesh = PlanMesh::create(plan, nullptr, "its cached generation");
  ASSERT_FALSE(mesh);
  EXPECT_EQ(mesh.error().message(), "some.plan: the plan is partitioned over a mesh of 2 ranks; "
                                    "its cached generation runs on the ranks of that mesh");
}

TEST(PlanMeshTest, AMeshOfOtherAxesIsRefused) {
  Plan plan = planWithMesh({{"dp", 2}, {"tp", 2}});
  MeshContext given;
  given.axes.push_back(MeshAxisGroup{"tp", 2, 0, nullptr});
  Expected<PlanMesh> mesh = PlanMesh::create(plan, &given, "its logits function");
  ASSERT_FALSE(mesh);
  EXPECT_EQ(mesh.error().message(), "some.plan: the mesh given has 1 axes, the plan's 2");
}

} // namespace
