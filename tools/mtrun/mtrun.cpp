//===- mtrun.cpp - The runtime driver -------------------------------------===//
//
// `mtrun PLAN [options]` loads and verifies a plan written by `mtc compile -o PLAN`
// (docs/plan-format.md) and trains it on this CPU with the plan's compiled step
// (kernels/x86_64.so). This file is the command line: it parses and checks the flags, starts
// the ranks (`--nodes`), joins this rank to its job and hands the run to the training loop
// (runtime/exec/TrainingRun.h: initialise or resume, the steps, logs, metrics, checkpoints,
// the export), printing its log. `--info` describes the plan. `mtrun generate PLAN ...`
// generates text instead (Generate.h), `mtrun serve PLAN ...` answers generation requests over
// HTTP (Serve.h). Plain C++20: no LLVM.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/LaunchEnvironment.h"
#include "runtime/data/BlendedDataset.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/exec/KernelThreads.h"
#include "runtime/exec/Trainer.h"
#include "runtime/exec/TrainingRun.h"
#include "runtime/plan/Plan.h"
#include "runtime/plan/PlanSummary.h"
#include "runtime/plan/Sharding.h"
#include "runtime/support/BlasCore.h"
#include "runtime/support/CommandLine.h"
#include "runtime/support/Error.h"
#include "runtime/support/OutputPaths.h"
#include "runtime/device/cuda/CudaLayer.h"
#include "tools/mtrun/Generate.h"
#include "tools/mtrun/Job.h"
#include "tools/mtrun/Serve.h"

#include <cblas.h>
#include <csignal>
#include <cstdio>
#include <malloc.h>
#include <cstdlib>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#ifndef MTC_VERSION
#define MTC_VERSION "unknown"
#endif

using namespace mtc::rt;

namespace {

struct Options {
  std::optional<std::string> plan;
  bool info = false;
  std::optional<std::string> exportSafetensors;
  std::optional<std::string> steps, data, save, saveEvery, load, logEvery, metrics, threads;
  std::optional<std::string> nodes, ranksPerNode, globalBatch, commTimeout, trace;
  std::optional<std::string> split, dataCachePath, trainSamples, evalInterval, evalIters, device;
  /// fp16's loss scaling (Megatron's flags).
  std::optional<std::string> lossScale, initialLossScale, minLossScale, lossScaleWindow,
      hysteresis;
  /// Megatron's --data-path: a prefix, or weights and prefixes.
  std::optional<std::vector<std::string>> dataPath;
  /// Megatron's --eod-mask-loss, and the tokenizer whose end of document it masks.
  bool eodMaskLoss = false;
  /// Megatron-Core's --optimizer-cpu-offload (DeepSpeed's offload_optimizer).
  bool optimizerCpuOffload = false;
  /// Megatron's --full-validation and --skip-train.
  bool fullValidation = false, skipTrain = false;
  /// Megatron's --reset-position-ids (restarting after the same tokenizer's end of document).
  bool resetPositionIds = false;
  /// Megatron's --reset-attention-mask (attention within the documents the same tokenizer's
  /// end of document separates).
  bool resetAttentionMask = false;
  std::optional<std::string> tokenizerType, vocabFile, mergeFile, tokenizerModel, vocabExtraIds;
  bool help = false;
  bool version = false;
};

#define MTRUN_VALUE_OPTION(flag, field, arg, text)                                           \
  {flag, arg, text, [](Options &o, std::string_view v) { o.field = std::string(v); },         \
   [](const Options &o) { return o.field.has_value(); }}

/// One command-line option. `value` names its argument (empty: a flag).
struct OptionSpec {
  std::string_view name;
  std::string_view value;
  std::string_view help;
  void (*apply)(Options &, std::string_view value);
  /// Whether it was given (for the "given twice" check); set by the parser.
  bool (*given)(const Options &);
  /// Takes every value up to the next option (`apply` once for each), as Megatron's
  /// `nargs='*'`.
  bool list = false;
};

constexpr OptionSpec kOptions[] = {
    MTRUN_VALUE_OPTION("--steps", steps, "N",
                       "train until N optimizer steps are done (default: the plan's `steps`)"),
    MTRUN_VALUE_OPTION("--data", data, "FILE",
                       "train on the bytes of FILE (default: the built-in synthetic task)"),
    {"--data-path", "[W] PREFIX ...",
     "train on the Megatron dataset PREFIX.idx/.bin, or a blend (0.3 A 0.7 B), in Megatron's "
     "order",
     [](Options &o, std::string_view v) {
       if (!o.dataPath)
         o.dataPath.emplace();
       o.dataPath->emplace_back(v);
     },
     [](const Options &o) { return o.dataPath.has_value(); }, /*list=*/true},
    MTRUN_VALUE_OPTION("--split", split, "S",
                       "Megatron's train,valid,test split of --data-path (default \"969, 30, 1\")"),
    MTRUN_VALUE_OPTION("--data-cache-path", dataCachePath, "DIR",
                       "keep --data-path's sample order indices (and a blend's blending indices) in "
                       "DIR (.npy files, Megatron's layout): loaded when there, else built and "
                       "written"),
    MTRUN_VALUE_OPTION("--train-samples", trainSamples, "N",
                       "the samples --data-path's order is for (default: steps x global batch)"),
    MTRUN_VALUE_OPTION("--eval-interval", evalInterval, "N",
                       "every N steps and at the end, the validation loss on --data-path's valid "
                       "split; at the end also the test loss on its test split (when it has "
                       "documents)"),
    MTRUN_VALUE_OPTION("--eval-iters", evalIters, "K",
                       "global batches of each evaluation and of the test evaluation (default "
                       "100; needs --eval-interval or --skip-train; 0: no test evaluation, "
                       "with --full-validation only)"),
    {"--full-validation", "",
     "every evaluation reads the whole valid split (one epoch, in whole global batches: the "
     "samples of a last partial batch are left out) instead of --eval-iters batches; needs "
     "--eval-interval or --skip-train, and one --data-path PREFIX",
     [](Options &o, std::string_view) { o.fullValidation = true; },
     [](const Options &o) { return o.fullValidation; }},
    {"--skip-train", "",
     "train nothing: evaluate the parameters (of --load, else the initial ones) once on the "
     "valid split and the test split, as at the end of training, and exit; needs --data-path",
     [](Options &o, std::string_view) { o.skipTrain = true; },
     [](const Options &o) { return o.skipTrain; }},
    MTRUN_VALUE_OPTION("--device", device, "cpu|cuda",
                       "where the step runs (default: cuda when the plan has CUDA host code and "
                       "a GPU is visible, else cpu)"),
    {"--optimizer-cpu-offload", "",
     "with --device cuda: keep the optimizer state in host memory and run the optimizer step "
     "on the CPU (the plan's x86 optimizer_step: compile with --target=x86,cuda); the GPU "
     "holds the parameters once and no optimizer state. Plans without tensor, sequence, "
     "context or expert parallelism",
     [](Options &o, std::string_view) { o.optimizerCpuOffload = true; },
     [](const Options &o) { return o.optimizerCpuOffload; }},
    MTRUN_VALUE_OPTION("--load", load, "DIR", "resume from the checkpoint in DIR"),
    MTRUN_VALUE_OPTION("--save", save, "DIR", "write a checkpoint to DIR at the end"),
    MTRUN_VALUE_OPTION("--save-every", saveEvery, "K", "also checkpoint every K steps (needs --save)"),
    MTRUN_VALUE_OPTION("--log-every", logEvery, "K", "print a log line every K steps (default 10)"),
    MTRUN_VALUE_OPTION("--metrics", metrics, "FILE",
                       "append one JSON line per step to FILE (step, loss, lr, ...)"),
    MTRUN_VALUE_OPTION("--threads-per-rank", threads, "N",
                       "threads of each rank's kernels, GEMMs and initialisation (default: "
                       "OMP_NUM_THREADS, else this host's cores / its ranks)"),
    MTRUN_VALUE_OPTION("--nodes", nodes, "N",
                       "run N nodes' ranks (on this host unless a launcher started mtrun)"),
    MTRUN_VALUE_OPTION("--ranks-per-node", ranksPerNode, "R", "ranks per node (default 1)"),
    MTRUN_VALUE_OPTION("--global-batch", globalBatch, "N",
                       "sequences per step (default: the plan's global_batch)"),
    MTRUN_VALUE_OPTION("--comm-timeout", commTimeout, "S",
                       "fail a collective after S seconds without progress (default 60)"),
    MTRUN_VALUE_OPTION("--export-safetensors", exportSafetensors, "FILE",
                       "write the parameters to FILE (safetensors, F32) when done"),
    MTRUN_VALUE_OPTION("--trace", trace, "FILE",
                       "write the job's timeline to FILE (Chrome trace JSON, for Perfetto)"),
    MTRUN_VALUE_OPTION("--loss-scale", lossScale, "S",
                       "fp16: a fixed loss scale S (default: dynamic loss scaling)"),
    MTRUN_VALUE_OPTION("--initial-loss-scale", initialLossScale, "S",
                       "fp16: the dynamic loss scale to start from (default 2^32)"),
    MTRUN_VALUE_OPTION("--min-loss-scale", minLossScale, "S",
                       "fp16: the dynamic loss scale never goes below S (default 1)"),
    MTRUN_VALUE_OPTION("--loss-scale-window", lossScaleWindow, "N",
                       "fp16: double the loss scale after N steps without overflow (default "
                       "1000)"),
    MTRUN_VALUE_OPTION("--hysteresis", hysteresis, "N",
                       "fp16: halve the loss scale after N overflows (default 2)"),
    {"--eod-mask-loss", "",
     "check that PLAN was compiled with --eod-mask-loss (its loss leaves out the positions "
     "whose token is the tokenizer's end of document, whether asked or not)",
     [](Options &o, std::string_view) { o.eodMaskLoss = true; },
     [](const Options &o) { return o.eodMaskLoss; }},
    {"--reset-position-ids", "",
     "check that PLAN was compiled with --reset-position-ids (its positions restart at 0 "
     "after each of the tokenizer's end of document, whether asked or not)",
     [](Options &o, std::string_view) { o.resetPositionIds = true; },
     [](const Options &o) { return o.resetPositionIds; }},
    {"--reset-attention-mask", "",
     "check that PLAN was compiled with --reset-attention-mask (its attention stays within "
     "each document the tokenizer's end of document ends, whether asked or not)",
     [](Options &o, std::string_view) { o.resetAttentionMask = true; },
     [](const Options &o) { return o.resetAttentionMask; }},
    MTRUN_VALUE_OPTION("--tokenizer-type", tokenizerType, "T",
                       "the data's tokenizer, whose end of document a plan compiled with "
                       "--eod-mask-loss masks (--reset-position-ids restarts after): bytes "
                       "(default), GPT2BPETokenizer, ... (as mtc-data)"),
    MTRUN_VALUE_OPTION("--vocab-file", vocabFile, "F", "the tokenizer's vocabulary file"),
    MTRUN_VALUE_OPTION("--merge-file", mergeFile, "F", "the tokenizer's merges file"),
    MTRUN_VALUE_OPTION("--tokenizer-model", tokenizerModel, "F",
                       "the tokenizer's SentencePiece model"),
    MTRUN_VALUE_OPTION("--vocab-extra-ids", vocabExtraIds, "N",
                       "SentencePieceTokenizer: T5's N sentinels (as mtc-data)"),
    {"--info", "", "print a summary of the verified plan (and exit unless asked for more)",
     [](Options &o, std::string_view) { o.info = true; }, [](const Options &o) { return o.info; }},
    {"--help", "", "print this help and exit", [](Options &o, std::string_view) { o.help = true; },
     [](const Options &o) { return o.help; }},
    {"--version", "", "print the version and exit",
     [](Options &o, std::string_view) { o.version = true; },
     [](const Options &o) { return o.version; }},
};

/// The end-of-document id of the tokenizer the options name (Megatron's tokenizer.eod), for
/// the plan's options that need it (`uses`: their flags, for the error).
Expected<int64_t> endOfDocument(const Options &opts, std::string_view uses) {
  TokenizerOptions tokenizer;
  Expected<int64_t> extraIds =
      parseInteger(opts.vocabExtraIds, "--vocab-extra-ids", 0, 0, kMaxVocabExtraIds);
  if (!extraIds)
    return extraIds.takeError();
  tokenizer.vocabExtraIds = *extraIds;
  tokenizer.type = opts.tokenizerType.value_or(tokenizer.type);
  tokenizer.vocabFile = opts.vocabFile.value_or("");
  tokenizer.mergeFile = opts.mergeFile.value_or("");
  tokenizer.tokenizerModel = opts.tokenizerModel.value_or("");
  Expected<std::unique_ptr<Tokenizer>> made = makeTokenizer(tokenizer);
  if (!made)
    return made.takeError().withContext(concat("the end of document of ", uses));
  return (*made)->eod();
}

void printUsage() {
  std::printf("usage: mtrun PLAN [options]\n"
              "       mtrun generate PLAN ...   (text from a prompt; mtrun generate --help)\n"
              "       mtrun serve PLAN ...      (an HTTP generation server; mtrun serve --help)\n\n"
              "Trains the plan directory PLAN (written by `mtc compile -o PLAN --kernels=x86`)\n"
              "on this CPU. `--steps 0` trains nothing: with --export-safetensors it writes the\n"
              "initial parameters.\n\n"
              "options:\n");
  for (const OptionSpec &o : kOptions) {
    std::string left = std::string(o.name);
    if (!o.value.empty())
      left.append(" ").append(o.value);
    std::printf("  %-26s %.*s\n", left.c_str(), static_cast<int>(o.help.size()), o.help.data());
  }
}

/// Whether `arg` continues a list option's values: not an option (a word not starting with
/// '-', or a negative number).
bool isListValue(std::string_view arg) {
  if (arg.empty() || arg[0] != '-')
    return true;
  return arg.size() > 1 && ((arg[1] >= '0' && arg[1] <= '9') || arg[1] == '.');
}

/// Parses argv by the table; `--opt=value` and `--opt value` both work, `--` ends options.
Expected<Options> parseArgs(int argc, char **argv) {
  Options opts;
  bool optionsEnded = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (optionsEnded || arg.empty() || arg[0] != '-' || arg == "-") {
      if (opts.plan)
        return makeError("unexpected argument '", arg, "' (mtrun takes one PLAN)");
      opts.plan = std::string(arg);
      continue;
    }
    if (arg == "--") {
      optionsEnded = true;
      continue;
    }
    if (arg == "-h")
      arg = "--help";
    std::string_view name = arg, inlineValue;
    bool hasInlineValue = false;
    if (size_t eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      inlineValue = arg.substr(eq + 1);
      hasInlineValue = true;
    }
    const OptionSpec *spec = nullptr;
    for (const OptionSpec &o : kOptions)
      if (o.name == name)
        spec = &o;
    if (!spec)
      return makeError("unknown option '", arg, "' (see mtrun --help)");
    if (spec->given(opts))
      return makeError(spec->name, " given twice");
    std::string_view value;
    if (spec->list && !hasInlineValue) {
      // Every value up to the next option: a word not starting with '-', or a negative number
      // (a weight, refused later with a better message than "unknown option").
      int given = 0;
      for (; i + 1 < argc && isListValue(argv[i + 1]); ++given) {
        std::string_view next = argv[++i];
        if (next.empty())
          return makeError(spec->name, " needs non-empty values");
        spec->apply(opts, next);
      }
      if (given == 0)
        return makeError(spec->name, " needs a value (", spec->name, " ", spec->value, ")");
      continue;
    }
    if (spec->value.empty()) {
      if (hasInlineValue)
        return makeError(spec->name, " takes no value");
    } else if (hasInlineValue) {
      value = inlineValue;
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return makeError(spec->name, " needs a value (", spec->name, " ", spec->value, ")");
    }
    if (!spec->value.empty() && value.empty())
      return makeError(spec->name, " needs a non-empty ", spec->value);
    spec->apply(opts, value);
  }
  return opts;
}

/// The ranges of the numeric options. A rank count is an `int` in every launcher and
/// communicator (torchrun, Gloo, NCCL), and 65536 ranks is past any job this runtime runs on
/// CPUs; steps are bounded as the plan's (kMaxTrainSteps); a timeout past a day is a hang.
constexpr int64_t kMaxRanks = 65536;
constexpr int64_t kMaxCommTimeoutSeconds = 24 * 60 * 60;
constexpr int64_t kMaxGlobalBatch = int64_t(1) << 24;

/// The training log on stdout, with a progress bar on stderr when it is a terminal, erased
/// before each log line.
class TerminalLog final : public TrainingLog {
public:
  TerminalLog() : progressEnabled_(::isatty(STDERR_FILENO) == 1) {}

  void write(std::string_view text) override {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }
  void progress(int64_t done, int64_t target) override {
    if (!progressEnabled_ || target <= 0)
      return;
    constexpr int width = 30;
    int filled = static_cast<int>(width * done / target);
    std::fprintf(stderr, "\r  [%.*s%*s] %lld/%lld steps", filled,
                 "##############################", width - filled, "",
                 static_cast<long long>(done), static_cast<long long>(target));
    std::fflush(stderr);
    shown_ = true;
  }
  void clearProgress() override {
    if (shown_)
      std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }

private:
  bool progressEnabled_;
  bool shown_ = false;
};

/// Checks that the checkpoint, the export, the metrics and the trace can be written, before
/// any step.
Error checkOutputs(const Options &opts) {
  if (opts.save)
    if (Error err = checkOutputDirectory(*opts.save, "--save"); !err.ok())
      return err;
  if (opts.exportSafetensors)
    if (Error err = checkOutputFile(*opts.exportSafetensors, "--export-safetensors"); !err.ok())
      return err;
  if (opts.metrics)
    if (Error err = checkOutputFile(*opts.metrics, "--metrics"); !err.ok())
      return err;
  if (opts.trace)
    if (Error err = checkOutputFile(*opts.trace, "--trace"); !err.ok())
      return err;
  return Error::success();
}

/// Prints the error; under a launcher, names this rank.
int fail(const Error &err, const RankContext *job = nullptr) {
  std::fflush(stdout);
  if (job && job->size > 1)
    std::fprintf(stderr, "mtrun: error: rank %d: %s\n", job->rank, err.message().c_str());
  else
    std::fprintf(stderr, "mtrun: error: %s\n", err.message().c_str());
  return 1;
}

/// Whether the run executes the plan's CUDA host code (--device, see kOptions) for
/// `requested` ranks, `ownLaunch` when this command starts them all on this host (--nodes
/// without a cluster launcher): `cuda` needs the CUDA layer (CudaLayer.h), a plan with CUDA
/// host code that the CUDA trainer runs on that many ranks (checkPlan: no pipeline, no
/// distributed optimizer), a visible GPU, and under its own launch a GPU per rank (an error
/// saying which is missing, "no CUDA device: ..." when there is none); no --device picks
/// cuda only for one rank when all of that holds. The layer is loaded only past the checks
/// that need no GPU: a CPU run never maps the CUDA libraries. Returns the loaded layer when
/// the run uses it, nothing when it runs on the CPU.
Expected<std::optional<cuda::CudaLayer>>
chooseCudaDevice(const std::optional<std::string> &device, const Plan &plan, int64_t requested,
                 bool ownLaunch) {
  using Choice = std::optional<cuda::CudaLayer>;
  if (device && *device != "cpu" && *device != "cuda")
    return makeError("--device: '", *device, "' is not a device (cpu or cuda)");
  bool asked = device && *device == "cuda";
  if (device && !asked)
    return Choice();
  bool hostCode = plan.cudaKernels && plan.cudaKernels->host;
  int64_t planRanks = 1;
  for (const MeshAxis &axis : plan.mesh)
    planRanks *= axis.size;
  if (!asked && (!hostCode || requested > 1 || planRanks > 1 || plan.pipeline))
    return Choice();
  Expected<std::string> path = cuda::CudaLayer::besideProgram();
  Expected<cuda::CudaLayer> layer =
      path ? cuda::CudaLayer::load(*path) : Expected<cuda::CudaLayer>(path.takeError());
  if (!layer)
    return asked ? Expected<Choice>(layer.takeError().withContext("--device cuda"))
                 : Expected<Choice>(Choice());
  const cuda::CudaLayerFunctions &cuda = layer->functions();
  // What the CUDA trainer cannot run is said before what the plan lacks for it.
  if (asked)
    if (Error err = cuda.checkPlan(plan, requested); !err.ok())
      return std::move(err).withContext("--device cuda");
  if (asked && !hostCode)
    return makeError("--device cuda: ", plan.dir,
                     " has no CUDA host code (compile it with `mtc compile --target=x86,cuda`)");
  Expected<int> devices = cuda.visibleDeviceCount();
  if (!devices)
    return asked ? Expected<Choice>(devices.takeError()) : Expected<Choice>(Choice());
  if (ownLaunch)
    if (Error err = cuda.checkDevicesForLocalRanks(int(requested), *devices); !err.ok())
      return std::move(err).withContext("--device cuda");
  return Choice(std::move(*layer));
}

int run(int argc, char **argv) {
  Expected<Options> opts = parseArgs(argc, argv);
  if (!opts)
    return fail(opts.error());
  if (opts->help) {
    printUsage();
    return 0;
  }
  if (opts->version) {
    std::printf("mtrun %s (plan format %d)\n", MTC_VERSION, kPlanFormatVersion);
    return 0;
  }
  if (!opts->plan)
    return fail(makeError("no PLAN given (usage: mtrun PLAN [options]; see mtrun --help)",
                          opts->dataPath ? "; --data-path takes every word up to the next "
                                           "option: give PLAN before it"
                                         : ""));
  if (opts->saveEvery && !opts->save)
    return fail(makeError("--save-every needs --save DIR"));
  if (opts->data && opts->dataPath)
    return fail(makeError("--data and --data-path are two data sets: give one"));
  if ((opts->split || opts->trainSamples || opts->dataCachePath) && !opts->dataPath)
    return fail(makeError(opts->split          ? "--split"
                          : opts->trainSamples ? "--train-samples"
                                               : "--data-cache-path",
                          " needs --data-path PREFIX"));
  if (opts->evalIters && !opts->evalInterval && !opts->skipTrain)
    return fail(makeError("--eval-iters needs --eval-interval N (or --skip-train)"));
  if (opts->fullValidation && !opts->evalInterval && !opts->skipTrain)
    return fail(makeError("--full-validation says what each evaluation reads: give "
                          "--eval-interval N (or --skip-train) to evaluate"));
  if (opts->skipTrain && !opts->dataPath)
    return fail(makeError("--skip-train evaluates on the valid split of --data-path PREFIX: give "
                          "it (the synthetic task and --data FILE have none)"));
  if (opts->skipTrain && opts->save)
    return fail(makeError("--skip-train trains nothing: there is no checkpoint for --save to "
                          "write"));
  if (opts->evalInterval && !opts->dataPath)
    return fail(makeError("--eval-interval needs --data-path PREFIX (evaluation reads its valid "
                          "split; the synthetic task and --data FILE have none)"));
  std::optional<DataBlend> dataPath;
  if (opts->dataPath) {
    Expected<DataBlend> blend = parseDataBlend(*opts->dataPath);
    if (!blend)
      return fail(blend.error());
    dataPath = std::move(*blend);
  }

  // Every numeric option, the plan, the batch split and the outputs are checked here, before
  // any rank starts or any step runs.
  constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
  Expected<int64_t> nodes = parseInteger(opts->nodes, "--nodes", 1, 1, kMaxRanks);
  Expected<int64_t> ranksPerNode =
      parseInteger(opts->ranksPerNode, "--ranks-per-node", 1, 1, kMaxRanks);
  Expected<int64_t> commTimeout =
      parseInteger(opts->commTimeout, "--comm-timeout", 60, 1, kMaxCommTimeoutSeconds);
  Expected<int64_t> steps = parseInteger(opts->steps, "--steps", 0, 0, kMaxTrainSteps);
  Expected<int64_t> logEvery = parseInteger(opts->logEvery, "--log-every", 10, 1, kMaxInt64);
  Expected<int64_t> saveEvery = parseInteger(opts->saveEvery, "--save-every", 0, 1, kMaxInt64);
  Expected<int64_t> threads =
      parseInteger(opts->threads, "--threads-per-rank", 0, 1, kMaxThreadsPerRank);
  Expected<int64_t> globalBatch =
      parseInteger(opts->globalBatch, "--global-batch", 0, 1, kMaxGlobalBatch);
  Expected<int64_t> trainSamples =
      parseInteger(opts->trainSamples, "--train-samples", 0, 1, int64_t(1) << 48);
  Expected<int64_t> evalInterval =
      parseInteger(opts->evalInterval, "--eval-interval", 0, 1, kMaxTrainSteps);
  Expected<int64_t> evalIters = parseInteger(opts->evalIters, "--eval-iters", 100, 0, kMaxTrainSteps);
  LossScaleOptions lossScaling;
  Expected<double> initialLossScale =
      parseNumber(opts->initialLossScale, "--initial-loss-scale", lossScaling.initial);
  Expected<double> minLossScale =
      parseNumber(opts->minLossScale, "--min-loss-scale", lossScaling.minimum);
  Expected<double> fixedLossScale = parseNumber(opts->lossScale, "--loss-scale", 1);
  Expected<int64_t> lossScaleWindow =
      parseInteger(opts->lossScaleWindow, "--loss-scale-window", lossScaling.window, 1, kMaxInt64);
  Expected<int64_t> hysteresis =
      parseInteger(opts->hysteresis, "--hysteresis", lossScaling.hysteresis, 1, kMaxInt64);
  for (const Error *err :
       {&nodes.error(), &ranksPerNode.error(), &commTimeout.error(), &steps.error(),
        &logEvery.error(), &saveEvery.error(), &threads.error(), &globalBatch.error(),
        &trainSamples.error(), &evalInterval.error(), &evalIters.error(),
        &initialLossScale.error(), &minLossScale.error(), &fixedLossScale.error(),
        &lossScaleWindow.error(), &hysteresis.error()})
    if (!err->ok())
      return fail(*err);
  // Megatron evaluates nothing with --eval-iters 0; here that is only --full-validation's
  // way to leave out the test split.
  if (*evalIters == 0 && !opts->fullValidation)
    return fail(makeError("--eval-iters 0 evaluates nothing: give K >= 1 batches, or "
                          "--full-validation to evaluate the whole valid split"));
  lossScaling.initial = static_cast<float>(*initialLossScale);
  lossScaling.minimum = static_cast<float>(*minLossScale);
  if (opts->lossScale)
    lossScaling.fixed = static_cast<float>(*fixedLossScale);
  lossScaling.window = *lossScaleWindow;
  lossScaling.hysteresis = *hysteresis;
  if (Error err = lossScaling.check(); !err.ok())
    return fail(err);
  if (opts->lossScale && (opts->initialLossScale || opts->minLossScale ||
                          opts->lossScaleWindow || opts->hysteresis))
    return fail(makeError("--loss-scale fixes the loss scale: --initial-loss-scale, "
                          "--min-loss-scale, --loss-scale-window and --hysteresis are for "
                          "dynamic loss scaling"));
  int64_t requested = *nodes * *ranksPerNode;
  if (requested > kMaxRanks)
    return fail(makeError("--nodes ", *nodes, " --ranks-per-node ", *ranksPerNode, " asks for ",
                          requested, " ranks, more than the ", kMaxRanks, " this runtime runs"));
  // The launcher checks the plan before it starts any rank.
  Expected<Plan> plan = loadPlan(*opts->plan);
  if (!plan)
    return fail(plan.error());
  if (!plan->lossScaling)
    for (auto [given, flag] :
         {std::pair{opts->lossScale.has_value(), "--loss-scale"},
          {opts->initialLossScale.has_value(), "--initial-loss-scale"},
          {opts->minLossScale.has_value(), "--min-loss-scale"},
          {opts->lossScaleWindow.has_value(), "--loss-scale-window"},
          {opts->hysteresis.has_value(), "--hysteresis"}})
      if (given)
        return fail(makeError(flag, ": ", *opts->plan,
                              " does not train in fp16, the only precision with loss scaling"));
  // A pipeline plan evaluates through its chunks' forwards (PipelineTrainer::evaluate).
  if ((opts->evalInterval || opts->skipTrain) && !plan->pipeline && plan->x86Kernels &&
      !plan->x86Kernels->forward)
    return fail(makeError(opts->skipTrain ? "--skip-train: " : "--eval-interval: ", *opts->plan,
                          " has no `forward` function to evaluate with"));
  Expected<LaunchEnvironment> env = readLaunchEnvironment(processEnvironment());
  if (!env)
    return fail(env.error());
  // What optimizer offload needs of the plan is said before any GPU is looked for.
  if (opts->optimizerCpuOffload) {
    if (opts->device && *opts->device == "cpu")
      return fail(makeError("--optimizer-cpu-offload moves a GPU's optimizer step to the host: "
                            "it needs --device cuda"));
    if (Error err = checkOptimizerOffload(*plan); !err.ok())
      return fail(std::move(err).withContext("--optimizer-cpu-offload"));
  }
  Expected<std::optional<cuda::CudaLayer>> onCuda = chooseCudaDevice(
      opts->device, *plan, env->launcher == Launcher::None ? requested : env->worldSize,
      env->launcher == Launcher::None);
  if (!onCuda)
    return fail(onCuda.error());
  if (opts->optimizerCpuOffload && !*onCuda)
    return fail(makeError("--optimizer-cpu-offload moves a GPU's optimizer step to the host, and "
                          "this run is on the CPU (no usable GPU: ask for --device cuda to see "
                          "why)"));
  // The ranks this command starts share this host's cores; a launcher says how many ranks
  // it started here.
  Expected<int> threadsPerRank =
      opts->threads ? Expected<int>(static_cast<int>(*threads))
                    : defaultThreadsPerRank(processEnvironment(), availableCores(),
                                            env->launcher == Launcher::None
                                                ? static_cast<int>(requested)
                                                : env->localWorldSize);
  if (!threadsPerRank)
    return fail(threadsPerRank.error());
  // Tensor parallelism: the ranks are mesh size x data-parallel degree (exactly the mesh size
  // when data parallelism is a mesh axis, the distributed optimizer); the global batch must
  // split over the data-parallel ranks.
  // With pipeline parallelism every stage has its block of ranks (placePlanRank checks the
  // number), and each data-parallel rank's micro-batches need a schedule in the plan.
  if (!opts->info && (env->launcher == Launcher::None || opts->nodes)) {
    Expected<MeshPlacement> p = placePlanRank(*plan, 0, requested);
    if (!p)
      return fail(p.error());
    if (const KernelFunction *step = plan->x86Kernels ? batchFunction(*plan->x86Kernels) : nullptr) {
      Expected<int64_t> split = countMicroBatches(*plan, *step,
                                                  *globalBatch, p->dpSize);
      if (!split)
        return fail(split.error());
      if (plan->pipeline)
        if (Expected<const PipelineSchedule *> schedule =
                plan->pipeline->forMicroBatches(*split / p->dpSize);
            !schedule)
          return fail(makeError(*opts->plan, ": ", *split / p->dpSize,
                                " micro-batches per data-parallel rank: ",
                                schedule.error().message()));
    }
  }
  TrainingRunOptions training;
  training.targetSteps = opts->steps ? *steps : plan->steps;
  training.logEvery = *logEvery;
  training.saveEvery = *saveEvery;
  training.globalBatch = *globalBatch;
  training.threads = static_cast<unsigned>(*threadsPerRank);
  training.data = opts->data;
  training.dataPath = dataPath;
  training.split = opts->split;
  training.dataCachePath = opts->dataCachePath;
  if (opts->trainSamples)
    training.trainSamples = *trainSamples;
  training.evalInterval = *evalInterval;
  training.evalIters = *evalIters;
  training.fullValidation = opts->fullValidation;
  training.skipTrain = opts->skipTrain;
  training.load = opts->load;
  training.save = opts->save;
  training.metrics = opts->metrics;
  training.exportSafetensors = opts->exportSafetensors;
  training.trace = opts->trace;
  training.lossScaling = lossScaling;
  training.eodMaskLoss = opts->eodMaskLoss;
  training.optimizerCpuOffload = opts->optimizerCpuOffload;
  training.resetPositionIds = opts->resetPositionIds;
  training.resetAttentionMask = opts->resetAttentionMask;
  if (plan->eodMaskLoss || plan->takesPositionIds()) {
    // The settings that read the end of document, for the messages.
    std::string settings;
    for (auto [set, name] : {std::pair{plan->eodMaskLoss, "--eod-mask-loss"},
                             std::pair{plan->resetPositionIds, "--reset-position-ids"},
                             std::pair{plan->resetAttentionMask, "--reset-attention-mask"}})
      if (set)
        settings += settings.empty() ? name : std::string(" and ") + name;
    Expected<int64_t> eod = endOfDocument(*opts, settings);
    if (!eod)
      return fail(eod.error());
    training.endOfDocument = *eod;
  }
  // Rank 0 writes the outputs (the launcher checks them for its ranks).
  if (env->rank == 0)
    if (Error err = checkOutputs(*opts); !err.ok())
      return fail(err);
  if (env->launcher == Launcher::None && requested > 1) {
    // The data files and splits once here, rather than an error from every rank.
    if (Error err = checkTrainingData(*plan, training); !err.ok())
      return fail(err);
    // Start the ranks here; each runs this command again and joins as the rank it is given.
    std::vector<std::string> args(argv + 1, argv + argc);
    if (!opts->threads)
      args.insert(args.begin(), {"--threads-per-rank", std::to_string(*threadsPerRank)});
    if (Error err = startLocalRanks(std::move(args), static_cast<int>(requested),
                                    static_cast<int>(*ranksPerNode), *threadsPerRank,
                                    std::chrono::seconds(*commTimeout) + std::chrono::seconds(5));
        !err.ok())
      return fail(err);
    return 0;
  }
  if (env->launcher != Launcher::None && opts->nodes && requested != env->worldSize)
    return fail(makeError("--nodes ", *nodes, " --ranks-per-node ", *ranksPerNode, " asks for ",
                          requested, " ranks, but ", launcherName(env->launcher), " started ",
                          env->worldSize));

  if (opts->info) {
    std::fputs(describePlan(*plan).c_str(), stdout);
    bool more = opts->steps || opts->load || opts->save || opts->exportSafetensors || opts->data ||
                opts->dataPath || opts->trace;
    if (!more)
      return std::fflush(stdout) == 0 ? 0 : fail(makeError("cannot write the output"));
  }

  setKernelThreads(*threadsPerRank);

  JobStore store;
  Expected<RankContext> job = joinJob(*env, std::chrono::seconds(*commTimeout), store);
  if (!job) {
    RankContext self{env->rank, env->worldSize, nullptr};
    return fail(job.error(), &self);
  }
  // The CUDA trainer joins its NCCL world through the job's store, on the local rank's GPU.
  if (*onCuda)
    training.device = (*onCuda)->functions().backend(cuda::CudaJob{
        store, job->rank, job->size, env->localRank, std::chrono::seconds(*commTimeout)});
  TerminalLog log;
  if (Error err = runTraining(*plan, training, *job, log); !err.ok()) {
    int status = fail(err, &*job);
    finishFailedRank(*job, store, std::chrono::seconds(*commTimeout));
    return status;
  }
  if (std::fflush(stdout) != 0)
    return fail(makeError("cannot write the output"), &*job);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // Debian's OpenBLAS runs its SSE3 kernels on CPUs newer than itself: run again with the
  // kernels this CPU's features allow (BlasCore.h), before anything else happens.
  mtc::rt::reexecForBlasCore(openblas_get_corename(), argv);
  // The compiled step mallocs and frees its temporaries on every call. Keep freed memory in
  // the heap instead of returning it to the system: otherwise every step pays the page
  // faults of fresh mappings again (a fifth of gpt-tiny's step time), until memory planning
  // gives the kernels static buffers.
  ::mallopt(M_MMAP_MAX, 0);
  ::mallopt(M_TRIM_THRESHOLD, -1);
  // A peer that died leaves sockets whose next write raises SIGPIPE, which would kill this
  // rank silently; ignored, the write fails and the collective reports which peer and
  // operation (Gloo writes without MSG_NOSIGNAL).
  std::signal(SIGPIPE, SIG_IGN);
  try {
    if (argc > 1 && std::string_view(argv[1]) == "generate")
      return runGenerate(argc - 1, argv + 1);
    if (argc > 1 && std::string_view(argv[1]) == "serve")
      return runServe(argc - 1, argv + 1);
    return run(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "mtrun: error: %s\n", e.what());
    return 1;
  }
}
