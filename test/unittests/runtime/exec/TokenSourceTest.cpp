//===- TokenSourceTest.cpp - The training data of a run -------------------===//

#include "runtime/data/TokenSource.h"

#include "test/unittests/runtime/TempDir.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace mtc::rt;
using mtc::rt::test::TempDir;

TEST(TokenSourceTest, SyntheticIsTheTask) {
  Expected<TokenSource> source = TokenSource::synthetic(256, 1234);
  ASSERT_TRUE(source.ok()) << source.error().message();
  SyntheticTask task(256, 1234);
  std::vector<int32_t> a(2 * 8), b(2 * 8), c(2 * 8), d(2 * 8);
  ASSERT_TRUE(source->batch(3, 4, 2, 8, a.data(), b.data()).ok());
  task.batch(3, 4, 2, 8, c.data(), d.data());
  EXPECT_EQ(a, c);
  EXPECT_EQ(b, d);
  ASSERT_TRUE(source->bestLoss().has_value());
  EXPECT_DOUBLE_EQ(*source->bestLoss(), task.entropyRate());
  EXPECT_EQ(source->describe(),
            "synthetic Markov task over 256 tokens (best loss 1.2799, uniform 5.5452)");
}

TEST(TokenSourceTest, TextNeedsAByteVocabulary) {
  TempDir tmp;
  std::ofstream(tmp / "t.txt") << "hello, world";
  Expected<TokenSource> small = TokenSource::text(tmp / "t.txt", 100, 0);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.error().message(), "--data '" + (tmp / "t.txt").string() +
                                         "': byte-level text needs a vocabulary of at least 256 "
                                         "tokens, but the model's vocab is 100");
  Expected<TokenSource> text = TokenSource::text(tmp / "t.txt", 256, 0);
  ASSERT_TRUE(text.ok()) << text.error().message();
  EXPECT_FALSE(text->bestLoss().has_value());
  EXPECT_EQ(text->describe(), "text '" + (tmp / "t.txt").string() + "' (12 bytes, byte-level tokens)");
}

TEST(TokenSourceTest, MissingTextFile) {
  TempDir tmp;
  Expected<TokenSource> text = TokenSource::text(tmp / "absent.txt", 256, 0);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.error().message().find("absent.txt"), std::string::npos);
}

// The indexed dataset's batches are its samples in Megatron's order, by global sample index.
TEST(TokenSourceTest, IndexedIsTheGptDataset) {
  TempDir tmp;
  Expected<IndexedDatasetWriter> writer = IndexedDatasetWriter::create(tmp / "c", TokenDType::U16);
  ASSERT_TRUE(writer.ok()) << writer.error().message();
  for (int d = 0; d < 12; ++d) {
    std::vector<int64_t> doc(size_t(5 + d), d);
    ASSERT_TRUE(writer->addTokens(doc).ok());
    ASSERT_TRUE(writer->endDocument().ok());
  }
  ASSERT_TRUE(writer->finish().ok());
  GptDataset::Options options;
  options.prefix = tmp / "c";
  options.seqLen = 8;
  options.globalBatch = 4;
  options.numSamples = 40;
  options.seed = 1234;
  options.vocab = 256;
  Expected<TokenSource> source = TokenSource::indexed(DataBlend{{options.prefix}, {}}, options);
  ASSERT_TRUE(source.ok()) << source.error().message();
  Expected<GptDataset> gpt = GptDataset::open(options);
  ASSERT_TRUE(gpt.ok()) << gpt.error().message();
  std::vector<int32_t> a(2 * 8), b(2 * 8), c(2 * 8), d(2 * 8);
  ASSERT_TRUE(source->batch(3, 2, 2, 8, a.data(), b.data()).ok());
  ASSERT_TRUE(gpt->batch(3, 2, 2, 8, c.data(), d.data()).ok());
  EXPECT_EQ(a, c);
  EXPECT_EQ(b, d);
  EXPECT_FALSE(source->bestLoss().has_value());
  EXPECT_EQ(source->describe(), gpt->describe());
  // Its order: the samples and epochs of the index (what --full-validation reads whole).
  std::optional<TokenSource::Order> order = source->order();
  ASSERT_TRUE(order.has_value());
  EXPECT_EQ(order->samples, gpt->index().numSamples());
  EXPECT_EQ(order->epochs, gpt->index().numEpochs);
  EXPECT_GE(order->samples, 40);
  // One sample asked for: one epoch, all its (12 documents of 5..16 tokens: 126 tokens, 1 more
  // than 8 per sample) (126 - 1) / 8 = 15 samples.
  options.numSamples = 1;
  Expected<TokenSource> epoch = TokenSource::indexed(DataBlend{{options.prefix}, {}}, options);
  ASSERT_TRUE(epoch.ok()) << epoch.error().message();
  ASSERT_TRUE(epoch->order().has_value());
  EXPECT_EQ(epoch->order()->epochs, 1);
  EXPECT_EQ(epoch->order()->samples, 15);
  // No order for the synthetic task.
  Expected<TokenSource> synthetic = TokenSource::synthetic(256, 1234);
  ASSERT_TRUE(synthetic.ok());
  EXPECT_FALSE(synthetic->order().has_value());
}
