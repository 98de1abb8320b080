//===- PipelineStage.cpp - What one pipeline stage holds ------------------===//

#include "runtime/exec/PipelineStage.h"

#include <algorithm>
#include <new>

namespace mtc::rt {
namespace {

bool isLayerParam(const ParamInfo &p) {
  return p.layer.has_value() && !p.dims.empty() && p.dims.front().name == "layers";
}

/// Calls `copy(modelOffset, stageOffset, count)` for the run of elements each of the stage's
/// chunks has in a layer tensor of the whole stack (`stackLayers` layers, `modelElements`
/// values) and in the stage's.
template <class Copy>
void forEachChunkRun(const StageHoldings &holdings, int64_t stackLayers, size_t modelElements,
                     Copy copy) {
  size_t row = modelElements / size_t(stackLayers);
  for (const StageHoldings::Chunk &c : holdings.chunks)
    copy(size_t(c.firstLayer) * row, size_t(c.offset) * row, size_t(c.numLayers) * row);
}

} // namespace

int64_t StageHoldings::chunkOffset(int64_t chunk) const {
  for (const Chunk &c : chunks)
    if (c.chunk == chunk)
      return c.offset;
  return 0;
}

Expected<StageHoldings> stageHoldings(const Plan &plan, int64_t stage) {
  if (!plan.pipeline || !plan.x86Kernels)
    return makeError(plan.dir.string(), ": the plan has no pipeline with compiled chunks");
  const PipelinePlan &pipeline = *plan.pipeline;
  const std::vector<ChunkKernels> &kernels = plan.x86Kernels->chunks;
  StageHoldings h;
  h.stage = stage;
  std::vector<bool> held(plan.params.size(), false);
  for (size_t c = 0; c < pipeline.chunkStages.size(); ++c) {
    if (pipeline.chunkStages[c] != stage)
      continue;
    if (c >= kernels.size() || !kernels[c].forward)
      return makeError(plan.dir.string(), ": the plan's kernels have no 'chunk", c,
                       ".forward' function");
    const ChunkKernels &k = kernels[c];
    h.chunks.push_back({int64_t(c), k.firstLayer, k.numLayers, h.layers});
    h.layers += k.numLayers;
    for (const std::optional<KernelFunction> *fn :
         {&k.forward, &k.backward, &k.backwardInput, &k.backwardWeight})
      if (*fn)
        for (const KernelBuffer &b : (*fn)->inputs)
          if (b.kind == BufferKind::Param)
            for (size_t i = 0; i < plan.params.size(); ++i)
              if (plan.params[i].name == b.name)
                held[i] = true;
  }
  for (size_t i = 0; i < held.size(); ++i)
    if (held[i] && (!isLayerParam(plan.params[i]) || h.layers > 0))
      h.params.push_back(i);
  return h;
}

/// The distributed optimizer's layout of a stage's tensor `p` (its stage dims): its layout
/// plus the first dimension no axis splits whose size the data-parallel degree divides, as
/// the compiler lays out the stage functions' gradients and states (none divides: whole).
/// Under ZeRO-3 the layout is the optimizer's already (split over dp, never along `layers`).
/// Under ZeRO-2 never along `layers` either: each chunk's gradient, the rows of its layers,
/// is reduce-scattered on its own (GradientBuffer::addPart).
std::optional<ParamLayout> stageOptimizerLayout(const Plan &plan, const ParamInfo &p) {
  if (plan.shardsParameters())
    return std::nullopt;
  const int64_t dp = plan.mesh[*plan.dataParallelAxis].size;
  for (size_t d = 0; d < p.dims.size(); ++d) {
    bool split = std::any_of(p.layout.splits.begin(), p.layout.splits.end(),
                             [&](const DimSplit &s) { return s.dim == d; });
    if (split || p.dims[d].size % dp != 0 || (plan.zeroStage == 2 && d == 0 && isLayerParam(p)))
      continue;
    ParamLayout layout = p.layout;
    auto at = std::find_if(layout.splits.begin(), layout.splits.end(),
                           [&](const DimSplit &s) { return s.dim > d; });
    layout.splits.insert(at, DimSplit{d, {*plan.dataParallelAxis}});
    return layout;
  }
  return std::nullopt;
}

Plan stagePlan(const Plan &plan, const StageHoldings &holdings) {
  Plan stage = plan;
  stage.params.clear();
  stage.states.clear();
  std::vector<std::optional<size_t>> newIndex(plan.params.size());
  for (size_t i : holdings.params) {
    ParamInfo p = plan.params[i];
    if (isLayerParam(p))
      p.dims.front().size = holdings.layers;
    if (plan.dataParallelAxis)
      p.optimizerLayout = stageOptimizerLayout(plan, p);
    newIndex[i] = stage.params.size();
    stage.params.push_back(std::move(p));
  }
  for (const StateInfo &s : plan.states) {
    if (!newIndex[s.paramIndex])
      continue;
    StateInfo state = s;
    state.paramIndex = *newIndex[s.paramIndex];
    state.dims = stage.params[state.paramIndex].dims;
    stage.states.push_back(std::move(state));
  }
  return stage;
}

Expected<TrainingState> takeStage(const Plan &plan, const StageHoldings &holdings,
                                  const TrainingState &model) {
  if (model.params.size() != plan.params.size() ||
      (!model.states.empty() && model.states.size() != plan.states.size()))
    return makeError("the state does not match the plan's tables");
  TrainingState stage;
  stage.step = model.step;
  stage.lossScale = model.lossScale;
  try {
    auto take = [&](const TrainingState::Tensor &t, const ParamInfo &p) {
      if (!isLayerParam(p))
        return t;
      TrainingState::Tensor out{t.name, t.shape, {}};
      int64_t stack = t.shape.front();
      out.shape.front() = holdings.layers;
      out.values.resize(t.values.size() / size_t(stack) * size_t(holdings.layers));
      forEachChunkRun(holdings, stack, t.values.size(), [&](size_t m, size_t s, size_t n) {
        std::copy_n(t.values.begin() + ptrdiff_t(m), n, out.values.begin() + ptrdiff_t(s));
      });
      return out;
    };
    std::vector<bool> held(plan.params.size(), false);
    for (size_t i : holdings.params) {
      held[i] = true;
      stage.params.push_back(take(model.params[i], plan.params[i]));
    }
    for (size_t i = 0; i < model.states.size(); ++i)
      if (held[plan.states[i].paramIndex])
        stage.states.push_back(take(model.states[i], plan.params[plan.states[i].paramIndex]));
  } catch (const std::bad_alloc &) {
    return makeError("out of memory taking stage ", holdings.stage, "'s parameters");
  }
  return stage;
}

Error putStage(const Plan &plan, const StageHoldings &holdings, const TrainingState &stage,
               TrainingState &model) {
  if (model.params.size() != plan.params.size() || model.states.size() != plan.states.size())
    return makeError("the state does not match the plan's tables");
  auto put = [&](const TrainingState::Tensor &from, TrainingState::Tensor &to,
                 const ParamInfo &p) -> Error {
    bool layered = isLayerParam(p);
    size_t expected = layered && !to.shape.empty()
                          ? to.values.size() / size_t(to.shape.front()) * size_t(holdings.layers)
                          : to.values.size();
    if (from.name != to.name || from.values.size() != expected)
      return makeError("stage ", holdings.stage, "'s tensor '", from.name, "' has ",
                       from.values.size(), " values, expected ", expected, " for '", to.name, "'");
    if (layered)
      forEachChunkRun(holdings, to.shape.front(), to.values.size(),
                      [&](size_t m, size_t s, size_t n) {
                        std::copy_n(from.values.begin() + ptrdiff_t(s), n,
                                    to.values.begin() + ptrdiff_t(m));
                      });
    else
      std::copy(from.values.begin(), from.values.end(), to.values.begin());
    return Error::success();
  };
  size_t next = 0;
  std::vector<bool> held(plan.params.size(), false);
  for (size_t i : holdings.params) {
    held[i] = true;
    if (next >= stage.params.size())
      return makeError("stage ", holdings.stage, " sent fewer parameters than it holds");
    if (Error err = put(stage.params[next++], model.params[i], plan.params[i]); !err.ok())
      return err;
  }
  next = 0;
  for (size_t i = 0; i < plan.states.size(); ++i) {
    if (!held[plan.states[i].paramIndex])
      continue;
    if (next >= stage.states.size())
      return makeError("stage ", holdings.stage, " sent fewer optimizer states than it holds");
    if (Error err =
            put(stage.states[next++], model.states[i], plan.params[plan.states[i].paramIndex]);
        !err.ok())
      return err;
  }
  return Error::success();
}

size_t heldWords(const KernelBuffer &b) {
  return (static_cast<size_t>(b.numElements()) * planDTypeSize(b.dtype) + sizeof(float) - 1) /
         sizeof(float);
}

size_t chunkActivationWords(const KernelsInfo &kernels, int64_t chunk) {
  if (chunk < 0 || static_cast<size_t>(chunk) >= kernels.chunks.size() ||
      !kernels.chunks[size_t(chunk)].forward)
    return 0;
  size_t words = 0;
  for (const KernelBuffer &b : kernels.chunks[size_t(chunk)].forward->outputs)
    if (b.kind == BufferKind::Activation)
      words += heldWords(b);
  return words;
}

namespace {

std::string formatSizes(const std::vector<int64_t> &sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i)
    out += concat(i ? ", " : "", sizes[i]);
  return out + "]";
}

} // namespace

size_t PipelineExpertLoad::size() const {
  size_t values = 0;
  for (int64_t e : experts)
    values += static_cast<size_t>(layers * e);
  return values;
}

size_t PipelineExpertLoad::rowOffset(size_t output, int64_t layer) const {
  size_t offset = 0;
  for (size_t o = 0; o < output; ++o)
    offset += static_cast<size_t>(layers * experts[o]);
  return offset + static_cast<size_t>(layer * experts[output]);
}

Expected<PipelineExpertLoad> pipelineExpertLoad(const KernelsInfo &kernels) {
  PipelineExpertLoad load;
  for (size_t c = 0; c < kernels.chunks.size(); ++c) {
    const ChunkKernels &chunk = kernels.chunks[c];
    if (!chunk.forward)
      return makeError("the plan's kernels have no 'chunk", c, ".forward' function");
    std::vector<int64_t> experts;
    for (const KernelBuffer &b : chunk.forward->outputs) {
      if (b.kind != BufferKind::ExpertLoad)
        continue;
      if (b.dims.size() != 2 || b.dims[0].size != chunk.numLayers)
        return makeError("chunk", c, ".forward: expert_load ", formatDims(b.dims),
                         " is not the tokens per expert of the chunk's ", chunk.numLayers,
                         " layers");
      experts.push_back(b.dims[1].size);
    }
    if (c > 0 && experts != load.experts)
      return makeError("chunk", c, ".forward returns ", experts.size(),
                       " expert_load outputs of experts ", formatSizes(experts),
                       ", but chunk0.forward ", load.experts.size(), " of experts ",
                       formatSizes(load.experts));
    load.experts = std::move(experts);
    load.layers += chunk.numLayers;
  }
  return load;
}

} // namespace mtc::rt
