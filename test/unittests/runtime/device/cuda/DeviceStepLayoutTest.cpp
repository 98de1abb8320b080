//===- DeviceStepLayoutTest.cpp - Where a one-GPU step's buffers lie ------===//
//
// No GPU needed: the layout is offsets. Every range aligned and apart from every other,
// the parameters and states once (the optimizer updates them in place), the gradients one range in the parameters'
// order (and the scratch one only with several micro-batches), the arena's size the end of
// the last range, and the errors for sizes that are not sizes.

#include "runtime/device/cuda/DeviceStepLayout.h"

#include "runtime/device/cuda/ArenaLayout.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace mtc::rt::cuda {
namespace {

TrainingState::Tensor tensor(const std::string &name, size_t elements) {
  TrainingState::Tensor t;
  t.name = name;
  t.shape = {static_cast<int64_t>(elements)};
  t.values.assign(elements, 0.0f);
  return t;
}

TrainingState smallState() {
  TrainingState s;
  s.params = {tensor("wte", 100), tensor("ln.g", 7), tensor("head", 65)};
  s.states = {tensor("wte.m", 100), tensor("wte.v", 100)};
  return s;
}

DeviceStepShape smallShape(int64_t microBatches) {
  DeviceStepShape shape;
  shape.microBatchSize = 2;
  shape.sequenceLength = 5;
  shape.microBatches = microBatches;
  shape.expertLoadElements = {6};
  shape.workspaceBytes = 1000;
  return shape;
}

std::vector<ArenaRange> allRanges(const DeviceStepLayout &l) {
  std::vector<ArenaRange> all;
  all.insert(all.end(), l.params.begin(), l.params.end());
  all.insert(all.end(), l.states.begin(), l.states.end());
  all.push_back(l.gradients);
  if (l.scratch)
    all.push_back(*l.scratch);
  if (l.lossMask)
    all.push_back(*l.lossMask);
  if (l.positionIds)
    all.push_back(*l.positionIds);
  for (const ArenaRange &r : {l.tokens, l.labels, l.loss, l.step, l.gradScale, l.gradNorm, l.lr,
                              l.workspace})
    all.push_back(r);
  all.insert(all.end(), l.expertLoads.begin(), l.expertLoads.end());
  return all;
}

TEST(DeviceStepLayout, RangesAreAlignedApartAndInsideTheArena) {
  DeviceStepShape shape = smallShape(2);
  shape.lossMask = true;
  shape.positionIds = true;
  Expected<DeviceStepLayout> layout = DeviceStepLayout::create(smallState(), shape);
  ASSERT_TRUE(layout.ok()) << layout.error().message();
  std::vector<ArenaRange> all = allRanges(*layout);
  std::sort(all.begin(), all.end(),
            [](const ArenaRange &a, const ArenaRange &b) { return a.offset < b.offset; });
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].offset % kDeviceArenaAlignment, 0) << "range " << i;
    EXPECT_LE(all[i].offset + all[i].bytes, layout->bytes) << "range " << i;
    if (i > 0)
      EXPECT_GE(all[i].offset, all[i - 1].offset + all[i - 1].bytes) << "ranges overlap at " << i;
  }
  EXPECT_EQ(layout->bytes, all.back().offset + all.back().bytes);
}

TEST(DeviceStepLayout, OneCopyOfTheTablesWithTheirSizes) {
  TrainingState s = smallState();
  Expected<DeviceStepLayout> layout = DeviceStepLayout::create(s, smallShape(1));
  ASSERT_TRUE(layout.ok()) << layout.error().message();
  ASSERT_EQ(layout->params.size(), s.params.size());
  ASSERT_EQ(layout->states.size(), s.states.size());
  for (size_t i = 0; i < s.params.size(); ++i)
    EXPECT_EQ(layout->params[i].bytes, int64_t(s.params[i].values.size() * 4));
  for (size_t i = 0; i < s.states.size(); ++i)
    EXPECT_EQ(layout->states[i].bytes, int64_t(s.states[i].values.size() * 4));
  EXPECT_EQ(layout->tokens.bytes, 2 * 5 * 4);
  EXPECT_EQ(layout->labels.bytes, 2 * 5 * 4);
  EXPECT_FALSE(layout->lossMask.has_value());
  DeviceStepShape masked = smallShape(1);
  masked.lossMask = true;
  Expected<DeviceStepLayout> withMask = DeviceStepLayout::create(s, masked);
  ASSERT_TRUE(withMask.ok()) << withMask.error().message();
  ASSERT_TRUE(withMask->lossMask.has_value());
  EXPECT_EQ(withMask->lossMask->bytes, 2 * 5 * 4);
  EXPECT_FALSE(layout->positionIds.has_value());
  DeviceStepShape positioned = smallShape(1);
  positioned.positionIds = true;
  Expected<DeviceStepLayout> withPositions = DeviceStepLayout::create(s, positioned);
  ASSERT_TRUE(withPositions.ok()) << withPositions.error().message();
  ASSERT_TRUE(withPositions->positionIds.has_value());
  EXPECT_EQ(withPositions->positionIds->bytes, 2 * 5 * 4);
  EXPECT_FALSE(withPositions->lossMask.has_value());
  EXPECT_EQ(layout->loss.bytes, 4);
  ASSERT_EQ(layout->expertLoads.size(), 1u);
  EXPECT_EQ(layout->expertLoads[0].bytes, 6 * 8);
  EXPECT_EQ(layout->workspace.bytes, 1000);
}

TEST(DeviceStepLayout, WithTheOptimizerOnTheHostTheParametersOnceAndNoState) {
  TrainingState s = smallState();
  Expected<DeviceStepLayout> both = DeviceStepLayout::create(s, smallShape(2));
  DeviceStepShape offloaded = smallShape(2);
  offloaded.optimizerOnHost = true;
  Expected<DeviceStepLayout> layout = DeviceStepLayout::create(s, offloaded);
  ASSERT_TRUE(both.ok() && layout.ok());
  ASSERT_EQ(layout->params.size(), s.params.size());
  EXPECT_TRUE(layout->states.empty());
  // The arena shrinks by exactly the states, each range rounded up to the arena's
  // alignment.
  auto aligned = [](const std::vector<ArenaRange> &ranges) {
    int64_t bytes = 0;
    for (const ArenaRange &r : ranges)
      bytes += (r.bytes + kDeviceArenaAlignment - 1) / kDeviceArenaAlignment * kDeviceArenaAlignment;
    return bytes;
  };
  EXPECT_EQ(both->bytes - layout->bytes, aligned(both->states));
  EXPECT_EQ(layout->gradients.bytes, both->gradients.bytes);
  ASSERT_TRUE(layout->scratch.has_value());
}

TEST(DeviceStepLayout, GradientsAreOneRangeInTheParametersOrder) {
  TrainingState s = smallState();
  Expected<DeviceStepLayout> layout = DeviceStepLayout::create(s, smallShape(1));
  ASSERT_TRUE(layout.ok()) << layout.error().message();
  ASSERT_EQ(layout->gradientOffsets.size(), s.params.size());
  EXPECT_EQ(layout->gradientOffsets[0], 0);
  for (size_t i = 0; i < s.params.size(); ++i) {
    EXPECT_EQ(layout->gradientOffsets[i] % kDeviceArenaAlignment, 0);
    int64_t end = layout->gradientOffsets[i] + int64_t(s.params[i].values.size() * 4);
    if (i + 1 < s.params.size())
      EXPECT_LE(end, layout->gradientOffsets[i + 1]);
    else
      EXPECT_EQ(end, layout->gradients.bytes);
  }
}

TEST(DeviceStepLayout, ScratchGradientsOnlyWithSeveralMicroBatches) {
  Expected<DeviceStepLayout> one = DeviceStepLayout::create(smallState(), smallShape(1));
  Expected<DeviceStepLayout> two = DeviceStepLayout::create(smallState(), smallShape(2));
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_FALSE(one->scratch.has_value());
  ASSERT_TRUE(two->scratch.has_value());
  EXPECT_EQ(two->scratch->bytes, two->gradients.bytes);
  EXPECT_GT(two->bytes, one->bytes);
}

TEST(DeviceStepLayout, SizesThatAreNotSizesAreErrors) {
  DeviceStepShape shape = smallShape(0);
  Expected<DeviceStepLayout> none = DeviceStepLayout::create(smallState(), shape);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message(), "device step layout: 0 micro-batches");
  shape = smallShape(1);
  shape.workspaceBytes = -1;
  EXPECT_FALSE(DeviceStepLayout::create(smallState(), shape).ok());
  shape = smallShape(1);
  shape.microBatchSize = int64_t(1) << 40;
  shape.sequenceLength = int64_t(1) << 40;
  Expected<DeviceStepLayout> huge = DeviceStepLayout::create(smallState(), shape);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message().find("a micro-batch of"), std::string::npos)
      << huge.error().message();
  shape = smallShape(1);
  shape.expertLoadElements = {-3};
  EXPECT_FALSE(DeviceStepLayout::create(smallState(), shape).ok());
}

} // namespace
} // namespace mtc::rt::cuda
