//===- KVCacheTest.cpp - the bookkeeping and buffers of cached generation --===//

#include "runtime/generate/KVCache.h"

#include <gtest/gtest.h>

#include <vector>

using namespace mtc::rt;

namespace {

TEST(CachedSequenceTest, FirstCallPrefills) {
  CachedSequence sequence(3);
  std::vector<int64_t> ids = {1, 2};
  EXPECT_TRUE(sequence.next(ids).prefill);
}

TEST(CachedSequenceTest, OneMoreIdStepsAtTheNextPosition) {
  CachedSequence sequence(2);
  std::vector<int64_t> prompt = {4, 5, 6};
  std::vector<float> rows = {0, 1, 2, 3, 4, 5};
  sequence.prefilled(prompt, rows);
  std::vector<int64_t> longer = {4, 5, 6, 7};
  CachedSequence::Action action = sequence.next(longer);
  EXPECT_FALSE(action.prefill);
  EXPECT_EQ(action.position, 3);
  sequence.stepped(7, std::vector<float>{8, 9, 99}); // a padded row: the vocabulary is 2
  EXPECT_EQ(sequence.size(), 4);
  EXPECT_EQ(sequence.at(1)[1], 3.0f);
  EXPECT_EQ(sequence.at(3)[0], 8.0f);
  EXPECT_EQ(sequence.at(3).size(), 2u);
}

TEST(CachedSequenceTest, AnotherPromptPrefillsAgain) {
  CachedSequence sequence(1);
  std::vector<int64_t> prompt = {1, 2};
  sequence.prefilled(prompt, std::vector<float>{0, 0});
  // Same length, a different last id, two more ids, a changed prefix, a shorter prompt.
  for (std::vector<int64_t> ids : {std::vector<int64_t>{1, 3}, std::vector<int64_t>{1, 2, 3, 4},
                                   std::vector<int64_t>{9, 2, 3}, std::vector<int64_t>{1}})
    EXPECT_TRUE(sequence.next(ids).prefill);
}

TEST(CachedSequenceTest, ResetForgetsTheIds) {
  CachedSequence sequence(1);
  std::vector<int64_t> prompt = {1, 2};
  sequence.prefilled(prompt, std::vector<float>{0, 0});
  sequence.reset();
  EXPECT_EQ(sequence.size(), 0);
  std::vector<int64_t> longer = {1, 2, 3};
  EXPECT_TRUE(sequence.next(longer).prefill);
}

TEST(KVCacheBuffersTest, StepsWriteTheOtherBuffersThenSwap) {
  Expected<KVCacheBuffers> cache = KVCacheBuffers::create(4, 6);
  ASSERT_TRUE(cache) << cache.error().message();
  float *keys = cache->keys(), *values = cache->values();
  EXPECT_NE(cache->nextKeys(), keys);
  EXPECT_NE(cache->nextValues(), values);
  EXPECT_EQ(keys[3], 0.0f);
  EXPECT_EQ(values[5], 0.0f);
  cache->nextKeys()[0] = 7.0f;
  cache->swap();
  EXPECT_EQ(cache->keys()[0], 7.0f);
  EXPECT_EQ(cache->nextKeys(), keys);
  cache->swap();
  EXPECT_EQ(cache->keys(), keys);
}

TEST(KVCacheBuffersTest, EmptyCacheIsAnError) {
  Expected<KVCacheBuffers> cache = KVCacheBuffers::create(0, 6);
  ASSERT_FALSE(cache);
  EXPECT_NE(cache.error().message().find("no elements"), std::string::npos);
}

} // namespace
