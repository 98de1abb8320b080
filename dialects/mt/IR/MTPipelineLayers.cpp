//===- MTPipelineLayers.cpp - the layers of each pipeline chunk -----------===//
//
// How the layer stack divides into pipeline model chunks: the model's layer count, the
// even split, Megatron's first/last-stage split and the check of an explicit one. Shared
// by the frontend, mtc's flags, the #mt.parallel verifier and the stage cut.
//
//===----------------------------------------------------------------------===//

#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mt/IR/MTOps.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mtc::mt;

int64_t mtc::mt::countLayers(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return 0;
  int64_t layers = 0;
  forward.walk([&](RepeatOp repeat) {
    if (!repeat.getReverse())
      layers += repeat.getCount();
  });
  return layers;
}

FailureOr<SmallVector<int64_t>> mtc::mt::getPipelineLayers(ModuleOp module) {
  ParallelAttr parallel = ParallelAttr::lookup(module);
  int64_t numLayers = countLayers(module);
  SmallVector<int64_t> layers =
      parallel ? parallel.getPipelineLayers(numLayers) : SmallVector<int64_t>{numLayers};
  if (layers.empty())
    return module.emitError() << numLayers << " layers do not split evenly into pp "
                              << parallel.getPipelineParallel() << " x "
                              << parallel.getNumVirtualStages()
                              << " virtual stages; give pipeline_layers";
  return layers;
}

std::optional<PipelineSettingProblem>
mtc::mt::checkPipelineSchedule(int64_t stages, std::optional<PipelineSchedule> schedule,
                               std::optional<int64_t> virtualStages,
                               const PipelineSettingNames &names) {
  using Setting = PipelineSettingProblem::Setting;
  int64_t chunks = virtualStages.value_or(schedule == PipelineSchedule::ZeroBubbleV ? 2 : 1);
  auto problem = [](Setting at, const llvm::Twine &message) {
    return PipelineSettingProblem{at, message.str()};
  };
  if (chunks > 1 && stages == 1)
    return problem(Setting::VirtualStages, names.describeVirtualStages(chunks) +
                                               " needs pipeline parallelism: set " + names.pp +
                                               " above 1");
  if (schedule == PipelineSchedule::Interleaved && chunks < 2)
    return problem(Setting::Schedule, "the interleaved schedule needs virtual stages: set " +
                                          names.virtualStages + " above 1");
  if (schedule == PipelineSchedule::ZeroBubbleV && chunks != 2)
    return problem(Setting::VirtualStages,
                   "the zb-v schedule runs 2 model chunks per stage (its V shape), not " +
                       names.describeVirtualStages(chunks));
  if (chunks > 1 && schedule && *schedule != PipelineSchedule::Interleaved &&
      *schedule != PipelineSchedule::ZeroBubbleV)
    return problem(Setting::VirtualStages, names.describeVirtualStages(chunks) +
                                               " needs the interleaved (or zb-v) schedule, not " +
                                               stringifyPipelineSchedule(*schedule));
  return std::nullopt;
}

llvm::Error mtc::mt::checkPipelineLayers(ArrayRef<int64_t> layers, int64_t numLayers) {
  int64_t sum = 0;
  for (int64_t count : layers)
    sum += count;
  if (sum == numLayers)
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::formatv("the split sums to {0} layers; the model has {1}", sum, numLayers));
}

llvm::Expected<SmallVector<int64_t>> mtc::mt::splitPipelineLayers(int64_t numLayers, int64_t stages,
                                                                  int64_t chunks,
                                                                  std::optional<int64_t> first,
                                                                  std::optional<int64_t> last) {
  auto fail = [](const llvm::Twine &message) { return llvm::createStringError(message.str()); };
  // Layers of each stage: the first and last as given, the others share the rest evenly.
  SmallVector<int64_t> perStage(stages, 0);
  int64_t rest = numLayers, restStages = stages;
  for (auto [given, stage, name] :
       {std::tuple(first, int64_t(0), "first"), std::tuple(last, stages - 1, "last")}) {
    if (!given)
      continue;
    if (*given < 1)
      return fail(llvm::Twine("the ") + name + " pipeline stage needs at least 1 layer, not " +
                  llvm::Twine(*given));
    if (perStage[stage] != 0)
      return fail("with one pipeline stage, the first stage is the last: give the layers of "
                  "only one of them");
    perStage[stage] = *given;
    rest -= *given;
    --restStages;
  }
  if (restStages == 0 && rest != 0)
    return fail(llvm::formatv("the first and last pipeline stages take {0} of the {1} layers",
                              numLayers - rest, numLayers));
  if (restStages > 0 && rest < restStages)
    return fail(llvm::formatv("{0} layers leave {1} for the {2} other pipeline stages, which "
                              "need at least 1 each",
                              numLayers, rest, restStages));
  if (restStages > 0 && rest % restStages != 0)
    return fail(llvm::formatv("{0} layers do not split evenly into {1} pipeline stages{2}", rest,
                              restStages, restStages == stages ? "" : " besides the first/last"));
  for (int64_t &count : perStage)
    if (count == 0)
      count = rest / restStages;
  // Each stage's layers share its virtual chunks evenly; chunk c runs on stage c mod pp.
  for (auto [stage, count] : llvm::enumerate(perStage))
    if (count % chunks != 0)
      return fail(llvm::formatv("pipeline stage {0} holds {1} layers, which its {2} virtual "
                                "stages cannot share evenly{3}",
                                stage, count, chunks,
                                count < chunks ? " (each needs a layer)" : ""));
  SmallVector<int64_t> layers(stages * chunks);
  for (int64_t chunk = 0; chunk < stages * chunks; ++chunk)
    layers[chunk] = perStage[chunk % stages] / chunks;
  return layers;
}
