//===- NcclCommunicator.h - The NCCL (GPU) backend --------------*- C++ -*-===//
//
// A Communicator on NCCL, built only when the CUDA toolkit and NCCL are found
// (MTC_HAVE_NCCL). Buffers are the caller's *device* pointers on the communicator's CUDA
// device; every call enqueues on the communicator's own stream and waits for it, so the
// interface stays blocking like Gloo's (overlap comes later, with streams the executor owns).
//
// Bootstrap (NCCL's documented sequence): rank 0 calls ncclGetUniqueId and publishes it in the
// job's TcpStore under `<prefix>/nccl-id`; every rank reads it and calls
// ncclCommInitRankConfig in non-blocking mode. Sub-groups use ncclCommSplit.
//
// Failures: every wait (init, split, each operation) polls ncclCommGetAsyncError and the
// stream; past the timeout it calls ncclCommAbort, and the communicator is unusable
// afterwards (`failure()`).
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

  struct Handles; // NCCL communicator, stream, scratch (kept out of this header)

private:
  NcclCommunicator(JobStore store, std::unique_ptr<Handles> handles, NcclOptions options, int rank,
                   int size);
  template <class Enqueue>
  Error run(const char *op, CollectiveKind kind, uint64_t bytes, Enqueue enqueue);

  JobStore store_;
  std::unique_ptr<Handles> h_;
  NcclOptions options_;
  int rank_ = 0, size_ = 1;
  std::string failure_;
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_COMM_NCCLCOMMUNICATOR_H
