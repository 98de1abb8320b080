//===- GptDatasetTest.cpp - Megatron's GPT sample order -------------------===//
//
// The split, the three indices on cases small enough to follow by hand, and the samples and
// batches read through them. The order's equality with Megatron's own algorithm over numpy is
// checked on larger cases by test/tools/mtc-data (a Python reference using numpy).
//
//===----------------------------------------------------------------------===//

#include "runtime/data/GptDataset.h"
#include "runtime/data/NumpyRandom.h"

#include "test/unittests/runtime/data/DatasetFiles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

using namespace mtc::rt;
using mtc::rt::test::TempDir;
using mtc::rt::test::writeDataset;

namespace {

using Ranges = std::array<std::optional<DocumentRange>, 3>;

Ranges split(std::string_view weights, int64_t documents) {
  Expected<std::array<double, 3>> w = parseSplit(weights);
  EXPECT_TRUE(w) << w.error().message();
  return w ? splitDocuments(*w, documents) : Ranges();
}

// Expected values from Megatron's arithmetic in Python (re.findall, numpy normalisation,
// round()): see split_range in test/tools/mtc-data/Inputs/megatron_reference.py.
TEST(GptDatasetTest, SplitAsMegatron) {
  EXPECT_EQ(split("969, 30, 1", 1000),
            (Ranges{DocumentRange{0, 969}, DocumentRange{969, 999}, DocumentRange{999, 1000}}));
  EXPECT_EQ(split("969, 30, 1", 61),
            (Ranges{DocumentRange{0, 59}, DocumentRange{59, 61}, DocumentRange{61, 61}}));
  EXPECT_EQ(split("90,5,5", 61),
            (Ranges{DocumentRange{0, 55}, DocumentRange{55, 58}, DocumentRange{58, 61}}));
  // Python's round() takes halves to even: 1.5 -> 2, 0.5 -> 0.
  EXPECT_EQ(split("1,1", 3), (Ranges{DocumentRange{0, 2}, DocumentRange{2, 3}, std::nullopt}));
  EXPECT_EQ(split("1,3", 2), (Ranges{DocumentRange{0, 0}, DocumentRange{0, 2}, std::nullopt}));
  EXPECT_EQ(split("1", 7), (Ranges{DocumentRange{0, 7}, std::nullopt, std::nullopt}));
  EXPECT_EQ(split("0.7 0.2 0.1", 10),
            (Ranges{DocumentRange{0, 7}, DocumentRange{7, 9}, DocumentRange{9, 10}}));
}

TEST(GptDatasetTest, SplitErrors) {
  auto message = [](std::string_view s) {
    Expected<std::array<double, 3>> w = parseSplit(s);
    return w ? std::string("no error") : w.error().message();
  };
  EXPECT_EQ(message("1,2,3,4"), "--split '1,2,3,4': more than three weights (train, valid, test)");
  EXPECT_EQ(message("1.2.3"), "--split '1.2.3': '1.2.3' is not a number");
  EXPECT_EQ(message("0,0"), "--split '0,0': the weights must not all be 0");
  EXPECT_EQ(message("train"), "--split 'train': the weights must not all be 0");
}

// One document of 10 tokens, samples of 3 + 1: the samples start every 3 tokens, sharing one.
TEST(GptDatasetTest, SampleIndexOfOneDocument) {
  std::vector<int32_t> lengths = {10};
  Expected<GptSampleIndex> index = buildGptSampleIndex(lengths, {0, 1}, 3, 3, 1234);
  ASSERT_TRUE(index) << index.error().message();
  EXPECT_EQ(index->numEpochs, 1);
  EXPECT_FALSE(index->separateFinalEpoch);
  EXPECT_EQ(index->documentIndex, std::vector<int32_t>{0});
  EXPECT_EQ(index->sampleIndex, (std::vector<int64_t>{0, 0, 0, 3, 0, 6, 0, 9}));
  // A single document draws nothing; the samples' shuffle is the first draw.
  NumpyRandomState random(1234);
  std::vector<int64_t> order = {0, 1, 2};
  random.shuffle(std::span<int64_t>(order));
  EXPECT_EQ(index->shuffleIndex, order);
}

// Three documents of 4 tokens and samples of 5 + 1: sample 0 is document a's 4 tokens and
// b's first 2, sample 1 b's last 3 and c's first 3. Equal lengths make the positions the same
// whatever the document order.
TEST(GptDatasetTest, SampleIndexAcrossDocuments) {
  std::vector<int32_t> lengths = {4, 4, 4, 9};
  Expected<GptSampleIndex> index = buildGptSampleIndex(lengths, {0, 3}, 5, 2, 1);
  ASSERT_TRUE(index) << index.error().message();
  EXPECT_EQ(index->numEpochs, 1);
  EXPECT_EQ(index->sampleIndex, (std::vector<int64_t>{0, 0, 1, 1, 2, 2}));
  std::vector<int32_t> docs = index->documentIndex;
  std::sort(docs.begin(), docs.end());
  EXPECT_EQ(docs, (std::vector<int32_t>{0, 1, 2})); // the split's documents only
}

// 12 tokens per epoch in samples of 2 + 1: 5 samples per epoch. 6 samples need 2 epochs of
// which the last gives 1 sample, under 80 % of 5 (int(0.8 * 5) = 4): Megatron shuffles the
// last epoch apart, its documents and its samples. 10 samples take 5 from the last: together.
TEST(GptDatasetTest, SeparateFinalEpoch) {
  std::vector<int32_t> lengths = {4, 4, 4};
  Expected<GptSampleIndex> apart = buildGptSampleIndex(lengths, {0, 3}, 2, 6, 99);
  ASSERT_TRUE(apart) << apart.error().message();
  EXPECT_EQ(apart->numEpochs, 2);
  EXPECT_TRUE(apart->separateFinalEpoch);
  EXPECT_EQ(apart->numSamples(), 11); // (24 - 1) / 2
  // The same draws by hand: documents of epoch 1, of epoch 2, samples before the last
  // epoch's ((12 - 1) / 2 = 5), the rest.
  NumpyRandomState random(99);
  std::vector<int32_t> first = {0, 1, 2}, last = {0, 1, 2};
  random.shuffle(std::span<int32_t>(first));
  random.shuffle(std::span<int32_t>(last));
  first.insert(first.end(), last.begin(), last.end());
  EXPECT_EQ(apart->documentIndex, first);
  std::vector<int64_t> early(5), late(6);
  std::iota(early.begin(), early.end(), 0);
  std::iota(late.begin(), late.end(), 5);
  random.shuffle(std::span<int64_t>(early));
  random.shuffle(std::span<int64_t>(late));
  early.insert(early.end(), late.begin(), late.end());
  EXPECT_EQ(apart->shuffleIndex, early);

  Expected<GptSampleIndex> together = buildGptSampleIndex(lengths, {0, 3}, 2, 10, 99);
  ASSERT_TRUE(together) << together.error().message();
  EXPECT_EQ(together->numEpochs, 2);
  EXPECT_FALSE(together->separateFinalEpoch);
  NumpyRandomState again(99);
  std::vector<int32_t> docs = {0, 1, 2, 0, 1, 2};
  again.shuffle(std::span<int32_t>(docs));
  EXPECT_EQ(together->documentIndex, docs);
}

TEST(GptDatasetTest, SampleIndexErrors) {
  std::vector<int32_t> lengths = {1, 0, 5};
  Expected<GptSampleIndex> few = buildGptSampleIndex(lengths, {0, 2}, 4, 1, 0);
  ASSERT_FALSE(few);
  EXPECT_EQ(few.error().message(),
            "documents [0, 2) hold 1 tokens, fewer than the 2 a sample needs");
  Expected<GptSampleIndex> shortSeq = buildGptSampleIndex(lengths, {0, 3}, 1, 1, 0);
  ASSERT_FALSE(shortSeq);
  EXPECT_EQ(shortSeq.error().message(), "a sequence length of 1 is too short (at least 2)");
}

// Sample k's tokens follow the indices; a batch of step s reads samples s B + i. 30 samples
// of 4 + 1 tokens need 2 epochs of 117 tokens, the second giving 1 of its 29 samples.
TEST(GptDatasetTest, SamplesAndBatches) {
  TempDir dir;
  std::vector<std::vector<int64_t>> docs;
  for (int d = 0; d < 20; ++d) {
    std::vector<int64_t> doc;
    for (int t = 0; t < 3 + d % 7; ++t)
      doc.push_back(d * 10 + t % 10);
    docs.push_back(doc);
  }
  GptDataset::Options options;
  options.prefix = writeDataset(dir, docs);
  options.split = "1";
  options.seqLen = 4;
  options.globalBatch = 3;
  options.numSamples = 30;
  options.seed = 5;
  options.vocab = 256;
  Expected<GptDataset> gpt = GptDataset::open(options);
  ASSERT_TRUE(gpt) << gpt.error().message();
  const GptSampleIndex &index = gpt->index();
  for (int64_t k = 0; k < 30; ++k) {
    std::vector<int64_t> got, want;
    ASSERT_TRUE(gpt->sample(k, got).ok());
    // The documents laid end to end in document-index order, from the sample's start.
    int64_t s = index.shuffleIndex[size_t(k)];
    int64_t position = index.sampleIndex[size_t(2 * s)],
            offset = index.sampleIndex[size_t(2 * s + 1)];
    while (int64_t(want.size()) < 5) {
      const std::vector<int64_t> &doc = docs[size_t(index.documentIndex[size_t(position)])];
      for (int64_t t = offset; t < int64_t(doc.size()) && want.size() < 5; ++t)
        want.push_back(doc[size_t(t)]);
      ++position;
      offset = 0;
    }
    EXPECT_EQ(got, want) << "sample " << k;
  }
  // Step 2, samples 1 and 2 of its batch of 3: samples 7 and 8 of the order.
  std::vector<int32_t> tokens(8), labels(8);
  ASSERT_TRUE(gpt->batch(2, 1, 2, 4, tokens.data(), labels.data()).ok());
  for (int i = 0; i < 2; ++i) {
    std::vector<int64_t> window;
    ASSERT_TRUE(gpt->sample(7 + i, window).ok());
    for (int t = 0; t < 4; ++t) {
      EXPECT_EQ(tokens[size_t(i * 4 + t)], window[size_t(t)]);
      EXPECT_EQ(labels[size_t(i * 4 + t)], window[size_t(t + 1)]);
    }
  }
  EXPECT_EQ(gpt->describe(), "indexed dataset '" + options.prefix.string() +
                                 "' (train split: documents [0, 20) of 20, 117 tokens; 58 samples "
                                 "of 5 tokens in 2 epochs, the last shuffled apart; seed 5)");
  // A sequence length other than the order's is refused, not read.
  Error other = gpt->batch(0, 0, 1, 8, tokens.data(), labels.data());
  EXPECT_EQ(other.message(), "indexed dataset '" + options.prefix.string() +
                                 "': samples of 8 tokens asked for, but its sample order is for 4");
}

TEST(GptDatasetTest, TokensOutsideTheVocabulary) {
  TempDir dir;
  GptDataset::Options options;
  options.prefix = writeDataset(dir, {{1, 2, 3, 300, 4, 5}});
  options.split = "1";
  options.seqLen = 5;
  options.globalBatch = 1;
  options.numSamples = 1;
  options.vocab = 256;
  Expected<GptDataset> gpt = GptDataset::open(options);
  ASSERT_TRUE(gpt) << gpt.error().message();
  std::vector<int32_t> tokens(5), labels(5);
  Error err = gpt->batch(0, 0, 1, 5, tokens.data(), labels.data());
  EXPECT_EQ(err.message(), "indexed dataset '" + options.prefix.string() +
                               "': token id 300 of sample 0 is outside the model's vocabulary of "
                               "256 tokens (ids 0 to 255)");
}

TEST(GptDatasetTest, OpenErrors) {
  TempDir dir;
  GptDataset::Options options;
  options.prefix = writeDataset(dir, {{1, 2, 3}, {4, 5, 6}});
  options.seqLen = 2;
  options.numSamples = 1;
  options.globalBatch = 1;
  options.split = "0,1";
  Expected<GptDataset> noTrain = GptDataset::open(options);
  ASSERT_FALSE(noTrain);
  EXPECT_EQ(noTrain.error().message(), "indexed dataset '" + options.prefix.string() +
                                           "': --split '0,1' gives the train split no documents");
  // 969/1000 of 2 documents rounds to both: the train split is all there is.
  options.split = std::string(kMegatronDefaultSplit);
  options.seed = uint64_t(1) << 32;
  Expected<GptDataset> bigSeed = GptDataset::open(options);
  ASSERT_FALSE(bigSeed);
  EXPECT_EQ(bigSeed.error().message(),
            "the seed 4294967296 does not fit in 32 bits, which Megatron's sample order (numpy's "
            "RandomState) takes");
  options.seed = 0;
  options.split = "1,3";
  Expected<GptDataset> empty = GptDataset::open(options);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().message(),
            "indexed dataset '" + options.prefix.string() +
                "': the train split (--split '1,3', 2 documents): documents [0, 0) hold 0 tokens, "
                "fewer than the 2 a sample needs");
}

// check() gives open()'s errors without building the order, and success where open succeeds.
TEST(GptDatasetTest, CheckAsOpen) {
  TempDir dir;
  GptDataset::Options options;
  options.prefix = writeDataset(dir, {{1, 2, 3}, {4, 5, 6}, {7}});
  options.seqLen = 2;
  options.numSamples = 4;
  options.globalBatch = 1;
  for (std::string split : {"1", "0,1", "2,1", "1,3", "nonsense,"}) {
    for (DataSplit which : {DataSplit::Train, DataSplit::Valid}) {
      options.split = split;
      options.which = which;
      Expected<GptDataset> opened = GptDataset::open(options);
      Error checked = GptDataset::check(options);
      EXPECT_EQ(checked.ok(), opened.ok()) << split;
      if (!opened)
        EXPECT_EQ(checked.message(), opened.error().message());
    }
  }
  options.split = "1";
  options.prefix = dir / "absent";
  EXPECT_EQ(GptDataset::check(options).message(), GptDataset::open(options).error().message());
}

} // namespace
