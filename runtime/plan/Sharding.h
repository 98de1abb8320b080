//===- Sharding.h - Ranks on the mesh and the shards they hold --*- C++ -*-===//
//
// Tensor parallelism partitions the compiled program over the plan's mesh axes
// (docs/plan-format.md, "Mesh and layouts"). This file is the arithmetic of it, without
// communication:
//
// Rank placement (Megatron order, the last axis fastest): for axes [a0 .. ak] of sizes
// [s0 .. sk], world rank r has coordinate(ak) = r % sk, then r /= sk, ... coordinate(a0) =
// r % s0, and data-parallel index r / (s0 * .. * sk). The ranks that share the data-parallel
// index hold one copy of the model between them (the mesh group; `meshIndex` is the rank's
// row-major index over the coordinates, r % mesh size); the ranks with the same coordinates
// are the data-parallel group.
//
// With a data-parallel axis (plan `mesh.data_parallel_axis`, the distributed optimizer), that
// axis is the first of the mesh and the world is exactly the mesh: a rank's data-parallel
// index is its coordinate on the axis and the data-parallel degree the axis' size. The
// placement of world ranks is the same as without it (data parallelism outermost).
//
// A parameter's shard: for each dim split over axes [a0, a1, ...] (outermost first) the
// combined coordinate c = (c0 * s1 + c1) * s2 + ... selects the contiguous index range
// [c * G / n, (c + 1) * G / n) of that dim (G its global size, n = s0 * s1 * ...); unsplit
// dims are whole. The local tensor is the row-major sub-block (`ShardBox`), which is a set
// of equally long runs of consecutive global row-major indices.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_PLAN_SHARDING_H
#define MTC_RUNTIME_PLAN_SHARDING_H

#include "runtime/plan/Plan.h"
#include "runtime/support/Error.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace mtc::rt {

/// Where one world rank sits.
struct MeshPlacement {
  std::vector<int64_t> coordinates; // per mesh axis, in [0, size)
  int64_t meshIndex = 0;            // row-major over the coordinates, in [0, meshSize)
  int64_t meshSize = 1;             // the product of the axis sizes
  int64_t dpIndex = 0;              // in [0, dpSize); the coordinate on a data-parallel axis
  int64_t dpSize = 1;               // worldSize / (stages x meshSize); a data-parallel axis' size
  int64_t stage = 0;                // the pipeline stage, in [0, stages)

  friend bool operator==(const MeshPlacement &, const MeshPlacement &) = default;
};

/// The product of the axis sizes (1 for no axes).
int64_t meshSizeOf(const std::vector<MeshAxis> &mesh);

/// The coordinates of mesh index `meshIndex` (last axis fastest).
std::vector<int64_t> meshCoordinates(const std::vector<MeshAxis> &mesh, int64_t meshIndex);

/// Places world rank `rank` of `worldSize` on `mesh`. Fails, with a message for users, when
/// the world size is not a multiple of the mesh size (or rank is out of range). With
/// `dataParallelAxis` (an index into `mesh`) data parallelism is that axis: the world size
/// must equal the mesh size, and dpIndex/dpSize are the coordinate on it and its size. With
/// `stages` pipeline stages the world is `stages` consecutive blocks, one per stage (the
/// pipeline outermost), each placed as above: the sizes required are `stages` times as many.
Expected<MeshPlacement> placeRank(const std::vector<MeshAxis> &mesh, int64_t rank,
                                  int64_t worldSize,
                                  std::optional<size_t> dataParallelAxis = std::nullopt,
                                  int64_t stages = 1);
/// The same for `plan`'s mesh, data-parallel axis and pipeline stages.
Expected<MeshPlacement> placePlanRank(const Plan &plan, int64_t rank, int64_t worldSize);

/// The block of a tensor one rank holds: per dim, the global size, the local size and the
/// first global index.
struct ShardBox {
  std::vector<int64_t> globalShape;
  std::vector<int64_t> localShape;
  std::vector<int64_t> offset;

  int64_t globalElements() const;
  int64_t localElements() const;
  /// Whether the rank holds the whole tensor.
  bool whole() const { return globalShape == localShape; }
};

/// The block of a tensor of `dims` laid out by `layout` over `mesh` that the rank with
/// `coordinates` holds. The layout must come from a loaded plan (dims divide evenly).
ShardBox shardBox(const std::vector<Dim> &dims, const ParamLayout &layout,
                  const std::vector<MeshAxis> &mesh, const std::vector<int64_t> &coordinates);

/// The rank's block of parameter `param` (its `layout`).
ShardBox shardBox(const Plan &plan, const ParamInfo &param,
                  const std::vector<int64_t> &coordinates);
/// The rank's block of each optimizer state of `param` and of its gradient as optimizer_step
/// takes it (its optimizer layout; the same as shardBox without one).
ShardBox optimizerShardBox(const Plan &plan, const ParamInfo &param,
                           const std::vector<int64_t> &coordinates);

/// Block c of a row-major tensor of `shape` cut along dimension `dim` into n equal contiguous
/// index ranges (block c: [c * L / n, (c + 1) * L / n), L = shape[dim], which n must divide):
/// out (size / n elements) is the block, row-major. The distributed optimizer's reduce-scatter
/// packs these blocks (block c goes to data-parallel coordinate c; GradientSharding.h).
void extractDimBlock(const std::vector<int64_t> &shape, size_t dim, int64_t n, int64_t c,
                     const float *in, float *out);

/// Calls fn(globalBegin, localBegin, length) for the runs of consecutive global row-major
/// indices that make up local elements [localBegin, localEnd) of the box, in order.
void forEachShardRun(const ShardBox &box, int64_t localBegin, int64_t localEnd,
                     const std::function<void(int64_t globalBegin, int64_t localBegin,
                                              int64_t length)> &fn);

/// local[i] = global[the global index of local element i] (global holds the whole tensor).
void extractShard(const ShardBox &box, const float *global, float *local);
/// The inverse: writes the rank's elements into the whole tensor.
void insertShard(const ShardBox &box, const float *local, float *global);

/// Fills out[0, localEnd - localBegin) with the initial values of local elements
/// [localBegin, localEnd) of `param`'s shard `box`: the values a single rank's
/// initializeParam gives at their global indices (Philox keyed on the global index).
void initializeShard(const ParamInfo &param, uint64_t seed, const ShardBox &box,
                     int64_t localBegin, int64_t localEnd, float *out);

} // namespace mtc::rt

#endif // MTC_RUNTIME_PLAN_SHARDING_H
