//===- TrainingRun.h - One rank's training run: state, steps, outputs -*- C++ -*-===//
//
// `runTraining(plan, options, job, log)` is what `mtrun PLAN` does on each rank once the
// command line is checked and the rank has joined its job:
//
//   - place the rank on the plan's mesh (RankMesh, collective over the job's world);
//   - start from the initial parameters or resume from a checkpoint (whole tensors, of which
//     each rank keeps its shard);
//   - train up to `targetSteps` (Trainer; PipelineTrainer for a pipeline plan; with
//     `device`, the device's DeviceTrainer), logging every `logEvery` steps, appending a JSON
//     line per step to the metrics file and checkpointing every `saveEvery` steps; an fp16
//     plan's log lines and records also give the loss scale and the skipped steps;
//   - with `evalInterval`, evaluate as Megatron does (Trainer::evaluate, under pipeline
//     parallelism PipelineTrainer::evaluate): every `evalInterval` steps and at the end of
//     training, the validation loss and perplexity over `evalIters` global batches of the
//     indexed dataset's valid split (with `fullValidation` over the whole split), as a log
//     line and a metrics record; with `skipTrain`, only one evaluation of the loaded state
//     (EvaluationSamples.h says what each evaluation reads);
//   - report the run (tokens/s, loss, the communication measured against its prediction,
//     CommunicationPrediction.h, and the kernels' arena);
//   - write the final checkpoint and the safetensors export, whole (the shards of a
//     partitioned plan gathered over the model group first).
//
// The leader (rank 0) logs, writes the metrics, checkpoints and exports; every rank takes
// part in the collectives. What the run reports goes to a TrainingLog, so the loop prints
// nothing itself: mtrun writes the log to stdout and the progress to a terminal.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_TRAININGRUN_H
#define MTC_RUNTIME_EXEC_TRAININGRUN_H

#include "runtime/comm/Communicator.h"
#include "runtime/data/BlendedDataset.h"
#include "runtime/exec/DeviceTrainer.h"
#include "runtime/exec/LossScaler.h"
#include "runtime/plan/Plan.h"
#include "runtime/support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace mtc::rt {

/// This process's place in the job: rank 0 of 1 without a launcher; otherwise the rank the
/// launcher gave, with the world communicator.
struct RankContext {
  int rank = 0;
  int size = 1;
  std::unique_ptr<Communicator> world;

  /// Rank 0 logs, writes metrics, checkpoints and exports; the others only report errors.
  bool leader() const { return rank == 0; }
};

/// What a run is asked to do (mtrun's flags, checked: counts in range, outputs writable).
struct TrainingRunOptions {
  /// Train until this many optimizer steps are done.
  int64_t targetSteps = 0;
  /// A log line for the first step, every `logEvery` steps and the last (>= 1).
  int64_t logEvery = 10;
  /// Also checkpoint to `save` every `saveEvery` steps (0: only at the end).
  int64_t saveEvery = 0;
  /// Sequences per step (0: the plan's `global_batch`).
  int64_t globalBatch = 0;
  /// Threads for initialisation (0: all cores).
  unsigned threads = 0;
  /// Train on the bytes of this file (none: the built-in synthetic task).
  std::optional<std::string> data;
  /// Or on the train split of this Megatron indexed dataset (PREFIX.idx and PREFIX.bin) or
  /// blend of them (`--data-path 0.3 A 0.7 B`), in Megatron's sample order for `targetSteps`
  /// x the global batch samples.
  std::optional<DataBlend> dataPath;
  /// Megatron's --split of `dataPath` (none: Megatron's default "969, 30, 1").
  std::optional<std::string> split;
  /// Megatron's --data-cache-path: the directory where the indices of `dataPath`'s orders are
  /// kept as .npy files (runtime/data/GptIndexCache.h): loaded when there, else built and
  /// written. Rank 0 opens the data first; the other ranks wait for it and then load what it
  /// wrote (or, without a shared directory, build and write their own).
  std::optional<std::string> dataCachePath;
  /// The samples `dataPath`'s order is built for (none: `targetSteps` x the global batch). A
  /// run stopped early and resumed keeps its order when both give the same number.
  std::optional<int64_t> trainSamples;
  /// Evaluate every `evalInterval` steps and at the end of training (0: never): the mean loss
  /// over `evalIters` global batches of the valid split of `dataPath` (which it needs), in
  /// Megatron's order for (train iterations / evalInterval + 1) x evalIters global batches
  /// (a pipeline plan's through its stages' chunk forwards, PipelineTrainer::evaluate).
  int64_t evalInterval = 0;
  /// Global batches of each evaluation and of the test split's (0: with `fullValidation`
  /// only, no test evaluation).
  int64_t evalIters = 100;
  /// Megatron's --full-validation: every evaluation reads the whole valid split (one epoch
  /// of it, in whole global batches: EvaluationSamples.h) instead of `evalIters` batches.
  /// `dataPath` must be one dataset (no blend).
  bool fullValidation = false;
  /// Megatron's --skip-train: no step; the state (of `load`, else the initial parameters) is
  /// evaluated once on the valid split (its first `evalIters` batches, or the whole split
  /// with `fullValidation`) and on the test split, as at the end of training, and the run
  /// ends. Needs `dataPath`; `targetSteps`, `evalInterval` and `trainSamples` are not used;
  /// nothing is saved (`save` must be unset).
  bool skipTrain = false;
  /// Resume from the checkpoint in this directory.
  std::optional<std::string> load;
  /// Write a checkpoint to this directory at the end (and every `saveEvery` steps).
  std::optional<std::string> save;
  /// Append one JSON line per step to this file.
  std::optional<std::string> metrics;
  /// Write the parameters to this safetensors file at the end.
  std::optional<std::string> exportSafetensors;
  /// Write the job's timeline to this file at the end (a Chrome trace, Trace.h).
  std::optional<std::string> trace;
  /// How an fp16 plan's loss scale is chosen (LossScaler.h; unused by other plans).
  LossScaleOptions lossScaling;
  /// Where the steps run: none: this CPU (Trainer, PipelineTrainer); else a device's host
  /// code and trainer (DeviceTrainer.h; mtrun --device cuda), for a plan without a pipeline;
  /// with several ranks the device trainer joins its own communicators (the CUDA trainer's
  /// NCCL world), the run's world still carrying the checkpoints' and exports' gathers.
  std::optional<DeviceBackend> device;
  /// With a device: the optimizer step runs on the host over the plan's x86 kernels, the
  /// state never on the device (optimizer offload, DeviceTrainer.h; mtrun
  /// --optimizer-cpu-offload).
  bool optimizerCpuOffload = false;
  /// Megatron's --eod-mask-loss was asked for: the plan must have been compiled with it
  /// (Plan::eodMaskLoss), whose step masks the loss whether asked or not.
  bool eodMaskLoss = false;
  /// Megatron's --reset-position-ids was asked for: the plan must have been compiled with it
  /// (Plan::resetPositionIds), whose step takes the position ids whether asked or not.
  bool resetPositionIds = false;
  /// Megatron's --reset-attention-mask was asked for: the plan must have been compiled with
  /// it (Plan::resetAttentionMask).
  bool resetAttentionMask = false;
  /// The data's end-of-document id (the tokenizer's), which a plan compiled with
  /// eod_mask_loss masks the loss at and one compiled with reset_position_ids restarts the
  /// positions after.
  std::optional<int64_t> endOfDocument;
};

/// Where a run reports. Only the leader's run reports; the others are silent.
class TrainingLog {
public:
  virtual ~TrainingLog() = default;
  /// Lines of the log, each ending in '\n'.
  virtual void write(std::string_view text) = 0;
  /// `done` of `target` steps are taken (a progress indicator, replaced by the next call).
  virtual void progress(int64_t /*done*/, int64_t /*target*/) {}
  /// Takes the progress indicator away (before a log line, an error or the end).
  virtual void clearProgress() {}
  /// A checkpoint of step `step` was written to `dir` (on the way or at the end).
  virtual void checkpointWritten(const std::string & /*dir*/, int64_t /*step*/) {}
};

/// Checks what can be checked of the run's indexed data before the ranks start, without the
/// plan's compiled step: --eod-mask-loss against the plan (and a plan masking the loss against
/// data without documents), the files of each `dataPath` prefix, the split and the seed, and
/// that the train split (and with evaluation the valid split) of each has documents holding
/// tokens; the errors the ranks would give. For a launcher, so that its ranks do not fail one by one.
Error checkTrainingData(const Plan &plan, const TrainingRunOptions &options);

/// Runs `options` on this rank of `job` (every rank of the job calls it, with the same plan
/// and options). Fails on the first error of any step, checkpoint, export or collective; the
/// message does not name the rank.
Error runTraining(const Plan &plan, const TrainingRunOptions &options, const RankContext &job,
                  TrainingLog &log);

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_TRAININGRUN_H
