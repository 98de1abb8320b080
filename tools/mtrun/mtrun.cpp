//===- mtrun.cpp - The runtime driver -------------------------------------===//
//
// `mtrun PLAN [options]` loads and verifies a plan written by `mtc compile -o PLAN`
// (docs/plan-format.md) and trains it on this CPU with the plan's compiled step
// (kernels/x86_64.so): initialise or resume (--load), run the step loop up to --steps, log,
// checkpoint (--save) and export the parameters (--export-safetensors). `--info` describes
// the plan. With `--nodes`, data parallelism over the ranks, and tensor parallelism over the
// plan's mesh when it has one (runtime/exec/RankMesh.h). Plain C++20: no LLVM.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/GlooCommunicator.h"
#include "runtime/comm/LaunchEnvironment.h"
#include "runtime/data/MetricsWriter.h"
#include "runtime/data/TokenSource.h"
#include "runtime/exec/Checkpoint.h"
#include "runtime/exec/Gemm.h"
#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/RankMesh.h"
#include "runtime/exec/Trainer.h"
#include "runtime/exec/TrainingState.h"
#include "runtime/launch/LocalLauncher.h"
#include "runtime/plan/Plan.h"
#include "runtime/plan/PlanSummary.h"
#include "runtime/support/Error.h"
#include "runtime/support/OutputPaths.h"
#include "runtime/support/Safetensors.h"

#include <charconv>
#include <csignal>
#include <cstdio>
#include <malloc.h>
#include <cstdlib>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <sys/resource.h>
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
  std::optional<std::string> nodes, ranksPerNode, globalBatch, commTimeout;
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
};

constexpr OptionSpec kOptions[] = {
    MTRUN_VALUE_OPTION("--steps", steps, "N",
                       "train until N optimizer steps are done (default: the plan's `steps`)"),
    MTRUN_VALUE_OPTION("--data", data, "FILE",
                       "train on the bytes of FILE (default: the built-in synthetic task)"),
    MTRUN_VALUE_OPTION("--load", load, "DIR", "resume from the checkpoint in DIR"),
    MTRUN_VALUE_OPTION("--save", save, "DIR", "write a checkpoint to DIR at the end"),
    MTRUN_VALUE_OPTION("--save-every", saveEvery, "K", "also checkpoint every K steps (needs --save)"),
    MTRUN_VALUE_OPTION("--log-every", logEvery, "K", "print a log line every K steps (default 10)"),
    MTRUN_VALUE_OPTION("--metrics", metrics, "FILE",
                       "append one JSON line per step to FILE (step, loss, lr, ...)"),
    MTRUN_VALUE_OPTION("--threads", threads, "N",
                       "threads for initialisation and GEMMs (default: all cores, 1 for GEMMs)"),
    MTRUN_VALUE_OPTION("--nodes", nodes, "N",
                       "run N nodes' ranks (on this host unless a launcher started mtrun)"),
    MTRUN_VALUE_OPTION("--ranks-per-node", ranksPerNode, "R", "ranks per node (default 1)"),
    MTRUN_VALUE_OPTION("--global-batch", globalBatch, "N",
                       "sequences per step (default: the plan's global_batch)"),
    MTRUN_VALUE_OPTION("--comm-timeout", commTimeout, "S",
                       "fail a collective after S seconds without progress (default 60)"),
    MTRUN_VALUE_OPTION("--export-safetensors", exportSafetensors, "FILE",
                       "write the parameters to FILE (safetensors, F32) when done"),
    {"--info", "", "print a summary of the verified plan (and exit unless asked for more)",
     [](Options &o, std::string_view) { o.info = true; }, [](const Options &o) { return o.info; }},
    {"--help", "", "print this help and exit", [](Options &o, std::string_view) { o.help = true; },
     [](const Options &o) { return o.help; }},
    {"--version", "", "print the version and exit",
     [](Options &o, std::string_view) { o.version = true; },
     [](const Options &o) { return o.version; }},
};

void printUsage() {
  std::printf("usage: mtrun PLAN [options]\n\n"
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
/// CPUs; steps index the dropout keys with 32 bits; a timeout past a day is a hang.
constexpr int64_t kMaxRanks = 65536;
constexpr int64_t kMaxSteps = (int64_t(1) << 31) - 1;
constexpr int64_t kMaxCommTimeoutSeconds = 24 * 60 * 60;
constexpr int64_t kMaxThreads = 4096;
constexpr int64_t kMaxGlobalBatch = int64_t(1) << 24;

/// An integer option in [min, max] (`fallback` when not given), parsed whole.
Expected<int64_t> parseCount(const std::optional<std::string> &value, std::string_view flag,
                             int64_t fallback, int64_t min, int64_t max) {
  if (!value)
    return fallback;
  int64_t n = 0;
  auto [end, err] = std::from_chars(value->data(), value->data() + value->size(), n);
  if (err != std::errc() || end != value->data() + value->size() || n < min || n > max)
    return makeError(flag, " expects an integer from ", min, " to ", max, ", got '", *value, "'");
  return n;
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

int64_t peakResidentBytes() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0)
    return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024; // Linux reports KiB
}

std::string mebibytes(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
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

/// A progress bar on stderr when it is a terminal, erased before each log line.
class Progress {
public:
  explicit Progress(bool leader) : enabled_(leader && ::isatty(STDERR_FILENO) == 1) {}
  void show(int64_t done, int64_t target) {
    if (!enabled_ || target <= 0)
      return;
    constexpr int width = 30;
    int filled = static_cast<int>(width * done / target);
    std::fprintf(stderr, "\r  [%.*s%*s] %lld/%lld steps", filled,
                 "##############################", width - filled, "",
                 static_cast<long long>(done), static_cast<long long>(target));
    std::fflush(stderr);
    shown_ = true;
  }
  void clear() {
    if (shown_)
      std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }

private:
  bool enabled_;
  bool shown_ = false;
};

/// " (best possible 1.2799)" when the data's best loss is known.
std::string bestLossNote(const TokenSource &data) {
  if (!data.bestLoss())
    return "";
  char buf[48];
  std::snprintf(buf, sizeof buf, " (best possible %.4f)", *data.bestLoss());
  return buf;
}

struct RunSettings {
  int64_t targetSteps = 0;
  int64_t logEvery = 10;
  int64_t saveEvery = 0;
  int64_t globalBatch = 0; // 0: the plan's
  unsigned threads = 0;
};

/// This process's place in the job: rank 0 of 1 without a launcher; otherwise the rank the
/// launcher gave, with the world communicator (data parallelism over every rank for now).
struct RankContext {
  int rank = 0;
  int size = 1;
  std::unique_ptr<Communicator> world;

  /// Rank 0 logs, writes metrics, checkpoints and exports; the others only report errors.
  bool leader() const { return rank == 0; }
};

/// The whole tensors of `state` (this rank's shards) for a checkpoint or an export. Every rank
/// calls it: when the plan is partitioned the ranks of the first model group (data-parallel
/// index 0; every rank when data parallelism is a mesh axis, the optimizer state being split
/// over it too) all-gather the shards over it, and the leader gets the whole tensors. Returns nothing when
/// `state` is whole already (no partitioning) or this rank writes nothing.
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

/// Writes the checkpoint of `state` (shards gathered into whole tensors; only the leader
/// writes). Every rank calls it.
Error saveWholeCheckpoint(const std::string &dir, const Plan &plan, const TrainingState &state,
                          const RankMesh &mesh, bool leader) {
  Expected<std::optional<TrainingState>> whole = wholeState(plan, state, mesh, leader);
  if (!whole)
    return whole.takeError().withContext(concat("saving the checkpoint '", dir, "'"));
  if (!leader)
    return Error::success();
  return saveCheckpoint(dir, plan, *whole ? **whole : state);
}

/// "tp=2 x data parallel 2" for the log; "dp=2 x tp=2, distributed optimizer over dp" when
/// data parallelism is a mesh axis.
std::string describeMesh(const Plan &plan, const RankMesh &mesh) {
  std::string s;
  for (const MeshAxis &a : plan.mesh)
    s.append(s.empty() ? "" : " x ").append(concat(a.name, '=', a.size));
  if (plan.dataParallelAxis)
    return concat(s, ", distributed optimizer over ", plan.mesh[*plan.dataParallelAxis].name);
  return concat(s, " x data parallel ", mesh.placement().dpSize);
}

/// The bytes rank 0 should send per step: the compiled step's own collectives (the
/// compiler's prediction per call, times the micro-batches this rank runs) and the runtime's
/// reduction of the gradients and the loss over `dp` data-parallel ranks: ring all-reduces
/// (2 (dp - 1) / dp of the bytes) and, with the distributed optimizer, the reduce-scatter of
/// each gradient its optimizer layout splits over the data-parallel axis ((dp - 1) / dp of
/// its rank-local bytes).
double predictedCommunicationBytes(const Plan &plan, const Trainer &trainer, int64_t dp) {
  double bytes = 0;
  if (const auto &compiled = plan.predictions.communicationBytes)
    bytes += static_cast<double>(trainer.microBatches() / dp) *
                 static_cast<double>(compiled->forwardBackward) +
             static_cast<double>(compiled->optimizerStep);
  if (dp > 1) {
    double allReduced = 0, reduceScattered = 0;
    const std::vector<TrainingState::Tensor> &params = trainer.state().params;
    for (size_t i = 0; i < params.size(); ++i) {
      double gradient = static_cast<double>(params[i].values.size() * sizeof(float));
      (plan.dataParallelShardDim(plan.params[i]) ? reduceScattered : allReduced) += gradient;
    }
    double fraction = static_cast<double>(dp - 1) / static_cast<double>(dp);
    bytes += fraction * reduceScattered + 2.0 * fraction * (allReduced + sizeof(double));
  }
  return bytes;
}

/// Trains `state` up to `settings.targetSteps`, logging and checkpointing on the way.
Error train(const Plan &plan, const Options &opts, const RunSettings &settings,
            RankContext &job, const RankMesh &mesh, TrainingState &state) {
  int64_t vocab = plan.vocabularySize().value_or(0);
  Expected<TokenSource> data = opts.data ? TokenSource::text(*opts.data, vocab, plan.seed)
                                         : TokenSource::synthetic(vocab, plan.seed);
  if (!data)
    return data.takeError();
  Expected<KernelLibrary> kernels = KernelLibrary::load(plan);
  if (!kernels)
    return kernels.takeError();
  std::optional<MetricsWriter> metrics;
  if (opts.metrics && job.leader()) {
    Expected<MetricsWriter> writer = MetricsWriter::open(*opts.metrics);
    if (!writer)
      return writer.takeError();
    metrics.emplace(std::move(*writer));
  }
  int64_t first = state.step;
  Expected<Trainer> trainer = Trainer::create(plan, *kernels, std::move(state), *data,
                                              settings.globalBatch, mesh.dataParallel(),
                                              mesh.partitioned() ? &mesh.context() : nullptr);
  if (!trainer)
    return trainer.takeError();
  // Everything below prints on the leader only.
  auto print = [&](auto... args) {
    if (job.leader())
      std::printf(args...);
  };

  print("model %s: %s parameters, plan %s\n", plan.model.c_str(),
        withThousands(plan.numParameterElements()).c_str(), plan.dir.c_str());
  print("data: %s\n", data->describe().c_str());
  if (job.size > 1 && mesh.partitioned())
    print("ranks: %d (%s, %s over TCP)\n", job.size, describeMesh(plan, mesh).c_str(),
          std::string(job.world->backendName()).c_str());
  else if (job.size > 1)
    print("ranks: %d (data parallel, %s over TCP)\n", job.size,
          std::string(job.world->backendName()).c_str());
  print("batch: %lld sequences of %lld tokens (%lld micro-batch%s of %lld); steps %lld -> "
        "%lld\n",
              static_cast<long long>(trainer->microBatches() * trainer->microBatchSize()),
              static_cast<long long>(trainer->sequenceLength()),
              static_cast<long long>(trainer->microBatches()),
              trainer->microBatches() == 1 ? "" : "es",
              static_cast<long long>(trainer->microBatchSize()), static_cast<long long>(first),
              static_cast<long long>(settings.targetSteps));
  std::fflush(stdout);

  // The compiler's figure for the same accounting, when the plan has one (plans with kernels)
  // and the run keeps the plan's batch (the prediction assumes it).
  std::string predicted;
  if (std::optional<int64_t> bytes = plan.predictions.memoryBytes.peak;
      bytes && settings.globalBatch == 0)
    predicted = concat(" (predicted ", mebibytes(*bytes), ")");
  Progress progress(job.leader());
  // Bytes this rank sent over the world and every communicator split from it (the mesh
  // axes' collectives in the kernels, the data-parallel all-reduce, gathers of checkpoints).
  const uint64_t commStart = mesh.bytesSent();
  uint64_t commBytes = commStart;
  double firstLoss = 0, lastLoss = 0, seconds = 0;
  int64_t tokens = 0;
  while (trainer->state().step < settings.targetSteps) {
    Expected<StepStats> stats = trainer->step();
    if (!stats) {
      progress.clear();
      return stats.takeError();
    }
    if (stats->step == first + 1)
      firstLoss = stats->loss;
    lastLoss = stats->loss;
    seconds += stats->seconds;
    tokens += stats->tokens;
    double tokensPerSecond = stats->seconds > 0 ? double(stats->tokens) / stats->seconds : 0;
    int64_t peak = trainer->peakBytes();
    int64_t rss = peakResidentBytes();
    // Bytes this rank sent in the step's collectives (the communicator's counters).
    uint64_t sent = mesh.bytesSent();
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
      if (Error err = metrics->write(record); !err.ok())
        return err;
    }
    bool last = stats->step == settings.targetSteps;
    if (stats->step == first + 1 || stats->step % settings.logEvery == 0 || last) {
      progress.clear();
      print("step %6lld/%lld  loss %.4f  lr %.3e  grad norm %.3f  %8.0f tok/s  %8.1f ms  "
            "mem %s%s  rss %s\n",
                  static_cast<long long>(stats->step),
                  static_cast<long long>(settings.targetSteps), stats->loss, stats->lr,
                  stats->gradNorm, tokensPerSecond, stats->seconds * 1e3,
                  mebibytes(peak).c_str(), predicted.c_str(), mebibytes(rss).c_str());
      std::fflush(stdout);
    }
    if (opts.save && settings.saveEvery > 0 && stats->step % settings.saveEvery == 0 && !last) {
      if (mesh.partitioned()) {
        if (Error err = saveWholeCheckpoint(*opts.save, plan, trainer->state(), mesh, job.leader());
            !err.ok())
          return err;
      } else if (job.leader()) {
        if (Error err = saveCheckpoint(*opts.save, plan, trainer->state()); !err.ok())
          return err;
      }
    }
    progress.show(stats->step, settings.targetSteps);
  }
  progress.clear();
  if (trainer->state().step > first)
    print("trained steps %lld-%lld in %.1f s (%.0f tok/s): loss %.4f -> %.4f%s\n",
                static_cast<long long>(first + 1), static_cast<long long>(settings.targetSteps),
                seconds, seconds > 0 ? double(tokens) / seconds : 0.0, firstLoss, lastLoss,
                bestLossNote(*data).c_str());
  if (job.world && trainer->state().step > first)
    print(mesh.partitioned()
              ? "communication: %.2f MiB sent by rank 0 per step (the kernels' collectives, "
                "gradients and loss); predicted %.2f MiB\n"
              : "communication: %.2f MiB sent by rank 0 per step (gradients and loss, ring "
                "all-reduce); predicted %.2f MiB\n",
          static_cast<double>(commBytes - commStart) / (1024.0 * 1024.0) /
              static_cast<double>(trainer->state().step - first),
          predictedCommunicationBytes(plan, *trainer, mesh.placement().dpSize) /
              (1024.0 * 1024.0));
  if (const KernelArena *arena = kernels->arena(); arena && trainer->state().step > first)
    print("temporaries: a %s arena placed by the plan; %lld allocations fell back to the heap\n",
          mebibytes(arena->size()).c_str(), static_cast<long long>(kernelArenaFallbacks()));
  state = trainer->state();
  if (metrics)
    return metrics->close();
  return Error::success();
}

/// The plan's `train.steps` (0 when absent): a step count mtrun can run, or an error.
Expected<int64_t> readPlanSteps(const Plan &plan) {
  const JsonObject *train = plan.train.getObject();
  const JsonValue *steps = train ? train->find("steps") : nullptr;
  if (!steps)
    return 0;
  std::optional<int64_t> n = steps->getInt();
  if (!n || *n < 0 || *n > kMaxSteps)
    return makeError(plan.dir.string(), "/plan.json: train.steps is ", steps->serialize(),
                     ", not a step count from 0 to ", kMaxSteps);
  return *n;
}

/// Checks that the checkpoint, the export and the metrics can be written, before any step.
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

/// Joins the job a launcher started (torchrun, srun, mpirun, or mtrun --nodes itself):
/// rendezvous with the job token, then the world communicator over Gloo.
Expected<RankContext> joinJob(const LaunchEnvironment &env, std::chrono::milliseconds timeout) {
  RankContext job;
  job.rank = env.rank;
  job.size = env.worldSize;
  if (env.worldSize == 1)
    return job;
  // A job on one host listens on loopback only, its store and its Gloo pairs: no other host
  // can reach (or disturb) them. A job across hosts listens where the others reach it.
  const bool oneHost = runsOnOneHost(env);
  const std::string master = oneHost ? std::string("127.0.0.1") : env.masterAddr;
  Expected<JobStore> store = openJobStore(env.rank, master, env.masterPort, env.jobToken, timeout,
                                          oneHost ? "127.0.0.1" : "0.0.0.0");
  if (!store)
    return store.takeError().withContext("rendezvous");
  GlooOptions options;
  // GLOO_SOCKET_IFNAME names the interface, as for PyTorch; otherwise this host's address
  // on the route to the master, which the other ranks can reach (loopback on one host).
  if (const char *iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) {
    options.interface = iface;
  } else {
    Expected<std::string> address = localAddressToward(master);
    if (!address)
      return address.takeError().withContext("choosing the address to listen on");
    options.hostname = *address;
  }
  options.timeout = timeout;
  options.rendezvousTimeout = timeout;
  Expected<std::unique_ptr<GlooCommunicator>> world =
      GlooCommunicator::create(std::move(*store), env.rank, env.worldSize, options);
  if (!world)
    return world.takeError().withContext("connecting the ranks");
  job.world = std::move(*world);
  return job;
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
    return fail(makeError("no PLAN given (usage: mtrun PLAN [options]; see mtrun --help)"));
  if (opts->saveEvery && !opts->save)
    return fail(makeError("--save-every needs --save DIR"));

  // Every numeric option, the plan, the batch split and the outputs are checked here, before
  // any rank starts or any step runs.
  constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
  Expected<int64_t> nodes = parseCount(opts->nodes, "--nodes", 1, 1, kMaxRanks);
  Expected<int64_t> ranksPerNode =
      parseCount(opts->ranksPerNode, "--ranks-per-node", 1, 1, kMaxRanks);
  Expected<int64_t> commTimeout =
      parseCount(opts->commTimeout, "--comm-timeout", 60, 1, kMaxCommTimeoutSeconds);
  Expected<int64_t> steps = parseCount(opts->steps, "--steps", 0, 0, kMaxSteps);
  Expected<int64_t> logEvery = parseCount(opts->logEvery, "--log-every", 10, 1, kMaxInt64);
  Expected<int64_t> saveEvery = parseCount(opts->saveEvery, "--save-every", 0, 1, kMaxInt64);
  Expected<int64_t> threads = parseCount(opts->threads, "--threads", 0, 1, kMaxThreads);
  Expected<int64_t> globalBatch =
      parseCount(opts->globalBatch, "--global-batch", 0, 1, kMaxGlobalBatch);
  for (const Error *err : {&nodes.error(), &ranksPerNode.error(), &commTimeout.error(),
                           &steps.error(), &logEvery.error(), &saveEvery.error(), &threads.error(),
                           &globalBatch.error()})
    if (!err->ok())
      return fail(*err);
  int64_t requested = *nodes * *ranksPerNode;
  if (requested > kMaxRanks)
    return fail(makeError("--nodes ", *nodes, " --ranks-per-node ", *ranksPerNode, " asks for ",
                          requested, " ranks, more than the ", kMaxRanks, " this runtime runs"));
  // The launcher checks the plan before it starts any rank.
  Expected<Plan> plan = loadPlan(*opts->plan);
  if (!plan)
    return fail(plan.error());
  Expected<LaunchEnvironment> env = readLaunchEnvironment(processEnvironment());
  if (!env)
    return fail(env.error());
  Expected<int64_t> planSteps = readPlanSteps(*plan);
  if (!planSteps)
    return fail(planSteps.error());
  // Tensor parallelism: the ranks are mesh size x data-parallel degree (exactly the mesh size
  // when data parallelism is a mesh axis, the distributed optimizer); the global batch must
  // split over the data-parallel ranks.
  if (!opts->info && (env->launcher == Launcher::None || opts->nodes)) {
    Expected<MeshPlacement> p = placePlanRank(*plan, 0, requested);
    if (!p)
      return fail(p.error());
    if (plan->x86Kernels && plan->x86Kernels->forwardBackward)
      if (Expected<int64_t> split = countMicroBatches(*plan, *plan->x86Kernels->forwardBackward,
                                                       *globalBatch, p->dpSize);
          !split)
        return fail(split.error());
  }
  // Rank 0 writes the outputs (the launcher checks them for its ranks).
  if (env->rank == 0)
    if (Error err = checkOutputs(*opts); !err.ok())
      return fail(err);
  if (env->launcher == Launcher::None && requested > 1) {
    // Start the ranks here; each runs this command again and joins as the rank it is given.
    Expected<int> port = pickFreePort();
    if (!port)
      return fail(port.error());
    Expected<std::string> token = generateJobToken();
    if (!token)
      return fail(token.error());
    LocalLaunch launch;
    launch.executable = "/proc/self/exe";
    launch.args.assign(argv + 1, argv + argc);
    launch.worldSize = static_cast<int>(requested);
    launch.ranksPerNode = static_cast<int>(*ranksPerNode);
    launch.masterPort = *port;
    launch.token = *token;
    launch.grace = std::chrono::seconds(*commTimeout) + std::chrono::seconds(5);
    launch.notice = [](const std::string &text) {
      std::fprintf(stderr, "mtrun: warning: %s\n", text.c_str());
    };
    if (Error err = runLocalRanks(launch); !err.ok())
      return fail(err);
    return 0;
  }
  if (env->launcher != Launcher::None && opts->nodes && requested != env->worldSize)
    return fail(makeError("--nodes ", *nodes, " --ranks-per-node ", *ranksPerNode, " asks for ",
                          requested, " ranks, but ", launcherName(env->launcher), " started ",
                          env->worldSize));

  if (opts->info) {
    std::fputs(describePlan(*plan).c_str(), stdout);
    bool more = opts->steps || opts->load || opts->save || opts->exportSafetensors || opts->data;
    if (!more)
      return std::fflush(stdout) == 0 ? 0 : fail(makeError("cannot write the output"));
  }

  RunSettings settings;
  settings.targetSteps = opts->steps ? *steps : *planSteps;
  settings.logEvery = *logEvery;
  settings.saveEvery = *saveEvery;
  settings.threads = static_cast<unsigned>(*threads);
  settings.globalBatch = *globalBatch;
  // The GEMMs of small models lose more to waking OpenBLAS's threads than they gain.
  setGemmThreads(settings.threads > 0 ? static_cast<int>(settings.threads) : 1);

  Expected<RankContext> job = joinJob(*env, std::chrono::seconds(*commTimeout));
  if (!job) {
    RankContext self{env->rank, env->worldSize, nullptr};
    return fail(job.error(), &self);
  }
  // This rank's place on the plan's mesh and the communicators of its axes (collective).
  Expected<RankMesh> mesh = RankMesh::create(*plan, job->world.get());
  if (!mesh)
    return fail(mesh.error(), &*job);
  const std::vector<int64_t> &coordinates = mesh->placement().coordinates;
  // Checkpoints hold whole tensors: every rank reads them and keeps its shard.
  Expected<TrainingState> state = [&]() -> Expected<TrainingState> {
    if (opts->load) {
      Expected<TrainingState> whole = loadCheckpoint(*opts->load, *plan);
      if (!whole || !mesh->partitioned())
        return whole;
      return shardState(*plan, *whole, coordinates);
    }
    return mesh->partitioned()
               ? TrainingState::initializeShards(*plan, coordinates, settings.threads)
               : TrainingState::initialize(*plan, settings.threads);
  }();
  if (!state)
    return fail(state.error(), &*job);
  if (opts->load && job->leader())
    std::printf("resumed from %s at step %lld\n", opts->load->c_str(),
                static_cast<long long>(state->step));
  if (state->step > settings.targetSteps)
    return fail(makeError("the checkpoint is at step ", state->step, ", past --steps ",
                          settings.targetSteps, " (give a larger --steps to continue)"),
                &*job);
  if (state->step < settings.targetSteps)
    if (Error err = train(*plan, *opts, settings, *job, *mesh, *state); !err.ok())
      return fail(err, &*job);
  // Every data-parallel rank holds the same parameters and state: the leader writes them,
  // whole (the shards of a partitioned plan gathered over the model group first).
  std::optional<TrainingState> whole;
  if (opts->save || opts->exportSafetensors) {
    Expected<std::optional<TrainingState>> gathered =
        wholeState(*plan, *state, *mesh, job->leader());
    if (!gathered)
      return fail(gathered.error(), &*job);
    whole = std::move(*gathered);
  }
  const TrainingState &written = whole ? *whole : *state;
  if (opts->save && job->leader()) {
    if (Error err = saveCheckpoint(*opts->save, *plan, written); !err.ok())
      return fail(err, &*job);
    std::printf("saved checkpoint %s (step %lld)\n", opts->save->c_str(),
                static_cast<long long>(state->step));
  }
  if (opts->exportSafetensors && job->leader())
    if (Error err = exportParameters(*plan, written, *opts->exportSafetensors); !err.ok())
      return fail(err, &*job);
  if (std::fflush(stdout) != 0)
    return fail(makeError("cannot write the output"), &*job);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
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
    return run(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "mtrun: error: %s\n", e.what());
    return 1;
  }
}
