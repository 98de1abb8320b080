//===- GenerationModel.cpp - What `mtrun generate` and `mtrun serve` load ---===//

#include "tools/mtrun/GenerationModel.h"

#include "runtime/comm/LaunchEnvironment.h"
#include "runtime/exec/Checkpoint.h"
#include "runtime/exec/KernelThreads.h"
#include "runtime/support/CommandLine.h"

namespace mtc::rt {

Expected<std::unique_ptr<GenerationModel>>
GenerationModel::load(const GenerationModelOptions &options) {
  if (!options.plan)
    return makeError("no PLAN given");
  if (options.load && options.steps)
    return makeError("--load and --steps 0 name two sets of parameters: give one");
  if (!options.load && !options.steps)
    return makeError("no parameters: give --load CKPT (a checkpoint of the plan) or --steps 0 "
                     "(its initial parameters)");
  if (options.steps && *options.steps != "0")
    return makeError("--steps must be 0 (the initial parameters; generation does not train), "
                     "got '",
                     *options.steps, "'");
  Expected<int64_t> threads =
      parseInteger(options.threads, "--threads-per-rank", 0, 1, kMaxThreadsPerRank);
  if (!threads)
    return threads.error();

  std::unique_ptr<GenerationModel> model(new GenerationModel());
  Expected<Plan> plan = loadPlan(*options.plan);
  if (!plan)
    return plan.error();
  if (plan->pipeline)
    return makeError(*options.plan, ": a pipeline plan runs its layers on several stages; "
                                    "generation runs on one rank (compile the model without "
                                    "--pp: a checkpoint loads under any layout)");
  model->plan_ = std::make_unique<Plan>(std::move(*plan));
  Expected<std::unique_ptr<Tokenizer>> tokenizer = makeTokenizer(options.tokenizer);
  if (!tokenizer)
    return tokenizer.error();
  model->tokenizer_ = std::move(*tokenizer);
  Expected<KernelLibrary> kernels = KernelLibrary::load(*model->plan_);
  if (!kernels)
    return kernels.error();
  model->kernels_ = std::make_unique<KernelLibrary>(std::move(*kernels));
  Expected<TrainingState> state = options.load ? loadCheckpoint(*options.load, *model->plan_)
                                               : TrainingState::initialize(*model->plan_);
  if (!state)
    return state.error();
  model->state_ = std::make_unique<TrainingState>(std::move(*state));
  Expected<LogitsFunction> logits =
      LogitsFunction::create(*model->plan_, *model->kernels_, *model->state_);
  if (!logits)
    return logits.error();
  model->logits_ = std::make_unique<LogitsFunction>(std::move(*logits));
  if (!options.noKVCache && model->kernels_->prefill() && model->kernels_->decodeStep()) {
    Expected<CachedLogits> cached =
        CachedLogits::create(*model->plan_, *model->kernels_, *model->state_);
    if (!cached)
      return cached.error();
    model->cached_ = std::make_unique<CachedLogits>(std::move(*cached));
  }
  Expected<int> threadsPerRank =
      options.threads ? Expected<int>(static_cast<int>(*threads))
                      : defaultThreadsPerRank(processEnvironment(), availableCores(), 1);
  if (!threadsPerRank)
    return threadsPerRank.error();
  model->threads_ = *threadsPerRank;
  setKernelThreads(model->threads_);
  return model;
}

Expected<std::vector<int64_t>> GenerationModel::encode(std::string_view text) {
  std::vector<int64_t> ids;
  if (Error err = tokenizer_->encode(text, ids); !err.ok())
    return err;
  for (int64_t id : ids)
    if (id >= vocabulary())
      return makeError("the ", tokenizer_->name(), " tokenizer gives id ", id,
                       ", outside the model's vocabulary of ", vocabulary(),
                       " (is it the tokenizer the model was trained with?)");
  return ids;
}

LogitsOfLast GenerationModel::logitsOfLast() {
  if (cached_)
    return [cached = cached_.get()](std::span<const int64_t> ids) {
      return cached->logitsOfLast(ids);
    };
  return
      [logits = logits_.get()](std::span<const int64_t> ids) -> Expected<std::span<const float>> {
        if (Error err = logits->run(ids); !err.ok())
          return err;
        return logits->at(static_cast<int64_t>(ids.size()) - 1);
      };
}

Expected<std::vector<float>>
GenerationModel::logitsOfPositions(std::span<const int64_t> tokens) {
  std::vector<float> rows;
  if (tokens.size() < 2)
    return rows;
  const size_t positions = tokens.size() - 1;
  if (cached_ && cached_->cachedTokens() < static_cast<int64_t>(positions))
    return makeError("the cache holds ", cached_->cachedTokens(), " positions, not the ",
                     positions, " asked for");
  if (!cached_)
    if (Error err = logits_->run(tokens); !err.ok())
      return err;
  for (size_t t = 0; t < positions; ++t) {
    std::span<const float> row = cached_ ? cached_->at(int64_t(t)) : logits_->at(int64_t(t));
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

Expected<Generation> GenerationModel::generate(std::span<const int64_t> prompt,
                                               const GenerationOptions &options) {
  return rt::generate(logitsOfLast(), prompt, window(), options);
}

} // namespace mtc::rt
