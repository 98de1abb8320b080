//===- CommunicationPrediction.cpp - Bytes a rank should send per step ----===//

#include "runtime/exec/CommunicationPrediction.h"

#include "runtime/exec/PipelineStage.h"

#include <algorithm>

namespace mtc::rt {

namespace {

/// What a ring all-reduce of `bytes` over `ranks` ranks sends from each.
double ringAllReduceBytes(double bytes, int64_t ranks) {
  return 2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks) * bytes;
}

double localBytes(const Plan &tables, const ParamInfo &param) {
  return static_cast<double>(numElements(tables.localDims(param)) * sizeof(float));
}

} // namespace

double dataParallelReductionBytes(const Plan &tables, int64_t dataParallelSize,
                                  int64_t microBatchesPerRank) {
  if (dataParallelSize <= 1)
    return 0;
  // ZeRO-3's kernels reduce-scatter the gradients themselves (forward_backward's predicted
  // bytes): only the loss crosses the data-parallel ranks here.
  if (tables.shardsParameters())
    return ringAllReduceBytes(sizeof(double), dataParallelSize);
  double allReduced = 0, reduceScattered = 0;
  for (const ParamInfo &param : tables.params)
    // The gradient as the kernels return it: the parameter's rank-local shard.
    (tables.dataParallelShardDim(param) ? reduceScattered : allReduced) +=
        localBytes(tables, param);
  double fraction =
      static_cast<double>(dataParallelSize - 1) / static_cast<double>(dataParallelSize);
  if (tables.zeroStage == 2)
    reduceScattered *= static_cast<double>(microBatchesPerRank);
  return fraction * reduceScattered + ringAllReduceBytes(allReduced + sizeof(double),
                                                         dataParallelSize);
}

double predictedCommunicationBytes(const Plan &plan, int64_t microBatches,
                                   int64_t dataParallelSize) {
  double bytes = 0;
  if (const auto &compiled = plan.predictions.communicationBytes)
    bytes += static_cast<double>(microBatches / dataParallelSize) *
                 static_cast<double>(compiled->forwardBackward) +
             static_cast<double>(compiled->optimizerStep);
  bytes += dataParallelReductionBytes(plan, dataParallelSize, microBatches / dataParallelSize);
  // The tokens per expert of an MoE model (i64) are all-reduced beside the loss (under ZeRO-3
  // by the kernels).
  if (dataParallelSize > 1 && !plan.shardsParameters() && plan.x86Kernels &&
      plan.x86Kernels->forwardBackward) {
    double counts = 0;
    for (const KernelBuffer &b : plan.x86Kernels->forwardBackward->outputs)
      if (b.kind == BufferKind::ExpertLoad)
        counts += static_cast<double>(b.numElements() * sizeof(int64_t));
    bytes += ringAllReduceBytes(counts, dataParallelSize);
  }
  return bytes;
}

std::optional<double> predictedStageCommunicationBytes(const Plan &plan, const Plan &stageTables,
                                                       const PipelineSchedule &schedule,
                                                       int64_t stage, int64_t dataParallelSize) {
  const auto &compiled = plan.predictions.communicationBytes;
  if (!compiled || !plan.pipeline || !plan.x86Kernels || stage < 0 ||
      static_cast<size_t>(stage) >= schedule.stages.size())
    return std::nullopt;
  auto functionBytes = [&](const std::string &name) -> std::optional<double> {
    auto it = compiled->pipelineFunctions.find(name);
    if (it == compiled->pipelineFunctions.end())
      return std::nullopt;
    return static_cast<double>(it->second);
  };
  const KernelsInfo &kernels = *plan.x86Kernels;
  // Under ZeRO-2 the gradient a chunk call returns of a parameter the stage's optimizer
  // layout splits over dp is reduce-scattered at once ((dp - 1) / dp of its bytes).
  bool shardsPerCall = stageTables.zeroStage == 2 && dataParallelSize > 1;
  auto reduceScatteredBytes = [&](const ScheduleTask &task) {
    if (!shardsPerCall || task.chunk < 0 || size_t(task.chunk) >= kernels.chunks.size())
      return 0.0;
    const ChunkKernels &chunk = kernels.chunks[size_t(task.chunk)];
    const std::optional<KernelFunction> &fn = task.op == TaskOp::Forward ? chunk.forward
                                              : task.op == TaskOp::Backward ? chunk.backward
                                              : task.op == TaskOp::BackwardInput
                                                  ? chunk.backwardInput
                                                  : chunk.backwardWeight;
    double sharded = 0;
    if (fn)
      for (const KernelBuffer &b : fn->outputs)
        if (b.kind == BufferKind::Grad)
          for (const ParamInfo &param : stageTables.params)
            if (param.name == b.name && stageTables.dataParallelShardDim(param))
              sharded += static_cast<double>(heldWords(b) * sizeof(float));
    return static_cast<double>(dataParallelSize - 1) / static_cast<double>(dataParallelSize) *
           sharded;
  };
  double bytes = 0;
  for (const ScheduleTask &task : schedule.stages[size_t(stage)].tasks) {
    if (isComputeTask(task.op)) {
      std::optional<double> call =
          functionBytes(concat("chunk", task.chunk, '.', taskOpName(task.op)));
      if (!call)
        return std::nullopt;
      bytes += *call + reduceScatteredBytes(task);
    } else if (task.op == TaskOp::SendActivation || task.op == TaskOp::SendGradient) {
      int64_t producer = task.op == TaskOp::SendActivation ? task.chunk : task.chunk - 1;
      bytes += static_cast<double>(chunkActivationWords(kernels, producer) * sizeof(float));
    }
  }
  const PipelinePlan &pipeline = *plan.pipeline;
  for (const PipelinePlan::SharedParam &shared : pipeline.sharedParams) {
    std::vector<int64_t> stages = pipeline.stagesOf(shared);
    if (stages.size() < 2 || !std::binary_search(stages.begin(), stages.end(), stage))
      continue;
    for (const ParamInfo &param : stageTables.params)
      if (param.name == shared.name)
        // (Under ZeRO-2 a reduce-scattered gradient's shard.)
        bytes += ringAllReduceBytes(localBytes(stageTables, param) /
                                        (shardsPerCall && stageTables.dataParallelShardDim(param)
                                             ? static_cast<double>(dataParallelSize)
                                             : 1.0),
                                    static_cast<int64_t>(stages.size()));
  }
  // (Under ZeRO-2 without the reduce-scatters the chunk calls counted.)
  bytes += dataParallelReductionBytes(stageTables, dataParallelSize, shardsPerCall ? 0 : 1);
  for (const char *role : {"grad_squares", "optimizer_step"}) {
    std::optional<double> call = functionBytes(concat("stage", stage, '.', role));
    if (!call)
      return std::nullopt;
    bytes += *call;
  }
  // The tokens per expert, as f64: the stage's rows beside the loss over the data-parallel
  // ranks, every stage's beside the squared norm and the loss over the pipeline group.
  Expected<PipelineExpertLoad> expertLoad = pipelineExpertLoad(kernels);
  if (!expertLoad)
    return std::nullopt;
  int64_t stageLayers = 0;
  for (size_t c = 0; c < kernels.chunks.size() && c < pipeline.chunkStages.size(); ++c)
    if (pipeline.chunkStages[c] == stage)
      stageLayers += kernels.chunks[c].numLayers;
  double stageCounts = 0;
  for (int64_t experts : expertLoad->experts)
    stageCounts += static_cast<double>(stageLayers * experts);
  if (dataParallelSize > 1 && !plan.shardsParameters()) // ZeRO-3's kernels count the group's
    bytes += ringAllReduceBytes(stageCounts * sizeof(double), dataParallelSize);
  return bytes + ringAllReduceBytes((2 + static_cast<double>(expertLoad->size())) * sizeof(double),
                                    pipeline.stages);
}

} // namespace mtc::rt
