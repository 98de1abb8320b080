//===- CollectiveModelTest.cpp - alpha-beta times and group placement -----===//

#include "compiler/costmodel/CollectiveModel.h"

#include "gtest/gtest.h"

using namespace mtc::costmodel;

namespace {

Cluster twoLinks() {
  Cluster c;
  c.devicesPerNode = 8;
  c.intraNode = {100e9, 1e-6};
  c.interNode = {10e9, 10e-6};
  return c;
}

TEST(CollectiveModelTest, PlacesMeshAxes) {
  // tp 8 innermost on nodes of 8: one node.
  EXPECT_TRUE(placeGroup(8, 1, 8).intraNode());
  // dp 4 outside tp 8: one rank per node.
  GroupPlacement dp = placeGroup(4, 8, 8);
  EXPECT_EQ(dp.perNode, 1);
  EXPECT_FALSE(dp.intraNode());
  // dp 8 outside tp 2: 4 ranks on each of 2 nodes.
  GroupPlacement mixed = placeGroup(8, 2, 8);
  EXPECT_EQ(mixed.perNode, 4);
  EXPECT_FALSE(mixed.intraNode());
}

TEST(CollectiveModelTest, RingAllReduceIsTwiceNMinusOneOverN) {
  Cluster c = twoLinks();
  // Large enough for the ring to beat the tree: 2 (n - 1) alpha + 2 (n - 1) / n B / beta.
  double bytes = 1e9;
  CollectiveTime t = collectiveTime(c, CollectiveKind::AllReduce, bytes, {8, 8});
  EXPECT_EQ(t.algorithm, "ring");
  EXPECT_DOUBLE_EQ(t.seconds, 14 * 1e-6 + 2.0 * 7 / 8 * bytes / 100e9);
  // A small message: the tree's log2 n latency wins.
  CollectiveTime small = collectiveTime(c, CollectiveKind::AllReduce, 8, {8, 8});
  EXPECT_EQ(small.algorithm, "tree");
  EXPECT_DOUBLE_EQ(small.seconds, 6 * 1e-6 + 2 * 8 / 100e9);
}

TEST(CollectiveModelTest, GatherScatterAllToAllAndShift) {
  Cluster c = twoLinks();
  double local = 1e6;
  // All-gather of a local part L: (n - 1) (alpha + L / beta).
  EXPECT_DOUBLE_EQ(collectiveTime(c, CollectiveKind::AllGather, local, {4, 8}).seconds,
                   3 * (1e-6 + local / 100e9));
  // Reduce-scatter of a whole buffer B: (n - 1) (alpha + B / n / beta).
  EXPECT_DOUBLE_EQ(collectiveTime(c, CollectiveKind::ReduceScatter, 4 * local, {4, 8}).seconds,
                   3 * (1e-6 + local / 100e9));
  // All-to-all inside a node: n - 1 blocks of B / n.
  EXPECT_DOUBLE_EQ(collectiveTime(c, CollectiveKind::AllToAll, 4 * local, {4, 8}).seconds,
                   3 * (1e-6 + local / 100e9));
  // Across nodes, one rank each: every block over the inter-node link.
  EXPECT_DOUBLE_EQ(collectiveTime(c, CollectiveKind::AllToAll, 4 * local, {4, 1}).seconds,
                   3 * (10e-6 + local / 10e9));
  EXPECT_DOUBLE_EQ(collectiveTime(c, CollectiveKind::Shift, local, {4, 1}).seconds,
                   10e-6 + local / 10e9);
  EXPECT_DOUBLE_EQ(pointToPointTime(c, local, true), 1e-6 + local / 100e9);
  EXPECT_EQ(collectiveTime(c, CollectiveKind::AllReduce, local, {1, 1}).seconds, 0);
}

TEST(CollectiveModelTest, HierarchicalAllReduceAcrossNodes) {
  Cluster c = twoLinks();
  double bytes = 1e9;
  // 16 ranks, 8 per node: a flat ring runs at the inter-node bandwidth; the hierarchical
  // algorithm sends only 1/8 of the buffer between the nodes.
  CollectiveTime t = collectiveTime(c, CollectiveKind::AllReduce, bytes, {16, 8});
  EXPECT_EQ(t.algorithm, "hierarchical");
  double inside = 7 * (1e-6 + bytes / 8 / 100e9);
  double across = 2 * (10e-6 + bytes / 8 / 2 / 10e9);
  EXPECT_DOUBLE_EQ(t.seconds, 2 * inside + across);
  EXPECT_LT(t.seconds, 2.0 * 15 / 16 * bytes / 10e9);
}

// Tests that a link with measured message times prices an all-reduce as the CPU runtime
// runs it: two ranks swap buffers of up to 1 MiB in one message; larger buffers and groups
// run Gloo's segmented ring (at least 2 n segments of at most 1 MiB, each rank sending
// 2 (S - S / n) of them); a shift is one message.
TEST(CollectiveModelTest, MeasuredMessagesPriceTheRuntimesAllReduce) {
  Cluster c = twoLinks();
  c.intraNode.messageTimes = {{1, 1e-4}, {1e9, 1e-4}}; // every message 100 us (exp of a log)
  CollectiveTime two = collectiveTime(c, CollectiveKind::AllReduce, 131072, {2, 2});
  EXPECT_EQ(two.algorithm, "exchange");
  EXPECT_NEAR(two.seconds, 1e-4, 1e-15);
  // 2 ranks, 2 MiB: Gloo's ring, 4 segments of 512 KiB, 4 messages.
  EXPECT_EQ(ringAllReduceSegments(2, 2 << 20), 4);
  CollectiveTime large = collectiveTime(c, CollectiveKind::AllReduce, 2 << 20, {2, 2});
  EXPECT_EQ(large.algorithm, "ring");
  EXPECT_NEAR(large.seconds, 4e-4, 1e-15);
  // 4 ranks, 128 KiB: 8 segments, 12 messages; 8 MiB over 4: 8 segments of 1 MiB.
  EXPECT_NEAR(collectiveTime(c, CollectiveKind::AllReduce, 131072, {4, 4}).seconds, 12e-4, 1e-15);
  EXPECT_EQ(ringAllReduceSegments(4, 8 << 20), 8);
  // 12 MiB over 4: 12 segments, 18 messages.
  EXPECT_EQ(ringAllReduceSegments(4, 12 << 20), 12);
  EXPECT_NEAR(collectiveTime(c, CollectiveKind::AllReduce, 12 << 20, {4, 4}).seconds, 18e-4,
              1e-15);
  EXPECT_NEAR(collectiveTime(c, CollectiveKind::Shift, 4096, {2, 2}).seconds, 1e-4, 1e-15);
  // All-gather: n - 1 messages of the local part.
  EXPECT_NEAR(collectiveTime(c, CollectiveKind::AllGather, 4096, {4, 4}).seconds, 3e-4, 1e-15);
}

} // namespace
