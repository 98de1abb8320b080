//===- ArenaLayoutTest.cpp - Offsets, bounds and the high-water mark -----===//

#include "runtime/device/cuda/ArenaLayout.h"

#include <gtest/gtest.h>

#include <limits>

namespace mtc::rt::cuda::test {
namespace {

TEST(ArenaLayout, HandsOutAlignedOffsetsInOrder) {
  ArenaLayout arena(4096);
  EXPECT_EQ(*arena.allocate(100), 0);
  EXPECT_EQ(*arena.allocate(1), 256); // rounded up to the default alignment
  EXPECT_EQ(*arena.allocate(8, 8), 264);
  EXPECT_EQ(*arena.allocate(0, 64), 320);
  EXPECT_EQ(arena.allocatedBytes(), 320);
  EXPECT_EQ(arena.highWaterBytes(), 320);
}

TEST(ArenaLayout, ExhaustionIsAnErrorAndChangesNothing) {
  ArenaLayout arena(1024);
  ASSERT_EQ(*arena.allocate(1000), 0);
  Expected<int64_t> more = arena.allocate(100);
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.error().message(),
            "device arena: 100 bytes (aligned to 256) do not fit: 0 of 1024 bytes left");
  EXPECT_EQ(arena.allocatedBytes(), 1000);
  // Exactly filling the arena is fine.
  ArenaLayout exact(512);
  EXPECT_EQ(*exact.allocate(256), 0);
  EXPECT_EQ(*exact.allocate(256), 256);
  EXPECT_FALSE(exact.allocate(1, 1).ok());
}

TEST(ArenaLayout, BadRequestsAreErrors) {
  ArenaLayout arena(1024);
  Expected<int64_t> odd = arena.allocate(8, 24);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.error().message(), "device arena: alignment 24 is not a power of two");
  EXPECT_FALSE(arena.allocate(8, 0).ok());
  EXPECT_FALSE(arena.allocate(-1).ok());
  EXPECT_EQ(arena.allocatedBytes(), 0);
}

TEST(ArenaLayout, PlannedRangesAreBoundsChecked) {
  ArenaLayout arena(1024);
  EXPECT_TRUE(arena.use(0, 1024).ok());
  EXPECT_TRUE(arena.use(1024, 0).ok());
  Error past = arena.use(1000, 25);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.message(),
            "device arena: range at offset 1000 of 25 bytes ends past the arena's 1024 bytes");
  EXPECT_FALSE(arena.use(-8, 8).ok());
  EXPECT_FALSE(arena.use(8, -8).ok());
  // offset + bytes would overflow int64.
  EXPECT_FALSE(arena.use(512, std::numeric_limits<int64_t>::max()).ok());
  EXPECT_FALSE(arena.use(std::numeric_limits<int64_t>::max(), 1).ok());
}

TEST(ArenaLayout, HighWaterMarkSurvivesReset) {
  ArenaLayout arena(8192);
  ASSERT_TRUE(arena.use(1024, 512).ok());
  EXPECT_EQ(arena.highWaterBytes(), 1536);
  ASSERT_TRUE(arena.allocate(3000).ok());
  EXPECT_EQ(arena.highWaterBytes(), 3000);
  arena.reset();
  EXPECT_EQ(arena.allocatedBytes(), 0);
  EXPECT_EQ(*arena.allocate(10), 0);
  EXPECT_EQ(arena.highWaterBytes(), 3000);
  ASSERT_TRUE(arena.use(4096, 4096).ok());
  EXPECT_EQ(arena.highWaterBytes(), 8192);
}

TEST(ArenaLayout, EmptyArena) {
  ArenaLayout arena(0);
  EXPECT_EQ(*arena.allocate(0), 0);
  EXPECT_FALSE(arena.allocate(1).ok());
  EXPECT_EQ(ArenaLayout(-5).capacity(), 0);
}

} // namespace
} // namespace mtc::rt::cuda::test
