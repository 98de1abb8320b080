//===- BlendedDataset.cpp - Megatron's blend of indexed datasets ---------===//

#include "runtime/data/BlendedDataset.h"

#include "runtime/data/BlendIndexCache.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <new>

namespace mtc::rt {

namespace {

/// `word` as Python's float() reads it (a sign, digits, a point, an exponent, "inf", "nan";
/// surrounding blanks), or nothing.
std::optional<double> parseFloat(std::string_view word) {
  while (!word.empty() && (word.front() == ' ' || word.front() == '\t'))
    word.remove_prefix(1);
  while (!word.empty() && (word.back() == ' ' || word.back() == '\t'))
    word.remove_suffix(1);
  bool negative = false;
  if (!word.empty() && (word.front() == '+' || word.front() == '-')) {
    negative = word.front() == '-';
    word.remove_prefix(1);
  }
  // from_chars takes no sign but '-', and reads "0x..." as 0 followed by "x...": both leave
  // characters over, which makes the word not a number.
  if (word.empty() || word.front() == '-' || word.front() == '+')
    return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (end != word.data() + word.size() ||
      (ec != std::errc() && ec != std::errc::result_out_of_range))
    return std::nullopt;
  // Python reads a literal past the range as inf, or as 0 or a subnormal, as strtod does
  // (from_chars leaves the value unset).
  if (ec == std::errc::result_out_of_range)
    value = std::strtod(std::string(word).c_str(), nullptr);
  return negative ? -value : value;
}

std::string quoted(std::span<const std::string> words) {
  std::string text;
  for (const std::string &w : words)
    text.append(text.empty() ? "" : " ").append(w);
  return concat("'", text, "'");
}

/// numpy's pairwise_sum for float64 (numpy/core/src/umath/loops_utils.h.src).
double pairwiseSum(const double *a, size_t n) {
  if (n < 8) {
    double sum = 0.;
    for (size_t i = 0; i < n; ++i)
      sum += a[i];
    return sum;
  }
  if (n <= 128) {
    double r[8];
    for (size_t j = 0; j < 8; ++j)
      r[j] = a[j];
    size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (size_t j = 0; j < 8; ++j)
        r[j] += a[i + j];
    double sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i)
      sum += a[i];
    return sum;
  }
  size_t half = n / 2;
  half -= half % 8;
  return pairwiseSum(a, half) + pairwiseSum(a + half, n - half);
}

} // namespace

std::string DataBlend::describe() const {
  std::string text;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    text.append(i ? ", " : "");
    if (!weights.empty())
      text.append(concat(weights[i], " "));
    text.append(concat(std::filesystem::path(prefixes[i])));
  }
  return text;
}

Expected<DataBlend> parseDataBlend(std::span<const std::string> words, std::string_view flag) {
  auto fail = [&](const auto &...pieces) {
    return makeError(flag, " ", quoted(words), ": ", pieces...);
  };
  if (words.empty())
    return makeError(flag, " needs a PREFIX, or weights and prefixes in pairs (", flag,
                     " 0.3 A 0.7 B)");
  std::vector<std::optional<double>> numbers;
  for (const std::string &w : words)
    numbers.push_back(parseFloat(w));
  const bool anyNumber =
      std::any_of(numbers.begin(), numbers.end(), [](const auto &n) { return n.has_value(); });
  DataBlend blend;
  if (!anyNumber) {
    // Megatron's list of prefixes, weighted by their sizes when there are several.
    blend.prefixes.assign(words.begin(), words.end());
  } else {
    if (words.size() % 2 == 1) {
      if (numbers.back())
        return fail("the weight ", words.back(), " has no prefix after it");
      return fail(words.size(), " values where weights and prefixes go in pairs (WEIGHT PREFIX "
                                "WEIGHT PREFIX ...)");
    }
    for (size_t i = 0; i < words.size(); i += 2) {
      if (!numbers[i])
        return fail("'", words[i],
                    "' where a weight belongs: each prefix follows its weight "
                    "(0.3 A 0.7 B)");
      if (numbers[i + 1])
        return fail("'", words[i + 1], "' where a prefix belongs (after the weight ", words[i],
                    "): each prefix follows its weight (0.3 A 0.7 B)");
      const double w = *numbers[i];
      if (!std::isfinite(w) || !(w > 0))
        return fail("the weight ", words[i], " of '", words[i + 1],
                    "' is not a positive finite number");
      blend.weights.push_back(w);
      blend.prefixes.push_back(words[i + 1]);
    }
  }
  for (const std::string &p : blend.prefixes)
    if (p.find_first_not_of(" \t") == std::string::npos)
      return fail("an empty prefix");
  if (int64_t(blend.prefixes.size()) > kMaxBlendedDatasets)
    return fail(blend.prefixes.size(), " datasets, more than the ", kMaxBlendedDatasets,
                " Megatron blends");
  return blend;
}

double numpySum(std::span<const double> values) {
  return pairwiseSum(values.data(), values.size());
}

std::vector<double> normalizeWeights(std::span<const double> weights) {
  const double sum = numpySum(weights);
  std::vector<double> normalized;
  normalized.reserve(weights.size());
  for (double w : weights)
    normalized.push_back(w / sum);
  return normalized;
}

std::vector<int64_t> samplesPerDataset(std::span<const double> weights, int64_t size,
                                       double surplus) {
  // Python: int(math.ceil(math.ceil(size * w) * (1 + surplus))), in float64 throughout.
  std::vector<int64_t> sizes;
  sizes.reserve(weights.size());
  for (double w : weights) {
    const double target = std::ceil(double(size) * w);
    sizes.push_back(int64_t(std::ceil(target * (1.0 + surplus))));
  }
  return sizes;
}

Expected<BlendingIndex> buildBlendingIndex(std::span<const double> weights, int64_t size) {
  // helpers.cpp computes each error as one product and one difference, rounded apart; a
  // fused multiply-add would round once and could choose another dataset on a near tie.
#pragma STDC FP_CONTRACT OFF
  if (weights.empty() || int64_t(weights.size()) > kMaxBlendedDatasets)
    return makeError("a blend of ", weights.size(), " datasets (1 to ", kMaxBlendedDatasets, ")");
  BlendingIndex index;
  try {
    index.dataset.resize(size_t(size));
    index.sample.resize(size_t(size));
  } catch (const std::bad_alloc &) {
    return makeError("out of memory for the blending indices of ", size, " samples");
  } catch (const std::length_error &) {
    return makeError("out of memory for the blending indices of ", size, " samples");
  }
  std::vector<int64_t> counts(weights.size(), 0);
  for (int64_t k = 0; k < size; ++k) {
    const double at = std::max(double(k), 1.0);
    size_t chosen = 0;
    double maxError = weights[0] * at - double(counts[0]);
    for (size_t d = 1; d < weights.size(); ++d) {
      const double error = weights[d] * at - double(counts[d]);
      if (error > maxError) {
        maxError = error;
        chosen = d;
      }
    }
    index.dataset[size_t(k)] = int16_t(chosen);
    index.sample[size_t(k)] = counts[chosen]++;
  }
  return index;
}

Expected<BlendedDataset> BlendedDataset::open(const DataBlend &blend,
                                              const GptDataset::Options &options, double surplus) {
  if (blend.prefixes.empty())
    return makeError("a blend of no datasets");
  if (!blend.weights.empty() && blend.weights.size() != blend.prefixes.size())
    return makeError("a blend of ", blend.prefixes.size(), " prefixes with ", blend.weights.size(),
                     " weights");
  BlendedDataset data;
  data.blend_ = blend;
  data.options_ = options;
  const size_t n = blend.prefixes.size();
  // With weights: each dataset's order for its share of the samples and a surplus; without,
  // one epoch of each (GptDataset's order for 0 samples, Megatron's for None).
  std::vector<double> normalized;
  std::vector<int64_t> contributions;
  if (!blend.weights.empty()) {
    normalized = normalizeWeights(blend.weights);
    contributions = samplesPerDataset(normalized, options.numSamples, 0.0);
    data.samplesBuilt_ = samplesPerDataset(normalized, options.numSamples, surplus);
  } else {
    data.samplesBuilt_.assign(n, 0);
  }
  for (size_t i = 0; i < n; ++i) {
    GptDataset::Options each = options;
    each.prefix = blend.prefixes[i];
    each.numSamples = data.samplesBuilt_[i];
    Expected<GptDataset> gpt = GptDataset::open(each);
    if (!gpt)
      return gpt.takeError();
    data.datasets_.push_back(std::move(*gpt));
  }
  int64_t size = 0;
  if (!blend.weights.empty()) {
    for (int64_t c : contributions)
      size += c;
    data.weights_ = normalizeWeights(normalized);
  } else {
    // Weighted by their sizes, at most all of them.
    std::vector<double> lengths;
    for (const GptDataset &gpt : data.datasets_) {
      lengths.push_back(double(gpt.index().numSamples()));
      size += gpt.index().numSamples();
    }
    // Megatron asserts every weight is positive.
    for (size_t i = 0; i < n; ++i)
      if (lengths[i] <= 0)
        return makeError("indexed dataset ", std::filesystem::path(blend.prefixes[i]), ": its ",
                         splitName(options.which), " split holds no sample of ", options.seqLen + 1,
                         " tokens in an epoch (a blend of prefixes without weights weights "
                         "each by one epoch's samples): give them weights");
    size = std::min(size, options.numSamples);
    data.weights_ = normalizeWeights(lengths);
  }
  if (!options.cachePath.empty()) {
    // Megatron's BlendedDataset entry next to the datasets' (BlendIndexCache.h).
    BlendIndexRequest request;
    request.which = options.which;
    request.weights = data.weights_;
    request.size = size;
    for (const GptDataset &gpt : data.datasets_) {
      request.datasets.push_back(gpt.cacheDescription());
      request.datasetSamples.push_back(gpt.index().numSamples());
    }
    Expected<CachedBlendIndex> cached = cachedBlendingIndex(options.cachePath, request);
    if (!cached)
      return cached.takeError().withContext(
          concat("the blend ", blend.describe(), " (", splitName(options.which), " split)"));
    data.index_ = std::move(cached->index);
    data.cacheEntry_ = cached->files.prefix;
    data.indexLoaded_ = cached->loaded;
  } else {
    Expected<BlendingIndex> index = buildBlendingIndex(data.weights_, size);
    if (!index)
      return index.takeError();
    data.index_ = std::move(*index);
  }
  // Megatron refuses a blend that draws more samples from a dataset than its order holds.
  data.drawn_.assign(n, 0);
  for (int16_t d : data.index_.dataset)
    ++data.drawn_[size_t(d)];
  for (size_t i = 0; i < n; ++i)
    if (data.drawn_[i] > data.datasets_[i].index().numSamples())
      return makeError("the blend ", blend.describe(), " draws ", data.drawn_[i],
                       " samples from indexed dataset ", std::filesystem::path(blend.prefixes[i]),
                       ", whose order holds only ", data.datasets_[i].index().numSamples());
  return data;
}

Expected<std::pair<const GptDataset *, int64_t>> BlendedDataset::locate(int64_t k) const {
  if (k < 0 || k >= size())
    return makeError("the blend ", blend_.describe(), ": no sample ", k, " (the blend has ", size(),
                     ")");
  return std::pair<const GptDataset *, int64_t>(&datasets_[size_t(index_.dataset[size_t(k)])],
                                                index_.sample[size_t(k)]);
}

Error BlendedDataset::sample(int64_t k, std::vector<int64_t> &tokens) const {
  Expected<std::pair<const GptDataset *, int64_t>> at = locate(k);
  if (!at)
    return at.takeError();
  return at->first->sample(at->second, tokens);
}

Error BlendedDataset::batch(int64_t step, int64_t sampleBegin, int64_t count, int64_t seqLen,
                            int32_t *tokens, int32_t *labels) const {
  if (count <= 0 || seqLen <= 0)
    return Error::success();
  std::vector<int64_t> window;
  for (int64_t i = 0; i < count; ++i) {
    Expected<std::pair<const GptDataset *, int64_t>> at =
        locate(step * options_.globalBatch + sampleBegin + i);
    if (!at)
      return at.takeError();
    if (Error err = at->first->tokensAndLabels(at->second, seqLen, tokens + i * seqLen,
                                               labels + i * seqLen, window);
        !err.ok())
      return err;
  }
  return Error::success();
}

std::string BlendedDataset::describe() const {
  std::string text = concat("blend of ", datasets_.size(), " indexed datasets (",
                            splitName(options_.which), " split: ", size(), " samples of ",
                            options_.seqLen + 1, " tokens; seed ", options_.seed, "): ");
  for (size_t i = 0; i < datasets_.size(); ++i) {
    const GptDataset &gpt = datasets_[i];
    char weight[32];
    std::snprintf(weight, sizeof weight, "%.4g", weights_[i]);
    text.append(i ? ", " : "")
        .append(weight)
        .append(concat(" ", std::filesystem::path(blend_.prefixes[i]), " (", drawn_[i],
                       " samples of its ", gpt.index().numSamples(), ": documents [",
                       gpt.documents().begin, ", ", gpt.documents().end, ") of ",
                       gpt.dataset().numSequences(), ", ", gpt.tokensPerEpoch(), " tokens, ",
                       gpt.index().numEpochs, gpt.index().numEpochs == 1 ? " epoch" : " epochs",
                       gpt.index().separateFinalEpoch ? ", the last shuffled apart" : "",
                       gpt.describeIndexOrigin(), ")"));
  }
  return text + describeIndexOrigin();
}

std::string BlendedDataset::describeIndexOrigin() const {
  if (cacheEntry_.empty())
    return "";
  return concat("; blending indices ", indexLoaded_ ? "loaded from '" : "cached in '",
                cacheEntry_.string(), "*'");
}

} // namespace mtc::rt
