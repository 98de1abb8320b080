//===- TokenSource.cpp - The training data of a run -----------------------===//

#include "runtime/data/TokenSource.h"

#include <cstdio>

namespace mtc::rt {

Expected<TokenSource> TokenSource::synthetic(int64_t vocab, uint64_t seed) {
  Expected<SyntheticTask> task = SyntheticTask::create(vocab, seed);
  if (!task)
    return task.takeError().withContext("the synthetic task");
  return TokenSource(std::move(*task));
}

Expected<TokenSource> TokenSource::text(const std::filesystem::path &path, int64_t vocab,
                                        uint64_t seed) {
  if (vocab < TextDataset::kVocab)
    return makeError("--data ", path, ": byte-level text needs a vocabulary of at least ",
                     TextDataset::kVocab, " tokens, but the model's vocab is ", vocab);
  Expected<TextDataset> data = TextDataset::open(path, seed);
  if (!data)
    return data.takeError();
  return TokenSource(std::move(*data));
}

Expected<TokenSource> TokenSource::indexed(const DataBlend &data,
                                           const GptDataset::Options &options) {
  if (data.single()) {
    GptDataset::Options one = options;
    one.prefix = data.prefixes[0];
    Expected<GptDataset> gpt = GptDataset::open(one);
    if (!gpt)
      return gpt.takeError();
    return TokenSource(std::move(*gpt));
  }
  Expected<BlendedDataset> blend = BlendedDataset::open(data, options);
  if (!blend)
    return blend.takeError();
  // Only prefixes without weights blend fewer: one epoch of each.
  if (blend->size() < options.numSamples)
    return makeError("the blend ", data.describe(), " holds ", blend->size(),
                     " samples (one epoch of each dataset, as Megatron blends prefixes given "
                     "without weights), fewer than the ", options.numSamples,
                     " asked for: give each prefix a weight (--data-path 0.5 A 0.5 B) to "
                     "repeat them");
  return TokenSource(std::move(*blend));
}

Error TokenSource::batch(int64_t step, int64_t sampleBegin, int64_t count, int64_t seqLen,
                         int32_t *tokens, int32_t *labels) const {
  if (const auto *task = std::get_if<SyntheticTask>(&source_)) {
    task->batch(step, sampleBegin, count, seqLen, tokens, labels);
    return Error::success();
  }
  if (const auto *gpt = std::get_if<GptDataset>(&source_))
    return gpt->batch(step, sampleBegin, count, seqLen, tokens, labels);
  if (const auto *blend = std::get_if<BlendedDataset>(&source_))
    return blend->batch(step, sampleBegin, count, seqLen, tokens, labels);
  return std::get<TextDataset>(source_).batch(step, sampleBegin, count, seqLen, tokens, labels);
}

namespace {
std::string fixed4(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", value);
  return buf;
}
} // namespace

std::string TokenSource::describe() const {
  if (const auto *task = std::get_if<SyntheticTask>(&source_))
    return concat("synthetic Markov task over ", task->vocab(), " tokens (best loss ",
                  fixed4(task->entropyRate()), ", uniform ", fixed4(task->uniformLoss()), ")");
  if (const auto *gpt = std::get_if<GptDataset>(&source_))
    return gpt->describe();
  if (const auto *blend = std::get_if<BlendedDataset>(&source_))
    return blend->describe();
  const auto &text = std::get<TextDataset>(source_);
  return concat("text ", text.path(), " (", text.size(), " bytes, byte-level tokens)");
}

std::optional<double> TokenSource::bestLoss() const {
  if (const auto *task = std::get_if<SyntheticTask>(&source_))
    return task->entropyRate();
  return std::nullopt;
}

std::optional<TokenSource::Order> TokenSource::order() const {
  if (const auto *gpt = std::get_if<GptDataset>(&source_))
    return Order{gpt->index().numSamples(), gpt->index().numEpochs};
  return std::nullopt;
}

} // namespace mtc::rt
