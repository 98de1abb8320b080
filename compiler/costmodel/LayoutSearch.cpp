//===- LayoutSearch.cpp - the search over parallel layouts ----------------===//

#include "compiler/costmodel/LayoutSearch.h"

#include "compiler/costmodel/CollectiveModel.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>

using namespace mtc::costmodel;

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
  if (v > 1 && m % pp != 0)
    return llvm::createStringError("the interleaved schedule needs micro-batches a multiple of pp");
  if (layout.zeroStage > 0 && dp < 2)
    return llvm::createStringError("ZeRO needs data parallelism");
  if (layout.zeroStage == 2 && pp > 1)
    return llvm::createStringError("ZeRO-2 is not supported with pipeline parallelism");
  if (layout.zeroStage == 3)
    return llvm::createStringError("ZeRO-3 is not composed by the search");
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
  const PartTime layer = timer.time(scaled(costs.layer, factor));
  const PartTime first = timer.time(scaled(costs.first, factor));
  const PartTime last = timer.time(scaled(costs.last, factor));

  // The stage cut: pp x V chunks, chunk k on stage k mod pp; balanced by time.
  const int64_t chunks = pp * v;
  c.chunkLayers =
      pp == 1 ? std::vector<int64_t>{costs.layers}
              : balancedCut(costs.layers, chunks, layer.total(), first.total(), last.total());
  if (c.chunkLayers.empty())
    return llvm::createStringError(
        llvm::formatv("{0} layers cannot be cut into {1} chunks", costs.layers, chunks).str());
  std::vector<int64_t> stageLayers(size_t(pp), 0);
  for (int64_t k = 0; k < chunks; ++k)
    stageLayers[size_t(k % pp)] += c.chunkLayers[size_t(k)];
  const int64_t lastStage = (chunks - 1) % pp;

  // Memory per rank, stage by stage (pruned on before anything is timed): parameters and
  // optimizer state twice (the optimizer writes the next into the second set), gradients
  // (twice with several micro-batches or a pipeline: a second buffer takes each part), the
  // tokens, the activations the schedule keeps in flight, and the step's temporaries.
  const double device = static_cast<double>(cluster.memoryBytes);
  for (int64_t s = 0; s < pp; ++s) {
    double params = static_cast<double>(stageLayers[size_t(s)]) * costs.layerParamBytes;
    if (s == 0 || s == lastStage)
      params += costs.restParamBytes;
    double state = params * costs.stateRatio;
    double gradients = params;
    if (layout.zeroStage >= 1)
      state /= static_cast<double>(dp);
    double secondGradients = (m > 1 || pp > 1) ? params : 0;
    if (layout.zeroStage == 2) {
      // ZeRO-2: the rank's gradient shards and the staging buffer of the largest gradient.
      gradients = params / static_cast<double>(dp) + costs.layerParamBytes;
      secondGradients = 0;
    }
    // Micro-batches whose activations a stage holds at once: 1F1B's p - s, interleaved
    // Megatron's warm-up ((p - s - 1) x 2 + (V - 1) x p + 1 chunks of L_s / V layers).
    double inFlightLayers = static_cast<double>(stageLayers[size_t(s)]);
    if (pp > 1 && v == 1)
      inFlightLayers *= static_cast<double>(std::min(m, pp - s));
    else if (v > 1)
      inFlightLayers *= static_cast<double>(std::min(m * v, (pp - s - 1) * 2 + (v - 1) * pp + 1)) /
                        static_cast<double>(v);
    double activations = inFlightLayers * costs.layerSavedBytes * factor;
    // The step's temporaries: one layer's backward (its saved values and their gradients)
    // and the largest value with its gradient (calibrated on gpt-tiny's planned workspace:
    // docs/cost-model.md).
    double temporaries = 2 * (costs.layerSavedBytes + costs.largestValueBytes) * factor;
    double bytes = 2 * (params + state) + gradients + secondGradients + costs.tokenBytes * factor +
                   activations + temporaries;
    c.memoryBytes = std::max(c.memoryBytes, bytes);
  }
  c.fits = c.memoryBytes <= device;

  // Time. Per micro-batch, each stage's compute tasks (its layers, the embedding on the
  // first, the head on the last); the schedule's bubble in closed form (equal micro-batches:
  // GPipe's and 1F1B's (p - 1) / (m + p - 1), interleaved's (p - 1) / V over m); the
  // activations and their gradients crossing each stage boundary once on the critical
  // path; then the data-parallel reduction and the optimizer step of the slowest stage.
  std::vector<PartTime> stage(static_cast<size_t>(pp));
  for (int64_t s = 0; s < pp; ++s) {
    stage[size_t(s)] = layer * static_cast<double>(stageLayers[size_t(s)]);
    if (s == 0)
      stage[size_t(s)] += first;
    if (s == lastStage)
      stage[size_t(s)] += last;
  }
  size_t slowest = 0;
  double sum = 0;
  for (size_t s = 0; s < stage.size(); ++s) {
    sum += stage[s].total();
    if (stage[s].total() > stage[slowest].total())
      slowest = s;
  }
  const PartTime &busiest = stage[slowest];
  double md = static_cast<double>(m);
  double pipeline = md * busiest.total();
  double bubble = 0;
  if (pp > 1) {
    int64_t stageStride = costs.meshSize * dp;
    bool sameNode = stageStride < ranksPerNode;
    double p2p = pointToPointTime(cluster, costs.activationBytes * factor, sameNode);
    if (v == 1)
      bubble = sum - busiest.total(); // the fill and drain: (p - 1) stages' worth
    else
      bubble = static_cast<double>(pp - 1) * busiest.total() / static_cast<double>(v);
    bubble += 2 * static_cast<double>(pp - 1) * p2p;
    pipeline += bubble;
  }

  // The data-parallel reduction and the optimizer step of the slowest stage (as the
  // runtime does them: runtime/exec/GradientBuffer.h; StepModel.cpp).
  double stageParams = static_cast<double>(stageLayers[slowest]) * costs.layerParamBytes;
  if (slowest == 0 || static_cast<int64_t>(slowest) == lastStage)
    stageParams += costs.restParamBytes;
  double totalParams =
      static_cast<double>(costs.layers) * costs.layerParamBytes + costs.restParamBytes;
  double share = totalParams > 0 ? stageParams / totalParams : 1;
  int64_t dpStride = costs.meshSize;
  double reduce = 0;
  if (dp > 1) {
    reduce += timer.collective(CollectiveKind::AllReduce, sizeof(double), dp, dpStride);
    if (layout.zeroStage == 0)
      reduce += timer.collective(CollectiveKind::AllReduce, stageParams, dp, dpStride);
    else {
      // One reduce-scatter per gradient and one all-gather per parameter, as the runtime and
      // the distributed optimizer's step do them: the stage's bytes at once, plus the
      // latency of each further tensor (the stage's share of them).
      double tensors = std::max(1.0, share * static_cast<double>(costs.paramTensors));
      auto perTensor = [&](CollectiveKind kind, double bytes) {
        return timer.collective(kind, bytes, dp, dpStride) +
               (tensors - 1) * timer.collective(kind, 0, dp, dpStride);
      };
      reduce += static_cast<double>(layout.zeroStage == 2 ? m : 1) *
                    perTensor(CollectiveKind::ReduceScatter, stageParams) +
                perTensor(CollectiveKind::AllGather, stageParams / static_cast<double>(dp));
    }
  }
  if (pp > 1)
    reduce +=
        timer.collective(CollectiveKind::AllReduce, 2 * sizeof(double), pp, costs.meshSize * dp);
  FunctionProfile optimizer = costs.optimizer;
  double optimizerShare = share / (layout.zeroStage >= 1 ? static_cast<double>(dp) : 1.0);
  for (FunctionProfile::Gemm &g : optimizer.gemms)
    g.flops *= optimizerShare;
  optimizer.trafficBytes *= optimizerShare;
  PartTime update = timer.time(optimizer);

  c.stepSeconds = pipeline + reduce + update.total();
  c.computeSeconds = md * busiest.compute + update.compute;
  c.layerCommunicationSeconds = md * busiest.communicate + update.communicate;
  c.dataParallelSeconds = reduce;
  c.communicationSeconds = c.layerCommunicationSeconds + reduce;
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
          if ((zero > 0 && dp < 2) || (zero == 2 && pp > 1))
            continue;
          std::vector<int64_t> virtualStages = {1};
          for (int64_t v = 2; pp > 1 && v <= options.maxVirtualStages && pp * v <= costs.layers;
               v *= 2)
            virtualStages.push_back(v);
          for (int64_t v : virtualStages) {
            Layout layout;
            layout.pp = pp;
            layout.dp = dp;
            layout.microBatch = b;
            layout.zeroStage = zero;
            layout.virtualStages = v;
            layout.schedule = pp == 1 ? "none" : v > 1 ? "interleaved" : "1f1b";
            ++result.enumerated;
            llvm::Expected<Candidate> c = composeLayout(costs, layout, cluster, options);
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
  llvm::stable_sort(result.fitting, faster);
  llvm::stable_sort(result.tooLarge, faster);
  // Only those faster than the fastest that fits say something about it.
  double bestFit = result.fitting.empty() ? std::numeric_limits<double>::infinity()
                                          : result.fitting.front().stepSeconds;
  llvm::erase_if(result.tooLarge, [&](const Candidate &c) { return c.stepSeconds >= bestFit; });
  if (result.tooLarge.size() > 3)
    result.tooLarge.resize(3);
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
