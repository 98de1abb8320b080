//===- StepModel.cpp - a plan's training step on a cluster ----------------===//

#include "compiler/costmodel/StepModel.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <numeric>

using namespace mtc::costmodel;
namespace json = llvm::json;
namespace rt = mtc::rt;

namespace {

llvm::Error fieldError(const std::string &where, const std::string &field,
                       const std::string &message) {
  return llvm::createStringError(where + ": " + field + ": " + message);
}

/// A non-negative integer member, as the plan loader reads counts.
llvm::Expected<int64_t> readCount(const json::Object &o, llvm::StringRef key,
                                  const std::string &where, const std::string &at) {
  const json::Value *value = o.get(key);
  std::optional<int64_t> n = value ? value->getAsInteger() : std::nullopt;
  if (!n || *n < 0)
    return fieldError(where, at + "." + key.str(),
                      value ? "expected a non-negative integer" : "missing");
  return *n;
}

llvm::Expected<FunctionProfile> readProfile(const json::Value &value, const rt::Plan &plan,
                                            const std::string &where, const std::string &at) {
  const json::Object *o = value.getAsObject();
  if (!o)
    return fieldError(where, at, "expected an object");
  FunctionProfile profile;
  llvm::Expected<int64_t> traffic = readCount(*o, "traffic_bytes", where, at);
  if (!traffic)
    return traffic.takeError();
  llvm::Expected<int64_t> ops = readCount(*o, "ops", where, at);
  if (!ops)
    return ops.takeError();
  profile.trafficBytes = static_cast<double>(*traffic);
  profile.ops = *ops;
  const json::Array *gemms = o->getArray("gemms");
  if (!gemms)
    return fieldError(where, at + ".gemms", "missing or not an array");
  for (auto [i, gemm] : llvm::enumerate(*gemms)) {
    std::string path = llvm::formatv("{0}.gemms[{1}]", at, i).str();
    const json::Object *g = gemm.getAsObject();
    if (!g)
      return fieldError(where, path, "expected an object");
    llvm::Expected<int64_t> flops = readCount(*g, "flops", where, path);
    if (!flops)
      return flops.takeError();
    llvm::Expected<int64_t> count = readCount(*g, "count", where, path);
    if (!count)
      return count.takeError();
    profile.gemms.push_back({static_cast<double>(*flops), *count});
  }
  const json::Array *collectives = o->getArray("collectives");
  if (!collectives)
    return fieldError(where, at + ".collectives", "missing or not an array");
  for (auto [i, call] : llvm::enumerate(*collectives)) {
    std::string path = llvm::formatv("{0}.collectives[{1}]", at, i).str();
    const json::Object *c = call.getAsObject();
    if (!c)
      return fieldError(where, path, "expected an object");
    FunctionProfile::Collective collective;
    std::optional<llvm::StringRef> kind = c->getString("kind");
    std::optional<CollectiveKind> parsed = kind ? parseCollectiveKind(*kind) : std::nullopt;
    if (!parsed)
      return fieldError(where, path + ".kind",
                        "expected all_reduce, all_gather, reduce_scatter, all_to_all or shift");
    collective.kind = *parsed;
    std::optional<llvm::StringRef> axis = c->getString("axis");
    auto meshAxis =
        llvm::find_if(plan.mesh, [&](const rt::MeshAxis &a) { return axis && a.name == *axis; });
    if (meshAxis == plan.mesh.end())
      return fieldError(where, path + ".axis", "not an axis of the plan's mesh");
    collective.axis = axis->str();
    llvm::Expected<int64_t> group = readCount(*c, "group", where, path);
    if (!group)
      return group.takeError();
    if (*group != meshAxis->size)
      return fieldError(where, path + ".group",
                        llvm::formatv("{0}, but the mesh axis '{1}' has {2} ranks", *group,
                                      meshAxis->name, meshAxis->size)
                            .str());
    collective.group = *group;
    llvm::Expected<int64_t> bytes = readCount(*c, "bytes", where, path);
    if (!bytes)
      return bytes.takeError();
    collective.bytes = static_cast<double>(*bytes);
    llvm::Expected<int64_t> count = readCount(*c, "count", where, path);
    if (!count)
      return count.takeError();
    collective.count = *count;
    profile.collectives.push_back(std::move(collective));
  }
  return profile;
}

/// The world-rank distance between neighbours on mesh axis `axis` (the axes after it are
/// faster).
int64_t axisStride(const rt::Plan &plan, llvm::StringRef axis) {
  int64_t stride = 1;
  for (auto it = plan.mesh.rbegin(); it != plan.mesh.rend(); ++it) {
    if (it->name == axis)
      return stride;
    stride *= it->size;
  }
  return stride;
}

class StepBuilder {
public:
  StepBuilder(const rt::Plan &plan, const Cluster &cluster,
              const std::map<std::string, FunctionProfile> &profiles, Simulation &sim,
              double computeScale)
      : plan(plan), cluster(cluster), profiles(profiles), sim(sim), computeScale(computeScale) {}

  /// The compute and collective tasks of one call of `function`.
  llvm::Error call(std::vector<SimTask> &tasks, const std::string &function,
                   const std::string &label) {
    auto it = profiles.find(function);
    if (it == profiles.end())
      return llvm::createStringError(plan.dir.string() +
                                     "/plan.json: predictions.functions has no '" + function +
                                     "' (recompile the plan)");
    const FunctionProfile &profile = it->second;
    // sim.peakFlops is already the rank's share of a core: only the rest is scaled here.
    double gemm = 0;
    for (const FunctionProfile::Gemm &g : profile.gemms)
      gemm += static_cast<double>(g.count) * g.flops /
              (sim.peakFlops * cluster.gemmEfficiencyAt(g.flops));
    double compute = gemm + (profile.trafficBytes / cluster.memoryBandwidth +
                             static_cast<double>(profile.ops) * cluster.kernelOverhead) *
                                computeScale;
    tasks.push_back({SimTask::Kind::Compute, label, compute, "", 0});
    double communicate = 0;
    for (const FunctionProfile::Collective &c : profile.collectives)
      communicate += static_cast<double>(c.count) *
                     collective(c.kind, c.bytes, c.group, axisStride(plan, c.axis));
    if (communicate > 0)
      tasks.push_back({SimTask::Kind::Communicate, label + " collectives", communicate, "", 0});
    return llvm::Error::success();
  }

  double collective(CollectiveKind kind, double bytes, int64_t group, int64_t stride) {
    return collectiveTime(cluster, kind, bytes, placeGroup(group, stride, sim.ranksPerNode))
        .seconds;
  }

  /// The runtime's reduction of the gradients of `params` (local f32 shards) and the loss
  /// over the data-parallel group (runtime/exec/GradientBuffer.h).
  double dataParallelReduction(const std::vector<const rt::ParamInfo *> &params,
                               int64_t microBatchesPerRank) {
    int64_t dp = sim.dataParallel;
    if (dp <= 1)
      return 0;
    int64_t stride = plan.dataParallelAxis
                         ? axisStride(plan, plan.mesh[*plan.dataParallelAxis].name)
                         : sim.meshSize;
    double seconds = collective(CollectiveKind::AllReduce, sizeof(double), dp, stride);
    if (plan.zeroStage == 3)
      return seconds;
    double allReduced = 0;
    for (const rt::ParamInfo *param : params) {
      double bytes = static_cast<double>(rt::numElements(plan.localDims(*param)) * sizeof(float));
      if (plan.dataParallelShardDim(*param))
        seconds += (plan.zeroStage == 2 ? static_cast<double>(microBatchesPerRank) : 1.0) *
                   collective(CollectiveKind::ReduceScatter, bytes, dp, stride);
      else
        allReduced += bytes;
    }
    if (allReduced > 0)
      seconds += collective(CollectiveKind::AllReduce, allReduced, dp, stride);
    return seconds;
  }

private:
  const rt::Plan &plan;
  const Cluster &cluster;
  const std::map<std::string, FunctionProfile> &profiles;
  Simulation &sim;
  double computeScale;
};

/// The bytes of chunk `c`'s activations (its forward's `activation` output), which a
/// send_activation of chunk c and a send_gradient of chunk c + 1 carry.
double activationBytes(const rt::Plan &plan, int64_t chunk) {
  if (!plan.x86Kernels || chunk < 0 || static_cast<size_t>(chunk) >= plan.x86Kernels->chunks.size())
    return 0;
  const auto &forward = plan.x86Kernels->chunks[size_t(chunk)].forward;
  double bytes = 0;
  if (forward)
    for (const rt::KernelBuffer &b : forward->outputs)
      if (b.kind == rt::BufferKind::Activation)
        bytes += static_cast<double>(b.numElements() * rt::planDTypeSize(b.dtype));
  return bytes;
}

} // namespace

int64_t mtc::costmodel::messageProducer(const rt::ScheduleTask &task) {
  bool activation = task.op == rt::TaskOp::SendActivation || task.op == rt::TaskOp::RecvActivation;
  // A forward's output, or the gradient of the next chunk's input.
  return rt::isSendTask(task.op) ? (activation ? task.chunk : task.chunk - 1)
                                 : (activation ? task.chunk - 1 : task.chunk);
}

std::string mtc::costmodel::messageKey(const rt::ScheduleTask &task) {
  bool activation = task.op == rt::TaskOp::SendActivation || task.op == rt::TaskOp::RecvActivation;
  // Short enough to stay in the string (the search makes millions of them).
  return (activation ? "a " : "g ") + std::to_string(messageProducer(task)) + " " +
         std::to_string(task.microBatch);
}

double Simulation::mfu() const {
  double peak = peakFlops * static_cast<double>(worldSize);
  return stepSeconds > 0 && peak > 0 ? modelFlopsPerStep / stepSeconds / peak : 0;
}

llvm::Expected<std::map<std::string, FunctionProfile>>
mtc::costmodel::readFunctionProfiles(const rt::Plan &plan) {
  std::string where = (plan.dir / "plan.json").string();
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file = llvm::MemoryBuffer::getFile(where);
  if (!file)
    return llvm::createStringError(file.getError(), "cannot read '%s'", where.c_str());
  llvm::Expected<json::Value> parsed = json::parse((*file)->getBuffer());
  if (!parsed)
    return llvm::createStringError("%s: %s", where.c_str(),
                                   llvm::toString(parsed.takeError()).c_str());
  const json::Object *predictions =
      parsed->getAsObject() ? parsed->getAsObject()->getObject("predictions") : nullptr;
  const json::Object *functions = predictions ? predictions->getObject("functions") : nullptr;
  if (!functions)
    return llvm::createStringError(
        where + ": predictions.functions is missing: the plan was compiled by an mtc before "
                "the cost model (recompile it)");
  std::map<std::string, FunctionProfile> profiles;
  for (const auto &[name, value] : *functions) {
    llvm::Expected<FunctionProfile> profile =
        readProfile(value, plan, where, "predictions.functions." + name.str());
    if (!profile)
      return profile.takeError();
    profiles[name.str()] = std::move(*profile);
  }
  return profiles;
}

llvm::Expected<Simulation> mtc::costmodel::simulateStep(const rt::Plan &plan,
                                                        const Cluster &cluster,
                                                        const SimulateOptions &options) {
  llvm::Expected<std::map<std::string, FunctionProfile>> profiles = readFunctionProfiles(plan);
  if (!profiles)
    return profiles.takeError();
  Simulation sim;
  sim.ranksPerNode = options.ranksPerNode ? options.ranksPerNode : cluster.devicesPerNode;
  if (options.nodes < 1 || sim.ranksPerNode < 1)
    return llvm::createStringError("--nodes and --gpus-per-node must be at least 1");
  sim.worldSize = options.nodes * sim.ranksPerNode;
  if (cluster.kind == "gpu" && sim.ranksPerNode > cluster.devicesPerNode)
    return llvm::createStringError(
        llvm::formatv("{0} ranks per node, but a node of {1} has {2} GPUs", sim.ranksPerNode,
                      cluster.name, cluster.devicesPerNode)
            .str());

  // The job's shape, as mtrun derives it (docs/plan-format.md, "Mesh and layouts").
  sim.meshSize = plan.meshSize();
  sim.pipelineStages = plan.pipeline ? plan.pipeline->stages : 1;
  int64_t modelRanks = sim.meshSize * sim.pipelineStages;
  if (sim.worldSize % modelRanks != 0)
    return llvm::createStringError(
        llvm::formatv("{0} ranks ({1} nodes x {2}) are not a multiple of the plan's {3} ranks "
                      "per model copy (mesh {4} x {5} pipeline stages)",
                      sim.worldSize, options.nodes, sim.ranksPerNode, modelRanks, sim.meshSize,
                      sim.pipelineStages)
            .str());
  int64_t outerDataParallel = sim.worldSize / modelRanks;
  if (plan.dataParallelAxis && outerDataParallel != 1)
    return llvm::createStringError(
        llvm::formatv("the plan fixes its data-parallel degree (mesh axis '{0}'): it runs on "
                      "exactly {1} ranks, not {2}",
                      plan.mesh[*plan.dataParallelAxis].name, modelRanks, sim.worldSize)
            .str());
  sim.dataParallel =
      plan.dataParallelAxis ? plan.mesh[*plan.dataParallelAxis].size : outerDataParallel;

  // Micro-batches: the global batch over the kernels' micro-batch (Trainer.h).
  if (plan.inputs.empty() || plan.inputs[0].dims.empty())
    return llvm::createStringError(plan.dir.string() + ": the plan takes no batch of tokens");
  int64_t microBatchSize = plan.inputs[0].dims[0].size;
  int64_t global = microBatchSize;
  if (const rt::JsonValue *g =
          plan.train.getObject() ? plan.train.getObject()->find("global_batch") : nullptr)
    global = g->getInt().value_or(global);
  if (options.globalBatch > 0)
    global = options.globalBatch;
  if (global % microBatchSize != 0)
    return llvm::createStringError(
        llvm::formatv("the global batch ({0}) is not a multiple of the plan's micro-batch ({1})",
                      global, microBatchSize)
            .str());
  sim.microBatches = global / microBatchSize;
  // Under ZeRO-3 the data-parallel ranks split each micro-batch (the kernels take a rank's
  // part, as Trainer.cpp's countMicroBatches counts): every rank runs every micro-batch.
  const bool splitMicroBatches = plan.zeroStage == 3;
  if (sim.microBatches < 1 || (!splitMicroBatches && sim.microBatches % sim.dataParallel != 0))
    return llvm::createStringError(
        llvm::formatv("the global batch of {0} micro-batches cannot be shared by {1} "
                      "data-parallel ranks",
                      sim.microBatches, sim.dataParallel)
            .str());
  int64_t perRank = splitMicroBatches ? sim.microBatches : sim.microBatches / sim.dataParallel;
  sim.microBatchesPerRank = perRank;
  sim.tokensPerStep = static_cast<double>(sim.microBatches) *
                      static_cast<double>(rt::numElements(plan.inputs[0].dims));
  sim.modelFlopsPerStep =
      sim.tokensPerStep * static_cast<double>(plan.predictions.forwardFlopsPerToken +
                                              plan.predictions.backwardFlopsPerToken);

  sim.dtype = options.dtype;
  if (sim.dtype.empty()) {
    sim.dtype = "f32";
    if (const rt::JsonValue *p =
            plan.train.getObject() ? plan.train.getObject()->find("precision") : nullptr;
        p && p->getString())
      sim.dtype = *p->getString();
  }
  sim.dtype = peakFlopsKey(sim.dtype);
  auto peak = cluster.peakFlops.find(sim.dtype);
  if (peak == cluster.peakFlops.end())
    return llvm::createStringError("cluster '" + cluster.name + "' has no peak FLOP/s for " +
                                   sim.dtype);
  sim.peakFlops = peak->second;
  // On a CPU host a rank computes on one core, or on its share of the cores when the node
  // runs more ranks than it has: the kernels of these models gain nothing from a second
  // thread (docs/cost-model.md), so threads beyond one are not counted.
  double computeScale = 1;
  if (cluster.kind == "cpu" && sim.ranksPerNode > cluster.devicesPerNode) {
    computeScale =
        static_cast<double>(sim.ranksPerNode) / static_cast<double>(cluster.devicesPerNode);
    sim.peakFlops /= computeScale;
    sim.notes.push_back(llvm::formatv("{0} ranks per node on {1} cores: each computes at "
                                      "{2:F2} x one core",
                                      sim.ranksPerNode, cluster.devicesPerNode, 1 / computeScale)
                            .str());
  }
  sim.deviceMemoryBytes = cluster.memoryBytes;

  StepBuilder step(plan, cluster, *profiles, sim, computeScale);
  if (!plan.pipeline) {
    std::vector<SimTask> tasks;
    for (int64_t m = 0; m < perRank; ++m)
      if (llvm::Error err =
              step.call(tasks, "forward_backward", llvm::formatv("forward_backward {0}", m).str()))
        return std::move(err);
    std::vector<const rt::ParamInfo *> params;
    for (const rt::ParamInfo &param : plan.params)
      params.push_back(&param);
    double reduce = step.dataParallelReduction(params, perRank);
    if (reduce > 0)
      tasks.push_back({SimTask::Kind::Communicate, "reduce_gradients", reduce, "", 0});
    if (llvm::Error err = step.call(tasks, "optimizer_step", "optimizer_step"))
      return std::move(err);
    sim.stages.push_back(std::move(tasks));
    sim.peakBytes.push_back(plan.predictions.memoryBytes.peak.value_or(-1));
  } else {
    const rt::PipelinePlan &pipeline = *plan.pipeline;
    rt::Expected<const rt::PipelineSchedule *> schedule = pipeline.forMicroBatches(perRank);
    if (!schedule)
      return llvm::createStringError(plan.dir.string() + ": " + schedule.error().message());
    int64_t stageStride = sim.meshSize * outerDataParallel;
    auto sameNode = [&](int64_t a, int64_t b) {
      return a * stageStride / sim.ranksPerNode == b * stageStride / sim.ranksPerNode;
    };
    for (int64_t s = 0; s < pipeline.stages; ++s) {
      const rt::StageTasks &stage = (*schedule)->stages[size_t(s)];
      sim.peakBytes.push_back(stage.peakBytes);
      std::vector<SimTask> tasks;
      for (const rt::ScheduleTask &task : stage.tasks) {
        std::string name = rt::describeTask(task);
        if (rt::isComputeTask(task.op)) {
          std::string function =
              llvm::formatv("chunk{0}.{1}", task.chunk, rt::taskOpName(task.op)).str();
          if (llvm::Error err = step.call(tasks, function, name))
            return std::move(err);
        } else if (rt::isSendTask(task.op) || rt::isRecvTask(task.op)) {
          int64_t producer = messageProducer(task);
          std::string message = messageKey(task);
          if (rt::isSendTask(task.op)) {
            bool local = sameNode(s, task.peer);
            const Link &link = local ? cluster.intraNode : cluster.interNode;
            tasks.push_back({SimTask::Kind::Send, name, link.latency, message,
                             pointToPointTime(cluster, activationBytes(plan, producer), local)});
          } else {
            tasks.push_back({SimTask::Kind::Receive, name, 0, message, 0});
          }
        } else if (task.op == rt::TaskOp::ReduceGradients) {
          // The stage's parameters (its chunks' param buffers) over the data-parallel
          // ranks, and the shared ones over the stages holding them.
          std::vector<const rt::ParamInfo *> params;
          double seconds = 0;
          if (plan.x86Kernels)
            for (size_t c = 0; c < plan.x86Kernels->chunks.size(); ++c) {
              if (pipeline.chunkStages[c] != s || !plan.x86Kernels->chunks[c].forward)
                continue;
              for (const rt::KernelBuffer &b : plan.x86Kernels->chunks[c].forward->inputs)
                if (const rt::ParamInfo *p =
                        b.kind == rt::BufferKind::Param ? plan.findParam(b.name) : nullptr;
                    p && !llvm::is_contained(params, p))
                  params.push_back(p);
            }
          seconds += step.dataParallelReduction(params, perRank);
          for (const rt::PipelinePlan::SharedParam &shared : pipeline.sharedParams) {
            std::vector<int64_t> holders = pipeline.stagesOf(shared);
            const rt::ParamInfo *param = plan.findParam(shared.name);
            if (param && holders.size() > 1 && llvm::is_contained(holders, s))
              seconds += step.collective(
                  CollectiveKind::AllReduce,
                  static_cast<double>(rt::numElements(plan.localDims(*param)) * sizeof(float)),
                  static_cast<int64_t>(holders.size()), stageStride);
          }
          tasks.push_back({SimTask::Kind::Communicate, name, seconds, "", 0});
        } else if (task.op == rt::TaskOp::OptimizerStep) {
          // The stage's squared norms, their sum with the loss over the pipeline group, the
          // update.
          if (llvm::Error err =
                  step.call(tasks, llvm::formatv("stage{0}.grad_squares", s).str(), "grad_squares"))
            return std::move(err);
          tasks.push_back({SimTask::Kind::Communicate, "pipeline norm all-reduce",
                           step.collective(CollectiveKind::AllReduce, 2 * sizeof(double),
                                           pipeline.stages, stageStride),
                           "", 0});
          if (llvm::Error err = step.call(tasks, llvm::formatv("stage{0}.optimizer_step", s).str(),
                                          "optimizer_step"))
            return std::move(err);
        }
      }
      sim.stages.push_back(std::move(tasks));
    }
  }

  llvm::Expected<SimResult> timeline = simulateStages(sim.stages);
  if (!timeline)
    return timeline.takeError();
  sim.timeline = std::move(*timeline);
  sim.stepSeconds = sim.timeline.stepSeconds;
  // The breakdown of the busiest stage (the one computing longest).
  size_t busiest = 0;
  for (size_t s = 0; s < sim.stages.size(); ++s)
    if (sim.timeline.compute[s] > sim.timeline.compute[busiest])
      busiest = s;
  sim.computeSeconds = sim.timeline.compute[busiest];
  sim.communicationSeconds = sim.timeline.communicate[busiest];
  // Rounding leaves a few ulps where there is no bubble.
  sim.bubbleSeconds =
      std::max(0.0, sim.stepSeconds - sim.computeSeconds - sim.communicationSeconds);
  return sim;
}

namespace {

std::string seconds(double s) {
  if (s >= 1)
    return llvm::formatv("{0:F3} s", s).str();
  if (s >= 1e-3)
    return llvm::formatv("{0:F3} ms", s * 1e3).str();
  return llvm::formatv("{0:F3} us", s * 1e6).str();
}

std::string mebibytes(int64_t bytes) {
  return llvm::formatv("{0:F2} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)).str();
}

} // namespace

void mtc::costmodel::printSimulation(const Simulation &sim, const rt::Plan &plan,
                                     const Cluster &cluster, llvm::raw_ostream &os) {
  os << "plan:      " << plan.dir.string() << " (model " << plan.model << ")\n";
  os << llvm::formatv("cluster:   {0} ({1}), {2} nodes x {3} ranks = {4} ranks\n", cluster.name,
                      cluster.deviceName, sim.worldSize / sim.ranksPerNode, sim.ranksPerNode,
                      sim.worldSize);
  os << llvm::formatv("layout:    mesh {0} x data-parallel {1} x pipeline {2}; {3} "
                      "micro-batches per step, {4} per data-parallel rank\n",
                      sim.meshSize, sim.dataParallel, sim.pipelineStages, sim.microBatches,
                      sim.microBatchesPerRank);
  os << llvm::formatv("step:      {0} predicted\n", seconds(sim.stepSeconds));
  auto share = [&](double part) {
    return sim.stepSeconds > 0 ? 100 * part / sim.stepSeconds : 0.0;
  };
  os << llvm::formatv("  compute                 {0,12} ({1,5:F1}%)\n", seconds(sim.computeSeconds),
                      share(sim.computeSeconds));
  os << llvm::formatv("  exposed communication   {0,12} ({1,5:F1}%)\n",
                      seconds(sim.communicationSeconds), share(sim.communicationSeconds));
  os << llvm::formatv("  bubble and waiting      {0,12} ({1,5:F1}%)\n", seconds(sim.bubbleSeconds),
                      share(sim.bubbleSeconds));
  os << llvm::formatv("throughput: {0:F1} tokens/s ({1} tokens per step)\n", sim.tokensPerSecond(),
                      static_cast<int64_t>(sim.tokensPerStep));
  os << llvm::formatv("MFU:       {0:F2}% of {1} peak ({2:E2} FLOP/s per rank, {3:E2} model "
                      "FLOPs per step)\n",
                      100 * sim.mfu(), sim.dtype, sim.peakFlops, sim.modelFlopsPerStep);
  os << "memory per rank (the plan's prediction):\n";
  for (size_t s = 0; s < sim.peakBytes.size(); ++s) {
    std::string who = sim.peakBytes.size() > 1 ? llvm::formatv("  stage {0}", s).str() : "  peak";
    if (sim.peakBytes[s] < 0) {
      os << who << ": unknown (the plan has no kernels)\n";
      continue;
    }
    os << llvm::formatv("{0}: {1} of {2} ({3})\n", who, mebibytes(sim.peakBytes[s]),
                        mebibytes(sim.deviceMemoryBytes),
                        sim.peakBytes[s] <= sim.deviceMemoryBytes ? "fits" : "does not fit");
  }
  for (const std::string &note : sim.notes)
    os << "note: " << note << "\n";
}
