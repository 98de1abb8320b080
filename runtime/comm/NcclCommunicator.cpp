//===- NcclCommunicator.cpp - The NCCL (GPU) backend ------------------------===//
//
// UNTESTED (no GPU here): compiled and linked only. See the header.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/NcclCommunicator.h"

#include "runtime/comm/ElementTypes.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <thread>

namespace mtc::rt {

namespace {

using Clock = std::chrono::steady_clock;

Error ncclFailure(const char *what, ncclResult_t r, ncclComm_t comm) {
  const char *last = comm ? ncclGetLastError(comm) : nullptr;
  return makeError(what, ": ", ncclGetErrorString(r),
                   (last && *last) ? concat(" (", last, ")") : std::string());
}

Error cudaFailure(const char *what, cudaError_t e) {
  return makeError(what, ": ", cudaGetErrorString(e));
}

/// Polls a non-blocking communicator until its pending work (init, split, enqueue) is done.
Error waitComm(ncclComm_t comm, Clock::time_point deadline, const char *what) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess)
      return ncclFailure(what, r, comm);
    if (state == ncclSuccess)
      return Error::success();
    if (state != ncclInProgress)
      return ncclFailure(what, state, comm);
    if (Clock::now() > deadline)
      return makeError(what, ": timed out");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

ncclConfig_t nonBlockingConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

} // namespace

struct NcclCommunicator::Handles {
  ncclComm_t comm = nullptr; // null once aborted
  cudaStream_t stream = nullptr;
  float *scratch = nullptr; // one float, for barrier()
  int device = 0;
  bool broken = false;
  std::chrono::milliseconds timeout{60000};
  std::shared_ptr<FailureRecord> failure;

  ~Handles() {
    cudaSetDevice(device);
    if (comm) {
      bool clean = false;
      if (!broken) {
        ncclResult_t r = ncclCommFinalize(comm);
        clean = (r == ncclSuccess || r == ncclInProgress) &&
                waitComm(comm, Clock::now() + timeout, "finalize").ok();
      }
      if (clean)
        ncclCommDestroy(comm);
      else
        ncclCommAbort(comm);
    }
    if (scratch)
      cudaFree(scratch);
    if (stream)
      cudaStreamDestroy(stream);
  }

  Error init(int dev) {
    device = dev;
    if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess)
      return cudaFailure("cudaStreamCreate", e);
    if (cudaError_t e = cudaMalloc(reinterpret_cast<void **>(&scratch), sizeof(float));
        e != cudaSuccess)
      return cudaFailure("cudaMalloc", e);
    return Error::success();
  }

  /// Records the failure of the operation `where` (the communicator is unusable from now
  /// on), aborts the NCCL communicator and returns the operation's Error.
  Error abort(const std::string &where, const Error &error) {
    failure->record(concat(where, ": ", error.message()));
    broken = true;
    if (comm)
      ncclCommAbort(comm);
    comm = nullptr;
    return makeError(where, " failed: ", error.message(), "; communicator aborted");
  }
};

namespace {

/// An enqueued operation: done when the event recorded after it has happened.
class NcclWork final : public WorkState {
public:
  NcclWork(std::shared_ptr<NcclCommunicator::Handles> handles, cudaEvent_t event,
           Clock::time_point deadline, std::string where)
      : h_(std::move(handles)), event_(event), deadline_(deadline), where_(std::move(where)) {}
  ~NcclWork() override { cudaEventDestroy(event_); }

  bool poll() override {
    if (!done_)
      step();
    return done_;
  }
  Error wait() override {
    while (!poll())
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    return result_;
  }

private:
  void finish(Error result) {
    result_ = std::move(result);
    done_ = true;
  }
  void step() {
    if (!h_->comm)
      return finish(h_->failure->unusable(where_));
    ncclResult_t state = ncclSuccess;
    if (ncclResult_t q = ncclCommGetAsyncError(h_->comm, &state); q != ncclSuccess)
      return finish(h_->abort(where_, ncclFailure("ncclCommGetAsyncError", q, h_->comm)));
    if (state != ncclSuccess && state != ncclInProgress)
      return finish(h_->abort(where_, ncclFailure("asynchronous error", state, h_->comm)));
    cudaError_t e = cudaEventQuery(event_);
    if (e == cudaSuccess)
      return finish(Error::success());
    if (e != cudaErrorNotReady)
      return finish(h_->abort(where_, cudaFailure("stream", e)));
    if (Clock::now() > deadline_)
      finish(h_->abort(where_, makeError("timed out after ", h_->timeout.count(),
                                         " ms (a peer died or stopped participating)")));
  }

  std::shared_ptr<NcclCommunicator::Handles> h_;
  cudaEvent_t event_;
  Clock::time_point deadline_;
  std::string where_;
  bool done_ = false;
  Error result_;
};

ncclDataType_t ncclTypeOf(MtcElementType type) {
  switch (type) {
  case MTC_F32:
    return ncclFloat32;
  case MTC_F64:
    return ncclFloat64;
  case MTC_BF16:
    return ncclBfloat16;
  case MTC_F16:
    return ncclFloat16;
  case MTC_I32:
    return ncclInt32;
  case MTC_I64:
    return ncclInt64;
  }
  return ncclUint8; // not reached: the arguments were checked
}

ncclRedOp_t ncclOpOf(MtcReduction reduction) {
  switch (reduction) {
  case MTC_SUM:
    return ncclSum;
  case MTC_MAX:
    return ncclMax;
  case MTC_MIN:
    return ncclMin;
  }
  return ncclSum; // not reached: the arguments were checked
}

/// Calls enqueue() between ncclGroupStart and ncclGroupEnd.
template <class Enqueue> ncclResult_t grouped(Enqueue enqueue) {
  if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess)
    return r;
  ncclResult_t r = enqueue();
  ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

} // namespace

NcclCommunicator::NcclCommunicator(JobStore store, std::shared_ptr<Handles> handles,
                                   NcclOptions options, int rank, int size)
    : store_(std::move(store)), h_(std::move(handles)), options_(std::move(options)), rank_(rank),
      size_(size) {
  h_->failure = failure_;
}

NcclCommunicator::~NcclCommunicator() = default;

Expected<std::unique_ptr<NcclCommunicator>>
NcclCommunicator::create(JobStore store, int rank, int size, const NcclOptions &options) {
  auto where = [&] { return concat("nccl: rank ", rank, " of ", size); };
  if (size < 1 || rank < 0 || rank >= size)
    return makeError("nccl: rank ", rank, " is not in [0, ", size, ")");
  if (!store.client)
    return makeError(where(), ": no rendezvous store");
  if (cudaError_t e = cudaSetDevice(options.device); e != cudaSuccess)
    return cudaFailure("cudaSetDevice", e).withContext(where());
  if (Error e = waitForRanks(*store.client, options.prefix, rank, size, options.rendezvousTimeout);
      !e.ok())
    return std::move(e);

  ncclUniqueId id;
  const std::string idKey = options.prefix + "/nccl-id";
  if (rank == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
      return ncclFailure("ncclGetUniqueId", r, nullptr).withContext(where());
    std::vector<char> bytes(reinterpret_cast<char *>(&id),
                            reinterpret_cast<char *>(&id) + sizeof id);
    if (Error e = store.client->trySet(idKey, bytes); !e.ok())
      return std::move(e).withContext(where());
  } else {
    auto bytes = store.client->tryGet(idKey, options.rendezvousTimeout);
    if (!bytes)
      return bytes.takeError().withContext(where());
    if (bytes->size() != sizeof id)
      return makeError(where(), ": the NCCL id in the store has ", bytes->size(), " bytes, not ",
                       sizeof id);
    std::memcpy(&id, bytes->data(), sizeof id);
  }

  auto handles = std::make_shared<Handles>();
  handles->timeout = options.timeout;
  handles->device = options.device;
  if (Error e = handles->init(options.device); !e.ok())
    return std::move(e).withContext(where());
  ncclConfig_t config = nonBlockingConfig();
  ncclResult_t r = ncclCommInitRankConfig(&handles->comm, size, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    handles->broken = true;
    return ncclFailure("ncclCommInitRankConfig", r, handles->comm).withContext(where());
  }
  if (Error e = waitComm(handles->comm, Clock::now() + options.timeout, "ncclCommInitRankConfig");
      !e.ok()) {
    handles->broken = true; // the destructor aborts
    return std::move(e).withContext(where());
  }
  return std::unique_ptr<NcclCommunicator>(
      new NcclCommunicator(std::move(store), std::move(handles), options, rank, size));
}

template <class Enqueue> Work NcclCommunicator::start(std::string_view op, Enqueue enqueue) {
  const std::string where = describe(op);
  if (!h_->comm)
    return unusable(op);
  cudaSetDevice(h_->device);
  const auto deadline = Clock::now() + options_.timeout;
  ncclResult_t r = enqueue(h_->comm, h_->stream);
  if (r != ncclSuccess && r != ncclInProgress)
    return Work::finished(h_->abort(where, ncclFailure("enqueue", r, h_->comm)));
  // A non-blocking communicator may still be enqueueing on the host: the event must follow.
  if (r == ncclInProgress)
    if (Error e = waitComm(h_->comm, deadline, "enqueue"); !e.ok())
      return Work::finished(h_->abort(where, e));
  cudaEvent_t event = nullptr;
  if (cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming); e != cudaSuccess)
    return Work::finished(h_->abort(where, cudaFailure("cudaEventCreate", e)));
  if (cudaError_t e = cudaEventRecord(event, h_->stream); e != cudaSuccess) {
    cudaEventDestroy(event);
    return Work::finished(h_->abort(where, cudaFailure("cudaEventRecord", e)));
  }
  return Work(std::make_shared<NcclWork>(h_, event, deadline, where));
}

Work NcclCommunicator::doAllReduce(void *data, size_t count, MtcElementType type,
                                   MtcReduction reduction) {
  const uint64_t bytes = count * elementSize(type);
  counters_.record(CollectiveKind::AllReduce,
                   size_ > 1 ? 2 * uint64_t(size_ - 1) * bytes / uint64_t(size_) : 0);
  return start("allReduce", [&](ncclComm_t c, cudaStream_t s) {
    return ncclAllReduce(data, data, count, ncclTypeOf(type), ncclOpOf(reduction), c, s);
  });
}

Work NcclCommunicator::doAllGather(const void *in, void *out, size_t countPerRank,
                                   MtcElementType type) {
  counters_.record(CollectiveKind::AllGather,
                   uint64_t(size_ - 1) * countPerRank * elementSize(type));
  return start("allGather", [&](ncclComm_t c, cudaStream_t s) {
    return ncclAllGather(in, out, countPerRank, ncclTypeOf(type), c, s);
  });
}

Work NcclCommunicator::doReduceScatter(const void *in, void *out, size_t countPerRank,
                                       MtcElementType type, MtcReduction reduction) {
  counters_.record(CollectiveKind::ReduceScatter,
                   uint64_t(size_ - 1) * countPerRank * elementSize(type));
  return start("reduceScatter", [&](ncclComm_t c, cudaStream_t s) {
    return ncclReduceScatter(in, out, countPerRank, ncclTypeOf(type), ncclOpOf(reduction), c, s);
  });
}

Work NcclCommunicator::doBroadcast(void *data, size_t count, MtcElementType type, int root) {
  // Ring: every rank but the root's predecessor forwards the data.
  const uint64_t bytes = count * elementSize(type);
  counters_.record(CollectiveKind::Broadcast,
                   (size_ > 1 && rank_ != (root + size_ - 1) % size_) ? bytes : 0);
  return start("broadcast", [&](ncclComm_t c, cudaStream_t s) {
    return ncclBroadcast(data, data, count, ncclTypeOf(type), root, c, s);
  });
}

Work NcclCommunicator::doAllToAllV(const void *in, std::vector<size_t> sendCounts, void *out,
                                   std::vector<size_t> recvCounts, MtcElementType type) {
  const size_t size = elementSize(type);
  uint64_t sent = 0;
  for (int p = 0; p < size_; ++p)
    if (p != rank_)
      sent += sendCounts[size_t(p)] * size;
  counters_.record(CollectiveKind::AllToAll, sent);
  return start("allToAll", [&](ncclComm_t c, cudaStream_t s) {
    return grouped([&] {
      const auto *from = static_cast<const char *>(in);
      auto *to = static_cast<char *>(out);
      ncclResult_t r = ncclSuccess;
      for (size_t p = 0; p < size_t(size_) && r == ncclSuccess; ++p) {
        if (sendCounts[p] > 0)
          r = ncclSend(from, sendCounts[p], ncclTypeOf(type), int(p), c, s);
        if (r == ncclSuccess && recvCounts[p] > 0)
          r = ncclRecv(to, recvCounts[p], ncclTypeOf(type), int(p), c, s);
        from += sendCounts[p] * size;
        to += recvCounts[p] * size;
      }
      return r;
    });
  });
}

Work NcclCommunicator::doBarrier() {
  counters_.record(CollectiveKind::Barrier, 0);
  return start("barrier", [&](ncclComm_t c, cudaStream_t s) {
    return ncclAllReduce(h_->scratch, h_->scratch, 1, ncclFloat32, ncclSum, c, s);
  });
}

Work NcclCommunicator::doSend(const void *data, size_t count, MtcElementType type, int peer) {
  counters_.record(CollectiveKind::SendRecv, count * elementSize(type));
  return start("send", [&](ncclComm_t c, cudaStream_t s) {
    return ncclSend(data, count, ncclTypeOf(type), peer, c, s);
  });
}

Work NcclCommunicator::doRecv(void *data, size_t count, MtcElementType type, int peer) {
  counters_.record(CollectiveKind::SendRecv, 0);
  return start("recv", [&](ncclComm_t c, cudaStream_t s) {
    return ncclRecv(data, count, ncclTypeOf(type), peer, c, s);
  });
}

Work NcclCommunicator::doSendRecv(const void *sendData, size_t sendCount, int dst, void *recvData,
                                  size_t recvCount, int src, MtcElementType type) {
  counters_.record(CollectiveKind::SendRecv, sendCount * elementSize(type));
  return start("sendRecv", [&](ncclComm_t c, cudaStream_t s) {
    return grouped([&] {
      ncclResult_t r = ncclSuccess;
      if (sendCount > 0)
        r = ncclSend(sendData, sendCount, ncclTypeOf(type), dst, c, s);
      if (r == ncclSuccess && recvCount > 0)
        r = ncclRecv(recvData, recvCount, ncclTypeOf(type), src, c, s);
      return r;
    });
  });
}

Expected<std::unique_ptr<Communicator>> NcclCommunicator::split(int color, int key) {
  auto where = [&] { return describe("split"); };
  if (failure_->failed() || !h_->comm)
    return unusable("split").wait();
  cudaSetDevice(h_->device);
  auto handles = std::make_shared<Handles>();
  handles->timeout = options_.timeout;
  handles->device = h_->device;
  ncclConfig_t config = nonBlockingConfig();
  ncclResult_t r =
      ncclCommSplit(h_->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &handles->comm, &config);
  if (r != ncclSuccess && r != ncclInProgress)
    return ncclFailure("ncclCommSplit", r, h_->comm).withContext(where());
  const auto deadline = Clock::now() + options_.timeout;
  if (Error e = waitComm(h_->comm, deadline, "ncclCommSplit"); !e.ok()) {
    failure_->record(concat(where(), ": ", e.message()));
    h_->broken = handles->broken = true;
    return std::move(e).withContext(where());
  }
  if (color < 0 || !handles->comm)
    return std::unique_ptr<Communicator>();
  if (Error e = waitComm(handles->comm, deadline, "ncclCommSplit"); !e.ok()) {
    handles->broken = true;
    return std::move(e).withContext(where());
  }
  int newRank = 0, newSize = 0;
  if (ncclCommUserRank(handles->comm, &newRank) != ncclSuccess ||
      ncclCommCount(handles->comm, &newSize) != ncclSuccess)
    return makeError(where(), ": cannot query the new communicator");
  if (Error e = handles->init(h_->device); !e.ok())
    return std::move(e).withContext(where());
  NcclOptions options = options_;
  options.prefix = concat(options_.prefix, "/split");
  return std::unique_ptr<Communicator>(
      new NcclCommunicator(store_, std::move(handles), std::move(options), newRank, newSize));
}

} // namespace mtc::rt
