//===- NcclCommunicator.h - The NCCL (GPU) backend --------------*- C++ -*-===//
//
// A Communicator on NCCL, built only when the CUDA toolkit and NCCL are found
// (MTC_HAVE_NCCL). Buffers are the caller's *device* pointers on the communicator's CUDA
// device. Every start enqueues on the communicator's own stream and records a CUDA event
// after the operation; the Work polls that event (test) or polls it until done (wait), so
// operations run in start order on the stream while the host goes on. bf16 and f16 are
// NCCL's own types; max and min are NCCL's (its NaN handling is NCCL's, not ElementTypes.h's).
// All-to-all(v), send/recv pairs (sendRecv) are ncclSend/ncclRecv between ncclGroupStart and
// ncclGroupEnd; a lone send or recv is its own operation on the stream, so an exchange
// between two ranks must use startSendRecv (two separate starts would deadlock the stream).
//
// Bootstrap: rank 0 calls ncclGetUniqueId and publishes it in the
// job's TcpStore under `<prefix>/nccl-id`; every rank reads it and calls
// ncclCommInitRankConfig in non-blocking mode. Sub-groups use ncclCommSplit.
//
// Failures: every wait (init, split, each operation's Work) polls ncclCommGetAsyncError and
// the event; past the timeout (counted from the start) it calls ncclCommAbort, and the
// communicator is unusable afterwards (`failure()`).
//
// Determinism: NCCL's ring all-reduce gives every rank the same bits, but NCCL picks the
// algorithm and protocol by size and topology; set NCCL_ALGO=Ring and NCCL_PROTO=Simple for
// run-to-run bitwise reproducibility on a fixed topology.
//
// UNTESTED: no GPU on the development machine; this file compiles and links against
// NCCL 2.28 / CUDA 13 but has never run. Counters use the ring formulas (NCCL may pick trees).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_COMM_NCCLCOMMUNICATOR_H
#define MTC_RUNTIME_COMM_NCCLCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"
#include "runtime/comm/Rendezvous.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace mtc::rt {

struct NcclOptions {
  /// The CUDA device this rank uses (usually the local rank).
  int device = 0;
  std::chrono::milliseconds timeout{60000};
  std::chrono::milliseconds rendezvousTimeout{60000};
  std::string prefix = "mtc-nccl";
};

class NcclCommunicator final : public Communicator {
public:
  static Expected<std::unique_ptr<NcclCommunicator>> create(JobStore store, int rank, int size,
                                                            const NcclOptions &options);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backendName() const override { return "nccl"; }

  Expected<std::unique_ptr<Communicator>> split(int color, int key) override;

  /// NCCL communicator, stream, scratch (kept out of this header); shared with the Works.
  struct Handles;

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
  NcclCommunicator(JobStore store, std::shared_ptr<Handles> handles, NcclOptions options, int rank,
                   int size);
  /// Enqueues (enqueue(comm, stream) returns an ncclResult_t) and returns the Work of `op`.
  template <class Enqueue> Work start(std::string_view op, Enqueue enqueue);

  JobStore store_;
  std::shared_ptr<Handles> h_;
  NcclOptions options_;
  int rank_ = 0, size_ = 1;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_COMM_NCCLCOMMUNICATOR_H
