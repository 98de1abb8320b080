//===- Communicator.h - A process group and its collectives -----*- C++ -*-===//
//
// The runtime talks to the other ranks through a `Communicator`: one process group (the
// world, or the ranks of one mesh axis) with the collectives that the plan's derived
// communication needs, on contiguous buffers. Two backends implement it: Gloo over TCP on
// CPUs (GlooCommunicator.h) and NCCL on GPUs (NcclCommunicator.h, where buffers are device
// pointers).
//
// Every operation is blocking and collective over the group (send/recv pair two ranks) and
// returns an Error: a peer that died or stopped participating makes the call fail within the
// communicator's timeout, and the communicator is unusable afterwards (`failure()` says why;
// rebuild one under a new store prefix). Nothing throws.
//
// Sub-groups: `split(color, key)` (MPI_Comm_split semantics) and `subgroup(ranks)` are
// collective over *this* communicator: every rank calls them in the same order; ranks that
// are not members get a null communicator.
//
// Counters: every communicator counts, per collective kind, its calls and the bytes this
// rank put on the wire under the algorithm it used (so the runtime can report the measured
// communication volume next to the cost model's prediction).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_COMM_COMMUNICATOR_H
#define MTC_RUNTIME_COMM_COMMUNICATOR_H

#include "runtime/support/Error.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::rt {

/// The kinds of operations counted separately.
enum class CollectiveKind : uint8_t {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  AllToAll,
  Barrier,
  SendRecv, // point-to-point: send, and the send half of sendRecv
};
inline constexpr size_t kNumCollectiveKinds = 7;

/// "allReduce", "allGather", ...
std::string_view collectiveKindName(CollectiveKind kind);

/// Calls and bytes sent by this rank, per kind. A plain value the communicator owns; copy it
/// to take a snapshot.
struct CommCounters {
  std::array<uint64_t, kNumCollectiveKinds> calls{};
  std::array<uint64_t, kNumCollectiveKinds> bytesSent{};

  uint64_t callsOf(CollectiveKind k) const { return calls[static_cast<size_t>(k)]; }
  uint64_t bytesSentBy(CollectiveKind k) const { return bytesSent[static_cast<size_t>(k)]; }
  uint64_t totalBytesSent() const;
  void record(CollectiveKind k, uint64_t bytes) {
    ++calls[static_cast<size_t>(k)];
    bytesSent[static_cast<size_t>(k)] += bytes;
  }
};

class Communicator {
public:
  virtual ~Communicator();

  /// This process's rank in the group, in [0, size()).
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "gloo" or "nccl".
  virtual std::string_view backendName() const = 0;

  /// In-place sum over all ranks; the result is bitwise identical on every rank and, for the
  /// same inputs and group size, on every run (the backend's documented algorithm).
  virtual Error allReduceSum(float *data, size_t count) = 0;
  virtual Error allReduceSum(double *data, size_t count) = 0;
  /// out[r * countPerRank + i] = in_r[i]. `out` holds size() * countPerRank elements.
  virtual Error allGather(const float *in, float *out, size_t countPerRank) = 0;
  /// out[i] = sum over ranks r of in_r[rank() * countPerRank + i]; `in` holds
  /// size() * countPerRank elements.
  virtual Error reduceScatterSum(const float *in, float *out, size_t countPerRank) = 0;
  /// Copies `bytes` bytes of root's `data` into every rank's `data`.
  virtual Error broadcast(void *data, size_t bytes, int root) = 0;
  /// out[s * countPerRank + i] = in_s[rank() * countPerRank + i] (block s of the output
  /// comes from rank s); both hold size() * countPerRank elements.
  virtual Error allToAll(const float *in, float *out, size_t countPerRank) = 0;
  virtual Error barrier() = 0;
  /// Point-to-point. Blocking: a send completes when the peer has received it, so two ranks
  /// that exchange must use sendRecv (or order their sends and receives).
  virtual Error send(const void *data, size_t bytes, int peer) = 0;
  virtual Error recv(void *data, size_t bytes, int peer) = 0;
  /// Sends to `dst` and receives from `src` at the same time (pipeline shifts, exchanges).
  virtual Error sendRecv(const void *sendData, size_t sendBytes, int dst, void *recvData,
                         size_t recvBytes, int src) = 0;

  /// Collective over this communicator: ranks with the same `color` >= 0 form a new group,
  /// ordered by (key, rank here); a rank with a negative color gets a null communicator. The
  /// new group's counters start at zero.
  virtual Expected<std::unique_ptr<Communicator>> split(int color, int key) = 0;
  /// Collective over this communicator: the group of `ranks` (ranks here, distinct), where
  /// ranks[i] becomes rank i. Every rank passes the same list; non-members get null.
  Expected<std::unique_ptr<Communicator>> subgroup(const std::vector<int> &ranks);

  /// Empty while usable; after a failed operation, that failure's message (and every later
  /// operation fails with it).
  virtual const std::string &failure() const = 0;

  const CommCounters &counters() const { return counters_; }
  void resetCounters() { counters_ = CommCounters(); }

protected:
  CommCounters counters_;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_COMM_COMMUNICATOR_H
