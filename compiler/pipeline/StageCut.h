//===- StageCut.h - the layers of each pipeline chunk -----------*- C++ -*-===//
//
// Pipeline parallelism divides the layer stack, the one `mt.repeat` of the entry function,
// into P x V contiguous model chunks (P = pp stages, V = virtual stages per stage); chunk 0
// also holds everything before the repeat (the embedding), the last chunk everything after
// it (final norm, head, loss). This file decides how many layers each chunk gets and on
// which stage it runs, and what each chunk costs, for `mtc compile --stats` and for the
// passes that build the chunk functions (docs/architecture.md, "Pipeline stages").
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_PIPELINE_STAGECUT_H
#define MTC_COMPILER_PIPELINE_STAGECUT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mtc::pipeline {

/// The pipeline settings of the model's `mt.parallel`.
struct PipelineOptions {
  int64_t stages = 1;        // pp
  int64_t virtualStages = 1; // virtual_stages
  std::string schedule;      // as written; empty when not given
  /// pipeline_layers: the layers of each chunk when the user splits explicitly; empty
  /// for the default equal split.
  llvm::SmallVector<int64_t> chunkLayers;

  int64_t numChunks() const { return stages * virtualStages; }
};

/// Reads `pp`, the virtual stages (ParallelAttr::getNumVirtualStages: 2 under zb-v),
/// `schedule` and `pipeline_layers` from the module's typed `#mt.parallel` (all optional;
/// its verifier checked them).
mlir::FailureOr<PipelineOptions> getPipelineOptions(mlir::ModuleOp module);

/// What one chunk (or one stage, the sum of its chunks) costs per micro-batch.
struct ChunkCost {
  /// Forward FLOPs (ModelStats' convention: matrix products only).
  double flops = 0;
  /// Parameters the chunk reads (a tied embedding counts on both chunks that read it).
  int64_t paramBytes = 0;
  /// Values the chunk's forward computes: what its backward saves without recomputation
  /// (an upper bound with it).
  int64_t activationBytes = 0;
};

/// The cut of the layer stack into chunks.
struct StageCut {
  PipelineOptions options;
  /// The layer function the entry repeats and the number of repeats.
  std::string layer;
  int64_t numLayers = 0;
  /// Per chunk: layers, the global index of its first layer, the stage that runs it.
  llvm::SmallVector<int64_t> chunkLayers, chunkFirstLayer, chunkStages;
  llvm::SmallVector<ChunkCost> chunkCosts;
  /// Per stage: the sum of its chunks.
  llvm::SmallVector<ChunkCost> stageCosts;
  /// Model parameters read both before the layer stack and after it (a tied embedding)
  /// when chunk 0 and the last chunk run on different stages, with those two chunks: both
  /// stages hold the parameter and sum its gradient.
  llvm::SmallVector<std::pair<std::string, llvm::SmallVector<int64_t>>> sharedParams;

  int64_t numChunks() const { return static_cast<int64_t>(chunkLayers.size()); }
  /// The largest stage FLOPs over the mean (1 = balanced).
  double imbalance() const;
};

/// Cuts the entry function's layer stack of an `mt` module (before or after the training
/// pipeline) by getPipelineOptions: the explicit split, or equal layers per chunk. Emits
/// an error and fails when the split is impossible: a layer count P x V does not divide
/// (the message suggests the FLOP-balanced explicit split), an explicit split with the
/// wrong number of entries, an entry below 1 or a sum other than the layer count. A
/// model without pipeline parallelism gets one chunk.
mlir::FailureOr<StageCut> computeStageCut(mlir::ModuleOp module);

/// The split of `numLayers` layers into `numChunks` chunks of at least one layer that
/// minimises the largest chunk cost, where a chunk costs `layerCost` per layer plus
/// `firstExtra` on chunk 0 and `lastExtra` on the last chunk.
llvm::SmallVector<int64_t> balancedSplit(int64_t numLayers, int64_t numChunks,
                                         double layerCost, double firstExtra, double lastExtra);

/// The cut as `mtc compile --stats` prints it: per stage its chunks, layers, FLOPs,
/// parameter and activation bytes, then the imbalance.
void printStageCut(const StageCut &cut, llvm::raw_ostream &os);

} // namespace mtc::pipeline

#endif // MTC_COMPILER_PIPELINE_STAGECUT_H
