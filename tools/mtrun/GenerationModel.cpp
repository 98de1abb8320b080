//===- GenerationModel.cpp - What `mtrun generate` and `mtrun serve` load ---===//

#include "tools/mtrun/GenerationModel.h"

#include "runtime/comm/LaunchEnvironment.h"
#include "runtime/exec/Checkpoint.h"
#include "runtime/exec/KernelThreads.h"
#include "runtime/generate/SharedLogits.h"
#include "runtime/plan/Sharding.h"
#include "runtime/support/CommandLine.h"

#include <algorithm>

namespace mtc::rt {

Error checkGenerationLayout(const Plan &plan, int64_t worldSize, std::string_view command) {
  if (plan.pipeline)
    return makeError(plan.dir.string(),
                     ": a pipeline plan runs its layers on several stages, which generation "
                     "does not (compile the model without --pp to generate: a checkpoint loads "
                     "under any layout)");
  Expected<MeshPlacement> placed = placePlanRank(plan, 0, worldSize);
  if (!placed)
    return makeError(plan.dir.string(), ": ", placed.error().message(),
                     plan.meshSize() > 1
                         ? concat(" (", command, " with --nodes ", plan.meshSize(), ")")
                         : std::string());
  return Error::success();
}

std::string describeMesh(const Plan &plan, int64_t ranks) {
  std::string text;
  for (const MeshAxis &a : plan.mesh)
    if (a.size > 1)
      text += concat(a.name, "=", a.size, " x ");
  return concat(text, "data parallel ", ranks / std::max<int64_t>(plan.meshSize(), 1));
}

Expected<std::vector<int64_t>> encodeForModel(Tokenizer &tokenizer, int64_t vocabulary,
                                              std::string_view text) {
  std::vector<int64_t> ids;
  if (Error err = tokenizer.encode(text, ids); !err.ok())
    return err;
  for (int64_t id : ids)
    if (id >= vocabulary)
      return makeError("the ", tokenizer.name(), " tokenizer gives id ", id,
                       ", outside the model's vocabulary of ", vocabulary,
                       " (is it the tokenizer the model was trained with?)");
  return ids;
}

Expected<std::unique_ptr<GenerationModel>>
GenerationModel::load(const GenerationModelOptions &options, Communicator *world) {
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
  if (Error err = checkGenerationLayout(*plan, world ? world->size() : 1); !err.ok())
    return err;
  model->plan_ = std::make_unique<Plan>(std::move(*plan));
  model->world_ = world;
  // This rank's place on the mesh and the communicators of its axes (collective).
  Expected<RankMesh> mesh = RankMesh::create(*model->plan_, world);
  if (!mesh)
    return mesh.takeError();
  model->mesh_ = std::make_unique<RankMesh>(std::move(*mesh));
  Expected<std::unique_ptr<Tokenizer>> tokenizer = makeTokenizer(options.tokenizer);
  if (!tokenizer)
    return tokenizer.error();
  model->tokenizer_ = std::move(*tokenizer);
  Expected<KernelLibrary> kernels = KernelLibrary::load(*model->plan_);
  if (!kernels)
    return kernels.error();
  model->kernels_ = std::make_unique<KernelLibrary>(std::move(*kernels));
  // Checkpoints hold whole tensors: every rank reads them and keeps its shards (training's
  // --load does the same); the initial parameters are made shard by shard.
  const Plan &p = *model->plan_;
  const RankMesh &placed = *model->mesh_;
  const std::vector<int64_t> &coordinates = placed.placement().coordinates;
  Expected<TrainingState> state =
      options.load ? loadCheckpoint(*options.load, p)
      : placed.partitioned() ? TrainingState::initializeShards(p, coordinates)
                             : TrainingState::initialize(p);
  if (state && options.load && placed.partitioned())
    state = shardState(p, *state, coordinates);
  if (!state)
    return state.error();
  model->state_ = std::make_unique<TrainingState>(std::move(*state));
  Expected<LogitsFunction> logits = LogitsFunction::create(
      p, *model->kernels_, *model->state_, placed.partitioned() ? &placed.context() : nullptr);
  if (!logits)
    return logits.error();
  model->logits_ = std::make_unique<LogitsFunction>(std::move(*logits));
  // The cached functions, where the compiler gave the plan them (mt-kv-cache).
  if (!options.noKVCache && model->kernels_->prefill() && model->kernels_->decodeStep()) {
    Expected<CachedLogits> cached =
        CachedLogits::create(*model->plan_, *model->kernels_, *model->state_,
                             placed.partitioned() ? &placed.context() : nullptr);
    if (!cached)
      return cached.error();
    model->cached_ = std::make_unique<CachedLogits>(std::move(*cached));
  }
  Expected<int> threadsPerRank =
      options.threads ? Expected<int>(static_cast<int>(*threads))
                      : defaultThreadsPerRank(processEnvironment(), availableCores(),
                                              options.ranksOnHost);
  if (!threadsPerRank)
    return threadsPerRank.error();
  model->threads_ = *threadsPerRank;
  setKernelThreads(model->threads_);
  return model;
}

Expected<std::vector<int64_t>> GenerationModel::encode(std::string_view text) {
  return encodeForModel(*tokenizer_, vocabulary(), text);
}

LogitsOfLast GenerationModel::logitsOfLast() {
  LogitsOfLast local;
  if (cached_)
    local = [cached = cached_.get()](std::span<const int64_t> ids) {
      return cached->logitsOfLast(ids);
    };
  else
    local = [logits = logits_.get()](
                std::span<const int64_t> ids) -> Expected<std::span<const float>> {
      if (Error err = logits->run(ids); !err.ok())
        return err;
      return logits->at(static_cast<int64_t>(ids.size()) - 1);
    };
  return shareLogitsOfRankZero(std::move(local), world_, vocabulary());
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
