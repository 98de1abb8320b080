//===- PlanMesh.h - The mesh a generation function runs its collectives over -*- C++ -*-===//
//
// A plan's generation functions (`logits`, `prefill`, `decode_step`) run with a MeshContext:
// the rank's place on the plan's mesh (RankMesh::context()) when the plan is partitioned,
// else a mesh of the plan's axes, all of size one, without communicators. LogitsFunction
// and CachedLogits hold one each.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_GENERATE_PLANMESH_H
#define MTC_RUNTIME_GENERATE_PLANMESH_H

#include "runtime/exec/MeshCollectives.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/Error.h"

#include <string_view>

namespace mtc::rt {

class PlanMesh {
public:
  /// `given` (which must outlive the object), or the plan's own mesh of one rank when null.
  /// Fails when the plan is partitioned over more than one rank and `given` is null (`what`,
  /// e.g. "its logits function", names what runs on the mesh), or when `given` has another
  /// number of axes than the plan.
  static Expected<PlanMesh> create(const Plan &plan, const MeshContext *given,
                                   std::string_view what);

  const MeshContext &context() const { return given_ ? *given_ : own_; }

private:
  MeshContext own_;
  const MeshContext *given_ = nullptr;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_GENERATE_PLANMESH_H
