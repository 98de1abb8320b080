//===- PlanMesh.cpp - The mesh a generation function runs its collectives over ---===//

#include "runtime/generate/PlanMesh.h"

namespace mtc::rt {

Expected<PlanMesh> PlanMesh::create(const Plan &plan, const MeshContext *given,
                                    std::string_view what) {
  if (plan.meshSize() > 1 && !given)
    return makeError(plan.dir.string(), ": the plan is partitioned over a mesh of ",
                     plan.meshSize(), " ranks; ", what, " runs on the ranks of that mesh");
  if (given && given->axes.size() != plan.mesh.size())
    return makeError(plan.dir.string(), ": the mesh given has ", given->axes.size(),
                     " axes, the plan's ", plan.mesh.size());
  PlanMesh mesh;
  mesh.given_ = given;
  if (!given)
    for (const MeshAxis &a : plan.mesh)
      mesh.own_.axes.push_back(MeshAxisGroup{a.name, a.size, 0, nullptr});
  return mesh;
}

} // namespace mtc::rt
