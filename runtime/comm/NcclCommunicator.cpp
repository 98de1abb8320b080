//===- NcclCommunicator.cpp - The NCCL (GPU) backend ------------------------===//
//
// UNTESTED (no GPU here): compiled and linked only. See the header.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/NcclCommunicator.h"

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
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float *scratch = nullptr; // one float, for barrier()
  int device = 0;
  bool broken = false;
  std::chrono::milliseconds timeout{60000};

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
};

NcclCommunicator::NcclCommunicator(JobStore store, std::unique_ptr<Handles> handles,
                                   NcclOptions options, int rank, int size)
    : store_(std::move(store)), h_(std::move(handles)), options_(std::move(options)), rank_(rank),
      size_(size) {}

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

  auto handles = std::make_unique<Handles>();
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

template <class Enqueue>
Error NcclCommunicator::run(const char *op, CollectiveKind kind, uint64_t bytes, Enqueue enqueue) {
  auto where = [&] { return concat("nccl ", op, " (rank ", rank_, " of ", size_, ")"); };
  if (!failure_.empty())
    return makeError(where(), ": communicator unusable after an earlier failure: ", failure_);
  auto fail = [&](Error e) {
    failure_ = concat(op, ": ", e.message());
    h_->broken = true;
    ncclCommAbort(h_->comm);
    h_->comm = nullptr;
    return std::move(e).withContext(where());
  };
  cudaSetDevice(h_->device);
  ncclResult_t r = enqueue(h_->comm, h_->stream);
  if (r != ncclSuccess && r != ncclInProgress)
    return fail(ncclFailure("enqueue", r, h_->comm));
  const auto deadline = Clock::now() + options_.timeout;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    if (ncclResult_t q = ncclCommGetAsyncError(h_->comm, &state); q != ncclSuccess)
      return fail(ncclFailure("ncclCommGetAsyncError", q, h_->comm));
    if (state != ncclSuccess && state != ncclInProgress)
      return fail(ncclFailure("asynchronous error", state, h_->comm));
    if (state == ncclSuccess) {
      cudaError_t s = cudaStreamQuery(h_->stream);
      if (s == cudaSuccess)
        break;
      if (s != cudaErrorNotReady)
        return fail(cudaFailure("stream", s));
    }
    if (Clock::now() > deadline)
      return fail(makeError("timed out after ", options_.timeout.count(),
                            " ms (a peer died or stopped participating); communicator aborted"));
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  counters_.record(kind, bytes);
  return Error::success();
}

Error NcclCommunicator::allReduceSum(float *data, size_t count) {
  uint64_t bytes = size_ > 1 ? 2 * uint64_t(size_ - 1) * count * sizeof(float) / size_ : 0;
  return run("allReduceSum", CollectiveKind::AllReduce, bytes, [&](ncclComm_t c, cudaStream_t s) {
    return ncclAllReduce(data, data, count, ncclFloat32, ncclSum, c, s);
  });
}

Error NcclCommunicator::allReduceSum(double *data, size_t count) {
  uint64_t bytes = size_ > 1 ? 2 * uint64_t(size_ - 1) * count * sizeof(double) / size_ : 0;
  return run("allReduceSum", CollectiveKind::AllReduce, bytes, [&](ncclComm_t c, cudaStream_t s) {
    return ncclAllReduce(data, data, count, ncclFloat64, ncclSum, c, s);
  });
}

Error NcclCommunicator::allGather(const float *in, float *out, size_t countPerRank) {
  uint64_t bytes = uint64_t(size_ - 1) * countPerRank * sizeof(float);
  return run("allGather", CollectiveKind::AllGather, bytes, [&](ncclComm_t c, cudaStream_t s) {
    return ncclAllGather(in, out, countPerRank, ncclFloat32, c, s);
  });
}

Error NcclCommunicator::reduceScatterSum(const float *in, float *out, size_t countPerRank) {
  uint64_t bytes = uint64_t(size_ - 1) * countPerRank * sizeof(float);
  return run("reduceScatterSum", CollectiveKind::ReduceScatter, bytes,
             [&](ncclComm_t c, cudaStream_t s) {
               return ncclReduceScatter(in, out, countPerRank, ncclFloat32, ncclSum, c, s);
             });
}

Error NcclCommunicator::broadcast(void *data, size_t bytes, int root) {
  if (root < 0 || root >= size_)
    return makeError("nccl broadcast (rank ", rank_, " of ", size_, "): root ", root,
                     " is not in [0, ", size_, ")");
  // Ring: every rank but the root's predecessor forwards the data.
  uint64_t sent = (size_ > 1 && rank_ != (root + size_ - 1) % size_) ? bytes : 0;
  return run("broadcast", CollectiveKind::Broadcast, sent, [&](ncclComm_t c, cudaStream_t s) {
    return ncclBroadcast(data, data, bytes, ncclUint8, root, c, s);
  });
}

Error NcclCommunicator::allToAll(const float *in, float *out, size_t countPerRank) {
  uint64_t bytes = uint64_t(size_ - 1) * countPerRank * sizeof(float);
  return run("allToAll", CollectiveKind::AllToAll, bytes, [&](ncclComm_t c, cudaStream_t s) {
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess)
      return r;
    for (int p = 0; p < size_ && r == ncclSuccess; ++p) {
      r = ncclSend(in + size_t(p) * countPerRank, countPerRank, ncclFloat32, p, c, s);
      if (r == ncclSuccess)
        r = ncclRecv(out + size_t(p) * countPerRank, countPerRank, ncclFloat32, p, c, s);
    }
    ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess ? r : end;
  });
}

Error NcclCommunicator::barrier() {
  return run("barrier", CollectiveKind::Barrier, 0, [&](ncclComm_t c, cudaStream_t s) {
    return ncclAllReduce(h_->scratch, h_->scratch, 1, ncclFloat32, ncclSum, c, s);
  });
}

Error NcclCommunicator::send(const void *data, size_t bytes, int peer) {
  if (peer < 0 || peer >= size_ || peer == rank_)
    return makeError("nccl send (rank ", rank_, "): peer ", peer, " is not another rank");
  return run("send", CollectiveKind::SendRecv, bytes, [&](ncclComm_t c, cudaStream_t s) {
    return ncclSend(data, bytes, ncclUint8, peer, c, s);
  });
}

Error NcclCommunicator::recv(void *data, size_t bytes, int peer) {
  if (peer < 0 || peer >= size_ || peer == rank_)
    return makeError("nccl recv (rank ", rank_, "): peer ", peer, " is not another rank");
  return run("recv", CollectiveKind::SendRecv, 0, [&](ncclComm_t c, cudaStream_t s) {
    return ncclRecv(data, bytes, ncclUint8, peer, c, s);
  });
}

Error NcclCommunicator::sendRecv(const void *sendData, size_t sendBytes, int dst, void *recvData,
                                 size_t recvBytes, int src) {
  for (int peer : {dst, src})
    if (peer < 0 || peer >= size_ || peer == rank_)
      return makeError("nccl sendRecv (rank ", rank_, "): peer ", peer, " is not another rank");
  return run("sendRecv", CollectiveKind::SendRecv, sendBytes, [&](ncclComm_t c, cudaStream_t s) {
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess)
      return r;
    if (sendBytes > 0)
      r = ncclSend(sendData, sendBytes, ncclUint8, dst, c, s);
    if (r == ncclSuccess && recvBytes > 0)
      r = ncclRecv(recvData, recvBytes, ncclUint8, src, c, s);
    ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess ? r : end;
  });
}

Expected<std::unique_ptr<Communicator>> NcclCommunicator::split(int color, int key) {
  auto where = [&] { return concat("nccl split (rank ", rank_, " of ", size_, ")"); };
  if (!failure_.empty())
    return makeError(where(), ": communicator unusable after an earlier failure: ", failure_);
  cudaSetDevice(h_->device);
  auto handles = std::make_unique<Handles>();
  handles->timeout = options_.timeout;
  handles->device = h_->device;
  ncclConfig_t config = nonBlockingConfig();
  ncclResult_t r =
      ncclCommSplit(h_->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &handles->comm, &config);
  if (r != ncclSuccess && r != ncclInProgress)
    return ncclFailure("ncclCommSplit", r, h_->comm).withContext(where());
  const auto deadline = Clock::now() + options_.timeout;
  if (Error e = waitComm(h_->comm, deadline, "ncclCommSplit"); !e.ok()) {
    failure_ = e.message();
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
