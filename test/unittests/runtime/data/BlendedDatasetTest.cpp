//===- BlendedDatasetTest.cpp - Megatron's blend of indexed datasets ------===//
//
// `--data-path`'s forms and every error of them, numpy's summation and Megatron's weight
// arithmetic to the bit, the blending indices on cases small enough to follow by hand, and
// the samples and batches of a blend read through them. The order's equality with
// Megatron's own algorithm over numpy is checked on larger cases by
// test/tools/mtc-data/samples.test (a Python transcription of Megatron's builder).
//
//===----------------------------------------------------------------------===//

#include "runtime/data/BlendedDataset.h"
#include "runtime/data/TokenSource.h"

#include "test/unittests/runtime/data/DatasetFiles.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

using namespace mtc::rt;
using mtc::rt::test::TempDir;
using mtc::rt::test::writeDataset;

namespace {

std::string parseError(std::vector<std::string> words) {
  Expected<DataBlend> blend = parseDataBlend(words);
  return blend ? std::string("no error") : blend.error().message();
}

TEST(BlendedDatasetTest, DataPathForms) {
  Expected<DataBlend> one = parseDataBlend(std::vector<std::string>{"corpus"});
  ASSERT_TRUE(one) << one.error().message();
  EXPECT_TRUE(one->single());
  EXPECT_EQ(one->prefixes, std::vector<std::string>{"corpus"});

  // Weights as Python's float() reads them: exponents, a sign, blanks around.
  Expected<DataBlend> weighted =
      parseDataBlend(std::vector<std::string>{"0.3", "a", "7e-1", "b", "+2", "c", " 1 ", "d"});
  ASSERT_TRUE(weighted) << weighted.error().message();
  EXPECT_FALSE(weighted->single());
  EXPECT_EQ(weighted->prefixes, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(weighted->weights, (std::vector<double>{0.3, 0.7, 2, 1}));
  EXPECT_EQ(weighted->describe(), "0.3 'a', 0.7 'b', 2 'c', 1 'd'");

  // A weighted prefix alone is a blend of one; prefixes alone are weighted by their sizes; a
  // prefix given twice is two datasets.
  Expected<DataBlend> blendOfOne = parseDataBlend(std::vector<std::string>{"1", "a"});
  ASSERT_TRUE(blendOfOne);
  EXPECT_FALSE(blendOfOne->single());
  Expected<DataBlend> sizes = parseDataBlend(std::vector<std::string>{"a", "b", "a"});
  ASSERT_TRUE(sizes);
  EXPECT_FALSE(sizes->single());
  EXPECT_TRUE(sizes->weights.empty());
  EXPECT_EQ(sizes->describe(), "'a', 'b', 'a'");
}

TEST(BlendedDatasetTest, DataPathErrors) {
  EXPECT_EQ(parseError({}), "--data-path needs a PREFIX, or weights and prefixes in pairs "
                            "(--data-path 0.3 A 0.7 B)");
  EXPECT_EQ(parseError({"0.3", "a", "0.7"}),
            "--data-path '0.3 a 0.7': the weight 0.7 has no prefix after it");
  EXPECT_EQ(parseError({"0.3"}), "--data-path '0.3': the weight 0.3 has no prefix after it");
  EXPECT_EQ(parseError({"0.3", "a", "b"}),
            "--data-path '0.3 a b': 3 values where weights and prefixes go in pairs (WEIGHT "
            "PREFIX WEIGHT PREFIX ...)");
  EXPECT_EQ(parseError({"a", "0.3", "b", "0.7"}),
            "--data-path 'a 0.3 b 0.7': 'a' where a weight belongs: each prefix follows its "
            "weight (0.3 A 0.7 B)");
  EXPECT_EQ(parseError({"0.3", "0.7", "a", "b"}),
            "--data-path '0.3 0.7 a b': '0.7' where a prefix belongs (after the weight 0.3): "
            "each prefix follows its weight (0.3 A 0.7 B)");
  for (std::string bad : {"0", "-1", "-0.5", "inf", "nan", "1e999"})
    EXPECT_EQ(parseError({"0.5", "a", bad, "b"}), "--data-path '0.5 a " + bad + " b': the weight " +
                                                      bad +
                                                      " of 'b' is not a positive finite number")
        << bad;
  EXPECT_EQ(parseError({"1", " "}), "--data-path '1  ': an empty prefix");
  // Hexadecimal is not a number to Python: a prefix, and then a weight is missing.
  EXPECT_EQ(parseError({"0x1", "a", "1", "b"}),
            "--data-path '0x1 a 1 b': '0x1' where a weight belongs: each prefix follows its "
            "weight (0.3 A 0.7 B)");
  std::vector<std::string> many;
  for (int64_t i = 0; i <= kMaxBlendedDatasets; ++i)
    many.insert(many.end(), {"1", "a"});
  Expected<DataBlend> tooMany = parseDataBlend(many);
  ASSERT_FALSE(tooMany);
  EXPECT_NE(tooMany.error().message().find(": 32767 datasets, more than the 32766 Megatron blends"),
            std::string::npos);
}

// numpy sums float64 pairwise: in turn below 8 values, in 8 partial sums up to 128, halves
// beyond. The expected sums are numpy's (numpy.sum of the same arrays), which differ from
// adding in turn in the last bit.
TEST(BlendedDatasetTest, NumpySum) {
  std::vector<double> small = {0.1, 0.2, 0.3};
  EXPECT_EQ(numpySum(small), (0.1 + 0.2) + 0.3);
  std::vector<double> twenty;
  for (int i = 0; i < 20; ++i)
    twenty.push_back(0.1 * (i % 7 + 1) + 0.04);
  EXPECT_EQ(numpySum(twenty), 0x1.1000000000001p+3);
  EXPECT_NE(std::accumulate(twenty.begin(), twenty.end(), 0.0), numpySum(twenty));
  std::vector<double> harmonic;
  for (int i = 0; i < 300; ++i)
    harmonic.push_back(1.0 / (i + 1));
  EXPECT_EQ(numpySum(harmonic), 0x1.92172a3e6965ap+2);
  EXPECT_EQ(std::accumulate(harmonic.begin(), harmonic.end(), 0.0), 0x1.92172a3e69658p+2);
  EXPECT_EQ(numpySum({}), 0.0);
}

// Megatron normalises in the builder and again in BlendedDataset; the second can change the
// last bits (values from numpy).
TEST(BlendedDatasetTest, WeightsAndSizesAsMegatron) {
  std::vector<double> once = normalizeWeights(std::vector<double>{0.1, 0.2, 0.3});
  EXPECT_EQ(once, (std::vector<double>{0x1.5555555555555p-3, 0x1.5555555555555p-2,
                                       0x1.ffffffffffffep-2}));
  EXPECT_EQ(normalizeWeights(once), (std::vector<double>{0x1.5555555555556p-3, 0x1.5555555555556p-2,
                                                         0x1.fffffffffffffp-2}));
  // ceil(N w), and ceil(ceil(N w) x 1.005) for the orders.
  std::vector<double> w = normalizeWeights(std::vector<double>{0.3, 0.7});
  EXPECT_EQ(samplesPerDataset(w, 1000, 0.0), (std::vector<int64_t>{300, 700}));
  EXPECT_EQ(samplesPerDataset(w, 1000, kMegatronMidLevelSurplus), (std::vector<int64_t>{302, 704}));
  std::vector<double> thirds = normalizeWeights(std::vector<double>{1, 2, 3});
  EXPECT_EQ(samplesPerDataset(thirds, 7, 0.0), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(samplesPerDataset(thirds, 7, kMegatronMidLevelSurplus),
            (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(samplesPerDataset(thirds, 1000, kMegatronMidLevelSurplus),
            (std::vector<int64_t>{168, 336, 503}));
  EXPECT_EQ(samplesPerDataset(thirds, 0, kMegatronMidLevelSurplus),
            (std::vector<int64_t>{0, 0, 0}));
}

// Each sample goes to the dataset furthest behind its share w max(k, 1) - count, the first on
// a tie, and is that dataset's next sample.
TEST(BlendedDatasetTest, BlendingIndexByHand) {
  // k = 0 and 1 both compare at 1: 0.5 and 0.5 (a tie: dataset 0), then -0.5 and 0.5.
  Expected<BlendingIndex> halves = buildBlendingIndex(std::vector<double>{0.5, 0.5}, 4);
  ASSERT_TRUE(halves) << halves.error().message();
  EXPECT_EQ(halves->dataset, (std::vector<int16_t>{0, 1, 0, 1}));
  EXPECT_EQ(halves->sample, (std::vector<int64_t>{0, 0, 1, 1}));
  // 0.25 / 0.75, errors at k = 0..7: 0.25 | 0.75 -> 1; 0.25 | -0.25 -> 0; -0.5 | 0.5 -> 1;
  // -0.25 | 0.25 -> 1; 0 | 0 -> 0 (the tie); -0.75 | 0.75, -0.5 | 0.5, -0.25 | 0.25 -> 1.
  Expected<BlendingIndex> quarter = buildBlendingIndex(std::vector<double>{0.25, 0.75}, 8);
  ASSERT_TRUE(quarter);
  EXPECT_EQ(quarter->dataset, (std::vector<int16_t>{1, 0, 1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(quarter->sample, (std::vector<int64_t>{0, 0, 1, 2, 1, 3, 4, 5}));
  // A blend of one takes every sample in order.
  Expected<BlendingIndex> one = buildBlendingIndex(std::vector<double>{1.0}, 3);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->dataset, (std::vector<int16_t>{0, 0, 0}));
  EXPECT_EQ(one->sample, (std::vector<int64_t>{0, 1, 2}));
  Expected<BlendingIndex> none = buildBlendingIndex(std::vector<double>{}, 3);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().message(), "a blend of 0 datasets (1 to 32766)");
}

// The counts never stray two samples from the shares, however skewed, and each dataset's
// samples are taken in order.
TEST(BlendedDatasetTest, BlendingIndexFollowsTheWeights) {
  std::vector<double> w = normalizeWeights(std::vector<double>{1e-4, 0.3, 5, 2});
  const int64_t size = 100000;
  Expected<BlendingIndex> index = buildBlendingIndex(w, size);
  ASSERT_TRUE(index);
  std::vector<int64_t> counts(w.size(), 0);
  double worst = 0;
  for (int64_t k = 0; k < size; ++k) {
    const size_t d = size_t(index->dataset[size_t(k)]);
    EXPECT_EQ(index->sample[size_t(k)], counts[d]) << "sample " << k;
    ++counts[d];
    for (size_t i = 0; i < w.size(); ++i)
      worst = std::max(worst, std::abs(double(counts[i]) - w[i] * double(k + 1)));
  }
  EXPECT_LT(worst, 2.0);
}

/// Three small datasets whose tokens say where they come from: dataset i's document d holds
/// tokens 100 i + d.
struct ThreeDatasets {
  TempDir dir;
  std::vector<std::filesystem::path> prefixes;
  ThreeDatasets() {
    for (int i = 0; i < 3; ++i) {
      std::vector<std::vector<int64_t>> docs;
      for (int d = 0; d < 6 + 3 * i; ++d)
        docs.push_back(std::vector<int64_t>(size_t(4 + (d * 7 + i) % 9), 100 * i + d));
      prefixes.push_back(writeDataset(dir, docs, std::string("d") + char('0' + i)));
    }
  }
  DataBlend blend(std::vector<double> weights) const {
    DataBlend b;
    for (const auto &p : prefixes)
      b.prefixes.push_back(p.string());
    b.weights = std::move(weights);
    return b;
  }
};

GptDataset::Options blendOptions(int64_t numSamples) {
  GptDataset::Options options;
  options.split = "1";
  options.seqLen = 4;
  options.globalBatch = 3;
  options.numSamples = numSamples;
  options.seed = 1234;
  options.vocab = 300;
  return options;
}

// Sample k of the blend is sample J of dataset D of the indices; each dataset's order is its
// GPT order for ceil(ceil(N w) x 1.005) samples; batches read samples step x B + i.
TEST(BlendedDatasetTest, SamplesAndBatches) {
  ThreeDatasets files;
  const GptDataset::Options options = blendOptions(60);
  Expected<BlendedDataset> blend = BlendedDataset::open(files.blend({0.2, 0.5, 0.3}), options);
  ASSERT_TRUE(blend) << blend.error().message();
  EXPECT_EQ(blend->samplesBuilt(), (std::vector<int64_t>{13, 31, 19}));
  EXPECT_EQ(blend->size(), 12 + 30 + 18);
  ASSERT_EQ(blend->datasets().size(), 3u);
  for (int64_t k = 0; k < blend->size(); ++k) {
    const int d = blend->index().dataset[size_t(k)];
    std::vector<int64_t> got, want;
    ASSERT_TRUE(blend->sample(k, got).ok());
    ASSERT_TRUE(blend->datasets()[size_t(d)].sample(blend->index().sample[size_t(k)], want).ok());
    EXPECT_EQ(got, want) << "sample " << k;
    // Every token of dataset d's documents is 100 d + document.
    for (int64_t t : got)
      EXPECT_EQ(t / 100, d) << "sample " << k;
  }
  // Each dataset's order is the one it has alone for its samples.
  GptDataset::Options alone = options;
  alone.prefix = files.prefixes[1];
  alone.numSamples = 31;
  Expected<GptDataset> middle = GptDataset::open(alone);
  ASSERT_TRUE(middle);
  EXPECT_EQ(middle->index().shuffleIndex, blend->datasets()[1].index().shuffleIndex);

  // Step 2, samples 1 and 2 of its batch of 3: samples 7 and 8 of the blend.
  std::vector<int32_t> tokens(8), labels(8);
  ASSERT_TRUE(blend->batch(2, 1, 2, 4, tokens.data(), labels.data()).ok());
  for (int i = 0; i < 2; ++i) {
    std::vector<int64_t> window;
    ASSERT_TRUE(blend->sample(7 + i, window).ok());
    for (int t = 0; t < 4; ++t) {
      EXPECT_EQ(tokens[size_t(i * 4 + t)], window[size_t(t)]);
      EXPECT_EQ(labels[size_t(i * 4 + t)], window[size_t(t + 1)]);
    }
  }
  // Past the blend: an error, not a read.
  std::vector<int64_t> window;
  Error past = blend->sample(60, window);
  EXPECT_EQ(past.message(), "the blend " + files.blend({0.2, 0.5, 0.3}).describe() +
                                ": no sample 60 (the blend has 60)");
  auto prefix = [&](int i) { return files.prefixes[size_t(i)].string(); };
  EXPECT_EQ(blend->describe(),
            "blend of 3 indexed datasets (train split: 60 samples of 5 tokens; seed 1234): 0.2 '" +
                prefix(0) +
                "' (12 samples of its 23: documents [0, 6) of 6, 48 tokens, 2 epochs, the last "
                "shuffled apart), 0.5 '" +
                prefix(1) +
                "' (30 samples of its 35: documents [0, 9) of 9, 72 tokens, 2 epochs), "
                "0.3 '" +
                prefix(2) +
                "' (18 samples of its 23: documents [0, 12) of 12, 93 tokens, 1 epoch)");
  // Through TokenSource, the same batches.
  Expected<TokenSource> source = TokenSource::indexed(files.blend({0.2, 0.5, 0.3}), options);
  ASSERT_TRUE(source) << source.error().message();
  std::vector<int32_t> tokens2(8), labels2(8);
  ASSERT_TRUE(source->batch(2, 1, 2, 4, tokens2.data(), labels2.data()).ok());
  EXPECT_EQ(tokens, tokens2);
  EXPECT_EQ(labels, labels2);
  EXPECT_EQ(source->describe(), blend->describe());
}

// Prefixes without weights: one epoch of each, weighted by its samples, at most N in all; a
// run that needs more is refused by TokenSource.
TEST(BlendedDatasetTest, PrefixesWithoutWeights) {
  ThreeDatasets files;
  Expected<BlendedDataset> blend = BlendedDataset::open(files.blend({}), blendOptions(10));
  ASSERT_TRUE(blend) << blend.error().message();
  EXPECT_EQ(blend->samplesBuilt(), (std::vector<int64_t>{0, 0, 0}));
  int64_t all = 0;
  std::vector<double> lengths;
  for (const GptDataset &gpt : blend->datasets()) {
    EXPECT_EQ(gpt.index().numEpochs, 1);
    all += gpt.index().numSamples();
    lengths.push_back(double(gpt.index().numSamples()));
  }
  EXPECT_EQ(blend->size(), 10);
  EXPECT_EQ(blend->weights(), normalizeWeights(lengths));
  Expected<BlendedDataset> capped = BlendedDataset::open(files.blend({}), blendOptions(all + 5));
  ASSERT_TRUE(capped);
  EXPECT_EQ(capped->size(), all);
  Expected<TokenSource> tooFew = TokenSource::indexed(files.blend({}), blendOptions(all + 5));
  ASSERT_FALSE(tooFew);
  EXPECT_EQ(tooFew.error().message(),
            "the blend " + files.blend({}).describe() + " holds " + std::to_string(all) +
                " samples (one epoch of each dataset, as Megatron blends prefixes given without "
                "weights), fewer than the " +
                std::to_string(all + 5) +
                " asked for: give each prefix a weight (--data-path 0.5 A 0.5 B) to repeat them");
}

// A prefix whose epoch holds no sample has no weight in a blend of prefixes alone (Megatron
// asserts every weight is positive); with weights it repeats.
TEST(BlendedDatasetTest, PrefixWithoutASampleInAnEpoch) {
  ThreeDatasets files;
  DataBlend blend = files.blend({});
  blend.prefixes[1] = writeDataset(files.dir, {{1, 2, 3}}, "tiny").string();
  Expected<BlendedDataset> none = BlendedDataset::open(blend, blendOptions(10));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().message(),
            "indexed dataset '" + blend.prefixes[1] +
                "': its train split holds no sample of 5 tokens in an epoch (a blend of prefixes "
                "without weights weights each by one epoch's samples): give them weights");
  blend.weights = {1, 1, 1};
  Expected<BlendedDataset> weighted = BlendedDataset::open(blend, blendOptions(10));
  ASSERT_TRUE(weighted) << weighted.error().message();
  EXPECT_GT(weighted->datasets()[1].index().numEpochs, 1);
}

TEST(BlendedDatasetTest, OpenErrors) {
  ThreeDatasets files;
  DataBlend missing = files.blend({1, 1});
  missing.prefixes = {files.prefixes[0].string(), (files.dir / "absent").string()};
  Expected<BlendedDataset> absent = BlendedDataset::open(missing, blendOptions(10));
  ASSERT_FALSE(absent);
  EXPECT_EQ(absent.error().message(), "indexed dataset '" + (files.dir / "absent").string() +
                                          "': neither '" + (files.dir / "absent.idx").string() +
                                          "' nor '" + (files.dir / "absent.bin").string() +
                                          "' exists");
  // Each dataset is split on its own: 6 documents give the valid split of "99,1" none.
  GptDataset::Options valid = blendOptions(10);
  valid.split = "99,1";
  valid.which = DataSplit::Valid;
  Expected<BlendedDataset> noValid = BlendedDataset::open(files.blend({1, 1, 1}), valid);
  ASSERT_FALSE(noValid);
  EXPECT_EQ(noValid.error().message(),
            "indexed dataset '" + files.prefixes[0].string() +
                "': the valid split (--split '99,1', 6 documents): documents [6, 6) hold 0 "
                "tokens, fewer than the 2 a sample needs");
  // A token outside the vocabulary names its dataset (the third's are 200 and more).
  GptDataset::Options small = blendOptions(10);
  small.vocab = 150;
  Expected<BlendedDataset> wide = BlendedDataset::open(files.blend({1, 1, 1}), small);
  ASSERT_TRUE(wide) << wide.error().message();
  std::vector<int32_t> tokens(40), labels(40);
  Error err = wide->batch(0, 0, 10, 4, tokens.data(), labels.data());
  EXPECT_NE(err.message().find("is outside the model's vocabulary of 150 tokens"),
            std::string::npos)
      << err.message();
  EXPECT_EQ(
      err.message().rfind("indexed dataset '" + files.prefixes[2].string() + "': token id 2", 0),
      0u)
      << err.message();
}

} // namespace
