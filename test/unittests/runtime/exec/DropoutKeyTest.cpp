//===- DropoutKeyTest.cpp - The dropout key compiled kernels ask for ------===//

#include "runtime/exec/DropoutKey.h"

#include "runtime/support/Philox.h"

#include <gtest/gtest.h>

#include <vector>

using namespace mtc::rt;

namespace {

/// The key a kernel of dropout site `stream` reads now in the call of `context`, word by
/// word.
std::vector<int64_t> kernelKey(MtcKernelContext *context, int64_t stream) {
  std::vector<int64_t> words;
  for (int64_t w = 0; w < MTC_DROPOUT_KEY_WORDS; ++w)
    words.push_back(mtc_dropout_key(context, stream, w));
  return words;
}

std::vector<int64_t> expectedKey(const DropoutKey &key, int64_t stream, int64_t instance) {
  std::vector<int64_t> words;
  for (int64_t w = 0; w < MTC_DROPOUT_KEY_WORDS; ++w)
    words.push_back(dropoutKeyWord(key, stream, instance, w));
  return words;
}

} // namespace

TEST(DropoutKeyTest, NoDropoutCallMeansNoDropout) {
  EXPECT_EQ(mtc_dropout_key(nullptr, 3, MTC_DROPOUT_KEY_ACTIVE), 0);
  mtc_dropout_layer(nullptr, 2); // nothing to set
  MtcKernelContext noDropout = mtc_kernel_context(nullptr, nullptr, nullptr, 0);
  EXPECT_EQ(mtc_dropout_key(&noDropout, 3, MTC_DROPOUT_KEY_ACTIVE), 0);
  // A context of another version of the ABI is not read.
  DropoutCall call{DropoutKey{1, 2, 3}};
  MtcKernelContext otherVersion = mtc_kernel_context(nullptr, &call, nullptr, 0);
  otherVersion.version = 0;
  EXPECT_EQ(mtc_dropout_key(&otherVersion, 3, MTC_DROPOUT_KEY_ACTIVE), 0);
  mtc_dropout_layer(&otherVersion, 2);
  EXPECT_EQ(call.instance, -1);
}

TEST(DropoutKeyTest, KeyWordsAreTheRunsSeedStepSampleAndSite) {
  DropoutKey key{0x123456789abcdefULL, 6, 16};
  EXPECT_EQ(dropoutKeyWord(key, 5, 3, MTC_DROPOUT_KEY_SEED), 0x123456789abcdefLL);
  EXPECT_EQ(dropoutKeyWord(key, 5, 3, MTC_DROPOUT_KEY_TENSOR_ID), mtc_dropout_tensor_id(5, 3));
  EXPECT_EQ(dropoutKeyWord(key, 5, 3, MTC_DROPOUT_KEY_STEP), 7);
  EXPECT_EQ(dropoutKeyWord(key, 5, 3, MTC_DROPOUT_KEY_INDEX_BASE), int64_t(16) << 40);
  EXPECT_EQ(dropoutKeyWord(key, 5, 3, MTC_DROPOUT_KEY_ACTIVE), 1);
  EXPECT_EQ(dropoutKeyWord(key, 5, 3, MTC_DROPOUT_KEY_WORDS), 0) << "unknown words are 0";
}

TEST(DropoutKeyTest, EachCallReadsItsOwnKey) {
  DropoutCall first{DropoutKey{11, 4, 0}}, second{DropoutKey{11, 5, 8}};
  MtcKernelContext a = mtc_kernel_context(nullptr, &first, nullptr, 0);
  MtcKernelContext b = mtc_kernel_context(nullptr, &second, nullptr, 0);
  EXPECT_EQ(kernelKey(&a, 2), expectedKey(first.key, 2, -1));
  EXPECT_EQ(kernelKey(&b, 2), expectedKey(second.key, 2, -1));
  EXPECT_NE(kernelKey(&a, 2), kernelKey(&b, 2));
}

TEST(DropoutKeyTest, LayerInstanceIsSetByKernelsInTheirCallOnly) {
  DropoutKey key{3, 1, 0};
  DropoutCall call{key}, other{key};
  MtcKernelContext context = mtc_kernel_context(nullptr, &call, nullptr, 0);
  MtcKernelContext otherContext = mtc_kernel_context(nullptr, &other, nullptr, 0);
  EXPECT_EQ(kernelKey(&context, 4), expectedKey(key, 4, -1)) << "a call starts outside layers";
  mtc_dropout_layer(&context, 1);
  EXPECT_EQ(call.instance, 1);
  EXPECT_EQ(kernelKey(&context, 4), expectedKey(key, 4, 1));
  EXPECT_EQ(kernelKey(&otherContext, 4), expectedKey(key, 4, -1));
  mtc_dropout_layer(&context, -1);
  EXPECT_EQ(kernelKey(&context, 4), expectedKey(key, 4, -1));
}

namespace {

/// Whether a compiled kernel keeps `element` of site `stream` in repeat `instance` under
/// `key`: Philox's decision (DropoutKeep.c) on the key words the runtime hands out.
bool keptUnder(const DropoutKey &key, int64_t stream, int64_t instance, int64_t element,
               float keepProb) {
  auto word = [&](int64_t w) { return dropoutKeyWord(key, stream, instance, w); };
  return mtc_dropout_keep(
             static_cast<uint64_t>(word(MTC_DROPOUT_KEY_SEED)),
             static_cast<uint32_t>(word(MTC_DROPOUT_KEY_TENSOR_ID)),
             static_cast<uint64_t>(word(MTC_DROPOUT_KEY_INDEX_BASE)) + static_cast<uint64_t>(element),
             static_cast<uint32_t>(word(MTC_DROPOUT_KEY_STEP)), keepProb) != 0;
}

} // namespace

TEST(DropoutKeyTest, KeepsAboutTheKeepProbability) {
  DropoutKey key{1234, 0, 0};
  int kept = 0;
  constexpr int n = 100000;
  for (int64_t e = 0; e < n; ++e)
    kept += keptUnder(key, 7, -1, e, 0.9f);
  EXPECT_NEAR(kept / double(n), 0.9, 0.005);
}

TEST(DropoutKeyTest, FollowsThePhiloxKeying) {
  // Counter step = step + 1 (0 is parameter initialisation); index = element + sample << 40.
  DropoutKey key{99, 6, 16};
  for (int64_t e = 0; e < 256; ++e) {
    uint64_t index = uint64_t(e) + (uint64_t(16) << 40);
    bool keep = mtc_dropout_keep(99, mtc_dropout_tensor_id(5, 3), index, 7, 0.75f);
    EXPECT_EQ(keptUnder(key, 5, 3, e, 0.75f), keep) << e;
  }
}

TEST(DropoutKeyTest, MicroBatchesAndSitesDiffer) {
  DropoutKey first{5, 0, 0}, second{5, 0, 8};
  int bySample = 0, bySite = 0, byInstance = 0;
  for (int64_t e = 0; e < 256; ++e) {
    bool base = keptUnder(first, 1, 0, e, 0.5f);
    bySample += base != keptUnder(second, 1, 0, e, 0.5f);
    bySite += base != keptUnder(first, 2, 0, e, 0.5f);
    byInstance += base != keptUnder(first, 1, 1, e, 0.5f);
  }
  EXPECT_GT(bySample, 64);
  EXPECT_GT(bySite, 64);
  EXPECT_GT(byInstance, 64);
}

TEST(DropoutKeyTest, EdgeKeepProbabilities) {
  // u < 1 always holds and u < 0 never: rate 0 keeps every element, rate 1 none.
  DropoutKey key{1, 0, 0};
  for (int64_t e = 0; e < 256; ++e) {
    EXPECT_TRUE(keptUnder(key, 0, -1, e, 1.0f)) << e;
    EXPECT_FALSE(keptUnder(key, 0, -1, e, 0.0f)) << e;
  }
}
