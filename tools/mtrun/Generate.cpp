//===- Generate.cpp - `mtrun generate` ------------------------------------===//
//
// Parses and checks the flags, loads the plan and its parameters (a checkpoint, or the
// initial ones with --steps 0), tokenizes the prompt, generates (runtime/generate) and
// prints the text. Everything a user can get wrong is checked before the first token.
//
//===----------------------------------------------------------------------===//

#include "tools/mtrun/Generate.h"
#include "tools/mtrun/GenerationModel.h"

#include "runtime/data/NpyFile.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/generate/Decoding.h"
#include "runtime/support/CommandLine.h"
#include "runtime/support/OutputPaths.h"

#include <algorithm>
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
      threads, dumpLogits;
  std::vector<std::string> stopTokens;
  TokenizerOptions tokenizer;
  bool ignoreEod = false, ids = false, help = false, noKVCache = false;
};

constexpr const char *kUsage =
    "usage: mtrun generate PLAN (--load CKPT | --steps 0) --prompt TEXT [options]\n\n"
    "Continues TEXT with the plan's `logits` function on this CPU (one rank): greedy by\n"
    "default, sampled with --temperature > 0. Where the plan has `prefill` and `decode_step`\n"
    "(single-rank plans), each new token is scored with a KV cache.\n\n"
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
    "  --threads-per-rank N       threads of the kernels (default: OMP_NUM_THREADS, else cores)\n";

Expected<GenerateOptions> parseGenerateArgs(int argc, char **argv) {
  Expected<CommandLine> line = parseCommandLine(
      argc, argv, 1,
      {{"--load", "--steps", "--prompt", "--max-new-tokens", "--temperature", "--top-k", "--top-p",
        "--seed", "--threads-per-rank", "--dump-logits", kTokenizerFlags[0], kTokenizerFlags[1],
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

/// The logits of every position of `tokens` but the last, row-major [n - 1, vocabulary], as
/// a version 1.0 .npy file (numpy.load reads it): those generation used with the KV cache,
/// else the window's over the whole result.
Error writeLogits(const std::string &path, GenerationModel &model,
                  const std::vector<int64_t> &tokens) {
  Expected<std::vector<float>> rows = model.logitsOfPositions(tokens);
  if (!rows)
    return rows.takeError();
  const int64_t shape[] = {int64_t(tokens.size()) - 1, model.vocabulary()};
  return writeNpyFile(path, NpyDType::F32, shape,
                      std::string_view(reinterpret_cast<const char *>(rows->data()),
                                       rows->size() * sizeof(float)))
      .withContext("--dump-logits");
}

int failWith(const Error &err) {
  std::fflush(stdout);
  std::fprintf(stderr, "mtrun generate: error: %s\n", err.message().c_str());
  return 1;
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
  for (const Error *err : {&maxNew.error(), &temperature.error(), &topK.error(), &topP.error()})
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

  Expected<std::unique_ptr<GenerationModel>> model = GenerationModel::load(
      {opts->plan, opts->load, opts->steps, opts->threads, opts->tokenizer, opts->noKVCache});
  if (!model)
    return failWith(model.error());
  Expected<int64_t> seed = parseInteger(opts->seed, "--seed", int64_t((*model)->plan().seed), 0,
                                        std::numeric_limits<int64_t>::max());
  if (!seed)
    return failWith(seed.error());
  generation.sampling.seed = static_cast<uint64_t>(*seed);
  Expected<std::vector<int64_t>> prompt = (*model)->encode(*opts->prompt);
  if (!prompt) {
    Error error = prompt.error();
    return failWith(std::move(error).withContext("--prompt"));
  }
  for (const std::string &text : opts->stopTokens) {
    Expected<int64_t> id = parseInteger(text, "--stop-token", 0, 0, (*model)->vocabulary() - 1);
    if (!id)
      return failWith(id.error());
    generation.stopTokens.push_back(*id);
  }
  if (!opts->ignoreEod)
    generation.stopTokens.push_back((*model)->tokenizer().eod());

  Expected<Generation> result = (*model)->generate(*prompt, generation);
  if (!result)
    return failWith(result.error());

  std::string text;
  if (opts->ids) {
    for (size_t i = 0; i < result->tokens.size(); ++i)
      text += concat(i ? " " : "", result->tokens[i]);
  } else if (Error err = (*model)->tokenizer().decode(result->tokens, text); !err.ok()) {
    return failWith(std::move(err).withContext("decoding the generated tokens"));
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  if (opts->dumpLogits)
    if (Error err = writeLogits(*opts->dumpLogits, **model, result->tokens); !err.ok())
      return failWith(err);
  const int64_t made = static_cast<int64_t>(result->tokens.size()) - result->promptTokens;
  std::string why = result->reason == StopReason::StopToken
                        ? concat("stop token ", result->stopToken)
                    : result->reason == StopReason::WindowFull
                        ? concat("the model's window of ", (*model)->window(), " tokens is full")
                        : concat("--max-new-tokens ", generation.maxNewTokens);
  std::fprintf(stderr, "mtrun generate: %lld prompt tokens, %lld new (%s; %s; %s)\n",
               static_cast<long long>(result->promptTokens), static_cast<long long>(made),
               generation.sampling.temperature == 0 ? "greedy" : "sampled", why.c_str(),
               (*model)->usesKVCache() ? "KV cache" : "window path");
  return std::fflush(stdout) == 0 ? 0 : failWith(makeError("cannot write the output"));
}

} // namespace

int runGenerate(int argc, char **argv) { return generateMain(argc, argv); }

} // namespace mtc::rt
