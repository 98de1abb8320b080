//===- PipelineStage.h - What one pipeline stage holds ------------*- C++ -*-===//
//
// Under pipeline parallelism (docs/plan-format.md, "Pipeline") stage s runs the model chunks
// c with chunk_stages[c] == s and holds only the parameters their compiled functions read:
//
//   - a layer parameter (leading `layers` dimension) with the layers of those chunks, packed
//     in increasing chunk order: interleaved pp2 x v2 over 4 layers gives stage 0 chunks 0
//     and 2, layers 0 and 2, stored as [layers=2, ...]; chunk c's slice starts at the layers
//     of the stage's earlier chunks (`chunkOffset`);
//   - a model parameter whole, on every stage whose chunks read it (a tied embedding on the
//     stages of the first and the last chunk, once when that is one stage).
//
// The optimizer state follows its parameter, and the compiled stage functions (`stage<s>.
// grad_squares`, `stage<s>.optimizer_step`) take the same storage. `stagePlan` writes this
// down as a Plan of its own (the held parameters and states, layer dims resized), so that
// what works on a plan's tables (gathering shards, the gradient buffer, binding kernel
// buffers) works on a stage unchanged. `takeStage` and `putStage` move tensors between the
// whole model's state and a stage's, in either layout of tensor parallelism.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_PIPELINESTAGE_H
#define MTC_RUNTIME_EXEC_PIPELINESTAGE_H

#include "runtime/exec/TrainingState.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/Error.h"

#include <cstdint>
#include <vector>

namespace mtc::rt {

struct StageHoldings {
  int64_t stage = 0;
  /// The stage's chunks, ascending, and the layers of the stack each runs.
  struct Chunk {
    int64_t chunk = 0;
    int64_t firstLayer = 0, numLayers = 0;
    int64_t offset = 0; // where its layers start in the stage's layer parameters
  };
  std::vector<Chunk> chunks;
  int64_t layers = 0; // of the stack, on this stage
  /// Indices into plan.params, ascending: the parameters some chunk function of the stage
  /// reads.
  std::vector<size_t> params;

  /// Where chunk `chunk`'s layers start in the stage's layer parameters.
  int64_t chunkOffset(int64_t chunk) const;
};

/// What stage `stage` of `plan` (a plan with a pipeline and x86 kernels) holds. Fails when
/// the plan's chunk functions are missing.
Expected<StageHoldings> stageHoldings(const Plan &plan, int64_t stage);

/// `plan` restricted to the stage: the held parameters and their states, in table order, a
/// layer parameter's (and state's) `layers` dimension the stage's layer count. With the
/// distributed optimizer a tensor's optimizer layout is derived from the stage's dims (its
/// layout plus the first dimension no axis splits whose size the data-parallel degree
/// divides), which is how the stage functions take gradients and states; it can differ
/// from the whole tensor's (one layer per stage cannot be split over dp2 by `layers`).
Plan stagePlan(const Plan &plan, const StageHoldings &holdings);

/// The stage's tensors of `model` (a state of `plan`'s tables, whole or a tensor-parallel
/// rank's shards), in the tables of `stagePlan(plan, holdings)`. A `model` without optimizer
/// states (a fresh start, whose zero state the stage makes in its own layout) gives a stage
/// without them. The optimizer states must not be split over a data-parallel axis (the
/// stage's optimizer layout is not the model's): take them whole, then shard.
Expected<TrainingState> takeStage(const Plan &plan, const StageHoldings &holdings,
                                  const TrainingState &model);

/// Writes the stage's tensors `stage` (stagePlan's tables) into `model` (plan's tables, the
/// same tensor-parallel locality), whose tensors must have their full size.
Error putStage(const Plan &plan, const StageHoldings &holdings, const TrainingState &stage,
               TrainingState &model);

/// The f32 words a stage holds a buffer of `b` in (a residual may be of another type, as a
/// router's i32 expert ids).
size_t heldWords(const KernelBuffer &b);

/// The f32 words of the values chunk `chunk` of `kernels` hands to the next (its forward's
/// activation outputs, together one message); 0 for a chunk without them.
size_t chunkActivationWords(const KernelsInfo &kernels, int64_t chunk);

/// The tokens per expert of a pipeline plan's MoE layers (docs/plan-format.md, "Pipeline"):
/// every chunk's forward returns, per `expert_load` output of forward_backward (one per
/// dispatch of the layer), the rows [count, experts] of its own layers. Laid out as the
/// single-stage step returns them: output after output, each [layers, experts] over the whole
/// layer stack, row-major.
struct PipelineExpertLoad {
  int64_t layers = 0;            // of the whole stack
  std::vector<int64_t> experts;  // per output, in the chunk forwards' order; empty: dense
  /// Values of every output together.
  size_t size() const;
  /// Where row `layer` of output `output` starts.
  size_t rowOffset(size_t output, int64_t layer) const;
};

/// The tokens per expert the chunk forwards of `kernels` return. Fails when the chunks
/// disagree on the outputs (their number or experts) or a chunk's rows are not its layers.
Expected<PipelineExpertLoad> pipelineExpertLoad(const KernelsInfo &kernels);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_PIPELINESTAGE_H
