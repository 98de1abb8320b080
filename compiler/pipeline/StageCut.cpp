//===- StageCut.cpp - the layers of each pipeline chunk -------------------===//

#include "compiler/pipeline/StageCut.h"

#include "compiler/analysis/ModelStats.h"
#include "compiler/pipeline/Schedules.h"
#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/ParameterRead.h"
#include "dialects/mt/Utils/TensorSize.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <limits>

using namespace mlir;
using namespace mtc;
using namespace mtc::pipeline;

FailureOr<PipelineOptions> pipeline::getPipelineOptions(ModuleOp module) {
  PipelineOptions options;
  mt::ParallelAttr parallel = mt::ParallelAttr::lookup(module);
  if (!parallel)
    return options;
  // The attribute's verifier has checked the values (degrees >= 1, the split's shape).
  options.stages = parallel.getPipelineParallel();
  options.virtualStages = parallel.getNumVirtualStages();
  if (std::optional<mt::PipelineSchedule> schedule = parallel.getSchedule())
    options.schedule = mt::stringifyPipelineSchedule(*schedule).str();
  if (DenseI64ArrayAttr layers = parallel.getPipelineLayers())
    llvm::append_range(options.chunkLayers, layers.asArrayRef());
  return options;
}

double StageCut::imbalance() const {
  double sum = 0, largest = 0;
  for (const ChunkCost &stage : stageCosts) {
    sum += stage.flops;
    largest = std::max(largest, stage.flops);
  }
  return sum > 0 ? largest / (sum / static_cast<double>(stageCosts.size())) : 1.0;
}

SmallVector<int64_t> pipeline::balancedSplit(int64_t numLayers, int64_t numChunks,
                                             double layerCost, double firstExtra,
                                             double lastExtra) {
  // best[c][l]: the smallest largest-chunk cost of the first c chunks holding l layers.
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  auto cost = [&](int64_t chunk, int64_t layers) {
    double extra = (chunk == 0 ? firstExtra : 0) + (chunk == numChunks - 1 ? lastExtra : 0);
    return static_cast<double>(layers) * layerCost + extra;
  };
  SmallVector<SmallVector<double>> best(numChunks + 1,
                                        SmallVector<double>(numLayers + 1, kInfinity));
  SmallVector<SmallVector<int64_t>> choice(numChunks + 1,
                                           SmallVector<int64_t>(numLayers + 1, 0));
  best[0][0] = 0;
  for (int64_t c = 1; c <= numChunks; ++c)
    for (int64_t l = c; l <= numLayers; ++l)
      for (int64_t k = 1; k <= l - (c - 1); ++k) {
        double value = std::max(best[c - 1][l - k], cost(c - 1, k));
        // On a tie the smaller last chunk wins: later chunks hold the head.
        if (value < best[c][l]) {
          best[c][l] = value;
          choice[c][l] = k;
        }
      }
  SmallVector<int64_t> split(numChunks, 0);
  for (int64_t c = numChunks, l = numLayers; c > 0; --c) {
    split[c - 1] = choice[c][l];
    l -= choice[c][l];
  }
  return split;
}

namespace {

/// The parameter `value` is a read of: its `mt.param_ref`, or under mixed precision the
/// cast of one (mt::getCastParameter); null otherwise.
mt::ParamRefOp parameterRead(Value value) {
  if (Value param = mt::getCastParameter(value.getDefiningOp()))
    value = param;
  return value.getDefiningOp<mt::ParamRefOp>();
}

/// The cost of `ops` (of one function): the parameters they read (once per symbol, the
/// `mt.param_ref` wherever it is), the FLOPs and the values they compute.
ChunkCost costOf(ArrayRef<Operation *> ops, FlopCounter &flops, ModuleOp module) {
  ChunkCost cost;
  llvm::StringSet<> params;
  for (Operation *op : ops) {
    cost.flops += flops.count(op);
    for (Value operand : op->getOperands())
      if (mt::ParamRefOp ref = parameterRead(operand); ref && params.insert(ref.getParam()).second)
        if (auto param = module.lookupSymbol<mt::ParamOp>(ref.getParam()))
          cost.paramBytes += mt::getSizeInBytes(param.getTensorType());
    if (isa<mt::ParamRefOp, mt::RepeatOp>(op) || op->hasTrait<mt::OpTrait::CallConstant>())
      continue;
    for (Value result : op->getResults())
      cost.activationBytes += mt::getSizeInBytes(result.getType());
  }
  return cost;
}

ChunkCost &operator+=(ChunkCost &into, const ChunkCost &cost) {
  into.flops += cost.flops;
  into.paramBytes += cost.paramBytes;
  into.activationBytes += cost.activationBytes;
  return into;
}

ChunkCost times(const ChunkCost &cost, int64_t n) {
  return {cost.flops * static_cast<double>(n), cost.paramBytes * n, cost.activationBytes * n};
}

std::string listOf(ArrayRef<int64_t> values) {
  std::string text = "[";
  for (auto [i, value] : llvm::enumerate(values))
    text += (i ? ", " : "") + std::to_string(value);
  return text + "]";
}

} // namespace

FailureOr<StageCut> pipeline::computeStageCut(ModuleOp module) {
  FailureOr<PipelineOptions> options = getPipelineOptions(module);
  if (failed(options))
    return failure();
  StageCut cut;
  cut.options = *options;
  int64_t numChunks = options->numChunks();

  auto entry = module.lookupSymbol<func::FuncOp>("forward");
  if (!entry || !entry.getBody().hasOneBlock())
    return module.emitError("pipeline parallelism needs the entry function 'forward'");
  SmallVector<mt::RepeatOp> repeats(entry.getBody().front().getOps<mt::RepeatOp>());
  if (repeats.size() != 1 && numChunks > 1)
    return entry.emitOpError("must apply exactly one layer stack (mt.repeat) to be cut into ")
           << numChunks << " pipeline chunks; it applies " << repeats.size();

  // The three parts of the entry: before the repeat, the layers, after it.
  FlopCounter flops(module);
  SmallVector<Operation *> before, after;
  ChunkCost layerCost;
  if (repeats.empty()) {
    for (Operation &op : entry.getBody().front().without_terminator())
      before.push_back(&op);
  } else {
    mt::RepeatOp repeat = repeats.front();
    cut.layer = repeat.getCallee().str();
    cut.numLayers = repeat.getCount();
    auto layer = module.lookupSymbol<func::FuncOp>(repeat.getCallee());
    if (!layer)
      return repeat.emitOpError("repeats the unknown function '@") << repeat.getCallee() << "'";
    SmallVector<Operation *> layerOps;
    for (Operation &op : layer.getBody().front().without_terminator())
      layerOps.push_back(&op);
    layerCost = costOf(layerOps, flops, module);
    bool isBefore = true;
    for (Operation &op : entry.getBody().front().without_terminator()) {
      if (&op == repeat.getOperation()) {
        isBefore = false;
        continue;
      }
      (isBefore ? before : after).push_back(&op);
    }
  }
  ChunkCost embedding = costOf(before, flops, module), head = costOf(after, flops, module);

  // The layers of each chunk.
  int64_t n = cut.numLayers;
  if (numChunks == 1) {
    cut.chunkLayers = {n};
  } else if (!options->chunkLayers.empty()) {
    ArrayRef<int64_t> layers = options->chunkLayers;
    if (static_cast<int64_t>(layers.size()) != numChunks)
      return module.emitError() << "pipeline_layers " << listOf(layers) << " has "
                                << layers.size() << " entries; pp " << options->stages
                                << " x virtual_stages " << options->virtualStages << " needs "
                                << numChunks << ", one per model chunk";
    for (auto [chunk, count] : llvm::enumerate(layers))
      if (count < 1)
        return module.emitError() << "pipeline_layers " << listOf(layers) << ": chunk "
                                  << chunk << " has " << count
                                  << " layers; every chunk needs at least one";
    int64_t sum = 0;
    for (int64_t count : layers)
      sum += count;
    if (sum != n)
      return module.emitError() << "pipeline_layers " << listOf(layers) << " holds " << sum
                                << " layers but the model repeats @" << cut.layer << " " << n
                                << " times; the split must hold every layer exactly once";
    cut.chunkLayers.assign(layers.begin(), layers.end());
  } else if (n < numChunks || n % numChunks != 0) {
    InFlightDiagnostic diag = module.emitError()
                              << n << " layers do not split into pp " << options->stages
                              << " x virtual_stages " << options->virtualStages << " = "
                              << numChunks << " equal chunks";
    if (n < numChunks)
      diag << "; every chunk needs at least one layer";
    else
      diag << "; give the split explicitly, e.g. pipeline_layers "
           << listOf(balancedSplit(n, numChunks, layerCost.flops, embedding.flops, head.flops))
           << " (balanced by FLOPs, the embedding and the head counted)";
    return diag;
  } else {
    cut.chunkLayers.assign(numChunks, n / numChunks);
  }

  // Parameters the embedding and the head both read.
  auto readBy = [](ArrayRef<Operation *> ops) {
    llvm::StringSet<> params;
    for (Operation *op : ops)
      for (Value operand : op->getOperands())
        if (mt::ParamRefOp ref = parameterRead(operand))
          params.insert(ref.getParam());
    return params;
  };
  llvm::StringSet<> embeddingParams = readBy(before), headParams = readBy(after);

  // Placement and costs.
  cut.stageCosts.assign(options->stages, ChunkCost());
  // The schedules' placement (Megatron's c % P; V-shaped for zb-v), so the plan's chunks
  // and its schedules agree by construction.
  cut.chunkStages = placeChunks(
      mts::symbolizeScheduleKind(options->schedule).value_or(mts::ScheduleKind::OneFOneB),
      options->stages, options->virtualStages);
  int64_t first = 0;
  for (int64_t chunk = 0; chunk < numChunks; ++chunk) {
    cut.chunkFirstLayer.push_back(first);
    first += cut.chunkLayers[chunk];
    ChunkCost cost = times(layerCost, cut.chunkLayers[chunk]);
    if (chunk == 0)
      cost += embedding;
    if (chunk == numChunks - 1)
      cost += head;
    cut.chunkCosts.push_back(cost);
    cut.stageCosts[cut.chunkStages[chunk]] += cost;
  }
  if (numChunks > 1 && cut.chunkStages.front() != cut.chunkStages.back())
    for (auto param : module.getOps<mt::ParamOp>())
      if (embeddingParams.contains(param.getSymName()) && headParams.contains(param.getSymName()))
        cut.sharedParams.push_back({param.getSymName().str(), {0, numChunks - 1}});
  return cut;
}

void pipeline::printStageCut(const StageCut &cut, llvm::raw_ostream &os) {
  const PipelineOptions &options = cut.options;
  os << llvm::formatv("pipeline: pp {0} x virtual_stages {1} = {2} chunks of @{3} ({4} layers)",
                      options.stages, options.virtualStages, cut.numChunks(), cut.layer,
                      cut.numLayers);
  if (!options.schedule.empty())
    os << ", schedule " << options.schedule;
  os << "\n";
  os << llvm::formatv("  {0,-6} {1,-12} {2,-10} {3,16} {4,16} {5,18}\n", "stage", "chunks",
                      "layers", "forward FLOPs", "parameter bytes", "activation bytes");
  for (auto [stage, cost] : llvm::enumerate(cut.stageCosts)) {
    SmallVector<int64_t> chunks, layers;
    for (int64_t chunk = 0; chunk < cut.numChunks(); ++chunk)
      if (cut.chunkStages[chunk] == static_cast<int64_t>(stage)) {
        chunks.push_back(chunk);
        layers.push_back(cut.chunkLayers[chunk]);
      }
    os << llvm::formatv("  {0,-6} {1,-12} {2,-10} {3,16} {4,16} {5,18}\n", stage,
                        listOf(chunks), listOf(layers), static_cast<int64_t>(cost.flops),
                        cost.paramBytes, cost.activationBytes);
  }
  os << llvm::formatv("  imbalance: the busiest stage has {0:F2} x the mean stage's FLOPs\n",
                      cut.imbalance());
  os << "  (per micro-batch; FLOPs of the forward, matrix products only; activation bytes "
        "are every value the forward computes)\n";
}
