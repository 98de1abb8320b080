//===- Trainer.h - The single-rank training step loop ------------*- C++ -*-===//
//
// One optimizer step of the plan on this CPU:
//
//   for each micro-batch m of the global batch (global_batch / micro_batch of them) that
//   this data-parallel rank owns (m % dp == rank):
//     tokens, labels <- data(step, samples [m * micro, (m + 1) * micro))
//     loss_m, grads_m <- forward_backward(tokens, labels, params)   (dropout key: step, m)
//       (a plan compiled with eod_mask_loss also takes the loss mask of the tokens after the
//       labels, LossMask.h: 0 at the run's end-of-document id, 1 elsewhere; one compiled
//       with reset_position_ids the tokens' positions within their documents last,
//       Documents.h)
//     grads += grads_m
//   all-reduce (sum) grads and the loss sum over the data-parallel ranks, one buffer
//   grad_norm, lr, params', states' <- optimizer_step(step, 1 / micro-batches, grads, ...)
//
// An fp16 plan's backward starts from the loss scale S (LossScaler.h), passed in each
// forward_backward call's kernel context: its gradients are S times the true ones, so the
// optimizer's gradient scale is 1 / (micro-batches x S) and its step the optimizer's own
// count (TrainingState::optimizerSteps). When the gradient norm comes back inf or NaN the
// optimizer's outputs are dropped: the step is skipped, and S lowered.
//
// Every rank then holds the same gradients and takes the same optimizer step, so parameters
// and state stay replicated across the data-parallel ranks.
//
// With tensor parallelism (a plan with a mesh, docs/plan-format.md "Mesh and layouts") the
// parameters, states and gradients are this rank's shards (local dims), the kernels
// communicate along the mesh axes themselves (MeshCollectives.h: every kernel call's context
// holds a MeshCall over the mesh given to `create`, and a failed collective fails the step), and
// the gradients they return are the complete gradients of the local shards. The ranks of a mesh
// group process the same micro-batches; only the data-parallel group (the ranks with the same
// mesh coordinates) is all-reduced here. The step's loss is the mean of the micro-batch losses
// (each a mean over its tokens), so it does not depend on how the global batch is split. The
// optimizer updates the parameters and state in place (and leaves them as they were when the
// gradient norm is not finite), so they are held once.
//
// With the distributed optimizer (a plan whose mesh names a `data_parallel_axis`; docs/plan-
// format.md "Distributed optimizer") data parallelism is that mesh axis: `dataParallel` is its
// communicator (rank = data-parallel coordinate, which deals the micro-batches), and instead
// of all-reducing every gradient the step reduce-scatters over it the gradient of each
// parameter whose optimizer layout splits a dimension over the axis (GradientSharding.h), so
// the rank keeps only its block of the summed gradient; the others are all-reduced as before,
// and so is the loss. optimizer_step then takes those gradient shards and the rank's shards
// of the optimizer state (the optimizer layout) with the whole (tensor-parallel local)
// parameters; it all-gathers the updated parameters over the axis itself, and all-reduces
// the squared gradient norm, so every rank ends with the same parameters and norm.
//
// Evaluation (`evaluate`, mtrun --eval-interval) runs the plan's `forward` over global
// batches of a validation TokenSource, the micro-batches dealt to the data-parallel ranks as
// in a step and its collectives over the same mesh, and all-reduces the loss sum over the
// data-parallel ranks:
//
//   for each global batch b of [first, first + count), each micro-batch m this rank owns:
//     tokens, labels <- validation(b, samples [m * micro, (m + 1) * micro))
//     loss_m <- forward(tokens, labels, params)                       (no dropout key)
//   validation loss <- (sum of loss_m over the ranks) / (count x micro-batches)
//
// The call has no dropout key, which the kernels read as "no dropout" (DropoutKey.h): every
// element kept, unscaled. Nothing of the training state changes, and the training data and
// dropout keys depend only on the step, so a run that evaluates trains exactly as one that
// does not.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_TRAINER_H
#define MTC_RUNTIME_EXEC_TRAINER_H

#include "runtime/comm/Communicator.h"
#include "runtime/data/TokenSource.h"
#include "runtime/exec/GradientBuffer.h"
#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/MeshCollectives.h"
#include "runtime/exec/StepBindings.h"
#include "runtime/exec/Trace.h"
#include "runtime/exec/TrainingState.h"
#include "runtime/plan/Plan.h"

#include <optional>
#include <vector>

namespace mtc::rt {

/// What one step measured.
struct StepStats {
  int64_t step = 0; // steps taken after this one (1 for the first)
  double loss = 0;
  double lr = 0;
  double gradNorm = 0;  // before clipping (inf or NaN for a skipped step)
  /// fp16: the loss scale the step's backward started from (0: no loss scaling), and
  /// whether a gradient overflowed, so that the step was skipped (LossScaler.h).
  double lossScale = 0;
  bool skipped = false;
  int64_t tokens = 0;   // tokens of the global batch
  double seconds = 0;   // wall time of the step
  /// Tokens routed to each expert (before any capacity drops one), per MoE layer, summed
  /// over the global batch: the rows of forward_backward's `expert_load` outputs in their
  /// order (for a pipeline plan, PipelineTrainer's rows of every stage). Empty for a dense
  /// model.
  std::vector<std::vector<int64_t>> tokensPerExpert;
};

/// The function of `kernels` whose token ids set the micro-batch: forward_backward, or a
/// pipeline plan's (which has none) chunk 0 forward; null when the plan has neither.
const KernelFunction *batchFunction(const KernelsInfo &kernels);
/// The token ids `step` takes: its first input of kind `input` (forward_backward's first
/// buffer, chunk 0's forward's after the parameters before it), or null.
const KernelBuffer *tokensInput(const KernelFunction &step);

/// The micro-batches of one step: the global batch (`globalBatch` samples, 0: the plan's
/// `global_batch`) in micro-batches of `step`'s batch (batchFunction; its token ids must be
/// [batch, seq], else an error), which must divide it, shared
/// evenly by `dataParallelSize` ranks. Known from the plan alone, so that a launcher refuses a
/// batch its ranks cannot share before it starts any.
Expected<int64_t> countMicroBatches(const Plan &plan, const KernelFunction &step,
                                    int64_t globalBatch, int64_t dataParallelSize);

/// A plan compiled with eod_mask_loss or reset_position_ids derives its loss mask or its
/// position ids from the data's end-of-document id: an error naming the setting when
/// `endOfDocument` is none; success for other plans.
Error checkEndOfDocument(const Plan &plan, std::optional<int64_t> endOfDocument);

class Trainer {
public:
  /// Binds `kernels` (of `plan`) to `state`. `globalBatch` samples per step (0: the plan's
  /// `global_batch`), split over the ranks of `dataParallel` (null: this rank alone). `mesh`
  /// (RankMesh::context(); copied, its communicators must outlive the trainer) is what the
  /// kernels' collectives run over; null for a plan without a mesh of more than one rank. The
  /// plan, kernels, data and communicator must outlive the trainer. Fails when the batch
  /// settings, the kernels, the state's shapes and the data-parallel degree do not fit
  /// together. With a data-parallel axis in the plan, `dataParallel` must be that axis'
  /// communicator (RankMesh::dataParallel()) and the state hold the optimizer state's shards.
  /// `validation` (null: no evaluation; it must outlive the trainer) is what `evaluate`
  /// reads; then the plan must have a `forward` taking the same batch of tokens and labels,
  /// the parameters, and returning the loss, else an error. `endOfDocument` is the data's
  /// end-of-document id, which a plan compiled with eod_mask_loss or reset_position_ids
  /// needs (an error without it) and others ignore.
  static Expected<Trainer> create(const Plan &plan, const KernelLibrary &kernels,
                                  TrainingState state, const TokenSource &data,
                                  int64_t globalBatch = 0, Communicator *dataParallel = nullptr,
                                  const MeshContext *mesh = nullptr,
                                  const TokenSource *validation = nullptr,
                                  std::optional<int64_t> endOfDocument = std::nullopt);

  /// Takes one optimizer step. Fails (leaving the state of the previous step) when the loss
  /// or the gradient norm is not finite, or a collective fails; with loss scaling (fp16), a
  /// gradient norm that is not finite skips the step instead (the parameters and optimizer
  /// state stay, the step count and the scaler's state advance).
  Expected<StepStats> step();

  /// The mean loss of the current parameters over global batches [firstBatch, firstBatch +
  /// count) of the validation data (batch b is `step` b of its TokenSource), without dropout;
  /// every rank gets the same value. Changes nothing the steps read. Fails when the trainer
  /// has no validation data, a batch cannot be read or a collective fails; a loss that is not
  /// finite is returned as it is. `source` (null: the validation data) evaluates other data
  /// the same way, such as the test split (it must outlive the call; the trainer must have
  /// been given validation data, which binds the `forward`).
  Expected<double> evaluate(int64_t firstBatch, int64_t count,
                            const TokenSource *source = nullptr);

  /// Records each micro-batch's forward_backward, the data-parallel reduction and the
  /// optimizer step as spans (null: no trace). The recorder must outlive the trainer.
  void setTrace(TraceRecorder *trace) { trace_ = trace; }
  /// How an fp16 plan's loss scale is chosen (default: Megatron's dynamic scaling); the
  /// scaler's state is the training state's.
  void setLossScaleOptions(const LossScaleOptions &options) { lossScaleOptions_ = options; }

  const TrainingState &state() const { return state_; }
  int64_t microBatches() const { return microBatches_; }
  int64_t microBatchSize() const { return microBatchSize_; }
  int64_t sequenceLength() const { return seqLen_; }
  /// Bytes of the buffers the trainer holds (parameters and state, gradients twice when
  /// there are several micro-batches, the token buffers and loss mask; with the distributed optimizer and
  /// one micro-batch also a buffer of the reduce-scattered gradients' size, for their packed
  /// blocks, which the second gradient buffer holds otherwise); the kernels' own temporaries
  /// come on top.
  int64_t bufferBytes() const;
  /// The most bytes this rank has held for training: bufferBytes() plus the high-water mark
  /// of the kernels' temporaries in this process (KernelMemory.h). What the plan's
  /// `predictions.memory_bytes.peak` predicts.
  int64_t peakBytes() const;

private:
  Trainer(const Plan &plan, const KernelLibrary &kernels, TrainingState state,
          const TokenSource &data, Communicator *dataParallel, const TokenSource *validation)
      : plan_(&plan), kernels_(&kernels), data_(&data), validation_(validation),
        dataParallel_(dataParallel), state_(std::move(state)) {}

  /// Sums the gradients, `lossSum` and the expert counts over the data-parallel ranks.
  Error reduceOverDataParallel(double &lossSum, int64_t step);
  /// The first sample of the kernels' micro-batch when this rank computes its micro-batch
  /// `microBatch` (of microBatchSize_ samples): the group's first under ZeRO-3.
  int64_t groupSampleBegin(int64_t microBatch) const;

  /// Calls `kernel` with a MeshCall over mesh_ (and `dropout`, if any) in its kernel
  /// context; fails with the first collective's error.
  Error callInMesh(const LoadedKernel &kernel, std::span<void *const> buffers,
                   std::string_view what, int64_t step, DropoutCall *dropout = nullptr,
                   float lossScale = 1.0f);

  const Plan *plan_;
  const KernelLibrary *kernels_;
  const TokenSource *data_;
  const TokenSource *validation_; // null: no evaluation
  Communicator *dataParallel_;
  TraceRecorder *trace_ = nullptr;
  LossScaleOptions lossScaleOptions_;
  MeshContext mesh_;
  TrainingState state_;
  /// The gradients; a scratch buffer for the second and later micro-batches.
  std::optional<GradientBuffer> grads_;
  std::vector<int32_t> tokens_, labels_;
  /// The loss mask of tokens_ (plans compiled with eod_mask_loss; empty otherwise), and the
  /// end-of-document id it masks.
  std::vector<float> lossMask_;
  int64_t endOfDocument_ = 0;
  /// The position ids of tokens_ within their documents (plans compiled with
  /// reset_position_ids; empty otherwise; Documents.h).
  std::vector<int32_t> positionIds_;
  /// The buffer of the i-th input of forward_backward or forward: tokens_, labels_, lossMask_,
  /// positionIds_ (those the plan takes).
  void *inputBuffer(int index);
  /// Reads samples [sampleBegin, + microBatchSize_) of `step` of `source` into the input
  /// buffers (the loss mask computed from the tokens).
  Error readBatch(const TokenSource &source, int64_t step, int64_t sampleBegin);
  /// forward_backward's `expert_load` outputs, their sums over the step's micro-batches then
  /// over the data-parallel ranks.
  std::vector<ExpertLoad> expertLoad_;
  StepBindings bindings_; // `forward` with validation data only
  int64_t microBatches_ = 1, microBatchSize_ = 1, seqLen_ = 1;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_TRAINER_H
