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
// Algorithms (all deterministic: same inputs and group size give the same bits every run):
//   allReduceSum    gloo::allreduce, ring (reduce-scatter then allgather over segments; each
//                   segment is reduced once, by its owner, and then copied, so every rank has
//                   the same bits). Sends about 2 (n-1)/n of the buffer.
//   allGather       gloo::allgather (ring): (n-1) * countPerRank elements sent.
//   reduceScatter   a ring on Gloo's unbound buffers written here (Debian's Gloo has only
//                   ReduceScatterHalvingDoubling, an old-style algorithm with int counts and
//                   no per-call timeout): block c is summed in ring order
//                   ((x[c+1] + x[c+2]) + ...) + x[c]; (n-1) * countPerRank elements sent.
//   broadcast       gloo::broadcast (binomial tree from the root).
//   allToAll        gloo::alltoall (pairwise): (n-1) * countPerRank elements sent.
//   barrier         gloo::barrier (counted as 0 bytes).
//   send/recv       unbound buffers on a point-to-point slot, in order per peer pair.
// Byte counters are what this rank sends under these schedules (computed, not sniffed).
//
// Failures: Gloo throws (gloo::IoException on a timeout or a closed peer, EnforceNotMet on
// misuse); every call catches and returns an Error naming the operation and the rank. A
// timeout makes Gloo close the context's pairs, so the communicator is unusable afterwards
// (`failure()`); build a new one under a new prefix.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_COMM_GLOOCOMMUNICATOR_H
#define MTC_RUNTIME_COMM_GLOOCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"
#include "runtime/comm/Rendezvous.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>

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

  Error allReduceSum(float *data, size_t count) override;
  Error allReduceSum(double *data, size_t count) override;
  Error allGather(const float *in, float *out, size_t countPerRank) override;
  Error reduceScatterSum(const float *in, float *out, size_t countPerRank) override;
  Error broadcast(void *data, size_t bytes, int root) override;
  Error allToAll(const float *in, float *out, size_t countPerRank) override;
  Error barrier() override;
  Error send(const void *data, size_t bytes, int peer) override;
  Error recv(void *data, size_t bytes, int peer) override;
  Error sendRecv(const void *sendData, size_t sendBytes, int dst, void *recvData, size_t recvBytes,
                 int src) override;
  Expected<std::unique_ptr<Communicator>> split(int color, int key) override;
  const std::string &failure() const override { return failure_; }

  std::chrono::milliseconds timeout() const { return options_.timeout; }

  /// Bytes rank `rank` of `size` sends in Gloo's ring all-reduce of `bytes` bytes of
  /// `elementSize`-byte elements (its segment schedule, replayed).
  static uint64_t ringAllReduceBytesSent(int rank, int size, size_t bytes, size_t elementSize);

private:
  GlooCommunicator(JobStore store, std::shared_ptr<gloo::transport::Device> device,
                   std::shared_ptr<gloo::Context> context, GlooOptions options);
  /// Runs `body` (which may throw Gloo's exceptions), turning failures into Errors that name
  /// `op`; counts `bytes` under `kind` on success.
  Error run(const char *op, CollectiveKind kind, uint64_t bytes, const std::function<void()> &body);
  Error checkPeer(const char *op, int peer) const;
  uint32_t nextTag() { return tag_++; }

  JobStore store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  GlooOptions options_;
  int rank_ = 0, size_ = 1;
  uint32_t tag_ = 1;
  uint32_t splits_ = 0;
  std::string failure_;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_COMM_GLOOCOMMUNICATOR_H
