//===- PipelineTrainer.h - One pipeline stage's training step -----*- C++ -*-===//
//
// The Trainer of a rank of one pipeline stage (docs/runtime.md, "Pipeline parallelism"). Each
// step runs the stage's task list of the plan's schedule for this rank's m micro-batches
// (ScheduleExecutor.h) with this class as its StageCompute:
//
//   - forward / backward / backward_input / backward_weight of chunk c, micro-batch i call
//     `chunk<c>.*` on the stage's parameters (a layer parameter's slice of the chunk's
//     layers, PipelineStage.h), with the dropout key of the global sample the micro-batch
//     starts at, so masks are those of the single-rank run; the rank's micro-batch i is the
//     global micro-batch dp index + i x dp, as the Trainer deals them;
//   - a chunk function takes the data inputs it reads, by name (the token ids for the
//     embedding, the labels and eod_mask_loss's loss mask for the loss, reset_position_ids'
//     position ids for the position table): the stage reads a micro-batch's tokens and
//     labels when one of its functions first takes either, and derives the mask or the
//     position ids from the tokens as the Trainer does, only when a function takes them;
//   - activations, their gradients, the residuals a forward keeps for its backward and the
//     stash backward_input keeps for backward_weight live in buffers per (chunk, micro-batch)
//     from the task that writes them to the last task that reads them (a send's until the
//     executor gives it back, `sent`: where it is known to have arrived, else at the step's
//     end); a chunk's output for the next chunk
//     on the same stage is written straight into that chunk's input;
//   - each backward's gradients (the chunk's part) are added into the stage's gradients
//     (GradientBuffer::addPart; under ZeRO-2 a gradient the stage shards over dp is
//     reduce-scattered at once and added to the stage's shard);
//   - reduce_gradients sums a shared parameter's gradient (its shard under ZeRO-2) over the
//     stages holding it (the tied embedding's group of the first and last stage), then over
//     the data-parallel ranks (GradientBuffer.h: all-reduce, or the distributed optimizer's
//     reduce-scatter, which ZeRO-2 has done already);
//   - optimizer_step: `stage<s>.grad_squares` gives the stage's part of the squared gradient
//     norm, summed over the pipeline group; `stage<s>.optimizer_step` takes the global norm
//     (clipping covers every stage) and updates the stage's parameters and state.
//
// The loss of a step is the mean over the micro-batches of the losses of the stage running
// the last chunk, summed over the data-parallel ranks and then shared with every stage, so
// every rank reports the same. So are the tokens per expert of an MoE model: each forward
// returns the counts of its chunk's layers, which the stage adds up over its micro-batches
// into the rows of those layers (PipelineExpertLoad), sums over the data-parallel ranks
// beside the loss and shares with every stage in the pipeline group's all-reduce of the
// gradient norm, where each stage contributes its rows and zeros for the others.
//
// Evaluation (`evaluate`, mtrun --eval-interval) runs the forward-only task lists of
// EvaluationSchedule.h through a second executor over the same links: for each validation
// global batch, the forward of every chunk and micro-batch (the rank's micro-batches dealt
// as in a step), without dropout, without the loss scale, with no gradient, no backward and
// no optimizer; what a forward saves for its backward is dropped as soon as it returns. The
// validation loss is Trainer::evaluate's: the mean of the micro-batch losses of the stage
// running the last chunk, summed over the data-parallel ranks and shared with every stage.
// Nothing of training changes (the state, the step's data and dropout keys, the measured
// times and the memory high-water marks), so the steps after an evaluation are bit for bit
// those of a run without it.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_PIPELINETRAINER_H
#define MTC_RUNTIME_EXEC_PIPELINETRAINER_H

#include "runtime/data/TokenSource.h"
#include "runtime/exec/GradientBuffer.h"
#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/PipelineLinks.h"
#include "runtime/exec/PipelineStage.h"
#include "runtime/exec/RankMesh.h"
#include "runtime/exec/ScheduleExecutor.h"
#include "runtime/exec/Trainer.h"

#include <map>
#include <memory>
#include <tuple>

namespace mtc::rt {

class PipelineTrainer final : public StageCompute {
public:
  /// The trainer of this rank's stage (mesh.stage()) of `plan`. `state` is the stage's
  /// (takeStage of the rank's shards), `globalBatch` as for the Trainer. Collective over the
  /// pipeline group (it builds the links between stages). `trace` (optional) records every
  /// task (ScheduleExecutor.h). `validation` (null: no evaluation) is what `evaluate` reads.
  /// Everything given must outlive the trainer.
  /// `endOfDocument` is the data's end-of-document id, which a plan compiled with
  /// eod_mask_loss or reset_position_ids needs (as for the Trainer).
  static Expected<std::unique_ptr<PipelineTrainer>>
  create(const Plan &plan, const KernelLibrary &kernels, TrainingState state,
         const TokenSource &data, int64_t globalBatch, const RankMesh &mesh,
         TraceRecorder *trace = nullptr, const TokenSource *validation = nullptr,
         std::optional<int64_t> endOfDocument = std::nullopt);

  /// One step of the schedule. With loss scaling (fp16) a gradient norm that is not finite
  /// skips the optimizer step (Trainer::step).
  Expected<StepStats> step();
  /// The validation loss of the current parameters over global batches [firstBatch,
  /// firstBatch + count) of the validation data (batch b is `step` b of its TokenSource), as
  /// Trainer::evaluate defines it, the same on every rank (see the file comment). Collective
  /// over the pipeline and data-parallel groups. Fails when the trainer has no validation
  /// data, a batch cannot be read, a forward or a message fails. `source` (null: the
  /// validation data) evaluates other data the same way (Trainer::evaluate).
  Expected<double> evaluate(int64_t firstBatch, int64_t count,
                            const TokenSource *source = nullptr);
  /// As Trainer::setLossScaleOptions.
  void setLossScaleOptions(const LossScaleOptions &options) { lossScaleOptions_ = options; }

  /// The stage's parameters and state (stagePlan()'s tables).
  const TrainingState &state() const { return state_; }
  const Plan &stagePlan() const { return stagePlan_; }
  const StageHoldings &holdings() const { return holdings_; }
  const PipelineSchedule &schedule() const { return *schedule_; }
  /// Every step's measured times (for the bubble fractions).
  const std::vector<StageStepTimes> &stepTimes() const { return times_; }
  /// The micro-batches of the global batch (those of every data-parallel rank).
  int64_t microBatches() const { return totalMicroBatches_; }
  int64_t microBatchSize() const { return microBatchSize_; }
  int64_t sequenceLength() const { return seqLen_; }
  /// Bytes of the parameters, state, gradients and the most buffers (activations, messages,
  /// residuals, stash) held at once.
  int64_t bufferBytes() const;
  /// bufferBytes() plus the kernels' temporaries' high-water mark.
  int64_t peakBytes() const;
  /// Bytes this rank has sent over the communicators the trainer made: the links between
  /// stages and the shared parameters' groups (the mesh's are RankMesh::bytesSent).
  uint64_t bytesSent() const;
  /// The most bytes of residuals and stash held at once: what the schedule's
  /// `activation_bytes` predicts (for whole tensors; a tensor-parallel rank's are smaller).
  int64_t activationPeakBytes() const { return peakSavedBytes_; }

  // StageCompute.
  Error compute(const ScheduleTask &task) override;
  Expected<MessageBuffer> message(const ScheduleTask &task) override;
  Error reduceGradients() override;
  Error optimizerStep() override;
  void sent(const ScheduleTask &send) override;

private:
  PipelineTrainer(const Plan &plan, const KernelLibrary &kernels, const TokenSource &data,
                  const RankMesh &mesh)
      : plan_(&plan), kernels_(&kernels), data_(&data), mesh_(&mesh) {}

  /// Everything create does before its collectives: the stage's tables, the batch, the
  /// schedule, the functions its tasks call, the gradient and optimizer buffers.
  Error prepare(TrainingState state, int64_t globalBatch);

  /// What a (chunk, micro-batch) buffer holds. `index`: a residual's or stash entry's.
  enum class Held { Input, Output, InputGrad, OutputGrad, Residual, Stash };
  using Key = std::tuple<Held, int64_t, int64_t, int64_t>; // what, chunk, micro-batch, index
  /// The buffer of `key`, made with `elements` values when it does not exist (0: it must).
  Expected<float *> buffer(const Key &key, size_t elements, std::string_view what);
  void release(const Key &key);
  /// Releases the residuals and stash of chunk `chunk`, micro-batch `microBatch`.
  void releaseSaved(int64_t chunk, int64_t microBatch);
  /// Counts `bytes` more (or fewer) held in buffers of `key`'s kind.
  void countHeld(const Key &key, int64_t bytes);
  /// The data input `name` of the rank's micro-batch `microBatch` (of the step, or of the
  /// validation batch being evaluated), for a chunk function taking it: the token ids and
  /// labels are read from the data (both at once, by the first function taking either), the
  /// loss mask and the position ids derived from the token ids when first taken, so that a
  /// stage reads and derives only what its chunks take.
  Expected<void *> dataInput(std::string_view name, int64_t microBatch);
  /// Whether dataInput makes `name`.
  static bool isDataInput(std::string_view name);
  int64_t sampleBegin(int64_t microBatch) const {
    return (dpIndex_ + microBatch * dpSize_) * microBatchSize_;
  }
  /// The first sample of the kernels' micro-batch in this rank's micro-batch `microBatch`:
  /// under ZeRO-3 the data-parallel group's (the kernels take its part dpIndex_).
  int64_t kernelSampleBegin(int64_t microBatch) const {
    return plan_->shardsParameters() ? microBatch * dpSize_ * microBatchSize_
                                 : sampleBegin(microBatch);
  }
  Error callChunk(const LoadedKernel &kernel, const ScheduleTask &task, std::string_view role);
  Error callStep(const LoadedKernel &kernel, std::span<void *const> buffers, std::string_view what);
  /// The stage's parameters and optimizer states by name (every call binds its buffers by
  /// name), and the index of `name` in one of them.
  using NameIndex = std::map<std::string, size_t, std::less<>>;
  static std::optional<size_t> indexIn(const NameIndex &index, std::string_view name);

  const Plan *plan_;
  const KernelLibrary *kernels_;
  const TokenSource *data_;
  const RankMesh *mesh_;
  StageHoldings holdings_;
  Plan stagePlan_;
  const PipelineSchedule *schedule_ = nullptr;
  std::optional<PipelineLinks> links_;
  std::optional<ScheduleExecutor> executor_;
  /// Evaluation: the validation data (null: none), the forward-only lists and their
  /// executor, and the batch being evaluated (none: a training step runs) and its data.
  const TokenSource *validation_ = nullptr;
  const TokenSource *evaluationSource_ = nullptr;
  std::optional<PipelineSchedule> evaluationSchedule_;
  std::optional<ScheduleExecutor> evaluationExecutor_;
  std::optional<int64_t> evaluationBatch_;
  /// The stages holding shared parameters (the tied embedding), when they differ: their
  /// group (null on a stage outside it) and the parameters (stage table indices) summed
  /// over it.
  struct SharedGroup {
    std::vector<int64_t> stages;
    std::unique_ptr<Communicator> comm;
    std::vector<size_t> params;
  };
  std::vector<SharedGroup> sharedGroups_;
  NameIndex paramIndex_, stateIndex_;
  TrainingState state_;
  std::optional<GradientBuffer> grads_;
  std::map<Key, std::vector<float>> buffers_;
  /// The data inputs of the micro-batches of the step (or validation batch) the stage's
  /// chunks have taken so far (dataInput), by micro-batch: empty until taken.
  struct MicroBatchData {
    std::vector<int32_t> tokens, labels, positionIds;
    std::vector<float> lossMask;
  };
  std::map<int64_t, MicroBatchData> batches_;
  /// The data's end-of-document id (the loss mask's and the position ids'; 0 when the plan
  /// takes neither).
  int64_t endOfDocument_ = 0;
  /// Bytes held in buffers (messages included), and of those in residuals and stash, now
  /// and at most.
  int64_t heldBytes_ = 0, peakHeldBytes_ = 0, savedBytes_ = 0, peakSavedBytes_ = 0;
  std::vector<StageStepTimes> times_;
  int64_t microBatches_ = 1, totalMicroBatches_ = 1, microBatchSize_ = 1, seqLen_ = 1;
  int64_t dpIndex_ = 0, dpSize_ = 1;
  int64_t step_ = 0;
  double lossSum_ = 0;
  /// The tokens per expert: where each row lies, the sums of the step's micro-batches (the
  /// stage's rows; after the optimizer step every stage's), one forward's counts per
  /// expert_load output, and the step's rows as StepStats reports them.
  PipelineExpertLoad expertLoad_;
  std::vector<int64_t> expertLoadSum_;
  std::vector<std::vector<int64_t>> expertLoadCounts_;
  std::vector<std::vector<int64_t>> tokensPerExpert_;
  /// The positions of the stage's rows in expertLoadSum_, as (first value, values).
  std::vector<std::pair<size_t, size_t>> stageExpertLoadRanges() const;
  float gradNorm_ = 0, lr_ = 0;
  /// fp16: how the loss scale is chosen, the step's scaler (from the state's), and whether
  /// the step's gradients overflowed (its optimizer left the parameters and states as they were).
  LossScaleOptions lossScaleOptions_;
  std::optional<LossScaler> scaler_;
  bool skipped_ = false;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_PIPELINETRAINER_H
