//===- TrainingRun.cpp - One rank's training run: state, steps, outputs ---===//

#include "runtime/exec/TrainingRun.h"

#include "runtime/comm/Communicator.h"
#include "runtime/data/MetricsWriter.h"
#include "runtime/data/TokenSource.h"
#include "runtime/exec/Checkpoint.h"
#include "runtime/exec/CommunicationPrediction.h"
#include "runtime/exec/EvaluationSamples.h"
#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/KernelMemory.h"
#include "runtime/exec/PipelineTrainer.h"
#include "runtime/exec/RankMesh.h"
#include "runtime/exec/Trace.h"
#include "runtime/exec/Trainer.h"
#include "runtime/exec/TrainingState.h"
#include "runtime/support/Safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <optional>
#include <sys/resource.h>

namespace mtc::rt {
namespace {

/// printf into a string, for the log's lines.
[[gnu::format(printf, 1, 2)]] std::string formatText(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0)
    std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  va_end(args);
  return out;
}

int64_t peakResidentBytes() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0)
    return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024; // Linux reports KiB
}

std::string mebibytes(int64_t bytes) {
  return formatText("%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

std::string withThousands(int64_t n) {
  std::string digits = concat(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

/// " (best possible 1.2799)" when the data's best loss is known.
std::string bestLossNote(const TokenSource &data) {
  if (!data.bestLoss())
    return "";
  return formatText(" (best possible %.4f)", *data.bestLoss());
}

Error exportParameters(const Plan &plan, const TrainingState &whole, const std::string &file) {
  // The real vocabulary only (Checkpoint.h): an export is the same model under every tp.
  std::optional<TrainingState> real;
  if (plan.vocabularyPadded())
    real = withRealVocabulary(plan, whole);
  const TrainingState &state = real ? *real : whole;
  std::vector<TensorRef> refs = state.paramRefs();
  SafetensorsMetadata metadata = {
      {"format", "mtc"},
      {"model", plan.model},
      {"seed", concat(plan.seed)},
      {"step", concat(state.step)},
      {"plan_sha256", plan.planSha256},
  };
  return writeSafetensors(file, refs, metadata);
}

/// The whole tensors of `state` (this rank's shards) for a checkpoint or an export. Every rank
/// calls it: when the plan is partitioned the ranks of the first model group (data-parallel
/// index 0; every rank when data parallelism is a mesh axis, the optimizer state being split
/// over it too) all-gather the shards over it, and the leader gets the whole tensors. Returns
/// nothing when `state` is whole already (no partitioning) or this rank writes nothing.
Expected<std::optional<TrainingState>> wholeState(const Plan &plan, const TrainingState &state,
                                                  const RankMesh &mesh, bool leader) {
  if (!mesh.partitioned())
    return std::optional<TrainingState>(); // `state` is whole already
  if (!mesh.inFirstModelGroup())
    return std::optional<TrainingState>();
  Expected<TrainingState> global = gatherState(plan, state, mesh);
  if (!global)
    return global.takeError();
  if (!leader)
    return std::optional<TrainingState>();
  return std::optional<TrainingState>(std::move(*global));
}

/// "tp=2 x data parallel 2" for the log; "dp=2 x tp=2, distributed optimizer over dp" when
/// data parallelism is a mesh axis ("..., distributed optimizer and gradient shards (ZeRO-2)
/// over dp" under ZeRO-2).
std::string describeMesh(const Plan &plan, const RankMesh &mesh) {
  std::string s;
  for (const MeshAxis &a : plan.mesh)
    s.append(s.empty() ? "" : " x ").append(concat(a.name, '=', a.size));
  if (plan.dataParallelAxis)
    return concat(s,
                  plan.zeroStage == 3   ? ", parameters, gradients and optimizer state sharded "
                                          "(ZeRO-3) over "
                  : plan.zeroStage == 2 ? ", distributed optimizer and gradient shards (ZeRO-2) over "
                                        : ", distributed optimizer over ",
                  plan.mesh[*plan.dataParallelAxis].name);
  return concat(s, " x data parallel ", mesh.placement().dpSize);
}

/// The run's data: the training samples and, with evaluation, the validation samples and
/// the test samples (none when the test split has no documents or --eval-iters is 0).
struct RunData {
  TokenSource train;
  std::optional<TokenSource> validation;
  std::optional<TokenSource> test;
  /// With --full-validation: the batches each evaluation reads of the whole valid split.
  std::optional<FullValidation> full;
};

/// Whether the run evaluates: every --eval-interval steps, or once with --skip-train.
bool evaluates(const TrainingRunOptions &options) {
  return options.evalInterval > 0 || options.skipTrain;
}

/// The flag that asks for the evaluation, for the messages about its data.
const char *evaluationFlag(const TrainingRunOptions &options) {
  return options.fullValidation ? "--full-validation"
         : options.skipTrain    ? "--skip-train"
                                : "--eval-interval";
}

/// What the orders of the run's indexed datasets share: the split, the seed, the vocabulary.
GptDataset::Options indexedDataOptions(const Plan &plan, const TrainingRunOptions &options) {
  GptDataset::Options gpt;
  gpt.split = options.split.value_or(std::string(kMegatronDefaultSplit));
  gpt.seed = plan.seed;
  gpt.vocab = plan.vocabularySize().value_or(0);
  if (options.dataCachePath)
    gpt.cachePath = *options.dataCachePath;
  return gpt;
}

/// Whether any dataset of `data` has documents in its test split (`--split 100,0,0`, or a
/// split whose test share rounds to no document, has none: then nothing is evaluated on it,
/// as Megatron builds no test set for a split of weight 0). A blend whose test split is empty
/// for some datasets only is opened, and gives the error of the first of those.
Expected<bool> testSplitHasDocuments(const DataBlend &data, GptDataset::Options options) {
  options.which = DataSplit::Test;
  for (const std::string &prefix : data.prefixes) {
    options.prefix = prefix;
    Expected<bool> has = GptDataset::splitHasDocuments(options);
    if (!has || *has)
      return has;
  }
  return false;
}

/// --full-validation reads one indexed dataset's valid split whole: Megatron builds a
/// whole-split blend only of datasets without weights, and mtrun none.
Error checkFullValidationData(const TrainingRunOptions &options) {
  if (options.fullValidation && options.dataPath && !options.dataPath->single())
    return makeError("--full-validation reads one dataset's valid split whole; --data-path ",
                     options.dataPath->describe(),
                     " is a blend (Megatron builds a whole-split blend only without weights "
                     "and mtrun not at all): give one PREFIX");
  return Error::success();
}

/// --eod-mask-loss, --reset-position-ids and --reset-attention-mask against the plan, and
/// what the plan computes from the documents (its loss mask, its position ids) against the
/// data: one row per setting, the same two checks for each.
Error checkLossMask(const Plan &plan, const TrainingRunOptions &options) {
  struct DocumentSetting {
    bool asked, compiled;
    const char *flag;      // mtrun's
    const char *without;   // what a plan compiled without it lacks
    const char *recompile; // how to compile it with the setting
    const char *does;      // what a plan compiled with it does with the documents
  };
  const DocumentSetting settings[] = {
      {options.eodMaskLoss, plan.eodMaskLoss, "--eod-mask-loss",
       "its step takes no loss mask",
       "`mtc compile --eod-mask-loss` or `train { eod_mask_loss on }`",
       "masks the loss at end-of-document tokens (compiled with eod_mask_loss)"},
      {options.resetPositionIds, plan.resetPositionIds, "--reset-position-ids",
       "its step takes no position ids", "`mtc compile --reset-position-ids`",
       "restarts the positions at each document (compiled with reset_position_ids)"},
      {options.resetAttentionMask, plan.resetAttentionMask, "--reset-attention-mask",
       "its attention crosses documents", "`mtc compile --reset-attention-mask`",
       "attends within each document (compiled with reset_attention_mask)"},
  };
  for (const DocumentSetting &s : settings) {
    if (s.asked && !s.compiled)
      return makeError(s.flag, ": ", plan.dir.string(), " was compiled without it (", s.without,
                       "): recompile it with ", s.recompile);
    if (s.compiled && !options.data && !options.dataPath)
      return makeError(plan.dir.string(), " ", s.does,
                       ", but the synthetic task has no documents: train on --data-path PREFIX "
                       "or --data FILE");
  }
  return Error::success();
}

/// The run's data. An indexed dataset's (or a blend's) sample order depends on the sequence
/// length and the global batch, which the compiled step gives, and on the samples the run
/// trains on (Megatron's train_iters x global_batch_size, or its --train-samples: a resumed
/// run reads the order of the run it resumes when both have the same target or the same train
/// samples). The validation samples are the valid split's own order (a blend's blended apart
/// from its train split's), for Megatron's number of them:
/// (train_iters / eval_interval + 1) x eval_iters global batches, train_iters being
/// --train-samples / global batch when given. The test samples are the test split's own order
/// for --eval-iters global batches (Megatron's test_samples), read from its start at the end
/// of training.
Expected<RunData> openData(const Plan &plan, const TrainingRunOptions &options,
                           const KernelLibrary &kernels) {
  const int64_t vocab = plan.vocabularySize().value_or(0);
  if (Error err = checkLossMask(plan, options); !err.ok())
    return err;
  const std::string flag = evaluationFlag(options);
  if (evaluates(options) && !options.dataPath)
    return makeError(flag, " needs --data-path PREFIX (evaluation reads its valid split; "
                           "the synthetic task and --data FILE have none)");
  if (options.skipTrain && options.save)
    return makeError("--skip-train trains nothing: there is no checkpoint for --save to write");
  if (Error err = checkFullValidationData(options); !err.ok())
    return err;
  if (evaluates(options) && options.evalIters < (options.fullValidation ? 0 : 1))
    return makeError("--eval-iters ", options.evalIters, " evaluates nothing");
  if (options.data) {
    Expected<TokenSource> text = TokenSource::text(*options.data, vocab, plan.seed);
    if (!text)
      return text.takeError();
    return RunData{std::move(*text), std::nullopt, std::nullopt, std::nullopt};
  }
  if (!options.dataPath) {
    Expected<TokenSource> synthetic = TokenSource::synthetic(vocab, plan.seed);
    if (!synthetic)
      return synthetic.takeError();
    return RunData{std::move(*synthetic), std::nullopt, std::nullopt, std::nullopt};
  }
  const KernelFunction *step = plan.x86Kernels ? batchFunction(*plan.x86Kernels) : nullptr;
  if (!step)
    step = kernels.forwardBackward().function;
  if (!step)
    return makeError(plan.dir.string(), ": the plan's kernels take no batch of tokens");
  Expected<int64_t> microBatches = countMicroBatches(plan, *step, options.globalBatch, 0);
  if (!microBatches)
    return microBatches.takeError();
  // [batch, seq], as countMicroBatches checked.
  const int64_t microBatch = tokensInput(*step)->dims[0].size,
                seqLen = tokensInput(*step)->dims[1].size;
  GptDataset::Options gpt = indexedDataOptions(plan, options);
  gpt.seqLen = seqLen;
  gpt.globalBatch = *microBatches * microBatch;
  gpt.numSamples = options.targetSteps * gpt.globalBatch;
  // --skip-train reads no training sample: the train split's files and documents are
  // checked, for an order of one batch (Megatron builds its dataset, but no loader).
  if (options.skipTrain)
    gpt.numSamples = gpt.globalBatch;
  else if (options.trainSamples) {
    if (*options.trainSamples < gpt.numSamples)
      return makeError("--train-samples ", *options.trainSamples, " is fewer than the ",
                       gpt.numSamples, " samples of ", options.targetSteps, " steps of ",
                       gpt.globalBatch);
    gpt.numSamples = *options.trainSamples;
  }
  Expected<TokenSource> train = TokenSource::indexed(*options.dataPath, gpt);
  if (!train)
    return train.takeError();
  if (!evaluates(options))
    return RunData{std::move(*train), std::nullopt, std::nullopt, std::nullopt};
  GptDataset::Options valid = gpt;
  valid.which = DataSplit::Valid;
  if (options.fullValidation) {
    // One epoch of the split, shuffled (Megatron's num_samples None): the fewest epochs that
    // hold one sample.
    valid.numSamples = 1;
  } else {
    const int64_t trainIters =
        options.trainSamples ? *options.trainSamples / gpt.globalBatch : options.targetSteps;
    Expected<int64_t> samples = validationOrderSamples(
        trainIters, options.evalInterval, options.evalIters, gpt.globalBatch, options.skipTrain);
    if (!samples)
      return samples.takeError().withContext(
          options.skipTrain ? concat("--skip-train --eval-iters ", options.evalIters)
                            : concat("--eval-interval ", options.evalInterval, " --eval-iters ",
                                     options.evalIters));
    valid.numSamples = *samples;
  }
  Expected<TokenSource> validation = TokenSource::indexed(*options.dataPath, valid);
  if (!validation)
    return validation.takeError().withContext(flag);
  std::optional<FullValidation> full;
  if (options.fullValidation) {
    std::optional<TokenSource::Order> order = validation->order();
    if (!order || order->epochs != 1)
      return makeError(flag, ": one epoch of the valid split of ", options.dataPath->describe(),
                       " holds no sample of ", seqLen + 1, " tokens");
    Expected<FullValidation> batches = fullValidation(order->samples, gpt.globalBatch);
    if (!batches)
      return batches.takeError().withContext(flag);
    full = *batches;
  }
  Expected<bool> hasTest = testSplitHasDocuments(*options.dataPath, gpt);
  if (!hasTest)
    return hasTest.takeError().withContext(concat(flag, " (the test split)"));
  std::optional<TokenSource> test;
  if (*hasTest && options.evalIters > 0) {
    GptDataset::Options testOptions = gpt;
    testOptions.which = DataSplit::Test;
    testOptions.numSamples = options.evalIters * gpt.globalBatch;
    Expected<TokenSource> source = TokenSource::indexed(*options.dataPath, testOptions);
    if (!source)
      return source.takeError().withContext(concat(flag, " (the test split)"));
    test.emplace(std::move(*source));
  }
  return RunData{std::move(*train), std::move(*validation), std::move(test), full};
}

} // namespace

Error checkTrainingData(const Plan &plan, const TrainingRunOptions &options) {
  if (Error err = checkLossMask(plan, options); !err.ok())
    return err;
  if (!options.dataPath)
    return Error::success();
  GptDataset::Options gpt = indexedDataOptions(plan, options);
  const std::string flag = evaluationFlag(options);
  if (Error err = checkFullValidationData(options); !err.ok())
    return err;
  for (DataSplit split : {DataSplit::Train, DataSplit::Valid, DataSplit::Test}) {
    if (split != DataSplit::Train && !evaluates(options))
      break;
    if (split == DataSplit::Test) {
      // An empty test split, or --eval-iters 0, is not evaluated (openData).
      if (options.evalIters <= 0)
        break;
      Expected<bool> hasTest = testSplitHasDocuments(*options.dataPath, gpt);
      if (!hasTest)
        return hasTest.takeError().withContext(concat(flag, " (the test split)"));
      if (!*hasTest)
        break;
    }
    gpt.which = split;
    for (const std::string &prefix : options.dataPath->prefixes) {
      gpt.prefix = prefix;
      if (Error err = GptDataset::check(gpt); !err.ok())
        return split == DataSplit::Train ? err
               : split == DataSplit::Valid
                   ? std::move(err).withContext(flag)
                   : std::move(err).withContext(concat(flag, " (the test split)"));
    }
  }
  return Error::success();
}

namespace {

/// Makes the host's copy of a trainer's state current: a device trainer's lives on the
/// device (DeviceTrainer.h); the CPU trainers' is the state itself.
Error syncHostState(const Trainer &) { return Error::success(); }
Error syncHostState(const PipelineTrainer &) { return Error::success(); }
Error syncHostState(DeviceTrainer &trainer) { return trainer.syncState(); }

/// What the step log calls the trainer's peak memory.
const char *memoryName(const Trainer &) { return "mem"; }
const char *memoryName(const PipelineTrainer &) { return "mem"; }
const char *memoryName(const DeviceTrainer &) { return "device mem"; }

/// The run on one rank once its mesh is known.
class Run {
public:
  Run(const Plan &plan, const TrainingRunOptions &options, const RankContext &job,
      const RankMesh &mesh, TrainingLog &log, TraceRecorder *trace)
      : plan_(plan), options_(options), job_(job), mesh_(mesh), log_(log), trace_(trace) {}

  /// The state at the start: the checkpoint of `options.load` (this rank's shard of it) or
  /// the initial parameters.
  Expected<TrainingState> startState();
  /// Trains `state` up to `options.targetSteps`, logging and checkpointing on the way.
  Error train(TrainingState &state);
  /// The final checkpoint and export of `state`.
  Error writeOutputs(const TrainingState &state);

private:
  /// The run's data (openData). With an index cache and several ranks, rank 0 opens it first,
  /// building and writing the cache's missing entries, and tells the others (a broadcast of
  /// whether it succeeded), which then open it from the cache: one rank builds, no two write
  /// at once on a shared directory.
  Expected<RunData> openRunData(const KernelLibrary &kernels);
  /// Logs on the leader only.
  void print(const std::string &text) {
    if (job_.leader())
      log_.write(text);
  }
  /// Writes the checkpoint of `state` (shards gathered into whole tensors; only the leader
  /// writes). Every rank calls it.
  Error saveDuringRun(const TrainingState &state);
  /// Writes `whole` to `options.save` (the leader only) and tells the log.
  Error writeCheckpoint(const TrainingState &whole, int64_t step);
  /// The whole model of `state` (this rank's: its shards, of its stage under pipeline
  /// parallelism) on the leader; nothing elsewhere, and nothing when `state` is whole
  /// already. Every rank calls it.
  Expected<std::optional<TrainingState>> wholeModel(const TrainingState &state);
  /// Logs each stage's peak memory and activations, and the bytes each stage sent per step
  /// (`sentPerStep_`), against the plan's predictions (collective over the pipeline group).
  Error reportStages(const PipelineTrainer &trainer);
  /// Bytes this rank has sent: over the mesh's communicators, and under pipeline parallelism
  /// over the links and groups of its stage too.
  uint64_t bytesSent(const Trainer &) const { return mesh_.bytesSent(); }
  uint64_t bytesSent(const DeviceTrainer &trainer) const {
    return mesh_.bytesSent() + trainer.bytesSent();
  }
  uint64_t bytesSent(const PipelineTrainer &trainer) const {
    return mesh_.bytesSent() + trainer.bytesSent();
  }
  /// Evaluation number `index` (of the run's order: the one at step (index + 1) x the
  /// interval, or with `end` the one at the end of training) of the trainer's parameters
  /// (a Trainer or a PipelineTrainer), logged and recorded in the metrics (every rank calls
  /// it). With --full-validation every evaluation reads the whole valid split (`full_`).
  /// With `test`, the evaluation of the test split at the end of training instead: its
  /// first --eval-iters batches.
  template <class StepTrainer>
  Error evaluate(StepTrainer &trainer, int64_t index, bool end,
                 std::optional<MetricsWriter> &metrics, const TokenSource *test = nullptr);
  /// The step loop over `trainer` (a Trainer or a PipelineTrainer), which evaluates on
  /// `validation` (null: no evaluation) and at the end on `test` (null: none).
  template <class StepTrainer>
  Error runSteps(StepTrainer &trainer, TrainingState &state, const TokenSource &data,
                 const TokenSource *validation, const TokenSource *test,
                 const KernelLibrary &kernels, std::optional<MetricsWriter> &metrics);

  const Plan &plan_;
  const TrainingRunOptions &options_;
  const RankContext &job_;
  const RankMesh &mesh_;
  TrainingLog &log_;
  TraceRecorder *trace_; // null without --trace
  /// Under pipeline parallelism: this rank's stage and its tables (the state is the stage's).
  std::optional<StageHoldings> stage_;
  std::optional<Plan> stagePlan_;
  /// The bytes this rank sent per step in the steps it ran (0 before).
  double sentPerStep_ = 0;
  /// With --full-validation: what each evaluation reads of the valid split (openData).
  std::optional<FullValidation> full_;
};

Expected<TrainingState> Run::startState() {
  // Checkpoints hold whole tensors: every rank reads them and keeps its shard (of its stage's
  // tensors under pipeline parallelism, whose optimizer layout is the stage's own).
  const std::vector<int64_t> &coordinates = mesh_.placement().coordinates;
  if (plan_.pipeline) {
    Expected<StageHoldings> holdings = stageHoldings(plan_, mesh_.stage());
    if (!holdings)
      return holdings.takeError();
    stage_ = std::move(*holdings);
    stagePlan_ = stagePlan(plan_, *stage_);
  }
  const Plan &tables = stage_ ? *stagePlan_ : plan_;
  if (options_.load) {
    Expected<TrainingState> whole = loadCheckpoint(*options_.load, plan_);
    if (whole && stage_)
      whole = takeStage(plan_, *stage_, *whole);
    if (!whole || !mesh_.partitioned())
      return whole;
    return shardState(tables, *whole, coordinates);
  }
  Expected<TrainingState> model =
      mesh_.partitioned() ? TrainingState::initializeShards(plan_, coordinates, options_.threads)
                          : TrainingState::initialize(plan_, options_.threads);
  if (!model || !stage_)
    return model;
  // Parameters are never split over the data-parallel ranks: the stage's are a slice of the
  // model's. The zero state is made in the stage's optimizer layout.
  model->states.clear();
  Expected<TrainingState> stage = takeStage(plan_, *stage_, *model);
  if (!stage)
    return stage;
  Expected<std::vector<TrainingState::Tensor>> states =
      TrainingState::zeroStates(tables, mesh_.partitioned() ? coordinates : std::vector<int64_t>{});
  if (!states)
    return states.takeError();
  stage->states = std::move(*states);
  return stage;
}

Expected<std::optional<TrainingState>> Run::wholeModel(const TrainingState &state) {
  if (!stage_)
    return wholeState(plan_, state, mesh_, job_.leader());
  // The stage's tensors whole over its mesh on its leader, then the stages on rank 0.
  Expected<std::optional<TrainingState>> stageWhole =
      wholeState(*stagePlan_, state, mesh_, mesh_.stageLeader());
  if (!stageWhole)
    return stageWhole.takeError();
  if (!mesh_.stageLeader())
    return std::optional<TrainingState>();
  return gatherStages(plan_, *stageWhole ? **stageWhole : state, mesh_);
}

Error Run::writeCheckpoint(const TrainingState &whole, int64_t step) {
  if (Error err = saveCheckpoint(*options_.save, plan_, whole); !err.ok())
    return err;
  log_.checkpointWritten(*options_.save, step);
  return Error::success();
}

Error Run::saveDuringRun(const TrainingState &state) {
  TraceRecorder::Scope span(trace_, "checkpoint", "checkpoint", {{"step", state.step}});
  Expected<std::optional<TrainingState>> whole = wholeModel(state);
  if (!whole)
    return whole.takeError().withContext(concat("saving the checkpoint '", *options_.save, "'"));
  if (!job_.leader())
    return Error::success();
  return writeCheckpoint(*whole ? **whole : state, state.step);
}

Expected<RunData> Run::openRunData(const KernelLibrary &kernels) {
  if (!options_.dataPath || !options_.dataCachePath || job_.size <= 1 || !job_.world)
    return openData(plan_, options_, kernels);
  std::optional<Expected<RunData>> data;
  if (job_.rank == 0)
    data.emplace(openData(plan_, options_, kernels));
  int32_t opened = job_.rank == 0 && *data ? 1 : 0;
  if (Error err = job_.world->broadcast(&opened, 1, MTC_I32, 0); !err.ok())
    return std::move(err).withContext("waiting for rank 0 to build the index cache");
  if (job_.rank == 0)
    return std::move(*data);
  if (!opened)
    return makeError("rank 0 could not open the training data (its error says why)");
  return openData(plan_, options_, kernels);
}

Error Run::train(TrainingState &state) {
  Expected<KernelLibrary> kernels =
      options_.device ? options_.device->loadKernels(plan_)
      : plan_.pipeline ? KernelLibrary::load(plan_, mesh_.stage())
                       : KernelLibrary::load(plan_);
  if (!kernels)
    return kernels.takeError();
  Expected<RunData> data = openRunData(*kernels);
  if (!data)
    return data.takeError();
  full_ = data->full;
  std::optional<MetricsWriter> metrics;
  if (options_.metrics && job_.leader()) {
    Expected<MetricsWriter> writer = MetricsWriter::open(*options_.metrics);
    if (!writer)
      return writer.takeError();
    metrics.emplace(std::move(*writer));
  }
  const TokenSource *validation = data->validation ? &*data->validation : nullptr;
  const TokenSource *test = data->test ? &*data->test : nullptr;
  if (options_.device) {
    // Offloaded, the optimizer step is the plan's x86 one (loaded beside the device's code).
    std::optional<KernelLibrary> hostOptimizer;
    if (options_.optimizerCpuOffload) {
      Expected<KernelLibrary> x86 = KernelLibrary::load(plan_);
      if (!x86)
        return x86.takeError().withContext("optimizer offload");
      hostOptimizer.emplace(std::move(*x86));
    }
    Expected<std::unique_ptr<DeviceTrainer>> trainer = options_.device->createTrainer(
        DeviceTrainerInputs{plan_, *kernels, std::move(state), data->train, options_.globalBatch,
                            validation, options_.lossScaling, options_.endOfDocument,
                            hostOptimizer ? &*hostOptimizer : nullptr});
    if (!trainer)
      return trainer.takeError();
    print("device: " + (*trainer)->describeDevice() + "\n");
    if (Error err = runSteps(**trainer, state, data->train, validation, test, *kernels, metrics);
        !err.ok())
      return err;
  } else if (stage_) {
    Expected<std::unique_ptr<PipelineTrainer>> trainer =
        PipelineTrainer::create(plan_, *kernels, std::move(state), data->train,
                                options_.globalBatch, mesh_, trace_, validation,
                                options_.endOfDocument);
    if (!trainer)
      return trainer.takeError();
    (*trainer)->setLossScaleOptions(options_.lossScaling);
    if (Error err = runSteps(**trainer, state, data->train, validation, test, *kernels, metrics);
        !err.ok())
      return err;
    // Each stage's measured bubble next to the schedule's (collective over the stages), when
    // steps ran.
    if (options_.skipTrain)
      return metrics ? metrics->close() : Error::success();
    Expected<std::vector<double>> bubbles =
        measureBubbleFractions(mesh_.pipeline(), (*trainer)->stepTimes());
    if (!bubbles)
      return bubbles.takeError();
    print(describeBubbles((*trainer)->schedule(), *bubbles) + "\n");
    if (Error err = reportStages(**trainer); !err.ok())
      return err;
  } else {
    Expected<Trainer> trainer = Trainer::create(
        plan_, *kernels, std::move(state), data->train, options_.globalBatch, mesh_.dataParallel(),
        mesh_.partitioned() ? &mesh_.context() : nullptr, validation, options_.endOfDocument);
    if (!trainer)
      return trainer.takeError();
    trainer->setTrace(trace_);
    trainer->setLossScaleOptions(options_.lossScaling);
    if (Error err = runSteps(*trainer, state, data->train, validation, test, *kernels, metrics);
        !err.ok())
      return err;
  }
  if (metrics)
    return metrics->close();
  return Error::success();
}

Error Run::reportStages(const PipelineTrainer &trainer) {
  const int64_t stages = mesh_.stages();
  const StageTasks &tasks = trainer.schedule().stages[size_t(mesh_.stage())];
  // Per stage: the peak and its prediction, the activations held at once and theirs, the
  // bytes sent per step and theirs (-1: no prediction).
  std::optional<double> predictedSent = predictedStageCommunicationBytes(
      plan_, trainer.stagePlan(), trainer.schedule(), mesh_.stage(), mesh_.placement().dpSize);
  std::vector<double> mine = {static_cast<double>(trainer.peakBytes()),
                              static_cast<double>(tasks.peakBytes),
                              static_cast<double>(trainer.activationPeakBytes()),
                              static_cast<double>(tasks.activationBytes), sentPerStep_,
                              predictedSent.value_or(-1)};
  std::vector<double> all = mine;
  if (Communicator *pipeline = mesh_.pipeline()) {
    all.resize(mine.size() * size_t(stages));
    if (Error err = pipeline->allGather(mine.data(), all.data(), mine.size(), MTC_F64); !err.ok())
      return std::move(err).withContext("gathering the stages' memory and communication");
  }
  auto predicted = [](double figure, const std::string &text) {
    return figure >= 0 ? concat(" (predicted ", text, ")") : std::string();
  };
  // Dropless expert slots travel only when filled: the plan's figures count every slot.
  const bool upperBound =
      plan_.predictions.communicationBytes && plan_.predictions.communicationBytes->upperBound;
  auto predictedBound = [&](double figure, const std::string &text) {
    return figure >= 0 && upperBound ? concat(" (predicted at most ", text, ")")
                                     : predicted(figure, text);
  };
  std::string memory = "pipeline memory:", sent = "pipeline communication:";
  for (int64_t s = 0; s < stages; ++s) {
    const double *figures = all.data() + size_t(s) * mine.size();
    auto mib = [&](size_t i) { return mebibytes(static_cast<int64_t>(figures[i])); };
    memory += concat(s ? "; " : " ", "stage ", s, " peak ", mib(0), predicted(figures[1], mib(1)),
                     ", activations ", mib(2), predicted(figures[3], mib(3)));
    auto sentMib = [&](size_t i) { return formatText("%.2f MiB", figures[i] / (1024.0 * 1024.0)); };
    sent += concat(s ? "; " : " ", "stage ", s, " ", sentMib(4),
                   predictedBound(figures[5], sentMib(5)));
  }
  print(memory + "\n");
  if (job_.world)
    print(sent + " sent per rank per step\n");
  return Error::success();
}

template <class StepTrainer>
Error Run::evaluate(StepTrainer &trainer, int64_t index, bool end,
                    std::optional<MetricsWriter> &metrics, const TokenSource *test) {
  const int64_t step = trainer.state().step;
  const char *name = test ? "test" : "validation";
  // The whole valid split from its first batch every time, or the order's next batches.
  const bool whole = full_ && !test;
  const int64_t batches = whole ? full_->batches : options_.evalIters;
  const int64_t firstBatch = test || whole ? 0 : index * options_.evalIters;
  TraceRecorder::Scope span(trace_, test ? "test" : "evaluation", "evaluation", {{"step", step}});
  Expected<double> loss =
      test ? trainer.evaluate(firstBatch, batches, test) : trainer.evaluate(firstBatch, batches);
  span.finish();
  if (!loss)
    return test ? loss.takeError().withContext("the test split") : loss.takeError();
  // Megatron's perplexity, exp of the loss capped at 20 (a diverged loss stays printable).
  const double ppl = std::exp(std::min(20.0, *loss));
  if (metrics) {
    JsonObject record{{"step", step},
                      {concat(name, "_loss"), *loss},
                      {concat(name, "_ppl"), ppl}};
    if (end)
      record.insert("end_of_training", true);
    if (options_.skipTrain)
      record.insert("skip_train", true);
    if (whole) {
      record.insert("full_validation", true);
      record.insert("validation_samples", full_->evaluatedSamples);
    }
    if (Error err = metrics->write(record); !err.ok())
      return err;
  }
  if (job_.leader())
    log_.clearProgress();
  print(formatText("%s loss at step %lld%s: %.4f | PPL: %.3f\n", name, static_cast<long long>(step),
                   end                  ? " (end of training)"
                   : options_.skipTrain ? " (--skip-train)"
                                        : "",
                   *loss, ppl));
  return Error::success();
}

template <class StepTrainer>
Error Run::runSteps(StepTrainer &trainer, TrainingState &state, const TokenSource &data,
                    const TokenSource *validation, const TokenSource *test,
                    const KernelLibrary &kernels, std::optional<MetricsWriter> &metrics) {
  const int64_t first = trainer.state().step, target = options_.targetSteps;
  print(formatText("model %s: %s parameters, plan %s\n", plan_.model.c_str(),
                   withThousands(plan_.numParameterElements()).c_str(), plan_.dir.c_str()));
  print(formatText("data: %s\n", data.describe().c_str()));
  if (validation) {
    const int64_t batches = full_ ? full_->batches : options_.evalIters;
    std::string what =
        formatText("%lld batch%s", static_cast<long long>(batches), batches == 1 ? "" : "es");
    // The whole split in whole global batches: the samples of a last partial one are left
    // out, as Megatron's sampler drops an incomplete last batch.
    if (full_)
      what = formatText("the whole split, %s: %lld of its %lld samples (%lld short of a global "
                        "batch left out)",
                        what.c_str(), static_cast<long long>(full_->evaluatedSamples),
                        static_cast<long long>(full_->splitSamples),
                        static_cast<long long>(full_->droppedSamples));
    print(formatText("validation: %s; %s%s\n", validation->describe().c_str(), what.c_str(),
                     options_.skipTrain ? ""
                                        : formatText(" every %lld steps and at the end",
                                                     static_cast<long long>(options_.evalInterval))
                                              .c_str()));
  }
  const char *when = options_.skipTrain ? "" : " at the end";
  if (validation && test)
    print(formatText("test: %s; %lld batch%s%s\n", test->describe().c_str(),
                     static_cast<long long>(options_.evalIters),
                     options_.evalIters == 1 ? "" : "es", when));
  else if (validation && options_.evalIters == 0)
    print("test: none (--eval-iters 0)\n");
  else if (validation)
    print(formatText("test: none (--split '%s' gives the test split no documents)\n",
                     options_.split.value_or(std::string(kMegatronDefaultSplit)).c_str()));
  if (job_.size > 1 && stage_)
    print(formatText("ranks: %d (pp=%lld x %s, %s schedule, %s over TCP)\n", job_.size,
                     static_cast<long long>(mesh_.stages()),
                     mesh_.partitioned()
                         ? describeMesh(plan_, mesh_).c_str()
                         : concat("data parallel ", mesh_.placement().dpSize).c_str(),
                     plan_.pipeline->schedule.c_str(),
                     std::string(job_.world->backendName()).c_str()));
  else if (job_.size > 1 && mesh_.partitioned())
    print(formatText("ranks: %d (%s, %s over TCP)\n", job_.size, describeMesh(plan_, mesh_).c_str(),
                     std::string(job_.world->backendName()).c_str()));
  else if (job_.size > 1)
    print(formatText("ranks: %d (data parallel, %s over TCP)\n", job_.size,
                     std::string(job_.world->backendName()).c_str()));
  print(formatText(
      "batch: %lld sequences of %lld tokens (%lld micro-batch%s of %lld); %s\n",
      static_cast<long long>(trainer.microBatches() * trainer.microBatchSize()),
      static_cast<long long>(trainer.sequenceLength()),
      static_cast<long long>(trainer.microBatches()), trainer.microBatches() == 1 ? "" : "es",
      static_cast<long long>(trainer.microBatchSize()),
      options_.skipTrain
          ? formatText("no steps (--skip-train) at step %lld", static_cast<long long>(first))
                .c_str()
          : formatText("steps %lld -> %lld", static_cast<long long>(first),
                       static_cast<long long>(target))
                .c_str()));
  // Megatron's --skip-train: the evaluations of the end of training, of the state as it is,
  // and no step.
  if (options_.skipTrain) {
    if (Error err = evaluate(trainer, 0, false, metrics); !err.ok())
      return err;
    if (test)
      if (Error err = evaluate(trainer, 0, false, metrics, test); !err.ok())
        return err;
    if (Error err = syncHostState(trainer); !err.ok())
      return err;
    state = trainer.state();
    return Error::success();
  }

  // The compiler's figure for the same accounting, when the plan has one (plans with kernels)
  // and the run keeps the plan's batch (the prediction assumes it).
  std::string predicted;
  // (The prediction is of the whole model on one rank: not of a pipeline stage.)
  if (std::optional<int64_t> bytes = plan_.predictions.memoryBytes.peak;
      bytes && options_.globalBatch == 0 && !stage_)
    predicted = concat(" (predicted ", mebibytes(*bytes), ")");
  // Bytes this rank sent over the world and every communicator split from it (the mesh
  // axes' collectives in the kernels, the data-parallel all-reduce, gathers of checkpoints).
  uint64_t commStart = bytesSent(trainer);
  uint64_t commBytes = commStart;
  // Evaluates, keeping its bytes out of the steps' communication.
  auto evaluateAt = [&](int64_t index, bool end, const TokenSource *on = nullptr) -> Error {
    const uint64_t before = bytesSent(trainer);
    if (Error err = evaluate(trainer, index, end, metrics, on); !err.ok())
      return err;
    const uint64_t used = bytesSent(trainer) - before;
    commStart += used;
    commBytes += used;
    return Error::success();
  };
  double firstLoss = 0, lastLoss = 0, seconds = 0;
  int64_t tokens = 0;
  while (trainer.state().step < target) {
    TraceRecorder::Scope stepSpan(trace_, "step", "step", {{"step", trainer.state().step + 1}});
    Expected<StepStats> stats = trainer.step();
    stepSpan.finish();
    if (!stats) {
      if (job_.leader())
        log_.clearProgress();
      return stats.takeError();
    }
    if (stats->step == first + 1)
      firstLoss = stats->loss;
    lastLoss = stats->loss;
    seconds += stats->seconds;
    tokens += stats->tokens;
    double tokensPerSecond = stats->seconds > 0 ? double(stats->tokens) / stats->seconds : 0;
    int64_t peak = trainer.peakBytes();
    int64_t rss = peakResidentBytes();
    // Bytes this rank sent in the step's collectives (the communicator's counters).
    uint64_t sent = bytesSent(trainer);
    uint64_t stepBytes = sent - commBytes;
    commBytes = sent;
    if (metrics) {
      JsonObject record{{"step", stats->step},
                        {"loss", stats->loss},
                        {"lr", stats->lr},
                        {"grad_norm", stats->gradNorm},
                        {"tokens", stats->tokens},
                        {"tokens_per_s", tokensPerSecond},
                        {"step_ms", stats->seconds * 1e3},
                        {"peak_bytes", peak},
                        {"peak_rss_bytes", rss},
                        {"comm_bytes_sent", static_cast<int64_t>(stepBytes)}};
      if (stats->lossScale > 0) {
        record.insert("loss_scale", stats->lossScale);
        record.insert("skipped", stats->skipped);
        record.insert("skipped_steps", trainer.state().lossScale->skippedSteps);
      }
      if (!stats->tokensPerExpert.empty()) {
        JsonArray layers;
        for (const std::vector<int64_t> &counts : stats->tokensPerExpert)
          layers.push_back(JsonArray(counts.begin(), counts.end()));
        record.insert("tokens_per_expert", std::move(layers));
      }
      if (Error err = metrics->write(record); !err.ok())
        return err;
    }
    bool last = stats->step == target;
    if (stats->step == first + 1 || stats->step % options_.logEvery == 0 || last) {
      if (job_.leader())
        log_.clearProgress();
      // Megatron's fp16 fields: the scale the step ran with and the skipped steps so far.
      std::string scaling =
          stats->lossScale > 0
              ? formatText("  loss scale %.1f  skipped %lld%s", stats->lossScale,
                           static_cast<long long>(trainer.state().lossScale->skippedSteps),
                           stats->skipped ? " (this step: overflow)" : "")
              : std::string();
      print(
          formatText("step %6lld/%lld  loss %.4f  lr %.3e  grad norm %.3f  %8.0f tok/s  %8.1f ms  "
                     "%s %s%s  rss %s%s\n",
                     static_cast<long long>(stats->step), static_cast<long long>(target),
                     stats->loss, stats->lr, stats->gradNorm, tokensPerSecond, stats->seconds * 1e3,
                     memoryName(trainer), mebibytes(peak).c_str(), predicted.c_str(), mebibytes(rss).c_str(),
                     scaling.c_str()));
    }
    if (validation && stats->step % options_.evalInterval == 0)
      if (Error err = evaluateAt(stats->step / options_.evalInterval - 1, false); !err.ok())
        return err;
    if (options_.save && options_.saveEvery > 0 && stats->step % options_.saveEvery == 0 && !last) {
      if (Error err = syncHostState(trainer); !err.ok())
        return err;
      if (Error err = saveDuringRun(trainer.state()); !err.ok())
        return err;
    }
    if (job_.leader())
      log_.progress(stats->step, target);
  }
  if (job_.leader())
    log_.clearProgress();
  const int64_t taken = trainer.state().step - first;
  // Megatron evaluates once more when training ends, on the next batches of its order (also
  // after an evaluation at the same step).
  if (validation && taken > 0)
    if (Error err = evaluateAt(target / options_.evalInterval, true); !err.ok())
      return err;
  // And then on the test split, its first --eval-iters batches (Megatron's test set).
  if (test && taken > 0)
    if (Error err = evaluateAt(0, true, test); !err.ok())
      return err;
  if (taken > 0)
    sentPerStep_ = static_cast<double>(commBytes - commStart) / static_cast<double>(taken);
  if (taken > 0)
    print(formatText("trained steps %lld-%lld in %.1f s (%.0f tok/s): loss %.4f -> %.4f%s\n",
                     static_cast<long long>(first + 1), static_cast<long long>(target), seconds,
                     seconds > 0 ? double(tokens) / seconds : 0.0, firstLoss, lastLoss,
                     bestLossNote(data).c_str()));
  if (job_.world && taken > 0 && !stage_) {
    // Dropless expert slots travel only when filled: the plan's figure is every slot.
    bool upperBound = plan_.predictions.communicationBytes &&
                      plan_.predictions.communicationBytes->upperBound;
    print(formatText(
        mesh_.partitioned()
            ? "communication: %.2f MiB sent by rank 0 per step (the kernels' "
              "collectives, gradients and loss); predicted %s%.2f MiB%s\n"
            : "communication: %.2f MiB sent by rank 0 per step (gradients and loss, "
              "ring all-reduce); predicted %s%.2f MiB%s\n",
        static_cast<double>(commBytes - commStart) / (1024.0 * 1024.0) / static_cast<double>(taken),
        upperBound ? "at most " : "",
        predictedCommunicationBytes(plan_, trainer.microBatches(), mesh_.placement().dpSize) /
            (1024.0 * 1024.0),
        upperBound ? " (dropless expert slots move only where filled)" : ""));
  }
  if (const KernelArena *arena = kernels.arena(); arena && taken > 0)
    print(formatText("temporaries: a %s arena placed by the plan; %lld allocations fell back to "
                     "the heap\n",
                     mebibytes(arena->size()).c_str(),
                     static_cast<long long>(kernelArenaFallbacks())));
  if (Error err = syncHostState(trainer); !err.ok())
    return err;
  state = trainer.state();
  return Error::success();
}

Error Run::writeOutputs(const TrainingState &state) {
  if (!options_.save && !options_.exportSafetensors)
    return Error::success();
  TraceRecorder::Scope span(trace_, options_.save ? "checkpoint" : "export", "checkpoint",
                            {{"step", state.step}});
  // Every data-parallel rank holds the same parameters and state: the leader writes them,
  // whole (the shards of a partitioned plan gathered over the model group first).
  Expected<std::optional<TrainingState>> whole = wholeModel(state);
  if (!whole)
    return whole.takeError();
  if (!job_.leader())
    return Error::success();
  const TrainingState &written = *whole ? **whole : state;
  if (options_.save) {
    if (Error err = writeCheckpoint(written, state.step); !err.ok())
      return err;
    print(formatText("saved checkpoint %s (step %lld)\n", options_.save->c_str(),
                     static_cast<long long>(state.step)));
  }
  if (options_.exportSafetensors)
    return exportParameters(plan_, written, *options_.exportSafetensors);
  return Error::success();
}

} // namespace

Error runTraining(const Plan &plan, const TrainingRunOptions &options, const RankContext &job,
                  TrainingLog &log) {
  // This rank's place on the plan's mesh and the communicators of its axes (collective).
  Expected<RankMesh> mesh = RankMesh::create(plan, job.world.get());
  if (!mesh)
    return mesh.takeError();
  // Every rank records its timeline; rank 0 writes the job's at the end.
  std::optional<TraceRecorder> trace;
  if (options.trace) {
    trace.emplace(job.rank);
    if (Error err = trace->start(job.world.get()); !err.ok())
      return err;
  }
  // A device trainer joins its own communicators (NCCL's) and refuses what it cannot run
  // of a mesh; a pipeline has no device trainer.
  if (options.device && plan.pipeline)
    return makeError("a device trainer runs a plan without a pipeline, and this is a pipeline "
                     "plan (train it with --device cpu)");
  if (options.optimizerCpuOffload && !options.device)
    return makeError("optimizer offload moves a device's optimizer step to the host, and this "
                     "run is on the host already");
  Run run(plan, options, job, *mesh, log, trace ? &*trace : nullptr);
  Expected<TrainingState> state = run.startState();
  if (!state)
    return state.takeError();
  if (options.load && job.leader())
    log.write(formatText("%s %s at step %lld\n", options.skipTrain ? "loaded" : "resumed from",
                         options.load->c_str(), static_cast<long long>(state->step)));
  if (options.skipTrain) {
    if (job.leader())
      log.write(formatText("skipping training (--skip-train): evaluating the %s parameters\n",
                           options.load ? "loaded" : "initial"));
    if (Error err = run.train(*state); !err.ok())
      return err;
  } else if (state->step > options.targetSteps)
    return makeError("the checkpoint is at step ", state->step, ", past --steps ",
                     options.targetSteps, " (give a larger --steps to continue)");
  else if (state->step < options.targetSteps)
    if (Error err = run.train(*state); !err.ok())
      return err;
  if (Error err = run.writeOutputs(*state); !err.ok())
    return err;
  if (!trace)
    return Error::success();
  if (Error err = writeJobTrace(*trace, job.world.get(), *options.trace); !err.ok())
    return err;
  if (job.leader())
    log.write(formatText("timeline: %s (a Chrome trace of %d rank%s; open it in Perfetto)\n",
                         options.trace->c_str(), job.size, job.size == 1 ? "" : "s"));
  return Error::success();
}

} // namespace mtc::rt
