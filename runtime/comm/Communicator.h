//===- Communicator.h - A process group and its collectives -----*- C++ -*-===//
//
// The runtime talks to the other ranks through a `Communicator`: one process group (the
// world, or the ranks of one mesh axis) with the collectives that the plan's derived
// communication needs, on contiguous buffers. Two backends implement it: Gloo over TCP on
// CPUs (GlooCommunicator.h) and NCCL on GPUs (NcclCommunicator.h, where buffers are device
// pointers).
//
// One interface over element type and reduction: every operation names its element type
// (MtcElementType: f32, f64, bf16, f16, i32, i64) and the reductions their reduction
// (MtcReduction: sum, max, min), with the plain C codes of CollectiveTypes.h. Counts are in
// elements.
//
// Asynchronous: `startX(...)` checks the arguments, starts the operation and returns a `Work`
// handle; `test()` says whether it has finished, `wait()` blocks until it has and returns its
// Error. The buffers belong to the operation until then (a Work destroyed unfinished waits).
// The blocking `x(...)` is `startX(...).wait()`, started with `callerWaits()` set (a backend
// may then run it on the waiting caller's thread). Operations run in the order they were
// started, each collective over the group (every rank starts the same collectives in the same
// order; send/recv pair two ranks, and messages between two ranks arrive in the order they
// were sent). A communicator's methods are called from one thread at a time (its owner).
//
// Failures are values, never exceptions: bad arguments give a failed Work at once (the
// communicator stays usable); a peer that died or stopped participating makes the operation
// fail within the communicator's timeout, and then the communicator is unusable (`failure()`
// says why; every later operation fails with it; rebuild one under a new store prefix).
//
// Sub-groups: `split(color, key)` (MPI_Comm_split semantics) and `subgroup(ranks)` are
// collective over *this* communicator and blocking: every rank calls them in the same order;
// ranks that are not members get a null communicator.
//
// Counters: every communicator counts, per collective kind, its operations and the bytes this
// rank puts on the wire under the algorithm it uses (so the runtime can report the measured
// communication volume next to the cost model's prediction), when the operation starts.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_COMM_COMMUNICATOR_H
#define MTC_RUNTIME_COMM_COMMUNICATOR_H

#include "runtime/comm/CollectiveTypes.h"
#include "runtime/support/Error.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
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
  AllToAll, // all-to-all and all-to-all-v
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

/// How a backend reports the progress of one started operation (held through a Work).
class WorkState {
public:
  virtual ~WorkState();
  /// Whether the operation has finished, successfully or not. Never blocks.
  virtual bool poll() = 0;
  /// Blocks until the operation has finished (bounded by the communicator's timeout) and
  /// returns its result; later calls return the same result.
  virtual Error wait() = 0;
};

/// The handle of a started operation. Movable, not copyable. Destroying an unfinished Work
/// waits for the operation (its buffers may live on the caller's stack); its result then
/// remains in the communicator's failure().
class [[nodiscard]] Work {
public:
  /// A finished, successful operation (nothing to do).
  Work() = default;
  explicit Work(std::shared_ptr<WorkState> state) : state_(std::move(state)) {}
  /// An operation that finished at once with `result` (e.g. rejected arguments).
  static Work finished(Error result);
  Work(Work &&other) noexcept = default;
  Work &operator=(Work &&other) noexcept;
  Work(const Work &) = delete;
  Work &operator=(const Work &) = delete;
  ~Work();

  /// Whether the operation has finished. Never blocks.
  bool test() { return !state_ || state_->poll(); }
  /// Blocks until the operation has finished; its result (the same on every call).
  Error wait() { return state_ ? state_->wait() : result_; }

private:
  std::shared_ptr<WorkState> state_;
  Error result_;
};

/// The first failure of a communicator, shared with the operations in flight (which may
/// finish on another thread or after the communicator is gone).
class FailureRecord {
public:
  /// Keeps `message` unless a failure is already recorded (the first one sticks).
  void record(std::string message);
  /// Empty while no failure is recorded.
  std::string message() const;
  bool failed() const;
  /// The error of an operation (`where`, see Communicator::describe) refused because of the
  /// recorded failure.
  Error unusable(std::string_view where) const;

private:
  mutable std::mutex mutex_;
  std::string message_;
};

class Communicator {
public:
  virtual ~Communicator();

  /// This process's rank in the group, in [0, size()).
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "gloo" or "nccl".
  virtual std::string_view backendName() const = 0;

  //===--- Asynchronous operations ----------------------------------------===//

  /// In place: data[i] = the reduction of data[i] over all ranks. The result is bitwise
  /// identical on every rank and, for the same inputs and group size, on every run (the
  /// backend's documented algorithm).
  Work startAllReduce(void *data, size_t count, MtcElementType type, MtcReduction reduction);
  /// out[r * countPerRank + i] = in_r[i]. `out` holds size() * countPerRank elements.
  Work startAllGather(const void *in, void *out, size_t countPerRank, MtcElementType type);
  /// out[i] = the reduction over ranks r of in_r[rank() * countPerRank + i]; `in` holds
  /// size() * countPerRank elements.
  Work startReduceScatter(const void *in, void *out, size_t countPerRank, MtcElementType type,
                          MtcReduction reduction);
  /// Copies root's `count` elements of `data` into every rank's `data`.
  Work startBroadcast(void *data, size_t count, MtcElementType type, int root);
  /// out[s * countPerRank + i] = in_s[rank() * countPerRank + i] (block s of the output
  /// comes from rank s); both hold size() * countPerRank elements.
  Work startAllToAll(const void *in, void *out, size_t countPerRank, MtcElementType type);
  /// Uneven all-to-all: `in` holds the blocks for ranks 0, 1, ... back to back, block p of
  /// sendCounts[p] elements; `out` receives the blocks from ranks 0, 1, ... back to back,
  /// block s of recvCounts[s] elements. Both spans have size() entries (copied at start);
  /// sendCounts[rank()] must equal recvCounts[rank()], and what rank p sends to rank q must
  /// be what q expects from p (as in MPI: a mismatch fails or times out, it cannot be told
  /// apart from a peer's failure). Zero counts send and receive nothing.
  Work startAllToAllV(const void *in, std::span<const size_t> sendCounts, void *out,
                      std::span<const size_t> recvCounts, MtcElementType type);
  Work startBarrier();
  /// Point-to-point with another rank of the group. A send completes when the peer has
  /// received it; start both halves of an exchange before waiting (or use startSendRecv).
  Work startSend(const void *data, size_t count, MtcElementType type, int peer);
  Work startRecv(void *data, size_t count, MtcElementType type, int peer);
  /// Sends to `dst` and receives from `src` as one operation (pipeline shifts, exchanges;
  /// NCCL needs the two halves grouped).
  Work startSendRecv(const void *sendData, size_t sendCount, int dst, void *recvData,
                     size_t recvCount, int src, MtcElementType type);

  //===--- Blocking operations: start, then wait --------------------------===//
  // Started with callerWaits() set, so a backend may leave the operation to the waiting
  // caller instead of handing it to another thread.

  Error allReduce(void *data, size_t count, MtcElementType type, MtcReduction reduction) {
    return startAndWait([&] { return startAllReduce(data, count, type, reduction); });
  }
  Error allGather(const void *in, void *out, size_t countPerRank, MtcElementType type) {
    return startAndWait([&] { return startAllGather(in, out, countPerRank, type); });
  }
  Error reduceScatter(const void *in, void *out, size_t countPerRank, MtcElementType type,
                      MtcReduction reduction) {
    return startAndWait([&] { return startReduceScatter(in, out, countPerRank, type, reduction); });
  }
  Error broadcast(void *data, size_t count, MtcElementType type, int root) {
    return startAndWait([&] { return startBroadcast(data, count, type, root); });
  }
  Error allToAll(const void *in, void *out, size_t countPerRank, MtcElementType type) {
    return startAndWait([&] { return startAllToAll(in, out, countPerRank, type); });
  }
  Error allToAllV(const void *in, std::span<const size_t> sendCounts, void *out,
                  std::span<const size_t> recvCounts, MtcElementType type) {
    return startAndWait([&] { return startAllToAllV(in, sendCounts, out, recvCounts, type); });
  }
  Error barrier() {
    return startAndWait([&] { return startBarrier(); });
  }
  Error send(const void *data, size_t count, MtcElementType type, int peer) {
    return startAndWait([&] { return startSend(data, count, type, peer); });
  }
  Error recv(void *data, size_t count, MtcElementType type, int peer) {
    return startAndWait([&] { return startRecv(data, count, type, peer); });
  }
  Error sendRecv(const void *sendData, size_t sendCount, int dst, void *recvData, size_t recvCount,
                 int src, MtcElementType type) {
    return startAndWait(
        [&] { return startSendRecv(sendData, sendCount, dst, recvData, recvCount, src, type); });
  }

  //===--- Groups -----------------------------------------------------------===//

  /// Collective over this communicator: ranks with the same `color` >= 0 form a new group,
  /// ordered by (key, rank here); a rank with a negative color gets a null communicator. The
  /// new group's counters start at zero. Runs after the operations started before it.
  virtual Expected<std::unique_ptr<Communicator>> split(int color, int key) = 0;
  /// Collective over this communicator: the group of `ranks` (ranks here, distinct), where
  /// ranks[i] becomes rank i. Every rank passes the same list; non-members get null.
  Expected<std::unique_ptr<Communicator>> subgroup(const std::vector<int> &ranks);

  /// Empty while usable; after a failed operation, that failure's message (and every later
  /// operation fails with it).
  std::string failure() const { return failure_->message(); }

  const CommCounters &counters() const { return counters_; }
  void resetCounters() { counters_ = CommCounters(); }

protected:
  /// The backends' operations, called with checked arguments: a valid type and reduction,
  /// a root or peer in range (a peer other than this rank), non-null buffers where the count
  /// is not zero, and (all-to-all-v) size() counts each, with matching own counts. Each counts
  /// itself in counters_.
  virtual Work doAllReduce(void *data, size_t count, MtcElementType type,
                           MtcReduction reduction) = 0;
  virtual Work doAllGather(const void *in, void *out, size_t countPerRank, MtcElementType type) = 0;
  virtual Work doReduceScatter(const void *in, void *out, size_t countPerRank, MtcElementType type,
                               MtcReduction reduction) = 0;
  virtual Work doBroadcast(void *data, size_t count, MtcElementType type, int root) = 0;
  virtual Work doAllToAllV(const void *in, std::vector<size_t> sendCounts, void *out,
                           std::vector<size_t> recvCounts, MtcElementType type) = 0;
  virtual Work doBarrier() = 0;
  virtual Work doSend(const void *data, size_t count, MtcElementType type, int peer) = 0;
  virtual Work doRecv(void *data, size_t count, MtcElementType type, int peer) = 0;
  virtual Work doSendRecv(const void *sendData, size_t sendCount, int dst, void *recvData,
                          size_t recvCount, int src, MtcElementType type) = 0;

  /// "<backend> <op> (rank r of n)", the start of every message about an operation.
  std::string describe(std::string_view op) const;
  /// Whether the operation being started is a blocking call's, whose caller waits for it at
  /// once (GlooCommunicator then does not wake its worker thread: the caller runs it).
  bool callerWaits() const { return callerWaits_; }
  /// The failed Work of an operation refused because an earlier one failed.
  Work unusable(std::string_view op) const;

  CommCounters counters_;
  std::shared_ptr<FailureRecord> failure_ = std::make_shared<FailureRecord>();

private:
  /// Starts an operation with callerWaits() set and waits for it. The flag is cleared
  /// however the start ends: left set, later asynchronous starts would wake no worker.
  template <typename Start> Error startAndWait(Start start) {
    callerWaits_ = true;
    struct Reset {
      bool &flag;
      ~Reset() { flag = false; }
    } reset{callerWaits_};
    Work work = start();
    return work.wait();
  }

  bool callerWaits_ = false;

  /// A failed Work naming `op` and the first non-empty problem, or the earlier failure that
  /// made the communicator unusable; nothing when the operation may start.
  std::optional<Work> refuse(std::string_view op,
                             std::initializer_list<std::string> problems) const;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_COMM_COMMUNICATOR_H
