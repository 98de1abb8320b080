//===- SyntheticTaskTest.cpp - The built-in Markov-chain data task --------===//

#include "runtime/data/SyntheticTask.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

using namespace mtc::rt;

namespace {

struct Batch {
  std::vector<int32_t> tokens, labels;
};

Batch makeBatch(const SyntheticTask &task, int64_t step, int64_t begin, int64_t count,
                int64_t seqLen) {
  Batch b{std::vector<int32_t>(count * seqLen, -1), std::vector<int32_t>(count * seqLen, -1)};
  task.batch(step, begin, count, seqLen, b.tokens.data(), b.labels.data());
  return b;
}

TEST(SyntheticTaskTest, ChainShapeAndEntropy) {
  SyntheticTask task(512, 1234);
  EXPECT_EQ(task.vocab(), 512);
  EXPECT_EQ(task.seed(), 1234u);
  EXPECT_EQ(task.numSuccessors(), 4);
  double total = 0;
  for (int k = 0; k < 4; ++k)
    total += task.successorProbability(k);
  EXPECT_DOUBLE_EQ(total, 1.0);
  EXPECT_NEAR(task.successorProbability(0), 0.4, 1e-9);
  EXPECT_NEAR(task.successorProbability(3), 0.1, 1e-9);
  EXPECT_EQ(task.successorProbability(4), 0.0);
  // H(0.4, 0.3, 0.2, 0.1) in nats.
  const double h =
      -(0.4 * std::log(0.4) + 0.3 * std::log(0.3) + 0.2 * std::log(0.2) + 0.1 * std::log(0.1));
  EXPECT_NEAR(task.entropyRate(), h, 1e-9);
  EXPECT_NEAR(task.entropyRate(), 1.2798542258336676, 1e-9);
  EXPECT_DOUBLE_EQ(task.uniformLoss(), std::log(512.0));
  EXPECT_LT(task.entropyRate(), 0.25 * task.uniformLoss()); // far below ln V

  std::set<int32_t> reached;
  for (int32_t a = 0; a < 512; ++a) {
    auto succ = task.successors(a);
    ASSERT_EQ(succ.size(), 4u);
    std::set<int32_t> distinct(succ.begin(), succ.end());
    EXPECT_EQ(distinct.size(), 4u) << "token " << a;
    double rowSum = 0;
    for (int32_t b : succ) {
      ASSERT_GE(b, 0);
      ASSERT_LT(b, 512);
      reached.insert(b);
      rowSum += task.transitionProbability(a, b);
    }
    EXPECT_NEAR(rowSum, 1.0, 1e-12);
  }
  // Successors are spread over the vocabulary (2048 draws of 512 values reach ~98%).
  EXPECT_GT(reached.size(), 480u);
  EXPECT_EQ(task.transitionProbability(-1, 0), 0.0);
  EXPECT_EQ(task.transitionProbability(512, 0), 0.0);
}

TEST(SyntheticTaskTest, ChainDependsOnlyOnVocabAndSeed) {
  SyntheticTask a(300, 7), b(300, 7), c(300, 8);
  int differing = 0;
  for (int32_t t = 0; t < 300; ++t) {
    auto sa = a.successors(t), sb = b.successors(t), sc = c.successors(t);
    EXPECT_TRUE(std::equal(sa.begin(), sa.end(), sb.begin()));
    differing += !std::equal(sa.begin(), sa.end(), sc.begin());
  }
  EXPECT_GT(differing, 290);
}

TEST(SyntheticTaskTest, LabelsAreTokensShiftedAlongTheChain) {
  SyntheticTask task(512, 99);
  const int64_t count = 8, seqLen = 64;
  Batch b = makeBatch(task, 3, 0, count, seqLen);
  for (int64_t s = 0; s < count; ++s) {
    for (int64_t t = 0; t < seqLen; ++t) {
      int32_t tok = b.tokens[s * seqLen + t], lab = b.labels[s * seqLen + t];
      ASSERT_GE(tok, 0);
      ASSERT_LT(tok, 512);
      ASSERT_GT(task.transitionProbability(tok, lab), 0.0) << "sample " << s << " pos " << t;
      if (t + 1 < seqLen) {
        ASSERT_EQ(lab, b.tokens[s * seqLen + t + 1]);
      }
    }
  }
}

TEST(SyntheticTaskTest, AnyRankProducesItsSamplesAlone) {
  SyntheticTask task(512, 5);
  const int64_t seqLen = 32;
  Batch whole = makeBatch(task, 17, 0, 16, seqLen);
  // 4 data-parallel ranks with 4 samples each, and an odd split.
  for (int64_t begin : {0, 4, 8, 12, 5}) {
    int64_t count = begin == 5 ? 7 : 4;
    Batch part = makeBatch(task, 17, begin, count, seqLen);
    for (int64_t i = 0; i < count * seqLen; ++i) {
      ASSERT_EQ(part.tokens[i], whole.tokens[begin * seqLen + i]);
      ASSERT_EQ(part.labels[i], whole.labels[begin * seqLen + i]);
    }
  }
  // A second instance (another process) agrees.
  SyntheticTask other(512, 5);
  Batch again = makeBatch(other, 17, 0, 16, seqLen);
  EXPECT_EQ(again.tokens, whole.tokens);
  EXPECT_EQ(again.labels, whole.labels);
  // Shorter sequences are prefixes of longer ones.
  Batch shorter = makeBatch(task, 17, 2, 1, 10);
  for (int t = 0; t < 10; ++t) {
    EXPECT_EQ(shorter.tokens[t], whole.tokens[2 * seqLen + t]);
    EXPECT_EQ(shorter.labels[t], whole.labels[2 * seqLen + t]);
  }
}

TEST(SyntheticTaskTest, StepsAndSamplesDiffer) {
  SyntheticTask task(512, 5);
  Batch a = makeBatch(task, 1, 0, 4, 32), b = makeBatch(task, 2, 0, 4, 32);
  EXPECT_NE(a.tokens, b.tokens);
  int same = 0;
  for (int t = 0; t < 32; ++t)
    same += a.tokens[t] == a.tokens[32 + t];
  EXPECT_LT(same, 8); // samples 0 and 1 of one step are different sequences
}

TEST(SyntheticTaskTest, EmpiricalStatisticsMatchTheChain) {
  SyntheticTask task(64, 11);
  const int64_t count = 256, seqLen = 256;
  Batch b = makeBatch(task, 0, 0, count, seqLen);
  // Successor ranks follow 0.4 / 0.3 / 0.2 / 0.1, and the true model's mean cross-entropy
  // on the labels is the entropy rate.
  int64_t rank[4] = {};
  double nll = 0;
  std::vector<int64_t> first(64, 0);
  for (int64_t s = 0; s < count; ++s) {
    first[b.tokens[s * seqLen]]++;
    for (int64_t t = 0; t < seqLen; ++t) {
      int32_t tok = b.tokens[s * seqLen + t], lab = b.labels[s * seqLen + t];
      auto succ = task.successors(tok);
      int k = int(std::find(succ.begin(), succ.end(), lab) - succ.begin());
      ASSERT_LT(k, 4);
      rank[k]++;
      nll -= std::log(task.transitionProbability(tok, lab));
    }
  }
  const double n = double(count * seqLen); // 65536 labels
  EXPECT_NEAR(rank[0] / n, 0.4, 0.01);     // se ~0.002
  EXPECT_NEAR(rank[1] / n, 0.3, 0.01);
  EXPECT_NEAR(rank[2] / n, 0.2, 0.01);
  EXPECT_NEAR(rank[3] / n, 0.1, 0.01);
  EXPECT_NEAR(nll / n, task.entropyRate(), 0.02);
  // The first token is uniform: every token appears at least once in 256 starts over 64.
  int zeros = 0;
  for (int64_t c : first)
    zeros += c == 0;
  EXPECT_LT(zeros, 6); // expected 64 * e^-4 ~= 1.2
}

TEST(SyntheticTaskTest, SmallVocabulariesAndValidation) {
  SyntheticTask two(2, 3);
  EXPECT_EQ(two.numSuccessors(), 2);
  EXPECT_NEAR(two.successorProbability(0), 0.4 / 0.7, 1e-9);
  EXPECT_NEAR(two.successorProbability(1), 0.3 / 0.7, 1e-9);
  std::set<int32_t> s(two.successors(0).begin(), two.successors(0).end());
  EXPECT_EQ(s, (std::set<int32_t>{0, 1}));
  const double p = 0.4 / 0.7, q = 0.3 / 0.7;
  EXPECT_NEAR(two.entropyRate(), -(p * std::log(p) + q * std::log(q)), 1e-9);
  Batch b = makeBatch(two, 0, 0, 2, 16);
  for (int32_t t : b.tokens)
    EXPECT_TRUE(t == 0 || t == 1);

  SyntheticTask four(4, 3); // every token is a successor of every token
  for (int32_t a = 0; a < 4; ++a) {
    std::set<int32_t> all(four.successors(a).begin(), four.successors(a).end());
    EXPECT_EQ(all.size(), 4u);
  }

  SyntheticTask one(1, 3);
  EXPECT_EQ(one.numSuccessors(), 1);
  EXPECT_EQ(one.entropyRate(), 0.0);
  EXPECT_EQ(SyntheticTask(-5, 3).vocab(), 1); // the constructor clamps

  EXPECT_TRUE(SyntheticTask::create(512, 1));
  for (int64_t bad : {int64_t(-1), int64_t(0), int64_t(1), SyntheticTask::kMaxVocab + 1}) {
    Expected<SyntheticTask> t = SyntheticTask::create(bad, 1);
    ASSERT_FALSE(t) << bad;
    EXPECT_NE(t.error().message().find("vocabulary size " + std::to_string(bad)), std::string::npos)
        << t.error().message();
  }

  // Degenerate requests write nothing.
  int32_t tok = -7, lab = -7;
  two.batch(0, 0, 0, 16, &tok, &lab);
  two.batch(0, 0, 1, 0, &tok, &lab);
  two.batch(0, 0, -1, 16, &tok, &lab);
  EXPECT_EQ(tok, -7);
  EXPECT_EQ(lab, -7);
}

} // namespace
