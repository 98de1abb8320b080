//===- GlooCommunicator.h - The Gloo (CPU, TCP) backend ---------*- C++ -*-===//
//
// A Communicator on Debian's Gloo (0.5, 2022) over its TCP transport. Setup: wait for all
// ranks under the store prefix (an error names the missing ranks), create a TCP device on
// the given hostname or interface, then `gloo::rendezvous::Context::connectFullMesh` through
// a `PrefixStore` on the job's TcpStore, then exchange one word with every peer (an all-to-all
// that proves the full mesh and completes the connections Gloo's listening side finishes
// lazily; without it a communicator destroyed right after creation can leave a peer connecting
// to its released port, which another job may have reused).
//
// Asynchrony: the operations of a communicator run one at a time in the order they were
// started, since a Gloo context must not run two operations at once. A start only queues; a
// worker thread per communicator runs the queue, and a caller that waits for a Work runs the
// queued operations itself while the worker is not running one (so a blocking call, start
// then wait, costs no switch to another thread). Point-to-point operations are only posted
// there (Gloo's unbound buffers send and receive in the background) and then completed by a
// second thread, the completer, in posting order (or by the caller waiting for that very
// operation), so a rank can start a receive and a send in either order and wait for both.
// Only the thread running an operation touches the context; the completer touches only the
// posted buffers.
//
// Algorithms (all deterministic: same inputs and group size give the same bits every run):
//   allReduce       gloo::allreduce, ring, with the reduction of ElementTypes.h (bf16/f16 as
//                   16-bit words reduced through f32; Debian's Gloo has no such type): reduce-
//                   scatter then allgather over segments; each segment is reduced once, by its
//                   owner, and then copied, so every rank has the same bits. Sends about
//                   2 (n-1)/n of the buffer.
//   allGather       gloo::allgather (ring): (n-1) * countPerRank elements sent.
//   reduceScatter   a ring on Gloo's unbound buffers written here (Debian's Gloo has only
//                   ReduceScatterHalvingDoubling, an old-style algorithm with int counts and
//                   no per-call timeout): block c is reduced in ring order
//                   ((x[c+1] op x[c+2]) op ...) op x[c]; (n-1) * countPerRank elements sent.
//   broadcast       gloo::broadcast (binomial tree from the root).
//   allToAll(V)     pairwise exchange on unbound buffers written here (in step i send to
//                   rank + i, receive from rank - i), skipping empty blocks (gloo::alltoallv
//                   would post them): the elements of every block to another rank are sent.
//   barrier         gloo::barrier (counted as 0 bytes).
//   send/recv       unbound buffers on a point-to-point slot, in order per peer pair.
// Byte counters are what this rank sends under these schedules (computed, not sniffed).
//
// Failures: Gloo throws (gloo::IoException on a timeout or a closed peer, EnforceNotMet on
// misuse); the worker and the completer catch and fail the Work with an Error naming the
// operation and the rank, and, when the job store holds a Heartbeat (Heartbeat.h), the ranks
// of the job that have gone silent. A timeout makes Gloo close the context's pairs, so the
// communicator is unusable afterwards (`failure()`); build a new one under a new prefix.
// Destroying a communicator waits for the operations started on it.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_COMM_GLOOCOMMUNICATOR_H
#define MTC_RUNTIME_COMM_GLOOCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"
#include "runtime/comm/Rendezvous.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace gloo {
class Context;
namespace transport {
class Device;
} // namespace transport
} // namespace gloo

namespace mtc::rt {

struct GlooOptions {
  /// Address this rank listens on and advertises to its peers (e.g. "127.0.0.1", a host name
  /// or IP). Empty with `interface` empty: this host's name (gethostname).
  std::string hostname;
  /// Network interface to listen on instead of `hostname` (e.g. "eth0").
  std::string interface;
  /// Every operation (and connecting the pairs) fails after this long without progress.
  std::chrono::milliseconds timeout{60000};
  /// How long to wait for all ranks to arrive at creation.
  std::chrono::milliseconds rendezvousTimeout{60000};
  /// Namespace of this communicator's keys in the store; unique per job attempt.
  std::string prefix = "mtc";
};

class GlooCommunicator final : public Communicator {
public:
  /// Collective over `size` ranks that all call it with the same options (but their own
  /// rank). Keeps `store` (and rank 0's server) alive.
  static Expected<std::unique_ptr<GlooCommunicator>> create(JobStore store, int rank, int size,
                                                            const GlooOptions &options);
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backendName() const override { return "gloo"; }

  Expected<std::unique_ptr<Communicator>> split(int color, int key) override;

  std::chrono::milliseconds timeout() const { return options_.timeout; }

  /// The largest all-reduce two ranks exchange whole (usesPairExchange): Gloo's segment.
  static constexpr size_t kPairExchangeMaxBytes = size_t(1) << 20;

  /// Whether an all-reduce of `bytes` over `size` ranks swaps the two ranks' buffers in one
  /// message each way and reduces locally, rather than running Gloo's ring: 2 ranks and at
  /// most kPairExchangeMaxBytes. The ring cuts at least 4 segments there and sends them one
  /// after another, each a rendezvous of three messages through Gloo's event-loop thread,
  /// whose hand-offs, not the bytes, are most of a small all-reduce's time on CPU ranks
  /// (docs/runtime.md, "Collectives on CPU ranks"). The bytes sent are the same (the
  /// buffer), the reduction too (rank 0's values with rank 1's).
  static bool usesPairExchange(int size, size_t bytes);

  /// Bytes rank `rank` of `size` sends in Gloo's ring all-reduce of `bytes` bytes of
  /// `elementSize`-byte elements (its segment schedule, replayed).
  static uint64_t ringAllReduceBytesSent(int rank, int size, size_t bytes, size_t elementSize);

protected:
  Work doAllReduce(void *data, size_t count, MtcElementType type, MtcReduction reduction) override;
  Work doAllGather(const void *in, void *out, size_t countPerRank, MtcElementType type) override;
  Work doReduceScatter(const void *in, void *out, size_t countPerRank, MtcElementType type,
                       MtcReduction reduction) override;
  Work doBroadcast(void *data, size_t count, MtcElementType type, int root) override;
  Work doAllToAllV(const void *in, std::vector<size_t> sendCounts, void *out,
                   std::vector<size_t> recvCounts, MtcElementType type) override;
  Work doBarrier() override;
  Work doSend(const void *data, size_t count, MtcElementType type, int peer) override;
  Work doRecv(void *data, size_t count, MtcElementType type, int peer) override;
  Work doSendRecv(const void *sendData, size_t sendCount, int dst, void *recvData, size_t recvCount,
                  int src, MtcElementType type) override;

private:
  /// The worker and completer threads with the context they own, and the state of one
  /// operation (GlooCommunicator.cpp).
  class Engine;
  class OperationState;

  GlooCommunicator(JobStore store, std::shared_ptr<gloo::transport::Device> device,
                   std::shared_ptr<gloo::Context> context, GlooOptions options);
  uint32_t nextTag() { return tag_++; }

  JobStore store_;
  std::shared_ptr<gloo::transport::Device> device_;
  GlooOptions options_;
  int rank_ = 0, size_ = 1;
  uint32_t tag_ = 1;
  uint32_t splits_ = 0;
  std::unique_ptr<Engine> engine_; // last: its threads stop first
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_COMM_GLOOCOMMUNICATOR_H
