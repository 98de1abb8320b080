//===- LayoutSearch.h - the search over parallel layouts ---------*- C++ -*-===//
//
// `mtc explore` and `mtc compile --auto` (docs/cost-model.md, "The layout search"): the
// training step of every layout of a model on a cluster, composed from per-layer costs
// rather than compiled whole.
//
// The compiler (tools/mtc/Explore.cpp) compiles the model once per combination of the
// layouts inside a layer (tp, sp, cp, ep, recomputation), without pipeline or data
// parallelism and without code generation, and cuts the partitioned step into a
// LayerCosts: one layer's forward and backward, the parts before the layer stack (the
// embedding) and after it (final norm, head, loss), the optimizer step, each rank's bytes.
// This file composes those over what does not change a layer: the pipeline (pp, the stage
// cut balanced by the cost model, the schedule and its virtual stages: the compiler's task
// lists simulated as `mtc simulate` runs a plan's), data parallelism and the ZeRO stage
// (0-3), and the micro-batch (the compiled one scaled: every matrix product and every
// tensor with the `batch` dimension grows with it, the rest stays). Memory and a lower bound
// of the step come first: the search simulates a layout only when the bound says it could
// be on the Pareto front, the runner-up or a faster layout that does not fit.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_COSTMODEL_LAYOUTSEARCH_H
#define MTC_COMPILER_COSTMODEL_LAYOUTSEARCH_H

#include "compiler/costmodel/Cluster.h"
#include "compiler/costmodel/StepModel.h"
#include "runtime/plan/StageBuffers.h"

#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace mtc::costmodel {

/// The layout inside a layer: what the compiler partitions.
struct LayerLayout {
  int64_t tp = 1, cp = 1, ep = 1;
  bool sp = false;
  std::string recompute = "none";
};

/// A model's step compiled for one LayerLayout at one micro-batch, cut into parts. Each
/// profile is per call on one rank; the byte counts are one rank's.
struct LayerCosts {
  LayerLayout layout;
  /// The mesh the step was partitioned over, outermost axis first (the last is fastest in
  /// world rank, Megatron's order), and its size: the ranks of one model copy before the
  /// pipeline and data parallelism.
  std::vector<std::pair<std::string, int64_t>> meshAxes;
  int64_t meshSize = 1;
  /// The micro-batch it was compiled at, and the layer count.
  int64_t microBatch = 1;
  /// Whether the step scales to other micro-batches: false when a matrix product lacks the
  /// `batch` dimension (its FLOPs would not grow), and the search keeps the compiled one.
  bool scalesWithMicroBatch = true;
  int64_t layers = 1;
  /// Per micro-batch: one layer's forward and backward (its recomputation included), what
  /// runs before the layer stack and after its backward (the embedding), and what runs
  /// between (final norm, head, loss and their backward).
  FunctionProfile layer, first, last;
  /// Their forward parts (a pipeline chunk's forward task: the layer's forward, the
  /// embedding, the final norm, head and loss), each backward being the rest; and the part
  /// of the layer's backward computing its parameters' gradients (a split backward's W).
  FunctionProfile layerForward, firstForward, lastForward, layerBackwardWeight;
  /// The optimizer step of the whole model, without the distributed optimizer.
  FunctionProfile optimizer;
  /// Parameter bytes (f32 storage as the runtime holds them): one layer's, and the rest's
  /// (counted on both the first and the last stage: a tied embedding is on both).
  double layerParamBytes = 0, restParamBytes = 0;
  int64_t paramTensors = 0, layerParamTensors = 0;
  /// The largest parameter of one layer and of the rest (f32 storage): ZeRO-2 stages the
  /// largest gradient it shards whole (a layer parameter stacked over the stage's layers).
  double largestLayerParamBytes = 0, largestRestParamBytes = 0;
  /// Optimizer state bytes per parameter byte (AdamW: 2).
  double stateRatio = 2;
  /// Per micro-batch: what one layer's forward keeps for its backward, the largest value
  /// the step computes (the logits, typically), the token and label buffers, and the
  /// activation a stage sends the next.
  double layerSavedBytes = 0, largestValueBytes = 0, tokenBytes = 0, activationBytes = 0;
  /// Per micro-batch: what one layer's backward, split, keeps from its input-gradient part
  /// for its weight-gradient part (the zero-bubble schedule holds it until W runs).
  double layerWeightStashBytes = 0;
};

/// The layout composed over a LayerCosts.
struct Layout {
  int64_t pp = 1, dp = 1, virtualStages = 1, microBatch = 1, zeroStage = 0;
  std::string schedule = "1f1b"; // 1f1b, interleaved, zb-h1, zb-v; "none" without a pipeline
};

/// The task lists of a pipeline schedule (kind as the DSL spells it: 1f1b, interleaved,
/// zb-h1, zb-v) for `stages` stages of `virtualStages` chunks and `microBatches` micro-batches, as
/// the compiler generates them (tools/mtc/Explore.cpp); an error when the kind cannot
/// schedule them.
using ScheduleSource = std::function<llvm::Expected<const rt::PipelineSchedule *>(
    llvm::StringRef kind, int64_t stages, int64_t virtualStages, int64_t microBatches)>;

/// What each stage of a pipeline holds (StageBuffers.h), walked once per schedule, chunk
/// placement and chunk sizes: a search meets the same ones for every ZeRO stage (whose
/// buffers are the same) and every layout that shares the layer's sizes.
class StageBufferMemo {
public:
  const std::vector<rt::StageBufferPeaks> &peaks(const rt::PipelineSchedule &schedule,
                                                 const std::vector<int64_t> &chunkStages,
                                                 const rt::ChunkBufferBytes &bytes);

private:
  using Key = std::tuple<const rt::PipelineSchedule *, std::vector<int64_t>,
                         std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>,
                         std::vector<int64_t>>;
  std::map<Key, std::vector<rt::StageBufferPeaks>> walked_;
};

struct SearchOptions {
  int64_t gpus = 1;
  int64_t ranksPerNode = 0; // 0: the cluster's devices per node
  int64_t globalBatch = 1;  // sequences per step
  int64_t seq = 1;          // tokens per sequence
  double modelFlopsPerToken = 0;
  std::string dtype = "f32";
  std::vector<int64_t> microBatches = {1, 2, 4, 8};
  int64_t maxVirtualStages = 8;
  /// ZeRO stages to consider. Under ZeRO-3 the micro-batch is each rank's part: the compiled micro-batch is dp times
  /// it, split over the data-parallel ranks.
  std::vector<int64_t> zeroStages = {0, 1, 2, 3};
  /// The schedules a pipeline's step is simulated on (required for pp > 1).
  ScheduleSource schedules;
  /// Where the stages' buffer walks are kept across layouts (null: walked each time).
  StageBufferMemo *stageBuffers = nullptr;
  /// Whether composeLayout only bounds the step from below (its memory composed, the time
  /// not): the search times a layout only when its bound says it could matter.
  bool lowerBoundOnly = false;
};

/// One evaluated layout.
struct Candidate {
  const LayerCosts *costs = nullptr;
  Layout layout;
  /// Layers of each pipeline chunk, in model order (pp x V entries).
  std::vector<int64_t> chunkLayers;
  int64_t microBatchesPerRank = 0;
  double stepSeconds = 0, computeSeconds = 0, communicationSeconds = 0, bubbleSeconds = 0;
  /// The part of communicationSeconds in the layers' own collectives (tp, cp, ep), and in
  /// the data-parallel reduction and the distributed optimizer's gather.
  double layerCommunicationSeconds = 0, dataParallelSeconds = 0;
  double mfu = 0;
  /// The largest stage's predicted bytes per rank.
  double memoryBytes = 0;
  /// Per stage: its predicted bytes per rank (memoryBytes is the largest), and the layers'
  /// saved activations it holds at once (part of them).
  std::vector<double> stageMemoryBytes, stageActivationBytes;
  bool fits = false;
  /// False when the layout was not timed (SearchOptions::lowerBoundOnly; the search leaves
  /// untimed the layouts that cannot be on the Pareto front nor among the two fastest):
  /// stepSeconds is then a lower bound, the slowest stage's micro-batches without bubble or
  /// reduction, and the other times are 0.
  bool timed = true;
};

struct SearchResult {
  /// Every layout that fits, fastest first (those not timed by their lower bound).
  std::vector<Candidate> fitting;
  /// The fastest layouts that do not fit (at most a few, fastest first), for the report.
  std::vector<Candidate> tooLarge;
  /// The layout needing the least memory, fitting or not.
  std::optional<Candidate> smallest;
  int64_t enumerated = 0, prunedByMemory = 0;
  /// Fitting layouts no other beats in both step time and memory, fastest first.
  std::vector<Candidate> pareto() const;
};

/// Composes `layout` over `costs` on `cluster`. Fails when the layout cannot run (the
/// ranks do not divide, the batch does not share, the layers do not cut).
llvm::Expected<Candidate> composeLayout(const LayerCosts &costs, const Layout &layout,
                                        const Cluster &cluster, const SearchOptions &options);

/// Every layout over every LayerCosts on options.gpus ranks.
SearchResult searchLayouts(const std::vector<LayerCosts> &costs, const Cluster &cluster,
                           const SearchOptions &options);

/// "tp 8 sp pp 4 dp 32 mbs 1 1f1b recompute selective zero 1"
std::string describeLayout(const Candidate &candidate);

/// The Pareto table `mtc explore` prints (at most `rows` rows).
void printParetoTable(const SearchResult &result, const Cluster &cluster, size_t rows,
                      llvm::raw_ostream &os);

} // namespace mtc::costmodel

#endif // MTC_COMPILER_COSTMODEL_LAYOUTSEARCH_H
