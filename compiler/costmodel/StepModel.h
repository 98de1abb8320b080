//===- StepModel.h - a plan's training step on a cluster --------*- C++ -*-===//
//
// `mtc simulate`'s model (docs/cost-model.md): the time of one training step of a plan on a
// cluster, without running it.
//
//  - Each step function's call (forward_backward, optimizer_step, the pipeline's chunk and
//    stage functions) takes its compute time, from plan.json's `predictions.functions`: the
//    matrix products at the cluster's GEMM efficiency for their size, the other ops' bytes at
//    the memory bandwidth and a fixed overhead per op; then its collectives by the alpha-beta
//    model (CollectiveModel.h) on the links the mesh axis' ranks use (Megatron's placement,
//    the last mesh axis fastest, then data, then pipeline parallelism).
//  - The runtime's own communication: the data-parallel reduction of the gradients (one
//    all-reduce of the all-reduced gradients, a reduce-scatter per sharded one, the loss),
//    the pipeline's activations and gradients between stages, the shared parameters' sum.
//  - The step: each stage's task list (a plan without pipeline parallelism is one stage
//    running forward_backward per micro-batch, the reduction and the optimizer step) run by
//    ScheduleSimulation.h, so pipeline bubbles come out of the schedule.
//  - Memory per rank is the plan's own prediction (exact for the CPU runtime).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_COSTMODEL_STEPMODEL_H
#define MTC_COMPILER_COSTMODEL_STEPMODEL_H

#include "compiler/costmodel/CollectiveModel.h"
#include "compiler/costmodel/ScheduleSimulation.h"
#include "runtime/plan/Plan.h"

#include <map>

namespace mtc::costmodel {

/// One entry of `predictions.functions`: what one call of a function does on one rank.
struct FunctionProfile {
  struct Gemm {
    double flops = 0;
    int64_t count = 0;
  };
  struct Collective {
    CollectiveKind kind = CollectiveKind::AllReduce;
    std::string axis;
    int64_t group = 1;
    double bytes = 0;
    int64_t count = 0;
    /// The buffer grows with the micro-batch (the layout search's scaling; plan.json does
    /// not record it).
    bool batched = false;
  };
  std::vector<Gemm> gemms;
  double trafficBytes = 0;
  int64_t ops = 0;
  std::vector<Collective> collectives;
  /// The part of trafficBytes that grows with the micro-batch (the layout search's
  /// scaling; plan.json does not record it).
  double batchTrafficBytes = 0;
};

/// A pipeline send or receive: the chunk whose forward output (an activation) or whose
/// successor's input gradient it carries, and the key naming its message ("a 0 3", "g 1 3"),
/// equal on the sending and the receiving task (ScheduleSimulation.h's SimTask::message).
int64_t messageProducer(const rt::ScheduleTask &task);
std::string messageKey(const rt::ScheduleTask &task);

/// Reads and checks `predictions.functions` of the plan's plan.json (the loader verified the
/// file against MANIFEST): the kinds, axes of the plan's mesh with their sizes, counts.
/// Errors name the field; a plan without it (compiled by an older mtc, or without kernels)
/// is an error saying to recompile.
llvm::Expected<std::map<std::string, FunctionProfile>> readFunctionProfiles(const rt::Plan &plan);

struct SimulateOptions {
  int64_t nodes = 1;
  /// Ranks per node (0: the cluster's devices per node).
  int64_t ranksPerNode = 0;
  /// Sequences per step (mtrun --global-batch; 0: the plan's global_batch).
  int64_t globalBatch = 0;
  /// The element type of the matrix products (empty: the plan's precision, f32 without one).
  std::string dtype;
};

struct Simulation {
  int64_t worldSize = 0, ranksPerNode = 0;
  int64_t pipelineStages = 1, dataParallel = 1, meshSize = 1;
  int64_t microBatches = 0; // per step, all data-parallel ranks together
  /// The micro-batches each rank runs (all of them under ZeRO-3, each rank its part).
  int64_t microBatchesPerRank = 0;
  std::string dtype;
  double peakFlops = 0; // per rank
  double stepSeconds = 0;
  /// Of the slowest stage: computing, in communication nothing hides, and idle (the bubble).
  double computeSeconds = 0, communicationSeconds = 0, bubbleSeconds = 0;
  double tokensPerStep = 0, modelFlopsPerStep = 0;
  double tokensPerSecond() const { return stepSeconds > 0 ? tokensPerStep / stepSeconds : 0; }
  /// Model FLOPs (Megatron's convention, plan.json's flops_per_token) per second over the
  /// peak of every rank.
  double mfu() const;
  /// Per pipeline stage: the plan's predicted peak bytes per rank (-1: unknown).
  std::vector<int64_t> peakBytes;
  int64_t deviceMemoryBytes = 0;
  /// The simulated stages (one per pipeline stage): their tasks and when they ran.
  std::vector<std::vector<SimTask>> stages;
  SimResult timeline;
  /// What the model assumed that a reader should know ("4 ranks share 2 cores").
  std::vector<std::string> notes;
};

/// Simulates one step of `plan` on `options.nodes` nodes of `cluster`. Fails when the world
/// size does not fit the plan (not a multiple of its mesh and pipeline, not its fixed
/// data-parallel degree), the micro-batches do not share evenly, the cluster has no peak for
/// the element type, or the plan lacks its function profiles.
llvm::Expected<Simulation> simulateStep(const rt::Plan &plan, const Cluster &cluster,
                                        const SimulateOptions &options);

/// The report `mtc simulate` prints.
void printSimulation(const Simulation &simulation, const rt::Plan &plan, const Cluster &cluster,
                     llvm::raw_ostream &os);

} // namespace mtc::costmodel

#endif // MTC_COMPILER_COSTMODEL_STEPMODEL_H
