//===- Sharding.cpp - Ranks on the mesh and the shards they hold ----------===//

#include "runtime/plan/Sharding.h"

#include "runtime/plan/ParamInit.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace mtc::rt {

int64_t meshSizeOf(const std::vector<MeshAxis> &mesh) {
  int64_t n = 1;
  for (const MeshAxis &a : mesh)
    n *= a.size;
  return n;
}

std::vector<int64_t> meshCoordinates(const std::vector<MeshAxis> &mesh, int64_t meshIndex) {
  std::vector<int64_t> coords(mesh.size());
  for (size_t i = mesh.size(); i-- > 0;) {
    coords[i] = meshIndex % mesh[i].size;
    meshIndex /= mesh[i].size;
  }
  return coords;
}

Expected<MeshPlacement> placeRank(const std::vector<MeshAxis> &mesh, int64_t rank,
                                  int64_t worldSize, std::optional<size_t> dataParallelAxis,
                                  int64_t stages) {
  MeshPlacement p;
  p.meshSize = meshSizeOf(mesh);
  if (worldSize <= 0 || rank < 0 || rank >= worldSize)
    return makeError("rank ", rank, " is not in a world of ", worldSize, " ranks");
  std::string axes;
  for (const MeshAxis &a : mesh)
    axes.append(axes.empty() ? "" : " x ").append(concat(a.name, '=', a.size));
  // Pipeline stages are outermost: stage s is the block [s * n, (s + 1) * n) of the world.
  std::string meshText = concat("a mesh of ", p.meshSize, " ranks (", axes, ")");
  std::string layout = stages == 1      ? meshText
                       : p.meshSize == 1 ? concat(stages, " pipeline stages")
                                         : concat(stages, " pipeline stages of ", meshText);
  const int64_t ranksPerCopy = stages * p.meshSize;
  const char *job = worldSize == 1 ? " rank" : " ranks";
  if (dataParallelAxis) {
    assert(*dataParallelAxis < mesh.size() && "data-parallel axis out of range");
    const MeshAxis &dp = mesh[*dataParallelAxis];
    if (worldSize != ranksPerCopy)
      return makeError("the plan runs on ", layout, " whose axis '", dp.name,
                       "' is data parallelism (the distributed optimizer shards the optimizer "
                       "state over it), but the job has ",
                       worldSize, job, ": the number of ranks must be ", ranksPerCopy,
                       " (recompile with another data-parallel degree to change it)");
  } else if (worldSize % ranksPerCopy != 0) {
    return makeError("the plan partitions the model over ", layout, ", but the job has ",
                     worldSize, job,
                     ": the number of ranks must be a multiple of ", ranksPerCopy,
                     " (data parallelism takes the rest)");
  }
  const int64_t perStage = worldSize / stages;
  p.stage = rank / perStage;
  rank %= perStage;
  if (dataParallelAxis) {
    p.meshIndex = rank;
    p.coordinates = meshCoordinates(mesh, p.meshIndex);
    p.dpIndex = p.coordinates[*dataParallelAxis];
    p.dpSize = mesh[*dataParallelAxis].size;
    return p;
  }
  p.dpSize = perStage / p.meshSize;
  p.meshIndex = rank % p.meshSize;
  p.dpIndex = rank / p.meshSize;
  p.coordinates = meshCoordinates(mesh, p.meshIndex);
  return p;
}

Expected<MeshPlacement> placePlanRank(const Plan &plan, int64_t rank, int64_t worldSize) {
  return placeRank(plan.mesh, rank, worldSize, plan.dataParallelAxis,
                   plan.pipeline ? plan.pipeline->stages : 1);
}

int64_t ShardBox::globalElements() const {
  int64_t n = 1;
  for (int64_t s : globalShape)
    n *= s;
  return n;
}

int64_t ShardBox::localElements() const {
  int64_t n = 1;
  for (int64_t s : localShape)
    n *= s;
  return n;
}

ShardBox shardBox(const std::vector<Dim> &dims, const ParamLayout &layout,
                  const std::vector<MeshAxis> &mesh, const std::vector<int64_t> &coordinates) {
  ShardBox box;
  box.globalShape = dimSizes(dims);
  box.localShape = box.globalShape;
  box.offset.assign(dims.size(), 0);
  for (const DimSplit &split : layout.splits) {
    assert(split.dim < dims.size() && "split of a dim the tensor does not have");
    int64_t ways = 1, combined = 0;
    for (size_t axis : split.axes) {
      assert(axis < mesh.size() && axis < coordinates.size() && "axis out of range");
      ways *= mesh[axis].size;
      combined = combined * mesh[axis].size + coordinates[axis];
    }
    int64_t local = box.globalShape[split.dim] / ways;
    box.localShape[split.dim] = local;
    box.offset[split.dim] = combined * local;
  }
  return box;
}

ShardBox shardBox(const Plan &plan, const ParamInfo &param,
                  const std::vector<int64_t> &coordinates) {
  return shardBox(param.dims, param.layout, plan.mesh, coordinates);
}

ShardBox optimizerShardBox(const Plan &plan, const ParamInfo &param,
                           const std::vector<int64_t> &coordinates) {
  return shardBox(param.dims, param.stateLayout(), plan.mesh, coordinates);
}

namespace {

/// A row-major tensor cut along `dim` into n blocks: `outer` rows (the dims before `dim`),
/// each holding n runs of `run` consecutive elements (one per block).
struct DimCut {
  int64_t outer = 1, run = 1;
};

DimCut dimCut(const std::vector<int64_t> &shape, size_t dim, int64_t n) {
  assert(dim < shape.size() && n > 0 && shape[dim] % n == 0 && "a cut that does not divide");
  DimCut cut;
  for (size_t d = 0; d < dim; ++d)
    cut.outer *= shape[d];
  cut.run = shape[dim] / n;
  for (size_t d = dim + 1; d < shape.size(); ++d)
    cut.run *= shape[d];
  return cut;
}

} // namespace

void extractDimBlock(const std::vector<int64_t> &shape, size_t dim, int64_t n, int64_t c,
                     const float *in, float *out) {
  DimCut cut = dimCut(shape, dim, n);
  size_t bytes = size_t(cut.run) * sizeof(float);
  for (int64_t o = 0; o < cut.outer; ++o)
    std::memcpy(out + o * cut.run, in + (o * n + c) * cut.run, bytes);
}

void forEachShardRun(const ShardBox &box, int64_t localBegin, int64_t localEnd,
                     const std::function<void(int64_t, int64_t, int64_t)> &fn) {
  size_t rank = box.globalShape.size();
  // The last dim that is not whole: runs are its local extent times the whole dims after it.
  size_t last = rank;
  for (size_t d = rank; d-- > 0;)
    if (box.localShape[d] != box.globalShape[d]) {
      last = d;
      break;
    }
  if (last == rank) { // the whole tensor: one run
    if (localEnd > localBegin)
      fn(localBegin, localBegin, localEnd - localBegin);
    return;
  }
  std::vector<int64_t> stride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;)
    stride[d] = stride[d + 1] * box.globalShape[d + 1];
  int64_t runLength = box.localShape[last] * stride[last];
  if (runLength == 0)
    return;
  std::vector<int64_t> index(last); // multi-index of the run over dims [0, last)
  for (int64_t run = localBegin / runLength; run * runLength < localEnd; ++run) {
    int64_t r = run;
    int64_t global = box.offset[last] * stride[last];
    for (size_t d = last; d-- > 0;) {
      global += (box.offset[d] + r % box.localShape[d]) * stride[d];
      r /= box.localShape[d];
    }
    int64_t runBegin = run * runLength;
    int64_t begin = std::max(localBegin, runBegin);
    int64_t end = std::min(localEnd, runBegin + runLength);
    fn(global + (begin - runBegin), begin, end - begin);
  }
}

void extractShard(const ShardBox &box, const float *global, float *local) {
  forEachShardRun(box, 0, box.localElements(), [&](int64_t g, int64_t l, int64_t n) {
    std::memcpy(local + l, global + g, size_t(n) * sizeof(float));
  });
}

void insertShard(const ShardBox &box, const float *local, float *global) {
  forEachShardRun(box, 0, box.localElements(), [&](int64_t g, int64_t l, int64_t n) {
    std::memcpy(global + g, local + l, size_t(n) * sizeof(float));
  });
}

void initializeShard(const ParamInfo &param, uint64_t seed, const ShardBox &box,
                     int64_t localBegin, int64_t localEnd, float *out) {
  forEachShardRun(box, localBegin, localEnd, [&](int64_t g, int64_t l, int64_t n) {
    initializeParam(param, seed, g, g + n, out + (l - localBegin));
  });
}

} // namespace mtc::rt
