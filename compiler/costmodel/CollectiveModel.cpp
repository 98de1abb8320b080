//===- CollectiveModel.cpp - alpha-beta times of collectives --------------===//

#include "compiler/costmodel/CollectiveModel.h"

#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <cmath>

using namespace mtc::costmodel;

std::optional<CollectiveKind> mtc::costmodel::parseCollectiveKind(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<CollectiveKind>>(name)
      .Case("all_reduce", CollectiveKind::AllReduce)
      .Case("all_gather", CollectiveKind::AllGather)
      .Case("reduce_scatter", CollectiveKind::ReduceScatter)
      .Case("all_to_all", CollectiveKind::AllToAll)
      .Case("shift", CollectiveKind::Shift)
      .Default(std::nullopt);
}

GroupPlacement mtc::costmodel::placeGroup(int64_t size, int64_t stride, int64_t ranksPerNode) {
  // Members r0 + i stride: a node of ranksPerNode consecutive ranks holds ranksPerNode /
  // stride of them (all when the group fits, one when the stride reaches past the node).
  int64_t perNode = stride >= ranksPerNode ? 1 : std::max<int64_t>(1, ranksPerNode / stride);
  return {size, std::min(size, perNode)};
}

namespace {

/// A ring of n ranks: n - 1 steps, each moving `stepBytes` over the link.
double ring(const Link &link, int64_t n, double stepBytes, int64_t rounds = 1) {
  return static_cast<double>(rounds * (n - 1)) * link.messageTime(stepBytes);
}

} // namespace

double mtc::costmodel::pointToPointTime(const Cluster &cluster, double bytes, bool sameNode) {
  const Link &link = sameNode ? cluster.intraNode : cluster.interNode;
  return link.messageTime(bytes);
}

double mtc::costmodel::ringAllReduceSegments(int64_t n, double bytes) {
  // Gloo's ring (GlooCommunicator::ringAllReduceBytesSent counts its bytes the same way):
  // at least 2 n segments of at most 1 MiB, rounded up to a multiple of n.
  double dn = static_cast<double>(n);
  double segments = std::max(std::ceil(bytes / kRingMaxSegmentBytes), 2 * dn);
  return std::ceil(segments / dn) * dn;
}

double mtc::costmodel::segmentedRingAllReduceTime(const Link &link, int64_t n, double bytes) {
  // Each rank sends every segment but its own S / n twice (reduce-scatter, then all-gather),
  // one message per segment, each after the previous one.
  double segments = ringAllReduceSegments(n, bytes);
  double messages = 2 * (segments - segments / static_cast<double>(n));
  return messages * link.messageTime(bytes / segments);
}

CollectiveTime mtc::costmodel::collectiveTime(const Cluster &cluster, CollectiveKind kind,
                                              double bytes, GroupPlacement group) {
  int64_t n = group.size;
  if (n <= 1)
    return {0, "local"};
  // A ring through several nodes waits on its inter-node hops.
  const Link &slowest = group.intraNode() ? cluster.intraNode : cluster.interNode;
  double dn = static_cast<double>(n);
  switch (kind) {
  case CollectiveKind::AllReduce: {
    // A measured link is the runtime's (mtc calibrate times its messages): two ranks swap
    // buffers of up to kPairExchangeMaxBytes in one message each way, larger buffers and
    // larger groups run Gloo's ring (GlooCommunicator::usesPairExchange).
    if (!slowest.messageTimes.empty()) {
      if (n == 2 && bytes <= kPairExchangeMaxBytes)
        return {slowest.messageTime(bytes), "exchange"};
      return {segmentedRingAllReduceTime(slowest, n, bytes), "ring"};
    }
    // Ring: a reduce-scatter and an all-gather of B / n blocks.
    CollectiveTime best{ring(slowest, n, bytes / dn, 2), "ring"};
    // Tree (NCCL's double binary tree): reduce then broadcast, pipelined, log2 n hops.
    double hops = std::ceil(std::log2(dn));
    double tree = 2 * hops * slowest.latency + 2 * bytes / slowest.bandwidth;
    if (tree < best.seconds)
      best = {tree, "tree"};
    if (!group.intraNode() && group.perNode > 1) {
      // Hierarchical: reduce-scatter in the node, all-reduce of 1/g across the nodes,
      // all-gather in the node.
      int64_t g = group.perNode, nodes = n / g;
      double dg = static_cast<double>(g);
      double inside = ring(cluster.intraNode, g, bytes / dg);
      double across = ring(cluster.interNode, nodes, bytes / dg / static_cast<double>(nodes), 2);
      if (2 * inside + across < best.seconds)
        best = {2 * inside + across, "hierarchical"};
    }
    return best;
  }
  case CollectiveKind::AllGather:
    // `bytes` is the local part: n - 1 steps of one part each.
    return {ring(slowest, n, bytes), "ring"};
  case CollectiveKind::ReduceScatter:
    return {ring(slowest, n, bytes / dn), "ring"};
  case CollectiveKind::AllToAll: {
    // Every rank sends (n - 1) / n of its buffer directly; the blocks for other nodes share
    // the inter-node link, those inside the node the intra-node one, at once.
    double block = bytes / dn;
    int64_t inside = group.intraNode() ? n - 1 : group.perNode - 1;
    int64_t outside = n - 1 - inside;
    double seconds = std::max(static_cast<double>(inside) *
                                  cluster.intraNode.messageTime(block),
                              static_cast<double>(outside) * cluster.interNode.messageTime(block));
    return {seconds, "direct"};
  }
  case CollectiveKind::Shift:
    return {slowest.messageTime(bytes), "direct"};
  }
  return {0, "local"};
}
