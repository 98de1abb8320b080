//===- LayoutSearch.cpp - the search over parallel layouts ----------------===//

#include "compiler/costmodel/LayoutSearch.h"

#include "compiler/costmodel/CollectiveModel.h"
#include "compiler/costmodel/ScheduleSimulation.h"
#include "runtime/plan/StageBuffers.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mtc::costmodel;
namespace rt = mtc::rt;

namespace {

/// A profile compiled at micro-batch b0 at micro-batch b = factor x b0: every matrix
/// product and each batched byte count times the factor.
FunctionProfile scaled(const FunctionProfile &profile, double factor) {
  FunctionProfile out = profile;
  for (FunctionProfile::Gemm &gemm : out.gemms)
    gemm.flops *= factor;
  out.trafficBytes += profile.batchTrafficBytes * (factor - 1);
  out.batchTrafficBytes *= factor;
  for (FunctionProfile::Collective &c : out.collectives)
    if (c.batched)
      c.bytes *= factor;
  return out;
}

struct PartTime {
  double compute = 0, communicate = 0;
  double total() const { return compute + communicate; }
  PartTime &operator+=(const PartTime &o) {
    compute += o.compute;
    communicate += o.communicate;
    return *this;
  }
  PartTime operator*(double k) const { return {compute * k, communicate * k}; }
  PartTime operator-(const PartTime &o) const {
    return {compute - o.compute, communicate - o.communicate};
  }
};

/// Times profiles as StepModel.cpp's StepBuilder::call does: the GEMMs at the cluster's
/// efficiency for their size, the other ops' bytes at the memory bandwidth plus a fixed
/// overhead each, then the collectives on the links of their mesh axis.
class Timer {
public:
  Timer(const Cluster &cluster, const LayerCosts &costs, double peak, int64_t ranksPerNode)
      : cluster(cluster), costs(costs), peak(peak), ranksPerNode(ranksPerNode) {}

  PartTime time(const FunctionProfile &profile) const {
    PartTime t;
    for (const FunctionProfile::Gemm &g : profile.gemms)
      t.compute +=
          static_cast<double>(g.count) * g.flops / (peak * cluster.gemmEfficiencyAt(g.flops));
    t.compute += profile.trafficBytes / cluster.memoryBandwidth +
                 static_cast<double>(profile.ops) * cluster.kernelOverhead;
    for (const FunctionProfile::Collective &c : profile.collectives)
      t.communicate +=
          static_cast<double>(c.count) * collective(c.kind, c.bytes, c.group, axisStride(c.axis));
    return t;
  }

  double collective(CollectiveKind kind, double bytes, int64_t group, int64_t stride) const {
    if (group <= 1)
      return 0;
    return collectiveTime(cluster, kind, bytes, placeGroup(group, stride, ranksPerNode)).seconds;
  }

  /// The world-rank distance between neighbours on a mesh axis (the later axes are faster).
  int64_t axisStride(const std::string &axis) const {
    int64_t stride = 1;
    for (auto it = costs.meshAxes.rbegin(); it != costs.meshAxes.rend(); ++it) {
      if (it->first == axis)
        return stride;
      stride *= it->second;
    }
    return stride;
  }

private:
  const Cluster &cluster;
  const LayerCosts &costs;
  double peak;
  int64_t ranksPerNode;
};

/// What one pipeline chunk's tasks take per micro-batch.
struct ChunkTimes {
  PartTime forward, backward, backwardInput, backwardWeight;
  const PartTime &of(rt::TaskOp op) const {
    switch (op) {
    case rt::TaskOp::Forward:
      return forward;
    case rt::TaskOp::BackwardInput:
      return backwardInput;
    case rt::TaskOp::BackwardWeight:
      return backwardWeight;
    default:
      return backward;
    }
  }
};

/// What a stage does after its micro-batches: the data-parallel reduction, the squared
/// norm's all-reduce over the pipeline, the optimizer step.
struct StageEnd {
  double reduce = 0, norm = 0;
  PartTime update;
};

struct PipelineCosts {
  std::vector<ChunkTimes> chunks;
  std::vector<StageEnd> ends;
  /// A message from stage `from` to stage `to`: the sender's time (the link's latency) and
  /// when it arrives after its send starts.
  std::function<std::pair<double, double>(int64_t from, int64_t to)> send;
};

/// The simulated step, and the parts of the stage computing longest (as `mtc simulate`
/// reports them).
struct PipelineStep {
  double stepSeconds = 0, computeSeconds = 0, communicationSeconds = 0, dataParallelSeconds = 0;
};

/// Runs `schedule` (one task list per stage) with the chunks' times, as StepModel.cpp
/// builds the tasks of a compiled plan: each compute task, then its collectives; a send
/// busy for a latency, its message arriving a point-to-point time later; a receive waiting
/// for it; the stage's end.
llvm::Expected<SimResult> runSchedule(const rt::PipelineSchedule &schedule,
                                      const PipelineCosts &costs) {
  std::vector<std::vector<SimTask>> stages(schedule.stages.size());
  for (auto [s, stage] : llvm::enumerate(schedule.stages)) {
    std::vector<SimTask> &tasks = stages[s];
    tasks.reserve(stage.tasks.size() * 2);
    for (const rt::ScheduleTask &task : stage.tasks) {
      if (rt::isComputeTask(task.op)) {
        const PartTime &t = costs.chunks[size_t(task.chunk)].of(task.op);
        tasks.push_back({SimTask::Kind::Compute, "", t.compute, "", 0});
        if (t.communicate > 0)
          tasks.push_back({SimTask::Kind::Communicate, "", t.communicate, "", 0});
      } else if (rt::isSendTask(task.op)) {
        auto [latency, transfer] = costs.send(int64_t(s), task.peer);
        tasks.push_back({SimTask::Kind::Send, "", latency, messageKey(task), transfer});
      } else if (rt::isRecvTask(task.op)) {
        tasks.push_back({SimTask::Kind::Receive, "", 0, messageKey(task), 0});
      } else if (task.op == rt::TaskOp::ReduceGradients) {
        tasks.push_back({SimTask::Kind::Communicate, "", costs.ends[s].reduce, "", 0});
      } else if (task.op == rt::TaskOp::OptimizerStep) {
        const StageEnd &end = costs.ends[s];
        tasks.push_back({SimTask::Kind::Communicate, "", end.norm, "", 0});
        tasks.push_back({SimTask::Kind::Compute, "", end.update.compute, "", 0});
        if (end.update.communicate > 0)
          tasks.push_back({SimTask::Kind::Communicate, "", end.update.communicate, "", 0});
      }
    }
  }
  return simulateStages(stages);
}

/// Whether the layout's schedule splits each backward into B and W (the zero-bubble ones).
bool splitsBackward(const Layout &layout) {
  return layout.schedule == "zb-h1" || layout.schedule == "zb-v";
}

/// What each chunk of a pipeline keeps per micro-batch (rt::ChunkBufferBytes), composed
/// from one layer's: its layers' saved values (all of them read by the weight half of a
/// split backward: the zero-bubble schedule holds them from F to W), their stash from B to
/// W, and the activation it hands the next chunk.
rt::ChunkBufferBytes pipelineChunkBytes(const LayerCosts &costs,
                                        const std::vector<int64_t> &chunkLayers,
                                        const Layout &layout, double factor) {
  rt::ChunkBufferBytes bytes;
  auto rounded = [](double value) { return static_cast<int64_t>(std::llround(value)); };
  for (size_t k = 0; k < chunkLayers.size(); ++k) {
    double layers = static_cast<double>(chunkLayers[k]);
    int64_t saved = rounded(layers * costs.layerSavedBytes * factor);
    bytes.residual.push_back(saved);
    bytes.weightResidual.push_back(splitsBackward(layout) ? saved : 0);
    bytes.stash.push_back(rounded(layers * costs.layerWeightStashBytes * factor));
    bytes.activation.push_back(
        k + 1 < chunkLayers.size() ? rounded(costs.activationBytes * factor) : 0);
  }
  return bytes;
}

/// The pipeline's step on `m` micro-batches per rank. Up to 3 p micro-batches the schedule
/// is simulated whole; beyond, the steady state repeats: the step at 2 p and 3 p micro-
/// batches simulated and extended linearly (each further p micro-batches add what the
/// last p did), which keeps the search's time independent of the batch.
llvm::Expected<PipelineStep> simulatePipeline(const PipelineCosts &costs,
                                              const ScheduleSource &schedules, llvm::StringRef kind,
                                              int64_t p, int64_t v, int64_t m) {
  auto run = [&](int64_t count) -> llvm::Expected<PipelineStep> {
    llvm::Expected<const rt::PipelineSchedule *> schedule = schedules(kind, p, v, count);
    if (!schedule)
      return schedule.takeError();
    llvm::Expected<SimResult> sim = runSchedule(**schedule, costs);
    if (!sim)
      return sim.takeError();
    size_t busiest = 0;
    for (size_t s = 0; s < sim->compute.size(); ++s)
      if (sim->compute[s] > sim->compute[busiest])
        busiest = s;
    return PipelineStep{sim->stepSeconds, sim->compute[busiest], sim->communicate[busiest],
                        costs.ends[busiest].reduce + costs.ends[busiest].norm};
  };
  if (m <= 3 * p)
    return run(m);
  llvm::Expected<PipelineStep> lo = run(2 * p), hi = run(3 * p);
  if (!lo)
    return lo.takeError();
  if (!hi)
    return hi.takeError();
  double more = static_cast<double>(m - 3 * p) / static_cast<double>(p);
  auto extend = [&](double a, double b) { return b + more * (b - a); };
  return PipelineStep{
      extend(lo->stepSeconds, hi->stepSeconds), extend(lo->computeSeconds, hi->computeSeconds),
      extend(lo->communicationSeconds, hi->communicationSeconds), hi->dataParallelSeconds};
}

/// The split of `layers` into `chunks` chunks (at least one layer each) minimising the
/// largest chunk time, chunk 0 also running `first` and the last chunk `last`: the stage
/// cut balanced by the cost model. Empty when there are fewer layers than chunks.
std::vector<int64_t> balancedCut(int64_t layers, int64_t chunks, double layer, double first,
                                 double last) {
  if (layers < chunks || chunks < 1)
    return {};
  auto cut = [&](double limit) -> std::vector<int64_t> {
    std::vector<int64_t> split(size_t(chunks), 0);
    int64_t left = layers;
    for (int64_t c = 0; c < chunks; ++c) {
      double extra = (c == 0 ? first : 0) + (c == chunks - 1 ? last : 0);
      int64_t fit = layer > 0 ? static_cast<int64_t>((limit - extra) / layer + 1e-9) : left;
      int64_t later = chunks - c - 1; // each needs a layer
      int64_t n = std::min(fit, left - later);
      if (c == chunks - 1)
        n = left;
      if (n < 1 || (c == chunks - 1 && extra + static_cast<double>(n) * layer > limit * (1 + 1e-9)))
        return {};
      split[size_t(c)] = n;
      left -= n;
    }
    return split;
  };
  // The largest chunk time is one of layer x n + extra: search the layer counts.
  double lo = 0, hi = static_cast<double>(layers) * layer + first + last;
  std::vector<int64_t> best = cut(hi);
  for (int i = 0; i < 60 && !best.empty(); ++i) {
    double mid = (lo + hi) / 2;
    std::vector<int64_t> split = cut(mid);
    if (split.empty()) {
      lo = mid;
    } else {
      hi = mid;
      best = std::move(split);
    }
  }
  return best;
}

std::string gib(double bytes) {
  if (bytes < 1024.0 * 1024 * 1024)
    return llvm::formatv("{0:F1} MiB", bytes / (1024.0 * 1024)).str();
  return llvm::formatv("{0:F1} GiB", bytes / (1024.0 * 1024 * 1024)).str();
}

std::string seconds(double s) {
  if (s >= 1)
    return llvm::formatv("{0:F3} s", s).str();
  return llvm::formatv("{0:F2} ms", s * 1e3).str();
}

} // namespace

const std::vector<rt::StageBufferPeaks> &
StageBufferMemo::peaks(const rt::PipelineSchedule &schedule,
                       const std::vector<int64_t> &chunkStages, const rt::ChunkBufferBytes &bytes) {
  Key key{&schedule,       chunkStages,          bytes.residual,
          bytes.weightResidual, bytes.stash, bytes.activation};
  auto [it, inserted] = walked_.try_emplace(std::move(key));
  if (inserted)
    for (size_t s = 0; s < schedule.stages.size(); ++s)
      it->second.push_back(
          rt::simulateStageBuffers(schedule.stages, static_cast<int64_t>(s), chunkStages, bytes));
  return it->second;
}

llvm::Expected<Candidate> mtc::costmodel::composeLayout(const LayerCosts &costs,
                                                        const Layout &layout,
                                                        const Cluster &cluster,
                                                        const SearchOptions &options) {
  Candidate c;
  c.costs = &costs;
  c.layout = layout;
  const int64_t pp = layout.pp, dp = layout.dp, v = layout.virtualStages, b = layout.microBatch;
  const int64_t ranksPerNode = options.ranksPerNode ? options.ranksPerNode : cluster.devicesPerNode;
  if (pp < 1 || dp < 1 || v < 1 || b < 1)
    return llvm::createStringError("a degree below 1");
  if (costs.meshSize * pp * dp != options.gpus)
    return llvm::createStringError(llvm::formatv("mesh {0} x pp {1} x dp {2} is not {3} ranks",
                                                 costs.meshSize, pp, dp, options.gpus)
                                       .str());
  if (options.globalBatch % (dp * b) != 0)
    return llvm::createStringError(llvm::formatv("the global batch {0} does not share into "
                                                 "{1} data-parallel ranks of micro-batch {2}",
                                                 options.globalBatch, dp, b)
                                       .str());
  const int64_t m = options.globalBatch / (dp * b);
  c.microBatchesPerRank = m;
  if (pp == 1 && v != 1)
    return llvm::createStringError("virtual stages need a pipeline");
  if (layout.schedule == "interleaved" && m % pp != 0)
    return llvm::createStringError("the interleaved schedule needs micro-batches a multiple of pp");
  if (layout.schedule == "zb-v" && v != 2)
    return llvm::createStringError("the zb-v schedule runs two chunks per stage");
  if (layout.zeroStage > 0 && dp < 2)
    return llvm::createStringError("ZeRO needs data parallelism");
  auto peak = cluster.peakFlops.find(options.dtype);
  if (peak == cluster.peakFlops.end())
    return llvm::createStringError("cluster '" + cluster.name + "' has no peak FLOP/s for " +
                                   options.dtype);
  if (!costs.scalesWithMicroBatch && b != costs.microBatch)
    return llvm::createStringError(
        llvm::formatv("the step has matrix products without the batch dimension: it is "
                      "composed at its compiled micro-batch ({0}) only",
                      costs.microBatch)
            .str());
  const double factor = static_cast<double>(b) / static_cast<double>(costs.microBatch);
  Timer timer(cluster, costs, peak->second, ranksPerNode);
  PartTime layer = timer.time(scaled(costs.layer, factor));
  PartTime first = timer.time(scaled(costs.first, factor));
  PartTime last = timer.time(scaled(costs.last, factor));
  PartTime layerForward = timer.time(scaled(costs.layerForward, factor));
  PartTime firstForward = timer.time(scaled(costs.firstForward, factor));
  const PartTime lastForward = timer.time(scaled(costs.lastForward, factor));
  const int64_t dpStride = costs.meshSize;
  // A data-parallel collective of `tensors` tensors, one call each, as the runtime makes
  // them: the bytes at once, then a latency per further tensor.
  auto perTensor = [&](CollectiveKind kind, double bytes, double tensors) {
    return timer.collective(kind, bytes, dp, dpStride) +
           (std::max(1.0, tensors) - 1) * timer.collective(kind, 0, dp, dpStride);
  };
  if (layout.zeroStage == 3) {
    // ZeRO-3: a rank holds 1/dp of each parameter. Each micro-batch all-gathers a layer's
    // before its forward and again before its backward, one collective per tensor (as the
    // partitioned step does: the bytes at once, then a latency per further tensor), and
    // reduce-scatters the gradients of the whole layer stack once after the backward stack
    // (a stacked tensor each: counted per layer here); the other parameters (the embedding,
    // the final norm) likewise, around the embedding.
    const double d = static_cast<double>(dp);
    double layerTensors = static_cast<double>(costs.layerParamTensors);
    double restTensors = static_cast<double>(costs.paramTensors - costs.layerParamTensors);
    double layerGather =
        perTensor(CollectiveKind::AllGather, costs.layerParamBytes / d, layerTensors);
    double restGather = perTensor(CollectiveKind::AllGather, costs.restParamBytes / d, restTensors);
    layerForward.communicate += layerGather;
    double layers = static_cast<double>(costs.layers);
    layer.communicate += 2 * layerGather + perTensor(CollectiveKind::ReduceScatter,
                                                     layers * costs.layerParamBytes, layerTensors) /
                                               layers;
    firstForward.communicate += restGather;
    first.communicate += 2 * restGather + perTensor(CollectiveKind::ReduceScatter,
                                                    costs.restParamBytes, restTensors);
  }

  // The stage cut: pp x V chunks, chunk k on stage k mod pp (zb-v: V-shaped, stage s runs
  // chunks s and 2 pp - 1 - s); balanced by time.
  const int64_t chunks = pp * v;
  std::vector<int64_t> chunkStages;
  for (int64_t k = 0; k < chunks; ++k)
    chunkStages.push_back(layout.schedule == "zb-v" && k >= pp ? chunks - 1 - k : k % pp);
  c.chunkLayers =
      pp == 1 ? std::vector<int64_t>{costs.layers}
              : balancedCut(costs.layers, chunks, layer.total(), first.total(), last.total());
  if (c.chunkLayers.empty())
    return llvm::createStringError(
        llvm::formatv("{0} layers cannot be cut into {1} chunks", costs.layers, chunks).str());
  std::vector<int64_t> stageLayers(size_t(pp), 0);
  for (int64_t k = 0; k < chunks; ++k)
    stageLayers[size_t(chunkStages[size_t(k)])] += c.chunkLayers[size_t(k)];
  const int64_t lastStage = chunkStages.back();

  // Memory per rank, stage by stage (pruned on before anything is timed): parameters and
  // optimizer state (updated in place by the optimizer), gradients
  // (twice with several micro-batches or a pipeline: a second buffer takes each part), the
  // tokens, the activations the schedule keeps (with a pipeline, and the messages), and the
  // step's temporaries.
  const double device = static_cast<double>(cluster.memoryBytes);
  std::vector<rt::StageBufferPeaks> stagePeaks;
  if (pp > 1) {
    if (!options.schedules)
      return llvm::createStringError("no pipeline schedules to simulate the layout on");
    // The peak is reached within the first 3p micro-batches (as the step's time, below).
    llvm::Expected<const rt::PipelineSchedule *> schedule =
        options.schedules(layout.schedule, pp, v, std::min(m, 3 * pp));
    if (!schedule)
      return schedule.takeError();
    rt::ChunkBufferBytes chunkBytes = pipelineChunkBytes(costs, c.chunkLayers, layout, factor);
    if (options.stageBuffers)
      stagePeaks = options.stageBuffers->peaks(**schedule, chunkStages, chunkBytes);
    else
      stagePeaks = StageBufferMemo().peaks(**schedule, chunkStages, chunkBytes);
  }
  for (int64_t s = 0; s < pp; ++s) {
    double params = static_cast<double>(stageLayers[size_t(s)]) * costs.layerParamBytes;
    if (s == 0 || s == lastStage)
      params += costs.restParamBytes;
    double state = params * costs.stateRatio;
    double gradients = params;
    if (layout.zeroStage >= 1)
      state /= static_cast<double>(dp);
    double secondGradients = (m > 1 || pp > 1) ? params : 0;
    // ZeRO-3: the rank's shards of the parameters and their gradients, and one layer's
    // gathered parameters and their gradient before its reduce-scatter.
    double gathered = 0;
    if (layout.zeroStage == 3) {
      params /= static_cast<double>(dp);
      gradients = params;
      secondGradients = 0;
      gathered = 2 * costs.layerParamBytes;
    }
    if (layout.zeroStage == 2) {
      // ZeRO-2: one micro-batch's (a chunk call's) gradients whole, the rank's shards of
      // them, and the staging buffer of the largest (runtime/exec/GradientBuffer.h).
      double staging = static_cast<double>(stageLayers[size_t(s)]) * costs.largestLayerParamBytes;
      if (s == 0 || s == lastStage)
        staging = std::max(staging, costs.largestRestParamBytes);
      gradients = params + params / static_cast<double>(dp) + staging;
      secondGradients = 0;
    }
    // The saved values of one micro-batch at a time without a pipeline; with one, what the
    // stage's task list holds at once (saved values and stash, and in `buffers` the
    // messages too), walked as the runtime runs it.
    double activations =
        static_cast<double>(stageLayers[size_t(s)]) * costs.layerSavedBytes * factor;
    double buffers = activations;
    if (pp > 1) {
      activations = static_cast<double>(stagePeaks[size_t(s)].saved);
      buffers = static_cast<double>(stagePeaks[size_t(s)].held);
    }
    // The step's temporaries: one layer's backward (its saved values and their gradients)
    // and the largest value with its gradient (calibrated on gpt-tiny's planned workspace:
    // docs/cost-model.md).
    double temporaries = 2 * (costs.layerSavedBytes + costs.largestValueBytes) * factor;
    c.stageActivationBytes.push_back(activations);
    double bytes = params + state + gradients + secondGradients + gathered +
                   costs.tokenBytes * factor + buffers + temporaries;
    c.stageMemoryBytes.push_back(bytes);
    c.memoryBytes = std::max(c.memoryBytes, bytes);
  }
  c.fits = c.memoryBytes <= device;
  if (options.lowerBoundOnly) {
    double slowest = 0;
    for (int64_t s = 0; s < pp; ++s)
      slowest =
          std::max(slowest, layer.total() * static_cast<double>(stageLayers[size_t(s)]) +
                                (s == 0 ? first.total() : 0) + (s == lastStage ? last.total() : 0));
    c.stepSeconds = static_cast<double>(m) * slowest;
    c.timed = false;
    return c;
  }

  // Time. The data-parallel reduction and the optimizer step of a stage's parameters (as
  // the runtime does them: runtime/exec/GradientBuffer.h; StepModel.cpp).
  const double totalParams =
      static_cast<double>(costs.layers) * costs.layerParamBytes + costs.restParamBytes;
  auto stageParamBytes = [&](int64_t s) {
    double bytes = static_cast<double>(stageLayers[size_t(s)]) * costs.layerParamBytes;
    if (s == 0 || s == lastStage)
      bytes += costs.restParamBytes;
    return bytes;
  };
  auto reduceSeconds = [&](double stageParams) {
    if (dp <= 1)
      return 0.0;
    double seconds = timer.collective(CollectiveKind::AllReduce, sizeof(double), dp, dpStride);
    if (layout.zeroStage == 3) // reduce-scattered in the step, per micro-batch (above)
      return seconds;
    if (layout.zeroStage == 0)
      return seconds + timer.collective(CollectiveKind::AllReduce, stageParams, dp, dpStride);
    // One reduce-scatter per gradient and one all-gather per parameter, as the runtime and
    // the distributed optimizer's step do them: the stage's bytes at once, plus the latency
    // of each further tensor (the stage's share of them).
    double share = totalParams > 0 ? stageParams / totalParams : 1;
    double tensors = std::max(1.0, share * static_cast<double>(costs.paramTensors));
    // ZeRO-2 reduce-scatters each micro-batch's gradients as they are made: with a
    // pipeline, each chunk call's in its task (below).
    double reduceScatters = layout.zeroStage != 2 ? 1.0 : pp > 1 ? 0.0 : static_cast<double>(m);
    return seconds +
           reduceScatters * perTensor(CollectiveKind::ReduceScatter, stageParams, tensors) +
           perTensor(CollectiveKind::AllGather, stageParams / static_cast<double>(dp), tensors);
  };
  // ZeRO-2 with a pipeline: the reduce-scatter of the gradients of chunk k's call over dp,
  // one collective per tensor (a layer parameter's rows of the chunk's layers are one run),
  // as the runtime does it (GradientBuffer::addPart) in the task that makes them.
  auto chunkReduceScatter = [&](int64_t k) {
    if (layout.zeroStage != 2 || dp <= 1)
      return 0.0;
    double bytes = static_cast<double>(c.chunkLayers[size_t(k)]) * costs.layerParamBytes;
    double tensors = static_cast<double>(costs.layerParamTensors);
    if (k == 0 || k == chunks - 1) {
      bytes += costs.restParamBytes;
      tensors += static_cast<double>(costs.paramTensors - costs.layerParamTensors);
    }
    return perTensor(CollectiveKind::ReduceScatter, bytes, tensors);
  };
  auto updateTime = [&](double stageParams) {
    FunctionProfile optimizer = costs.optimizer;
    double share = (totalParams > 0 ? stageParams / totalParams : 1) /
                   (layout.zeroStage >= 1 ? static_cast<double>(dp) : 1.0);
    for (FunctionProfile::Gemm &g : optimizer.gemms)
      g.flops *= share;
    optimizer.trafficBytes *= share;
    return timer.time(optimizer);
  };
  const double md = static_cast<double>(m);

  if (pp == 1) {
    // One stage: m x (the embedding, the layers, the head), the reduction, the update.
    PartTime micro = layer * static_cast<double>(costs.layers);
    micro += first;
    micro += last;
    double reduce = reduceSeconds(totalParams);
    PartTime update = updateTime(totalParams);
    c.stepSeconds = md * micro.total() + reduce + update.total();
    c.computeSeconds = md * micro.compute + update.compute;
    c.layerCommunicationSeconds = md * micro.communicate + update.communicate;
    c.dataParallelSeconds = reduce;
  } else {
    // A pipeline: the schedule's task lists simulated with each chunk's forward and
    // backward (B and W when split) and the messages between stages.
    if (!options.schedules)
      return llvm::createStringError("no pipeline schedules to simulate the layout on");
    const PartTime layerBackward = layer - layerForward;
    PipelineCosts pipe;
    for (int64_t k = 0; k < chunks; ++k) {
      double n = static_cast<double>(c.chunkLayers[size_t(k)]);
      ChunkTimes t;
      t.forward = layerForward * n;
      t.backward = layerBackward * n;
      t.backwardWeight = timer.time(scaled(costs.layerBackwardWeight, factor)) * n;
      if (k == 0) {
        t.forward += firstForward;
        // The embedding's gradient is a parameter gradient: W's.
        t.backward += first - firstForward;
        t.backwardWeight += first - firstForward;
      }
      if (k == chunks - 1) {
        t.forward += lastForward;
        t.backward += last - lastForward;
      }
      t.backwardInput = t.backward - t.backwardWeight;
      // The task that makes the chunk's parameter gradients (backward, or W when split)
      // reduce-scatters them under ZeRO-2.
      double scatter = chunkReduceScatter(k);
      t.backward.communicate += scatter;
      t.backwardWeight.communicate += scatter;
      pipe.chunks.push_back(t);
    }
    for (int64_t s = 0; s < pp; ++s) {
      StageEnd end;
      end.reduce = reduceSeconds(stageParamBytes(s));
      end.norm =
          timer.collective(CollectiveKind::AllReduce, 2 * sizeof(double), pp, costs.meshSize * dp);
      end.update = updateTime(stageParamBytes(s));
      pipe.ends.push_back(end);
    }
    const int64_t stageStride = costs.meshSize * dp;
    pipe.send = [&, factor](int64_t from, int64_t to) {
      bool local = from * stageStride / ranksPerNode == to * stageStride / ranksPerNode;
      const Link &link = local ? cluster.intraNode : cluster.interNode;
      return std::make_pair(link.latency,
                            pointToPointTime(cluster, costs.activationBytes * factor, local));
    };
    llvm::Expected<PipelineStep> step =
        simulatePipeline(pipe, options.schedules, layout.schedule, pp, v, m);
    if (!step)
      return step.takeError();
    c.stepSeconds = step->stepSeconds;
    c.computeSeconds = step->computeSeconds;
    c.dataParallelSeconds = step->dataParallelSeconds;
    c.layerCommunicationSeconds = step->communicationSeconds - step->dataParallelSeconds;
  }
  c.communicationSeconds = c.layerCommunicationSeconds + c.dataParallelSeconds;
  c.bubbleSeconds = std::max(0.0, c.stepSeconds - c.computeSeconds - c.communicationSeconds);
  double tokens = static_cast<double>(options.globalBatch) * static_cast<double>(options.seq);
  c.mfu = tokens * options.modelFlopsPerToken / c.stepSeconds /
          (peak->second * static_cast<double>(options.gpus));
  return c;
}

std::vector<Candidate> SearchResult::pareto() const {
  std::vector<Candidate> front;
  double least = std::numeric_limits<double>::infinity();
  for (const Candidate &c : fitting) // fastest first
    if (c.memoryBytes < least) {
      front.push_back(c);
      least = c.memoryBytes;
    }
  return front;
}

SearchResult mtc::costmodel::searchLayouts(const std::vector<LayerCosts> &all,
                                           const Cluster &cluster, const SearchOptions &options) {
  SearchResult result;
  auto consider = [&](Candidate c) {
    if (!result.smallest || c.memoryBytes < result.smallest->memoryBytes)
      result.smallest = c;
    if (!c.fits) {
      ++result.prunedByMemory;
      result.tooLarge.push_back(std::move(c));
      return;
    }
    result.fitting.push_back(std::move(c));
  };
  // Each layout's memory and a lower bound of its step first; the simulations, which
  // dominate the search's time, only where the bound says they could matter (below).
  StageBufferMemo walks;
  SearchOptions withWalks = options;
  withWalks.stageBuffers = &walks;
  SearchOptions quick = withWalks;
  quick.lowerBoundOnly = true;
  for (const LayerCosts &costs : all) {
    if (options.gpus % costs.meshSize != 0)
      continue;
    int64_t copies = options.gpus / costs.meshSize; // pp x dp
    for (int64_t pp = 1; pp <= std::min(copies, costs.layers); ++pp) {
      if (copies % pp != 0)
        continue;
      int64_t dp = copies / pp;
      for (int64_t b : options.microBatches) {
        if (options.globalBatch % (dp * b) != 0)
          continue;
        for (int64_t zero : options.zeroStages) {
          if (zero > 0 && dp < 2)
            continue;
          std::vector<int64_t> virtualStages = {1};
          for (int64_t v = 2; pp > 1 && v <= options.maxVirtualStages && pp * v <= costs.layers;
               v *= 2)
            virtualStages.push_back(v);
          std::vector<std::pair<int64_t, const char *>> schedules;
          for (int64_t v : virtualStages)
            schedules.emplace_back(v, pp == 1 ? "none" : v > 1 ? "interleaved" : "1f1b");
          if (pp > 1)
            schedules.emplace_back(1, "zb-h1");
          if (pp > 1 && 2 * pp <= costs.layers)
            schedules.emplace_back(2, "zb-v");
          for (auto [v, schedule] : schedules) {
            Layout layout;
            layout.pp = pp;
            layout.dp = dp;
            layout.microBatch = b;
            layout.zeroStage = zero;
            layout.virtualStages = v;
            layout.schedule = schedule;
            ++result.enumerated;
            llvm::Expected<Candidate> c = composeLayout(costs, layout, cluster, quick);
            if (!c) {
              llvm::consumeError(c.takeError());
              continue;
            }
            consider(std::move(*c));
          }
        }
      }
    }
  }
  auto faster = [](const Candidate &a, const Candidate &b) {
    return a.stepSeconds < b.stepSeconds ||
           (a.stepSeconds == b.stepSeconds && a.memoryBytes < b.memoryBytes);
  };
  // The layouts that fit, in the order of their bounds: each is timed unless two timed
  // ones are already at most its bound (it is not among the two fastest the report names)
  // and one of them needs no more memory (it is not on the Pareto front).
  llvm::stable_sort(result.fitting, faster);
  std::vector<const Candidate *> timedFits;
  for (Candidate &c : result.fitting) {
    size_t notSlower = 0;
    bool dominated = false;
    for (const Candidate *t : timedFits)
      if (t->stepSeconds <= c.stepSeconds) {
        ++notSlower;
        dominated |= t->memoryBytes < c.memoryBytes ||
                     (t->memoryBytes == c.memoryBytes && t->stepSeconds < c.stepSeconds);
      }
    if (notSlower >= 2 && dominated)
      continue;
    llvm::Expected<Candidate> full = composeLayout(*c.costs, c.layout, cluster, withWalks);
    if (!full) {
      // The schedule cannot run it after all (the bound does not generate the schedule).
      llvm::consumeError(full.takeError());
      c.costs = nullptr;
      continue;
    }
    c = std::move(*full);
    timedFits.push_back(&c);
  }
  llvm::erase_if(result.fitting, [](const Candidate &c) { return !c.costs; });
  llvm::stable_sort(result.fitting, faster);
  // Only those faster than the fastest that fits say something about it, and the report
  // names three: time them in the order of their lower bounds until the next bound cannot
  // beat the third fastest timed.
  double bestFit = result.fitting.empty() ? std::numeric_limits<double>::infinity()
                                          : result.fitting.front().stepSeconds;
  llvm::erase_if(result.tooLarge, [&](const Candidate &c) { return c.stepSeconds >= bestFit; });
  llvm::stable_sort(result.tooLarge, faster);
  std::vector<Candidate> timed;
  for (const Candidate &c : result.tooLarge) {
    if (timed.size() == 3 && c.stepSeconds >= timed.back().stepSeconds)
      break;
    llvm::Expected<Candidate> full = composeLayout(*c.costs, c.layout, cluster, withWalks);
    if (!full) {
      llvm::consumeError(full.takeError());
      continue;
    }
    if (full->stepSeconds >= bestFit)
      continue;
    timed.insert(llvm::upper_bound(timed, *full, faster), std::move(*full));
    if (timed.size() > 3)
      timed.pop_back();
  }
  result.tooLarge = std::move(timed);
  return result;
}

std::string mtc::costmodel::describeLayout(const Candidate &c) {
  const LayerLayout &in = c.costs->layout;
  const Layout &l = c.layout;
  std::string text =
      llvm::formatv("tp {0}{1} pp {2} dp {3}", in.tp, in.sp ? " sp" : "", l.pp, l.dp).str();
  if (in.cp > 1)
    text += llvm::formatv(" cp {0}", in.cp).str();
  if (in.ep > 1)
    text += llvm::formatv(" ep {0}", in.ep).str();
  if (l.pp > 1)
    text += " " + l.schedule +
            (l.virtualStages > 1 ? llvm::formatv(" V {0}", l.virtualStages).str() : "");
  text += llvm::formatv(" mbs {0} recompute {1} zero {2}", l.microBatch, in.recompute, l.zeroStage)
              .str();
  return text;
}

void mtc::costmodel::printParetoTable(const SearchResult &result, const Cluster &cluster,
                                      size_t rows, llvm::raw_ostream &os) {
  std::vector<Candidate> front = result.pareto();
  os << llvm::formatv("{0,4} {1,11} {2,6} {3,11}  {4,3} {5,3} {6,3} {7,5} {8,3} {9,3} {10,2} "
                      "{11,-11} {12,2} {13,4} {14,-9} {15,4}\n",
                      "#", "step", "MFU", "mem/rank", "tp", "sp", "pp", "dp", "cp", "ep", "V",
                      "schedule", "mb", "m", "recompute", "zero");
  for (size_t i = 0; i < front.size() && i < rows; ++i) {
    const Candidate &c = front[i];
    const LayerLayout &in = c.costs->layout;
    os << llvm::formatv("{0,4} {1,11} {2,5:F1}% {3,11}  {4,3} {5,3} {6,3} {7,5} {8,3} {9,3} "
                        "{10,2} {11,-11} {12,2} {13,4} {14,-9} {15,4}\n",
                        i + 1, seconds(c.stepSeconds), 100 * c.mfu, gib(c.memoryBytes), in.tp,
                        in.sp ? "on" : "off", c.layout.pp, c.layout.dp, in.cp, in.ep,
                        c.layout.virtualStages, c.layout.schedule, c.layout.microBatch,
                        c.microBatchesPerRank, in.recompute, c.layout.zeroStage);
  }
  if (front.size() > rows)
    os << llvm::formatv("({0} more on the Pareto front; --rows N shows them)\n",
                        front.size() - rows);
  (void)cluster;
}
