//===- PipelineLinks.h - The point-to-point links between pipeline stages -*- C++ -*-===//
//
// The pipeline executor (ScheduleExecutor.h) moves activations and gradients between stages.
// It does not post them all on the pipeline group's communicator: a communicator completes
// the point-to-point operations posted on it in order (GlooCommunicator.h; NCCL's sends and
// receives on one stream likewise run in order), so a receive posted after a send could not
// complete before that send, which completes only once its peer receives it. That makes a
// send block the list as soon as a later receive is awaited, and two stages that each await a
// message the other sends after the first deadlock (2-stage interleaved 1F1B does it).
//
// Instead every direction of every pair of stages that exchange messages gets its own
// two-rank communicator, a link: on the link a -> b, stage a (its rank 0) only sends and stage
// b (its rank 1) only receives, in the order of the schedule, which is the order in which the
// messages match (plan-format.md, "Pipeline"). Operations on different links never wait for
// each other.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_PIPELINELINKS_H
#define MTC_RUNTIME_EXEC_PIPELINELINKS_H

#include "runtime/comm/Communicator.h"
#include "runtime/plan/PipelineSchedule.h"
#include "runtime/support/Error.h"

#include <memory>
#include <span>
#include <vector>

namespace mtc::rt {

class PipelineLinks {
public:
  /// Collective over `pipeline` (rank s is stage s): every rank calls it with the same
  /// schedules. Makes a link for every ordered pair of stages (a, b) such that a schedule sends
  /// from a to b (in the order a, then b, ascending: the same on every rank) and keeps those
  /// of this stage.
  static Expected<PipelineLinks> create(Communicator &pipeline,
                                        std::span<const PipelineSchedule> schedules);

  int stage() const { return stage_; }
  int stages() const { return static_cast<int>(to_.size()); }
  /// The link carrying this stage's messages to `peer` (this stage is its rank 0, the peer
  /// rank 1), or null when no schedule sends that way.
  Communicator *to(int peer) const { return to_[static_cast<size_t>(peer)].get(); }
  /// The link carrying `peer`'s messages to this stage (the peer is its rank 0), or null.
  Communicator *from(int peer) const { return from_[static_cast<size_t>(peer)].get(); }

  /// Bytes this stage has sent over its links (its communicators' counters).
  uint64_t bytesSent() const;

  /// The sender's and the receiver's rank on a link.
  static constexpr int kSenderRank = 0, kReceiverRank = 1;

private:
  int stage_ = 0;
  std::vector<std::unique_ptr<Communicator>> to_, from_; // indexed by peer stage
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_PIPELINELINKS_H
