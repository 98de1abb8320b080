//===- Generate.cpp - `mtrun generate` ------------------------------------===//
//
// Parses and checks the flags, loads the plan and its parameters (a checkpoint, or the
// initial ones with --steps 0), tokenizes the prompt, generates (runtime/generate) and
// prints the text. Everything a user can get wrong is checked before the first token.
//
// `--nodes N [--ranks-per-node R]` runs the plan on N x R ranks as training does (Job.h):
// this process checks the flags, the plan's layout and the prompt, then starts the ranks,
// each running this command again; every rank loads its shards of the model
// (GenerationModel.h) and generates the same tokens, and rank 0 alone prints them.
//
//===----------------------------------------------------------------------===//

#include "tools/mtrun/Generate.h"
#include "tools/mtrun/GenerationModel.h"
#include "tools/mtrun/Job.h"

#include "runtime/comm/LaunchEnvironment.h"
#include "runtime/data/NpyFile.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/generate/Decoding.h"
#include "runtime/support/CommandLine.h"
#include "runtime/support/OutputPaths.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::rt {
namespace {

struct GenerateOptions {
  std::optional<std::string> plan, load, steps, prompt, maxNewTokens, temperature, topK, topP, seed,
      threads, dumpLogits, nodes, ranksPerNode, commTimeout;
  std::vector<std::string> stopTokens;
  TokenizerOptions tokenizer;
  bool ignoreEod = false, ids = false, help = false, noKVCache = false;
};

constexpr const char *kUsage =
    "usage: mtrun generate PLAN (--load CKPT | --steps 0) --prompt TEXT [options]\n\n"
    "Continues TEXT with the plan's `logits` function on this CPU: greedy by default,\n"
    "sampled with --temperature > 0. Where the plan has `prefill` and `decode_step`\n"
    "(plans of one rank, over tp/sp, or ZeRO-1/2), each new token is scored with a KV cache.\n"
    "A plan partitioned over tp/sp (cp, ep) runs on the ranks of its mesh (--nodes), each\n"
    "rank with its shards of the checkpoint; rank 0 prints.\n\n"
    "options:\n"
    "  --load DIR                 the parameters of the checkpoint in DIR\n"
    "  --steps 0                  the plan's initial parameters instead\n"
    "  --prompt TEXT              the text to continue (not empty)\n"
    "  --max-new-tokens N         at most N new tokens (default: until the window is full)\n"
    "  --temperature T            0: greedy (the default); T > 0: sample softmax(logits / T)\n"
    "  --top-k K                  sample among the K most likely tokens (0: all, the default)\n"
    "  --top-p P                  sample in the smallest set of probability >= P, in (0, 1]\n"
    "  --seed S                   the sampling seed (default: the plan's seed)\n"
    "  --stop-token ID            end when ID is chosen (repeatable; the tokenizer's end of\n"
    "                             document always ends, unless --ignore-eod)\n"
    "  --ignore-eod               do not end at the tokenizer's end of document\n"
    "  --tokenizer-type T         bytes (default), GPT2BPETokenizer, SentencePieceTokenizer,\n"
    "                             GPTSentencePieceTokenizer, Llama2Tokenizer (as mtc-data)\n"
    "  --vocab-file F, --merge-file F, --tokenizer-model F   the tokenizer's files\n"
    "  --vocab-extra-ids N        SentencePieceTokenizer: T5's N sentinels (as mtc-data)\n"
    "  --ids                      print the token ids instead of the text\n"
    "  --dump-logits FILE         write the logits of every position of the result (.npy,\n"
    "                             f32 [tokens - 1, vocabulary])\n"
    "  --no-kv-cache              score the whole window for every token (the window path),\n"
    "                             even where the plan has a KV cache\n"
    "  --threads-per-rank N       threads of the kernels (default: OMP_NUM_THREADS, else\n"
    "                             this host's cores / its ranks)\n"
    "  --nodes N                  run N nodes' ranks (on this host unless a launcher started\n"
    "                             mtrun): a multiple of the plan's mesh size\n"
    "  --ranks-per-node R         ranks per node (default 1)\n"
    "  --comm-timeout S           fail a collective after S seconds without progress\n"
    "                             (default 60)\n";

Expected<GenerateOptions> parseGenerateArgs(int argc, char **argv) {
  Expected<CommandLine> line = parseCommandLine(
      argc, argv, 1,
      {{"--load", "--steps", "--prompt", "--max-new-tokens", "--temperature", "--top-k", "--top-p",
        "--seed", "--threads-per-rank", "--dump-logits", "--nodes", "--ranks-per-node",
        "--comm-timeout", kTokenizerFlags[0], kTokenizerFlags[1],
        kTokenizerFlags[2], kTokenizerFlags[3], kTokenizerFlags[4]},
       {"--stop-token"},
       {"--help", "-h", "--ignore-eod", "--ids", "--no-kv-cache"},
       " of mtrun generate (see mtrun generate --help)"});
  if (!line)
    return line.takeError();
  if (line->positional.size() > 1)
    return makeError("unexpected argument '", line->positional[1],
                     "' (mtrun generate takes one PLAN)");
  GenerateOptions o;
  if (!line->positional.empty())
    o.plan = line->positional.front();
  o.load = line->value("--load");
  o.steps = line->value("--steps");
  o.prompt = line->value("--prompt");
  o.maxNewTokens = line->value("--max-new-tokens");
  o.temperature = line->value("--temperature");
  o.topK = line->value("--top-k");
  o.topP = line->value("--top-p");
  o.seed = line->value("--seed");
  o.threads = line->value("--threads-per-rank");
  o.dumpLogits = line->value("--dump-logits");
  o.nodes = line->value("--nodes");
  o.ranksPerNode = line->value("--ranks-per-node");
  o.commTimeout = line->value("--comm-timeout");
  if (auto stops = line->repeated.find("--stop-token"); stops != line->repeated.end())
    o.stopTokens = stops->second;
  Expected<TokenizerOptions> tokenizer = tokenizerOptions(*line);
  if (!tokenizer)
    return tokenizer.takeError();
  o.tokenizer = std::move(*tokenizer);
  o.help = line->flags.count("--help") || line->flags.count("-h");
  o.ignoreEod = line->flags.count("--ignore-eod") > 0;
  o.ids = line->flags.count("--ids") > 0;
  o.noKVCache = line->flags.count("--no-kv-cache") > 0;
  return o;
}

/// The logits of every position of `tokens` but the last, row-major [n - 1, vocabulary]
/// (GenerationModel::logitsOfPositions), as a version 1.0 .npy file (numpy.load reads it).
Error writeLogits(const std::string &path, int64_t vocabulary, const std::vector<int64_t> &tokens,
                  const std::vector<float> &rows) {
  const int64_t shape[] = {std::max<int64_t>(int64_t(tokens.size()) - 1, 0), vocabulary};
  return writeNpyFile(path, NpyDType::F32, shape,
                      std::string_view(reinterpret_cast<const char *>(rows.data()),
                                       rows.size() * sizeof(float)))
      .withContext("--dump-logits");
}

/// Prints the error; on a rank of several, names it.
int failWith(const Error &err, const RankContext *job = nullptr) {
  std::fflush(stdout);
  if (job && job->size > 1)
    std::fprintf(stderr, "mtrun generate: error: rank %d: %s\n", job->rank,
                 err.message().c_str());
  else
    std::fprintf(stderr, "mtrun generate: error: %s\n", err.message().c_str());
  return 1;
}

/// The prompt's ids and the rest of the generation options (the seed, the stop tokens) from
/// the flags, checked against the plan and the tokenizer.
Error completeRequest(const GenerateOptions &o, const Plan &plan, Tokenizer &tokenizer,
                      std::vector<int64_t> &prompt, GenerationOptions &generation) {
  Expected<int64_t> seed = parseInteger(o.seed, "--seed", int64_t(plan.seed), 0,
                                        std::numeric_limits<int64_t>::max());
  if (!seed)
    return seed.takeError();
  generation.sampling.seed = static_cast<uint64_t>(*seed);
  Expected<std::vector<int64_t>> ids = encodeForModel(tokenizer, plan.vocabularyRealSize, *o.prompt);
  if (!ids)
    return ids.takeError().withContext("--prompt");
  prompt = std::move(*ids);
  for (const std::string &text : o.stopTokens) {
    Expected<int64_t> id = parseInteger(text, "--stop-token", 0, 0, plan.vocabularyRealSize - 1);
    if (!id)
      return id.takeError();
    generation.stopTokens.push_back(*id);
  }
  if (!o.ignoreEod)
    generation.stopTokens.push_back(tokenizer.eod());
  return Error::success();
}

/// The launcher of `--nodes N`: checks what every rank would refuse alike (the plan's layout
/// for the job's ranks, the tokenizer, the prompt and the stop tokens), then starts the ranks
/// and waits for them.
int launchRanks(const GenerateOptions &o, int argc, char **argv, int64_t requested,
                int64_t ranksPerNode, int64_t commTimeout) {
  Expected<Plan> plan = loadPlan(*o.plan);
  if (!plan)
    return failWith(plan.error());
  if (Error err = checkGenerationLayout(*plan, requested); !err.ok())
    return failWith(err);
  Expected<std::unique_ptr<Tokenizer>> tokenizer = makeTokenizer(o.tokenizer);
  if (!tokenizer)
    return failWith(tokenizer.error());
  std::vector<int64_t> prompt;
  GenerationOptions generation;
  if (Error err = completeRequest(o, *plan, **tokenizer, prompt, generation); !err.ok())
    return failWith(err);
  if (plan->x86Kernels && plan->x86Kernels->logits) {
    const int64_t window = plan->x86Kernels->logits->inputs[0].dims.back().size;
    if (static_cast<int64_t>(prompt.size()) >= window)
      return failWith(makeError("the prompt is ", prompt.size(),
                                " tokens, and the model's window (the plan's sequence length) "
                                "is ",
                                window,
                                ": no room for a new token (prompts are not truncated and "
                                "there is no sliding window)"));
  }
  std::vector<std::string> args(argv, argv + argc); // "generate" first
  Expected<int> threads = threadsForLocalRanks(o.threads, static_cast<int>(requested), args, 1);
  if (!threads)
    return failWith(threads.error());
  if (Error err = startLocalRanks(std::move(args), static_cast<int>(requested),
                                  static_cast<int>(ranksPerNode), *threads,
                                  std::chrono::seconds(commTimeout) + std::chrono::seconds(5));
      !err.ok())
    return failWith(err);
  return 0;
}

/// Generates on this rank of `job` (of one rank without --nodes); rank 0 prints.
int generateOnRank(const GenerateOptions &o, GenerationOptions generation, const RankContext &job,
                   int ranksOnHost) {
  Expected<std::unique_ptr<GenerationModel>> model =
      GenerationModel::load({o.plan, o.load, o.steps, o.threads, o.tokenizer, o.noKVCache,
                             ranksOnHost},
                            job.world.get());
  if (!model)
    return failWith(model.error(), &job);
  std::vector<int64_t> prompt;
  if (Error err = completeRequest(o, (*model)->plan(), (*model)->tokenizer(), prompt, generation);
      !err.ok())
    return failWith(err, &job);

  Expected<Generation> result = (*model)->generate(prompt, generation);
  if (!result)
    return failWith(result.error(), &job);
  // The logits of the result: on the window path of a mesh plan a collective, so every rank
  // computes them, and rank 0 writes them.
  std::optional<std::vector<float>> rows;
  if (o.dumpLogits) {
    Expected<std::vector<float>> computed = (*model)->logitsOfPositions(result->tokens);
    if (!computed)
      return failWith(computed.error(), &job);
    rows = std::move(*computed);
  }
  if (!(*model)->leader())
    return 0;

  std::string text;
  if (o.ids) {
    for (size_t i = 0; i < result->tokens.size(); ++i)
      text += concat(i ? " " : "", result->tokens[i]);
  } else if (Error err = (*model)->tokenizer().decode(result->tokens, text); !err.ok()) {
    return failWith(std::move(err).withContext("decoding the generated tokens"), &job);
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  if (rows)
    if (Error err = writeLogits(*o.dumpLogits, (*model)->vocabulary(), result->tokens, *rows);
        !err.ok())
      return failWith(err, &job);
  const int64_t made = static_cast<int64_t>(result->tokens.size()) - result->promptTokens;
  std::string why = result->reason == StopReason::StopToken
                        ? concat("stop token ", result->stopToken)
                    : result->reason == StopReason::WindowFull
                        ? concat("the model's window of ", (*model)->window(), " tokens is full")
                        : concat("--max-new-tokens ", generation.maxNewTokens);
  std::string ranks =
      job.size > 1 ? concat("; ", job.size, " ranks, ", describeMesh((*model)->plan(), job.size))
                   : std::string();
  std::fprintf(stderr, "mtrun generate: %lld prompt tokens, %lld new (%s; %s; %s%s)\n",
               static_cast<long long>(result->promptTokens), static_cast<long long>(made),
               generation.sampling.temperature == 0 ? "greedy" : "sampled", why.c_str(),
               (*model)->usesKVCache() ? "KV cache" : "window path", ranks.c_str());
  return std::fflush(stdout) == 0 ? 0 : failWith(makeError("cannot write the output"), &job);
}

int generateMain(int argc, char **argv) {
  Expected<GenerateOptions> opts = parseGenerateArgs(argc, argv);
  if (!opts)
    return failWith(opts.error());
  if (opts->help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!opts->plan)
    return failWith(makeError("no PLAN given (usage: mtrun generate PLAN --load CKPT --prompt "
                              "TEXT; see mtrun generate --help)"));
  if (!opts->prompt)
    return failWith(makeError("no --prompt TEXT given (the text to continue)"));
  Expected<int64_t> maxNew =
      parseInteger(opts->maxNewTokens, "--max-new-tokens", -1, 0, int64_t(1) << 40);
  Expected<double> temperature = parseNumber(opts->temperature, "--temperature", 0);
  Expected<int64_t> topK = parseInteger(opts->topK, "--top-k", 0, 0, int64_t(1) << 40);
  Expected<double> topP = parseNumber(opts->topP, "--top-p", 1);
  constexpr int64_t kMaxRanks = 65536, kMaxCommTimeoutSeconds = 24 * 60 * 60;
  Expected<int64_t> nodes = parseInteger(opts->nodes, "--nodes", 1, 1, kMaxRanks);
  Expected<int64_t> ranksPerNode =
      parseInteger(opts->ranksPerNode, "--ranks-per-node", 1, 1, kMaxRanks);
  Expected<int64_t> commTimeout =
      parseInteger(opts->commTimeout, "--comm-timeout", 60, 1, kMaxCommTimeoutSeconds);
  for (const Error *err : {&maxNew.error(), &temperature.error(), &topK.error(), &topP.error(),
                           &nodes.error(), &ranksPerNode.error(), &commTimeout.error()})
    if (!err->ok())
      return failWith(*err);
  GenerationOptions generation;
  generation.maxNewTokens = *maxNew;
  generation.sampling.temperature = *temperature;
  generation.sampling.topK = *topK;
  generation.sampling.topP = *topP;
  if (Error err = checkSamplingOptions(generation.sampling); !err.ok())
    return failWith(std::move(err).withContext(*temperature < 0          ? "--temperature"
                                               : *topP <= 0 || *topP > 1 ? "--top-p"
                                                                         : "--top-k"));
  if (opts->dumpLogits)
    if (Error err = checkOutputFile(*opts->dumpLogits, "--dump-logits"); !err.ok())
      return failWith(err);
  const int64_t requested = *nodes * *ranksPerNode;
  if (requested > kMaxRanks)
    return failWith(makeError("--nodes ", *nodes, " --ranks-per-node ", *ranksPerNode,
                              " asks for ", requested, " ranks, more than the ", kMaxRanks,
                              " this runtime runs"));
  Expected<LaunchEnvironment> env = readLaunchEnvironment(processEnvironment());
  if (!env)
    return failWith(env.error());
  if (env->launcher == Launcher::None && requested > 1)
    return launchRanks(*opts, argc, argv, requested, *ranksPerNode, *commTimeout);
  if (env->launcher != Launcher::None && opts->nodes && requested != env->worldSize)
    return failWith(makeError("--nodes ", *nodes, " --ranks-per-node ", *ranksPerNode,
                              " asks for ", requested, " ranks, but ",
                              launcherName(env->launcher), " started ", env->worldSize));

  JobStore store;
  Expected<RankContext> job = joinJob(*env, std::chrono::seconds(*commTimeout), store);
  if (!job) {
    RankContext self{env->rank, env->worldSize, nullptr};
    return failWith(job.error(), &self);
  }
  const int ranksOnHost = env->launcher == Launcher::None ? 1
                          : env->localWorldSize > 0        ? env->localWorldSize
                                                           : env->worldSize;
  int status = generateOnRank(*opts, generation, *job, ranksOnHost);
  if (status != 0)
    finishFailedRank(*job, store, std::chrono::seconds(*commTimeout));
  return status;
}

} // namespace

int runGenerate(int argc, char **argv) { return generateMain(argc, argv); }

} // namespace mtc::rt
