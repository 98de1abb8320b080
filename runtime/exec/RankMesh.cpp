//===- RankMesh.cpp - This rank's mesh: communicators and shards ----------===//

#include "runtime/exec/RankMesh.h"

#include <new>

namespace mtc::rt {

Expected<RankMesh> RankMesh::create(const Plan &plan, Communicator *world) {
  RankMesh m;
  m.world_ = world;
  const int worldRank = world ? world->rank() : 0;
  const int worldSize = world ? world->size() : 1;
  Expected<MeshPlacement> placement = placePlanRank(plan, worldRank, worldSize);
  if (!placement)
    return placement.takeError();
  m.placement_ = std::move(*placement);
  m.stage_ = m.placement_.stage;
  m.stages_ = plan.pipeline ? plan.pipeline->stages : 1;
  const int perStage = worldSize / static_cast<int>(m.stages_);
  m.rankInStage_ = worldRank % perStage;
  m.context_.worldRank = worldRank;
  Communicator *stageWorld = world;
  if (m.stages_ > 1) {
    // The stage's block of the world, within which the mesh is split as without a pipeline,
    // and the pipeline group: the ranks at this rank's place in every stage.
    Expected<std::unique_ptr<Communicator>> stage =
        world->split(static_cast<int>(m.stage_), static_cast<int>(m.rankInStage_));
    if (!stage)
      return stage.takeError().withContext("building the pipeline stage's communicator");
    Expected<std::unique_ptr<Communicator>> pipeline =
        world->split(static_cast<int>(m.rankInStage_), static_cast<int>(m.stage_));
    if (!pipeline)
      return pipeline.takeError().withContext("building the pipeline communicator");
    stageWorld = stage->get();
    m.pipeline_ = pipeline->get();
    m.owned_.push_back(std::move(*stage));
    m.owned_.push_back(std::move(*pipeline));
  }
  if (Error err = m.splitMesh(plan, stageWorld); !err.ok())
    return err;
  return m;
}

Error RankMesh::splitMesh(const Plan &plan, Communicator *world) {
  RankMesh &m = *this;
  // The rank in `world`, the block of the stage under pipeline parallelism.
  const int worldRank = world ? world->rank() : 0;
  for (size_t i = 0; i < plan.mesh.size(); ++i)
    m.context_.axes.push_back(
        MeshAxisGroup{plan.mesh[i].name, plan.mesh[i].size, m.placement_.coordinates[i], nullptr});
  if (!m.partitioned()) {
    m.dataParallel_ = world;
    return Error::success();
  }
  const std::vector<int64_t> &coords = m.placement_.coordinates;
  // Which copy of the whole mesh this rank is in (0 with a data-parallel axis).
  const int64_t replica = worldRank / m.placement_.meshSize;
  m.firstModelGroup_ = replica == 0;
  auto split = [&](int64_t color, int64_t key, std::string_view what) -> Expected<Communicator *> {
    Expected<std::unique_ptr<Communicator>> c =
        world->split(static_cast<int>(color), static_cast<int>(key));
    if (!c)
      return c.takeError().withContext(concat("building the ", what, " communicator"));
    m.owned_.push_back(std::move(*c));
    return m.owned_.back().get();
  };
  // One communicator per axis: the ranks that differ only along it.
  for (size_t i = 0; i < plan.mesh.size(); ++i) {
    if (plan.mesh[i].size == 1)
      continue;
    int64_t color = replica;
    for (size_t j = 0; j < plan.mesh.size(); ++j)
      if (j != i)
        color = color * plan.mesh[j].size + coords[j];
    Expected<Communicator *> c =
        split(color, coords[i], concat("mesh axis '", plan.mesh[i].name, "'"));
    if (!c)
      return c.takeError();
    m.context_.axes[i].comm = *c;
  }
  if (plan.dataParallelAxis) {
    // Data parallelism is a mesh axis: its communicator is the data-parallel group, and the
    // optimizer state is split over it, so one copy of the model and state is the world.
    m.dataParallel_ = m.context_.axes[*plan.dataParallelAxis].comm;
    m.modelGroup_ = world;
    return Error::success();
  }
  if (m.placement_.dpSize > 1) {
    Expected<Communicator *> dp =
        split(m.placement_.meshIndex, m.placement_.dpIndex, "data-parallel");
    if (!dp)
      return dp.takeError();
    m.dataParallel_ = *dp;
  }
  Expected<Communicator *> group = split(replica, m.placement_.meshIndex, "model group");
  if (!group)
    return group.takeError();
  m.modelGroup_ = *group;
  return Error::success();
}

uint64_t RankMesh::bytesSent() const {
  uint64_t total = world_ ? world_->counters().totalBytesSent() : 0;
  for (const std::unique_ptr<Communicator> &c : owned_)
    total += c->counters().totalBytesSent();
  return total;
}

Expected<TrainingState> shardState(const Plan &plan, const TrainingState &global,
                                   const std::vector<int64_t> &coordinates) {
  if (global.params.size() != plan.params.size() || global.states.size() != plan.states.size())
    return makeError("the state does not match the plan's tables");
  TrainingState local;
  local.step = global.step;
  local.lossScale = global.lossScale;
  try {
    auto take = [&](const TrainingState::Tensor &t, const ParamInfo &p,
                    const ParamLayout &layout) -> Expected<TrainingState::Tensor> {
      ShardBox box = shardBox(p.dims, layout, plan.mesh, coordinates);
      if (static_cast<int64_t>(t.values.size()) != box.globalElements())
        return makeError("tensor '", t.name, "' has ", t.values.size(), " elements, but ",
                         box.globalElements(), " whole");
      TrainingState::Tensor out{t.name, box.localShape,
                                std::vector<float>(size_t(box.localElements()))};
      extractShard(box, t.values.data(), out.values.data());
      return out;
    };
    for (size_t i = 0; i < plan.params.size(); ++i) {
      Expected<TrainingState::Tensor> t =
          take(global.params[i], plan.params[i], plan.params[i].layout);
      if (!t)
        return t.takeError();
      local.params.push_back(std::move(*t));
    }
    for (size_t i = 0; i < plan.states.size(); ++i) {
      const ParamInfo &p = plan.params[plan.states[i].paramIndex];
      Expected<TrainingState::Tensor> t = take(global.states[i], p, p.stateLayout());
      if (!t)
        return t.takeError();
      local.states.push_back(std::move(*t));
    }
  } catch (const std::bad_alloc &) {
    return makeError("out of memory taking this rank's shards");
  }
  return local;
}

Expected<TrainingState> gatherState(const Plan &plan, const TrainingState &local,
                                    const RankMesh &mesh) {
  if (!mesh.partitioned())
    return local;
  Communicator *group = mesh.modelGroup();
  const MeshPlacement &placement = mesh.placement();
  if (!group || group->size() != placement.meshSize)
    return makeError("internal error: no model-group communicator to gather the shards over");
  if (local.params.size() != plan.params.size() || local.states.size() != plan.states.size())
    return makeError("the state does not match the plan's tables");
  TrainingState global;
  global.step = local.step;
  global.lossScale = local.lossScale;
  try {
    std::vector<std::vector<int64_t>> coords;
    for (int64_t k = 0; k < placement.meshSize; ++k)
      coords.push_back(meshCoordinates(plan.mesh, k));
    std::vector<float> gathered;
    auto gather = [&](const TrainingState::Tensor &t, const ParamInfo &p, const ParamLayout &layout,
                      std::string_view kind) -> Expected<TrainingState::Tensor> {
      if (layout.replicated())
        return t;
      ShardBox mine = shardBox(p.dims, layout, plan.mesh, placement.coordinates);
      size_t count = size_t(mine.localElements());
      if (t.values.size() != count)
        return makeError(kind, " '", t.name, "' has ", t.values.size(),
                         " elements, but this rank's shard has ", count);
      gathered.resize(count * size_t(placement.meshSize));
      if (Error err = group->allGather(t.values.data(), gathered.data(), count, MTC_F32);
          !err.ok())
        return std::move(err).withContext(
            concat("gathering the shards of ", kind, " '", t.name, "' over the model group"));
      TrainingState::Tensor out{t.name, mine.globalShape,
                                std::vector<float>(size_t(mine.globalElements()))};
      for (int64_t k = 0; k < placement.meshSize; ++k)
        insertShard(shardBox(p.dims, layout, plan.mesh, coords[size_t(k)]),
                    gathered.data() + size_t(k) * count, out.values.data());
      return out;
    };
    for (size_t i = 0; i < plan.params.size(); ++i) {
      Expected<TrainingState::Tensor> t =
          gather(local.params[i], plan.params[i], plan.params[i].layout, "parameter");
      if (!t)
        return t.takeError();
      global.params.push_back(std::move(*t));
    }
    for (size_t i = 0; i < plan.states.size(); ++i) {
      const ParamInfo &p = plan.params[plan.states[i].paramIndex];
      Expected<TrainingState::Tensor> t =
          gather(local.states[i], p, p.stateLayout(), "optimizer state");
      if (!t)
        return t.takeError();
      global.states.push_back(std::move(*t));
    }
  } catch (const std::bad_alloc &) {
    return makeError("out of memory gathering the shards");
  }
  return global;
}

Expected<std::optional<TrainingState>> gatherStages(const Plan &plan, const TrainingState &stage,
                                                    const RankMesh &mesh) {
  Communicator *pipeline = mesh.pipeline();
  if (!pipeline)
    return makeError("internal error: no pipeline group to gather the stages over");
  auto describe = [](int64_t s) { return concat("gathering stage ", s, "'s tensors"); };
  if (mesh.stage() != 0) {
    for (const auto *table : {&stage.params, &stage.states})
      for (const TrainingState::Tensor &t : *table)
        if (Error err = pipeline->send(t.values.data(), t.values.size(), MTC_F32, 0); !err.ok())
          return std::move(err).withContext(describe(mesh.stage()));
    return std::optional<TrainingState>();
  }
  TrainingState model;
  model.step = stage.step;
  model.lossScale = stage.lossScale;
  try {
    for (const ParamInfo &p : plan.params)
      model.params.push_back({p.name, p.shape(), std::vector<float>(size_t(p.numElements()))});
    for (const StateInfo &s : plan.states)
      model.states.push_back(
          {s.name, dimSizes(s.dims), std::vector<float>(size_t(s.numElements()))});
    for (int64_t s = 0; s < mesh.stages(); ++s) {
      Expected<StageHoldings> holdings = stageHoldings(plan, s);
      if (!holdings)
        return holdings.takeError();
      if (s == 0) {
        if (Error err = putStage(plan, *holdings, stage, model); !err.ok())
          return err;
        continue;
      }
      // The stage's tables tell the sizes of what it sends.
      Plan tables = stagePlan(plan, *holdings);
      TrainingState received;
      for (const ParamInfo &p : tables.params)
        received.params.push_back({p.name, p.shape(), std::vector<float>(size_t(p.numElements()))});
      for (const StateInfo &st : tables.states)
        received.states.push_back(
            {st.name, dimSizes(st.dims), std::vector<float>(size_t(st.numElements()))});
      for (auto *table : {&received.params, &received.states})
        for (TrainingState::Tensor &t : *table)
          if (Error err = pipeline->recv(t.values.data(), t.values.size(), MTC_F32, int(s));
              !err.ok())
            return std::move(err).withContext(describe(s));
      if (Error err = putStage(plan, *holdings, received, model); !err.ok())
        return err;
    }
  } catch (const std::bad_alloc &) {
    return makeError("out of memory gathering the pipeline's stages");
  }
  return std::optional<TrainingState>(std::move(model));
}

} // namespace mtc::rt
