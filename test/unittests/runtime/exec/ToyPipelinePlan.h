//===- ToyPipelinePlan.h - An in-memory plan with pipeline chunks -*- C++ -*-===//
//
// A plan with a pipeline cut and chunk functions (their parameter buffers only: nothing is
// called), for the tests of what a stage holds (PipelineStage.h), of the rank mesh's
// pipeline placement and of gathering the stages. Its tables, in this order:
//
//   params  0 wte [vocab=6, hidden=4]             read by the first and the last chunk (tied)
//           1 block.w [layers=L, hidden=4, ffn=6] read by every chunk
//           2 block.b [layers=L, odd=3]           read by every chunk
//           3 lnf.g [hidden=4]                    read by the last chunk
//   states  block.b.m, wte.m, block.w.m, lnf.g.m, block.w.v (not in parameter order, so that
//           a stage's table must re-index them)
//
// Every chunk's functions list the layer parameters (of the chunk's layers), a chunk of 0
// layers too. The stage functions are left to the tests.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TEST_UNITTESTS_RUNTIME_EXEC_TOYPIPELINEPLAN_H
#define MTC_TEST_UNITTESTS_RUNTIME_EXEC_TOYPIPELINEPLAN_H

#include "runtime/plan/Plan.h"

#include <numeric>

namespace mtc::rt::test {

struct ToyPipeline {
  int64_t stages = 2;
  std::vector<int64_t> chunkStages = {0, 1}; // per chunk
  std::vector<int64_t> chunkLayers = {1, 1}; // per chunk
  /// Chunks run backward_input and backward_weight instead of backward.
  bool splitBackward = false;
  /// > 0: a data-parallel mesh axis `dp` of this size (the distributed optimizer), first.
  int64_t dp = 0;
  /// > 1: a mesh axis `tp` splitting block.w's `hidden`.
  int64_t tp = 1;
};

inline Plan toyPipelinePlan(const ToyPipeline &t) {
  const int64_t layers = std::accumulate(t.chunkLayers.begin(), t.chunkLayers.end(), int64_t(0));
  Plan plan;
  plan.dir = "pipe.plan";
  plan.model = "pipe";
  plan.seed = 7;
  plan.dims = {{"vocab", 6}, {"hidden", 4}, {"ffn", 6}, {"odd", 3}, {"layers", layers}};
  std::optional<size_t> tpAxis;
  if (t.dp > 0) {
    plan.mesh.push_back(MeshAxis{"dp", t.dp});
    plan.dataParallelAxis = 0;
  }
  if (t.tp > 1) {
    tpAxis = plan.mesh.size();
    plan.mesh.push_back(MeshAxis{"tp", t.tp});
  }
  auto param = [&](const char *name, uint32_t id, std::vector<Dim> dims, bool layered) {
    ParamInfo p;
    p.name = name;
    p.tensorId = id;
    p.dims = std::move(dims);
    p.init = InitSpec{InitKind::Normal, {1.0}};
    if (layered) {
      p.layer = "block";
      p.instances = layers;
    }
    return p;
  };
  plan.params = {param("wte", 0, {{"vocab", 6}, {"hidden", 4}}, false),
                 param("block.w", 1, {{"layers", layers}, {"hidden", 4}, {"ffn", 6}}, true),
                 param("block.b", 2, {{"layers", layers}, {"odd", 3}}, true),
                 param("lnf.g", 3, {{"hidden", 4}}, false)};
  if (tpAxis)
    plan.params[1].layout.splits = {DimSplit{1, {*tpAxis}}};
  if (plan.dataParallelAxis && layers % t.dp == 0) {
    // The whole model's optimizer layout: block.w by layers (a stage derives its own).
    plan.params[1].optimizerLayout = plan.params[1].layout;
    plan.params[1].optimizerLayout->splits.insert(plan.params[1].optimizerLayout->splits.begin(),
                                                  DimSplit{0, {0}});
  }
  auto state = [&](const char *name, size_t of) {
    return StateInfo{name, plan.params[of].name, of, plan.params[of].dims, PlanDType::F32};
  };
  plan.states = {state("block.b.m", 2), state("wte.m", 0), state("block.w.m", 1),
                 state("lnf.g.m", 3), state("block.w.v", 1)};

  PipelinePlan pipeline;
  pipeline.stages = t.stages;
  pipeline.virtualStages = int64_t(t.chunkStages.size()) / t.stages;
  pipeline.schedule = "gpipe";
  pipeline.chunkLayers = t.chunkLayers;
  pipeline.chunkStages = t.chunkStages;
  plan.pipeline = std::move(pipeline);

  KernelsInfo kernels;
  kernels.file = "kernels/x86_64.so";
  const size_t chunks = t.chunkStages.size();
  int64_t first = 0;
  for (size_t c = 0; c < chunks; ++c) {
    KernelFunction fn;
    fn.symbol = concat("chunk", c);
    // A parameter as the chunk takes it: the rank's shard, of the chunk's layers.
    auto reads = [&](const ParamInfo &p) {
      std::vector<Dim> dims = plan.localDims(p);
      if (p.layer)
        dims.front().size = t.chunkLayers[c];
      fn.inputs.push_back(KernelBuffer{BufferKind::Param, p.name, PlanDType::F32, dims});
    };
    if (c == 0)
      reads(plan.params[0]);
    reads(plan.params[1]);
    reads(plan.params[2]);
    if (c + 1 == chunks) {
      reads(plan.params[3]);
      reads(plan.params[0]);
    }
    ChunkKernels k;
    k.firstLayer = first;
    k.numLayers = t.chunkLayers[c];
    first += k.numLayers;
    k.forward = fn;
    if (t.splitBackward) {
      k.backwardInput = fn;
      k.backwardWeight = fn;
    } else {
      k.backward = fn;
    }
    kernels.chunks.push_back(std::move(k));
  }
  kernels.stages.resize(size_t(t.stages));
  plan.x86Kernels = std::move(kernels);
  return plan;
}

} // namespace mtc::rt::test

#endif // MTC_TEST_UNITTESTS_RUNTIME_EXEC_TOYPIPELINEPLAN_H
