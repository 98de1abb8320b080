//===- RankMesh.h - This rank's mesh: communicators and shards ---*- C++ -*-===//
//
// `RankMesh::create(plan, world)` places this rank on the plan's mesh (runtime/plan/
// Sharding.h: Megatron order, the last axis fastest, data parallelism outermost) and splits
// the world communicator into
//
//   - one communicator per mesh axis of size > 1: the ranks that differ only in their
//     coordinate along it (rank = coordinate), which the kernels' collectives use
//     (MeshCollectives.h, through `context()`);
//   - the data-parallel group: the ranks with the same mesh coordinates (rank = data-parallel
//     index), over which the Trainer all-reduces gradients and the loss;
//   - the model group: the ranks with the same data-parallel index (rank = mesh index), over
//     which checkpoints and exports gather the shards.
//
// With pipeline parallelism (a plan with a "pipeline" of P > 1 stages) the world is first cut
// into P blocks of consecutive ranks, one per stage (pipeline outermost, as Megatron places
// it: world rank = tp index + tp x (dp index + dp x stage)); within its stage's block a rank
// is placed as above, and the ranks at the same place of every stage form the pipeline group
// (rank = stage), over which the stages exchange activations and gradients.
//
// Without a mesh (or a mesh of one rank) nothing is split: the data-parallel group is the
// world itself, as before tensor parallelism.
//
// With a data-parallel axis (plan `mesh.data_parallel_axis`, the distributed optimizer) the
// world is exactly the mesh: the data-parallel group is that axis' communicator, and the
// model group is the whole world, since the optimizer state is split over the data-parallel
// ranks too (gatherState gathers every tensor by its own layout over it). Every split is collective over the world: all
// ranks create their RankMesh at the same point.
//
// `shardState` and `gatherState` convert between whole tensors (checkpoints, exports, the
// single-rank run) and this rank's shards.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_RANKMESH_H
#define MTC_RUNTIME_EXEC_RANKMESH_H

#include "runtime/comm/Communicator.h"
#include "runtime/exec/MeshCollectives.h"
#include "runtime/exec/PipelineStage.h"
#include "runtime/exec/TrainingState.h"
#include "runtime/plan/Plan.h"
#include "runtime/plan/Sharding.h"
#include "runtime/support/Error.h"

#include <memory>
#include <optional>
#include <vector>

namespace mtc::rt {

class RankMesh {
public:
  /// Collective over `world` (null: this rank alone, world size 1). Fails when the world
  /// size is not a multiple of the plan's mesh size, or a split fails. `world` must outlive
  /// the mesh.
  static Expected<RankMesh> create(const Plan &plan, Communicator *world);

  RankMesh(RankMesh &&) noexcept = default;
  RankMesh &operator=(RankMesh &&) noexcept = default;

  const MeshPlacement &placement() const { return placement_; }
  /// The axes with their communicators, for a kernel call's MeshCall (valid while this object
  /// lives).
  const MeshContext &context() const { return context_; }
  /// The data-parallel group (null when this rank is alone in it and there is no world).
  Communicator *dataParallel() const { return dataParallel_; }
  /// The ranks holding one copy of the model and its optimizer state (null when the mesh has
  /// one rank): the ranks of one data-parallel index, or, with a data-parallel axis, the
  /// whole world (rank = mesh index).
  Communicator *modelGroup() const { return modelGroup_; }
  /// Whether this rank is in the first model group (the one whose shards checkpoints and
  /// exports gather): data-parallel index 0, or every rank with a data-parallel axis.
  bool inFirstModelGroup() const { return firstModelGroup_; }
  /// Whether the model is partitioned (mesh size > 1).
  bool partitioned() const { return placement_.meshSize > 1; }
  /// With pipeline parallelism: this rank's stage, the number of stages, and the pipeline
  /// group (the ranks of the same place in every stage; rank = stage). Without: stage 0 of
  /// 1 and no group.
  int64_t stage() const { return stage_; }
  int64_t stages() const { return stages_; }
  Communicator *pipeline() const { return pipeline_; }
  /// Whether this rank is the first of its stage (the one that sends the stage's whole
  /// tensors to rank 0 for checkpoints; every rank of a plan without a pipeline is "first"
  /// of its single stage only at world rank 0).
  bool stageLeader() const { return rankInStage_ == 0; }
  /// Bytes this rank sent over the world and every communicator split from it.
  uint64_t bytesSent() const;

private:
  RankMesh() = default;
  /// Splits the mesh's communicators of this rank's placement from `world` (the job's, or
  /// the stage's block of it under pipeline parallelism).
  Error splitMesh(const Plan &plan, Communicator *world);

  MeshPlacement placement_;
  MeshContext context_;
  Communicator *world_ = nullptr;
  Communicator *dataParallel_ = nullptr;
  Communicator *modelGroup_ = nullptr;
  bool firstModelGroup_ = true;
  int64_t stage_ = 0, stages_ = 1, rankInStage_ = 0;
  Communicator *pipeline_ = nullptr;
  std::vector<std::unique_ptr<Communicator>> owned_;
};

/// A state of parameters and optimizer states in local shapes: the shard at `coordinates` of
/// every tensor of `global` (whole tensors in the plan's tables; a replicated one is copied),
/// parameters by their layout and states by their optimizer layout.
Expected<TrainingState> shardState(const Plan &plan, const TrainingState &global,
                                   const std::vector<int64_t> &coordinates);

/// Whole tensors from the shards of the ranks of this rank's model group: collective over
/// mesh.modelGroup() (every rank of the group calls it; the all-gathers move f32 values),
/// each tensor by its own layout (states by their optimizer layout). Without partitioning, a
/// copy of `local`.
Expected<TrainingState> gatherState(const Plan &plan, const TrainingState &local,
                                    const RankMesh &mesh);

/// The whole model from the stages of a pipeline: every stage leader (RankMesh::stageLeader)
/// calls it with its stage's tensors whole over tensor parallelism (stagePlan's tables), and
/// stage 0's leader (world rank 0) gets the model's whole tensors (plan's tables) while the
/// others send theirs and get nothing. Collective over the stage leaders' pipeline group.
Expected<std::optional<TrainingState>> gatherStages(const Plan &plan, const TrainingState &stage,
                                                    const RankMesh &mesh);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_RANKMESH_H
