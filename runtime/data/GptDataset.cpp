//===- GptDataset.cpp - Megatron's GPT sample order over an indexed dataset ----===//

#include "runtime/data/GptDataset.h"

#include "runtime/data/GptIndexCache.h"
#include "runtime/data/NumpyRandom.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>

namespace mtc::rt {

Expected<std::array<double, 3>> parseSplit(std::string_view split) {
  // Megatron takes every run of digits and dots as a number (re.findall("[.0-9]+")).
  std::vector<std::string> numbers;
  for (size_t i = 0; i < split.size();) {
    size_t j = i;
    while (j < split.size() && (split[j] == '.' || (split[j] >= '0' && split[j] <= '9')))
      ++j;
    if (j > i) {
      numbers.emplace_back(split.substr(i, j - i));
      i = j;
    } else {
      ++i;
    }
  }
  auto fail = [&](const auto &...pieces) {
    return makeError("--split '", split, "': ", pieces...);
  };
  if (numbers.size() > 3)
    return fail("more than three weights (train, valid, test)");
  std::array<double, 3> w = {0, 0, 0};
  for (size_t i = 0; i < numbers.size(); ++i) {
    const char *begin = numbers[i].c_str();
    char *end = nullptr;
    w[i] = std::strtod(begin, &end);
    if (end != begin + numbers[i].size() || !std::isfinite(w[i]))
      return fail("'", numbers[i], "' is not a number");
  }
  // numpy sums three float64s in order.
  double sum = (w[0] + w[1]) + w[2];
  if (!(sum > 0))
    return fail("the weights must not all be 0");
  for (double &x : w)
    x /= sum;
  return w;
}

std::string_view splitName(DataSplit split) {
  static constexpr std::string_view kNames[] = {"train", "valid", "test"};
  return kNames[int(split)];
}

std::array<std::optional<DocumentRange>, 3> splitDocuments(const std::array<double, 3> &weights,
                                                           int64_t numDocuments) {
  std::array<std::optional<DocumentRange>, 3> ranges;
  double begin = 0;
  for (size_t i = 0; i < 3; ++i) {
    double end = begin + weights[i];
    // Python's round() is to nearest, ties to even, as nearbyint in the default mode.
    if (end > begin)
      ranges[i] = DocumentRange{int64_t(std::nearbyint(begin * double(numDocuments))),
                                int64_t(std::nearbyint(end * double(numDocuments)))};
    begin = end;
  }
  return ranges;
}

namespace {

/// The documents `documents` repeated `epochs` times, shuffled (Megatron's
/// _build_document_index without a separate final epoch), appended to `out`.
void appendDocumentEpochs(DocumentRange documents, int64_t epochs, NumpyRandomState &random,
                          std::vector<int32_t> &out) {
  const size_t first = out.size();
  for (int64_t e = 0; e < epochs; ++e)
    for (int64_t d = documents.begin; d < documents.end; ++d)
      out.push_back(int32_t(d));
  random.shuffle(std::span<int32_t>(out).subspan(first));
}

/// [begin, end) shuffled, appended to `out`.
void appendShuffledRange(int64_t begin, int64_t end, NumpyRandomState &random,
                         std::vector<int64_t> &out) {
  const size_t first = out.size();
  for (int64_t k = begin; k < end; ++k)
    out.push_back(k);
  random.shuffle(std::span<int64_t>(out).subspan(first));
}

} // namespace

Expected<GptIndexShape> gptIndexShape(int64_t tokensPerEpoch, int64_t numDocuments, int64_t seqLen,
                                      int64_t numSamples) {
  if (seqLen < 2)
    return makeError("a sequence length of ", seqLen, " is too short (at least 2)");
  if (tokensPerEpoch < 2)
    return makeError("the documents hold ", tokensPerEpoch,
                     " tokens, fewer than the 2 a sample needs");
  // Megatron adds one token to every sample (the last label).
  constexpr int64_t extra = 1;
  if (numSamples < 0 || numSamples > (std::numeric_limits<int64_t>::max() - extra) / seqLen)
    return makeError(numSamples, " samples are out of range");
  GptIndexShape shape;
  // The fewest epochs that hold numSamples samples of seqLen tokens and the extra one.
  const int64_t tokensWanted = numSamples * seqLen + extra;
  shape.numEpochs = 1 + (tokensWanted - 1) / tokensPerEpoch;
  const int64_t epochs = shape.numEpochs;
  if (epochs > std::numeric_limits<int32_t>::max() ||
      epochs > std::numeric_limits<int64_t>::max() / tokensPerEpoch ||
      (numDocuments > 0 && epochs > std::numeric_limits<int64_t>::max() / numDocuments))
    return makeError(numSamples, " samples of ", seqLen, " tokens need ", epochs, " epochs of ",
                     tokensPerEpoch, " tokens: too many");
  if (epochs > 1) {
    shape.samplesBeforeFinalEpoch = ((epochs - 1) * tokensPerEpoch - extra) / seqLen;
    int64_t fromFinalEpoch = numSamples - shape.samplesBeforeFinalEpoch;
    int64_t perEpoch = (tokensPerEpoch - extra) / seqLen;
    // Megatron: int(0.80 * num_samples_per_epoch), in doubles.
    shape.separateFinalEpoch = fromFinalEpoch < int64_t(0.80 * double(perEpoch));
  }
  shape.numSamples = (epochs * tokensPerEpoch - extra) / seqLen;
  shape.documentIndexSize = epochs * numDocuments;
  return shape;
}

std::vector<int64_t> buildSampleIndex(std::span<const int32_t> sequenceLengths,
                                      std::span<const int32_t> documentIndex, int64_t seqLen,
                                      int64_t numSamples) {
  constexpr int64_t extra = 1;
  const std::span<const int32_t> docs = documentIndex;
  std::vector<int64_t> samples;
  samples.reserve(size_t(2 * (numSamples + 1)));
  int64_t position = 0, offset = 0;
  samples.push_back(position);
  samples.push_back(offset);
  for (int64_t k = 1; k <= numSamples; ++k) {
    int64_t remaining = seqLen + extra;
    while (remaining != 0) {
      int64_t length = sequenceLengths[size_t(docs[size_t(position)])] - offset;
      remaining -= length;
      if (remaining <= 0) {
        // The sample ends inside this document; the next starts at its last token.
        offset += remaining + length - extra;
        remaining = 0;
      } else if (position == int64_t(docs.size()) - 1) {
        // Out of documents (only on the last sample).
        offset = sequenceLengths[size_t(docs[size_t(position)])] - extra;
        break;
      } else {
        ++position;
        offset = 0;
      }
    }
    samples.push_back(position);
    samples.push_back(offset);
  }
  return samples;
}

Expected<GptSampleIndex> buildGptSampleIndex(std::span<const int32_t> sequenceLengths,
                                             DocumentRange documents, int64_t seqLen,
                                             int64_t numSamples, uint32_t seed) {
  if (seqLen < 2)
    return makeError("a sequence length of ", seqLen, " is too short (at least 2)");
  if (documents.begin < 0 || documents.end > int64_t(sequenceLengths.size()) ||
      documents.begin > documents.end)
    return makeError("documents [", documents.begin, ", ", documents.end, ") are not among the ",
                     sequenceLengths.size(), " of the dataset");
  if (documents.end > std::numeric_limits<int32_t>::max())
    return makeError("more than 2^31 documents");
  int64_t tokensPerEpoch = 0;
  for (int64_t d = documents.begin; d < documents.end; ++d)
    tokensPerEpoch += sequenceLengths[size_t(d)];
  if (tokensPerEpoch < 2)
    return makeError("documents [", documents.begin, ", ", documents.end, ") hold ", tokensPerEpoch,
                     " tokens, fewer than the 2 a sample needs");
  Expected<GptIndexShape> shape =
      gptIndexShape(tokensPerEpoch, documents.end - documents.begin, seqLen, numSamples);
  if (!shape)
    return shape.takeError();

  GptSampleIndex index;
  index.numEpochs = shape->numEpochs;
  index.separateFinalEpoch = shape->separateFinalEpoch;
  const int64_t epochs = shape->numEpochs, totalSamples = shape->numSamples;
  try {
    index.documentIndex.reserve(size_t(shape->documentIndexSize));
    index.shuffleIndex.reserve(size_t(totalSamples));
    NumpyRandomState random(seed);
    if (index.separateFinalEpoch) {
      appendDocumentEpochs(documents, epochs - 1, random, index.documentIndex);
      appendDocumentEpochs(documents, 1, random, index.documentIndex);
    } else {
      appendDocumentEpochs(documents, epochs, random, index.documentIndex);
    }
    index.sampleIndex =
        buildSampleIndex(sequenceLengths, index.documentIndex, seqLen, totalSamples);
    if (index.separateFinalEpoch) {
      appendShuffledRange(0, shape->samplesBeforeFinalEpoch, random, index.shuffleIndex);
      appendShuffledRange(shape->samplesBeforeFinalEpoch, totalSamples, random, index.shuffleIndex);
    } else {
      appendShuffledRange(0, totalSamples, random, index.shuffleIndex);
    }
  } catch (const std::bad_alloc &) {
    return makeError("out of memory for the indices of ", totalSamples, " samples over ",
                     shape->documentIndexSize, " documents");
  } catch (const std::length_error &) {
    return makeError("out of memory for the indices of ", totalSamples, " samples over ",
                     shape->documentIndexSize, " documents");
  }
  return index;
}

Expected<GptDataset> GptDataset::openSplit(const Options &options) {
  Expected<std::array<double, 3>> weights = parseSplit(options.split);
  if (!weights)
    return weights.takeError();
  if (options.seed > std::numeric_limits<uint32_t>::max())
    return makeError("the seed ", options.seed,
                     " does not fit in 32 bits, which Megatron's sample order (numpy's "
                     "RandomState) takes");
  Expected<IndexedDataset> dataset = IndexedDataset::open(options.prefix);
  if (!dataset)
    return dataset.takeError();
  GptDataset gpt(std::move(*dataset));
  gpt.options_ = options;
  std::optional<DocumentRange> range =
      splitDocuments(*weights, gpt.dataset_.numSequences())[int(options.which)];
  if (!range)
    return makeError("indexed dataset ", options.prefix, ": --split '", options.split,
                     "' gives the ", splitName(options.which), " split no documents");
  gpt.documents_ = *range;
  for (int64_t d = range->begin; d < range->end; ++d)
    gpt.tokensPerEpoch_ += gpt.dataset_.sequenceLengths()[size_t(d)];
  // As buildGptSampleIndex says it, before any index is built.
  if (gpt.tokensPerEpoch_ < 2)
    return makeError("documents [", range->begin, ", ", range->end, ") hold ",
                     gpt.tokensPerEpoch_, " tokens, fewer than the 2 a sample needs")
        .withContext(gpt.splitContext());
  return gpt;
}

std::string GptDataset::splitContext() const {
  return concat("indexed dataset ", options_.prefix, ": the ", splitName(options_.which),
                " split (--split '", options_.split, "', ", dataset_.numSequences(),
                " documents)");
}

Error GptDataset::check(const Options &options) {
  Expected<GptDataset> gpt = openSplit(options);
  return gpt ? Error::success() : gpt.takeError();
}

Expected<bool> GptDataset::splitHasDocuments(const Options &options) {
  Expected<std::array<double, 3>> weights = parseSplit(options.split);
  if (!weights)
    return weights.takeError();
  Expected<IndexedDataset> dataset = IndexedDataset::open(options.prefix);
  if (!dataset)
    return dataset.takeError();
  std::optional<DocumentRange> range =
      splitDocuments(*weights, dataset->numSequences())[int(options.which)];
  return range && range->end > range->begin;
}

Expected<GptDataset> GptDataset::open(const Options &options) {
  Expected<GptDataset> gpt = openSplit(options);
  if (!gpt)
    return gpt.takeError();
  if (!options.cachePath.empty()) {
    GptIndexRequest request;
    request.datasetPath = options.prefix.string();
    request.split = options.split;
    request.which = options.which;
    request.documents = gpt->documents_;
    request.sequenceLengths = gpt->dataset_.sequenceLengths();
    request.seqLen = options.seqLen;
    request.numSamples = options.numSamples;
    request.seed = uint32_t(options.seed);
    Expected<CachedGptIndex> cached = cachedGptSampleIndex(options.cachePath, request);
    if (!cached)
      return cached.takeError().withContext(gpt->splitContext());
    gpt->index_ = std::move(cached->index);
    gpt->origin_ = cached->loaded ? IndexOrigin::Loaded : IndexOrigin::BuiltAndCached;
    gpt->cacheEntry_ = cached->files.prefix;
    gpt->cacheDescription_ = std::move(cached->description);
    return gpt;
  }
  Expected<GptSampleIndex> index =
      buildGptSampleIndex(gpt->dataset_.sequenceLengths(), gpt->documents_, options.seqLen,
                          options.numSamples, uint32_t(options.seed));
  if (!index)
    return index.takeError().withContext(gpt->splitContext());
  gpt->index_ = std::move(*index);
  return gpt;
}

Error GptDataset::sample(int64_t k, std::vector<int64_t> &tokens) const {
  tokens.clear();
  const std::vector<int64_t> &shuffle = index_.shuffleIndex;
  if (k < 0 || k >= int64_t(shuffle.size()))
    return makeError("indexed dataset ", options_.prefix, ": no sample ", k, " (the order has ",
                     shuffle.size(), ")");
  const int64_t s = shuffle[size_t(k)];
  const int64_t *at = index_.sampleIndex.data() + 2 * s;
  const int64_t begin = at[0], beginOffset = at[1], end = at[2], endOffset = at[3];
  const std::vector<int32_t> &docs = index_.documentIndex;
  // From the first document's offset to the last document's end offset, inclusive.
  for (int64_t p = begin; p <= end; ++p) {
    const int64_t doc = docs[size_t(p)];
    const int64_t from = p == begin ? beginOffset : 0;
    const int64_t to = p == end ? endOffset + 1 : dataset_.sequenceLengths()[size_t(doc)];
    if (Error err = dataset_.read(doc, from, to - from, tokens); !err.ok())
      return err;
  }
  if (int64_t(tokens.size()) != options_.seqLen + 1)
    return makeError("indexed dataset ", options_.prefix, ": sample ", k, " has ", tokens.size(),
                     " tokens instead of ", options_.seqLen + 1);
  return Error::success();
}

Error GptDataset::tokensAndLabels(int64_t k, int64_t seqLen, int32_t *tokens, int32_t *labels,
                                  std::vector<int64_t> &window) const {
  if (seqLen != options_.seqLen)
    return makeError("indexed dataset ", options_.prefix, ": samples of ", seqLen,
                     " tokens asked for, but its sample order is for ", options_.seqLen);
  if (Error err = sample(k, window); !err.ok())
    return err;
  for (int64_t t = 0; t <= seqLen; ++t) {
    int64_t id = window[size_t(t)];
    if (options_.vocab > 0 && (id < 0 || id >= options_.vocab))
      return makeError("indexed dataset ", options_.prefix, ": token id ", id, " of sample ", k,
                       " is outside the model's vocabulary of ", options_.vocab,
                       " tokens (ids 0 to ", options_.vocab - 1, ")");
    if (t < seqLen)
      tokens[t] = int32_t(id);
    if (t > 0)
      labels[t - 1] = int32_t(id);
  }
  return Error::success();
}

Error GptDataset::batch(int64_t step, int64_t sampleBegin, int64_t count, int64_t seqLen,
                        int32_t *tokens, int32_t *labels) const {
  if (count <= 0 || seqLen <= 0)
    return Error::success();
  std::vector<int64_t> window;
  for (int64_t i = 0; i < count; ++i)
    if (Error err = tokensAndLabels(step * options_.globalBatch + sampleBegin + i, seqLen,
                                    tokens + i * seqLen, labels + i * seqLen, window);
        !err.ok())
      return err;
  return Error::success();
}

std::string GptDataset::describeIndexOrigin() const {
  switch (origin_) {
  case IndexOrigin::Built:
    return "";
  case IndexOrigin::Loaded:
    return concat("; indices loaded from '", cacheEntry_.string(), "*'");
  case IndexOrigin::BuiltAndCached:
    return concat("; indices cached in '", cacheEntry_.string(), "*'");
  }
  return "";
}

std::string GptDataset::describe() const {
  return concat("indexed dataset ", options_.prefix, " (", splitName(options_.which),
                " split: documents [", documents_.begin, ", ", documents_.end, ") of ",
                dataset_.numSequences(), ", ", tokensPerEpoch_, " tokens; ", index_.numSamples(),
                " samples of ", options_.seqLen + 1, " tokens in ", index_.numEpochs,
                index_.numEpochs == 1 ? " epoch" : " epochs",
                index_.separateFinalEpoch ? ", the last shuffled apart" : "", "; seed ",
                options_.seed, describeIndexOrigin(), ")");
}

} // namespace mtc::rt
