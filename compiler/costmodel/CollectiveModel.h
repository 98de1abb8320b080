//===- CollectiveModel.h - alpha-beta times of collectives ------*- C++ -*-===//
//
// The time of one collective over a group of ranks by the alpha-beta model: each message
// costs the link's latency (alpha) plus its bytes over the link's bandwidth (beta, what one
// rank sends in one direction). The algorithms are those NCCL and Gloo choose among (ring,
// tree, hierarchical); the model takes the fastest, as NCCL's tuner does. A group inside one
// node uses the intra-node link; a group with one rank per node the inter-node link; a group
// with g > 1 ranks on each of several nodes runs a ring through the slower inter-node link,
// or hierarchically (docs/cost-model.md, "Collectives"). A link whose message times were
// measured (the runtime's Gloo messages, by `mtc calibrate`) prices each message at its
// measured time and an all-reduce as the runtime runs it: two ranks' buffers of up to 1 MiB
// swapped in one message, else Gloo's segmented ring, message by message.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_COSTMODEL_COLLECTIVEMODEL_H
#define MTC_COMPILER_COSTMODEL_COLLECTIVEMODEL_H

#include "compiler/costmodel/Cluster.h"

#include <optional>

namespace mtc::costmodel {

enum class CollectiveKind { AllReduce, AllGather, ReduceScatter, AllToAll, Shift };

/// "all_reduce", ... as plan.json's `predictions.functions.*.collectives[].kind`.
std::optional<CollectiveKind> parseCollectiveKind(llvm::StringRef name);

/// Where a group's ranks are: `size` ranks, `perNode` of them on each node they use.
struct GroupPlacement {
  int64_t size = 1;
  int64_t perNode = 1;
  bool intraNode() const { return perNode >= size; }
};

/// The placement of a group of `size` ranks whose world ranks are `stride` apart (a mesh
/// axis: the product of the sizes of the axes inside it) on nodes of `ranksPerNode`
/// consecutive ranks.
GroupPlacement placeGroup(int64_t size, int64_t stride, int64_t ranksPerNode);

struct CollectiveTime {
  double seconds = 0;
  llvm::StringRef algorithm; // "ring", "tree", "hierarchical", "direct", "local"
};

/// The time of one collective of `bytes` (the buffer CommunicationVolume.h's CollectiveCall
/// describes for the kind) over `group`.
CollectiveTime collectiveTime(const Cluster &cluster, CollectiveKind kind, double bytes,
                              GroupPlacement group);

/// The time of one point-to-point message of `bytes` between two ranks.
double pointToPointTime(const Cluster &cluster, double bytes, bool sameNode);

/// The largest all-reduce two CPU ranks exchange whole instead of running Gloo's ring
/// (GlooCommunicator::kPairExchangeMaxBytes).
constexpr double kPairExchangeMaxBytes = 1 << 20;

/// The largest segment of Gloo's ring all-reduce (gloo::AllreduceOptions' kMaxSegmentSize).
constexpr double kRingMaxSegmentBytes = 1 << 20;

/// How many segments Gloo's ring all-reduce of `bytes` over `n` ranks cuts (each rank sends
/// 2 (S - S / n) messages of bytes / S).
double ringAllReduceSegments(int64_t n, double bytes);

/// Gloo's ring all-reduce of `bytes` over `n` ranks on `link`, message by message: the
/// runtime's CPU all-reduce, priced where the link's message times were measured.
double segmentedRingAllReduceTime(const Link &link, int64_t n, double bytes);

} // namespace mtc::costmodel

#endif // MTC_COMPILER_COSTMODEL_COLLECTIVEMODEL_H
