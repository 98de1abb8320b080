//===- CollectiveBenchmark.h - Gloo's all-reduce between two local ranks -*- C++ -*-===//
//
// `mtc calibrate`'s link measurement (docs/cost-model.md): the time of the runtime's own
// all-reduce (GlooCommunicator, f32 sum) between this process and a peer it forks, over
// loopback TCP as mtrun's ranks on one host use it. The header stays free of Gloo and of
// exceptions so that the compiler's tools can call it.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_COMM_COLLECTIVEBENCHMARK_H
#define MTC_RUNTIME_COMM_COLLECTIVEBENCHMARK_H

#include "runtime/support/Error.h"

#include <cstddef>
#include <vector>

namespace mtc::rt {

struct CollectiveSample {
  size_t bytes = 0;
  /// The median over the iterations (after one warm-up call): the typical time, which on a
  /// host shared with other work includes waking the peer.
  double seconds = 0;
  /// The mean over the same iterations: what a run of many such calls takes per call. On a
  /// host whose cores the ranks share, the times are bimodal (most calls fast, some waiting a
  /// scheduler tick for a core), and the median hides the slow ones a step pays for.
  double meanSeconds = 0;
};

/// Times an all-reduce of each of `bytes` (multiples of 4) `iterations` times between this
/// process (rank 0) and a forked peer (rank 1, which exits when done). Call it before the
/// process starts threads of its own: the peer is forked.
Expected<std::vector<CollectiveSample>> benchmarkLoopbackAllReduce(const std::vector<size_t> &bytes,
                                                                   int iterations);

} // namespace mtc::rt

#endif // MTC_RUNTIME_COMM_COLLECTIVEBENCHMARK_H
