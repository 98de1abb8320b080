//===- GlooCommunicator.cpp - The Gloo (CPU, TCP) backend -------------------===//

#include "runtime/comm/GlooCommunicator.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <numeric>

namespace mtc::rt {

namespace {

// Slot prefixes of the operations written here (Gloo's own use 0x01-0x08).
constexpr uint8_t kPointToPointSlotPrefix = 0x40;
constexpr uint8_t kReduceScatterSlotPrefix = 0x41;

using ReduceFn = void (*)(void *, const void *, const void *, size_t);

size_t roundUp(size_t x, size_t m) { return (x + m - 1) / m * m; }

uint64_t broadcastBytesSent(int rank, int size, int root, size_t bytes) {
  const size_t vsize = static_cast<size_t>(size);
  const size_t vrank = static_cast<size_t>((rank - root + size) % size);
  size_t dim = 0;
  while ((size_t(1) << dim) < vsize)
    ++dim;
  size_t mask = (size_t(1) << dim) - 1;
  uint64_t sends = 0;
  for (size_t i = 0; i < dim; ++i) {
    mask ^= size_t(1) << i;
    if ((vrank & mask) != 0)
      continue;
    size_t vpeer = vrank ^ (size_t(1) << i);
    if (vpeer >= vsize)
      continue;
    if ((vrank & (size_t(1) << i)) == 0)
      ++sends;
  }
  return sends * bytes;
}

/// Connects `context` to its peers through `store` and exchanges one word with every peer.
/// Gloo's listening side of a pair completes the connection lazily; without the exchange a
/// communicator destroyed right after creation can leave a peer still connecting to its
/// (released, possibly reused) port. The exchange also proves the full mesh at creation.
/// Throws Gloo's exceptions.
void connectAndVerify(gloo::rendezvous::Context &context, gloo::rendezvous::Store &store,
                      std::shared_ptr<gloo::transport::Device> &device) {
  context.connectFullMesh(store, device);
  if (context.size == 1)
    return;
  std::vector<int32_t> in(context.size, context.rank), out(context.size, -1);
  std::shared_ptr<gloo::Context> self(std::shared_ptr<gloo::Context>(), &context);
  gloo::AlltoallOptions opts(self);
  opts.setInput(in.data(), in.size());
  opts.setOutput(out.data(), out.size());
  opts.setTag(0); // operations count tags from 1
  gloo::alltoall(opts);
  for (int p = 0; p < context.size; ++p)
    if (out[p] != p)
      throw gloo::IoException(
          concat("mesh check: expected rank ", p, " from peer ", p, ", got ", out[p]));
}

} // namespace

uint64_t GlooCommunicator::ringAllReduceBytesSent(int rank, int size, size_t bytes,
                                                  size_t elementSize) {
  if (size <= 1 || bytes == 0)
    return 0;
  const size_t n = static_cast<size_t>(size);
  const size_t maxSegmentBytes =
      elementSize *
      std::max<size_t>(1, gloo::detail::AllreduceOptionsImpl::kMaxSegmentSize / elementSize);
  const size_t numSegments =
      roundUp(std::max((bytes + maxSegmentBytes - 1) / maxSegmentBytes, n * 2), n);
  const size_t perRank = numSegments / n;
  const size_t segmentBytes = roundUp((bytes + numSegments - 1) / numSegments, elementSize);
  const size_t span = numSegments * segmentBytes;
  uint64_t total = 0;
  auto add = [&](size_t offset) {
    if (offset < bytes)
      total += std::min(segmentBytes, bytes - offset);
  };
  const size_t r = static_cast<size_t>(rank);
  for (size_t i = 0; i < numSegments - perRank; ++i) {
    add((((r + 1) * perRank + i) * segmentBytes) % span); // reduce-scatter
    add(((r * perRank + i) * segmentBytes) % span);       // allgather
  }
  return total;
}

GlooCommunicator::GlooCommunicator(JobStore store, std::shared_ptr<gloo::transport::Device> device,
                                   std::shared_ptr<gloo::Context> context, GlooOptions options)
    : store_(std::move(store)), device_(std::move(device)), context_(std::move(context)),
      options_(std::move(options)), rank_(context_->rank), size_(context_->size) {}

GlooCommunicator::~GlooCommunicator() = default;

Expected<std::unique_ptr<GlooCommunicator>>
GlooCommunicator::create(JobStore store, int rank, int size, const GlooOptions &options) {
  if (size < 1 || rank < 0 || rank >= size)
    return makeError("gloo: rank ", rank, " is not in [0, ", size, ")");
  if (!store.client)
    return makeError("gloo: rank ", rank, ": no rendezvous store");
  if (options.timeout.count() <= 0)
    return makeError("gloo: the timeout must be positive");
  if (Error e = waitForRanks(*store.client, options.prefix, rank, size, options.rendezvousTimeout);
      !e.ok())
    return std::move(e);
  try {
    gloo::transport::tcp::attr attr;
    if (!options.interface.empty())
      attr.iface = options.interface;
    else
      attr.hostname = options.hostname;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(options.timeout);
    gloo::rendezvous::PrefixStore prefixed(options.prefix + "/mesh", *store.client);
    connectAndVerify(*context, prefixed, device);
    return std::unique_ptr<GlooCommunicator>(
        new GlooCommunicator(std::move(store), std::move(device), std::move(context), options));
  } catch (const std::exception &e) {
    return makeError("gloo: connecting rank ", rank, " of ", size, " (prefix '", options.prefix,
                     "'): ", e.what());
  }
}

Error GlooCommunicator::run(const char *op, CollectiveKind kind, uint64_t bytes,
                            const std::function<void()> &body) {
  auto where = [&] { return concat("gloo ", op, " (rank ", rank_, " of ", size_, ")"); };
  if (!failure_.empty())
    return makeError(where(), ": communicator unusable after an earlier failure: ", failure_);
  try {
    body();
  } catch (const gloo::IoException &e) {
    failure_ = concat(op, ": ", e.what());
  } catch (const std::exception &e) {
    failure_ = concat(op, ": ", e.what());
  }
  if (!failure_.empty())
    return makeError(where(), " failed: ", failure_.substr(std::strlen(op) + 2),
                     " (operation timeout ", options_.timeout.count(),
                     " ms; the communicator is unusable now)");
  counters_.record(kind, bytes);
  return Error::success();
}

Error GlooCommunicator::checkPeer(const char *op, int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_)
    return makeError("gloo ", op, " (rank ", rank_, " of ", size_, "): peer ", peer,
                     " is not another rank of the group");
  return Error::success();
}

namespace {
template <class T>
void ringAllReduce(const std::shared_ptr<gloo::Context> &context, T *data, size_t count,
                   uint32_t tag, std::chrono::milliseconds timeout) {
  gloo::AllreduceOptions opts(context);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setOutput(data, count);
  opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<T>));
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::allreduce(opts);
}
} // namespace

Error GlooCommunicator::allReduceSum(float *data, size_t count) {
  uint64_t bytes = ringAllReduceBytesSent(rank_, size_, count * sizeof(float), sizeof(float));
  return run("allReduceSum", CollectiveKind::AllReduce, bytes, [&] {
    if (count > 0)
      ringAllReduce(context_, data, count, nextTag(), options_.timeout);
  });
}

Error GlooCommunicator::allReduceSum(double *data, size_t count) {
  uint64_t bytes = ringAllReduceBytesSent(rank_, size_, count * sizeof(double), sizeof(double));
  return run("allReduceSum", CollectiveKind::AllReduce, bytes, [&] {
    if (count > 0)
      ringAllReduce(context_, data, count, nextTag(), options_.timeout);
  });
}

Error GlooCommunicator::allGather(const float *in, float *out, size_t countPerRank) {
  uint64_t bytes = uint64_t(size_ - 1) * countPerRank * sizeof(float);
  return run("allGather", CollectiveKind::AllGather, bytes, [&] {
    if (countPerRank == 0)
      return;
    gloo::AllgatherOptions opts(context_);
    opts.setInput(const_cast<float *>(in), countPerRank);
    opts.setOutput(out, countPerRank * size_);
    opts.setTag(nextTag());
    opts.setTimeout(options_.timeout);
    gloo::allgather(opts);
  });
}

Error GlooCommunicator::reduceScatterSum(const float *in, float *out, size_t countPerRank) {
  const size_t n = static_cast<size_t>(size_);
  uint64_t bytes = uint64_t(n - 1) * countPerRank * sizeof(float);
  return run("reduceScatterSum", CollectiveKind::ReduceScatter, bytes, [&] {
    if (countPerRank == 0)
      return;
    const size_t r = static_cast<size_t>(rank_);
    if (n == 1) {
      std::memmove(out, in, countPerRank * sizeof(float));
      return;
    }
    // Ring: in step s, send block (r - 1 - s) to the right neighbour (holding s + 1
    // contributions) and receive block (r - 2 - s) from the left, adding ours to it. After
    // n - 1 steps block r has all n contributions.
    std::vector<float> work(in, in + n * countPerRank);
    std::vector<float> incoming(countPerRank);
    const size_t blockBytes = countPerRank * sizeof(float);
    auto workBuf = context_->createUnboundBuffer(work.data(), work.size() * sizeof(float));
    auto inBuf = context_->createUnboundBuffer(incoming.data(), blockBytes);
    const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, nextTag());
    const int right = static_cast<int>((r + 1) % n), left = static_cast<int>((r + n - 1) % n);
    for (size_t s = 0; s + 1 < n; ++s) {
      size_t sendBlock = (r + 2 * n - 1 - s) % n;
      size_t recvBlock = (r + 2 * n - 2 - s) % n;
      inBuf->recv(left, slot, 0, blockBytes);
      workBuf->send(right, slot, sendBlock * blockBytes, blockBytes);
      if (!inBuf->waitRecv(options_.timeout) || !workBuf->waitSend(options_.timeout))
        throw gloo::IoException("reduce-scatter step aborted");
      float *acc = work.data() + recvBlock * countPerRank;
      for (size_t i = 0; i < countPerRank; ++i)
        acc[i] = incoming[i] + acc[i];
    }
    std::memcpy(out, work.data() + r * countPerRank, blockBytes);
  });
}

Error GlooCommunicator::broadcast(void *data, size_t bytes, int root) {
  if (root < 0 || root >= size_)
    return makeError("gloo broadcast (rank ", rank_, " of ", size_, "): root ", root,
                     " is not in [0, ", size_, ")");
  return run("broadcast", CollectiveKind::Broadcast, broadcastBytesSent(rank_, size_, root, bytes),
             [&] {
               if (bytes == 0 || size_ == 1)
                 return;
               gloo::BroadcastOptions opts(context_);
               opts.setOutput(static_cast<uint8_t *>(data), bytes);
               opts.setRoot(root);
               opts.setTag(nextTag());
               opts.setTimeout(options_.timeout);
               gloo::broadcast(opts);
             });
}

Error GlooCommunicator::allToAll(const float *in, float *out, size_t countPerRank) {
  uint64_t bytes = uint64_t(size_ - 1) * countPerRank * sizeof(float);
  return run("allToAll", CollectiveKind::AllToAll, bytes, [&] {
    if (countPerRank == 0)
      return;
    gloo::AlltoallOptions opts(context_);
    opts.setInput(const_cast<float *>(in), countPerRank * size_);
    opts.setOutput(out, countPerRank * size_);
    opts.setTag(nextTag());
    opts.setTimeout(options_.timeout);
    gloo::alltoall(opts);
  });
}

Error GlooCommunicator::barrier() {
  return run("barrier", CollectiveKind::Barrier, 0, [&] {
    if (size_ == 1)
      return;
    gloo::BarrierOptions opts(context_);
    opts.setTag(nextTag());
    opts.setTimeout(options_.timeout);
    gloo::barrier(opts);
  });
}

Error GlooCommunicator::send(const void *data, size_t bytes, int peer) {
  if (Error e = checkPeer("send", peer); !e.ok())
    return e;
  return run("send", CollectiveKind::SendRecv, bytes, [&] {
    if (bytes == 0)
      return;
    auto buf = context_->createUnboundBuffer(const_cast<void *>(data), bytes);
    buf->send(peer, gloo::Slot::build(kPointToPointSlotPrefix, 0));
    if (!buf->waitSend(options_.timeout))
      throw gloo::IoException(concat("send to rank ", peer, " aborted"));
  });
}

Error GlooCommunicator::recv(void *data, size_t bytes, int peer) {
  if (Error e = checkPeer("recv", peer); !e.ok())
    return e;
  return run("recv", CollectiveKind::SendRecv, 0, [&] {
    if (bytes == 0)
      return;
    auto buf = context_->createUnboundBuffer(data, bytes);
    buf->recv(peer, gloo::Slot::build(kPointToPointSlotPrefix, 0));
    if (!buf->waitRecv(options_.timeout))
      throw gloo::IoException(concat("receive from rank ", peer, " aborted"));
  });
}

Error GlooCommunicator::sendRecv(const void *sendData, size_t sendBytes, int dst, void *recvData,
                                 size_t recvBytes, int src) {
  if (Error e = checkPeer("sendRecv", dst); !e.ok())
    return e;
  if (Error e = checkPeer("sendRecv", src); !e.ok())
    return e;
  return run("sendRecv", CollectiveKind::SendRecv, sendBytes, [&] {
    const uint64_t slot = gloo::Slot::build(kPointToPointSlotPrefix, 0);
    std::unique_ptr<gloo::transport::UnboundBuffer> in, out;
    if (recvBytes > 0) {
      in = context_->createUnboundBuffer(recvData, recvBytes);
      in->recv(src, slot);
    }
    if (sendBytes > 0) {
      out = context_->createUnboundBuffer(const_cast<void *>(sendData), sendBytes);
      out->send(dst, slot);
    }
    if (in && !in->waitRecv(options_.timeout))
      throw gloo::IoException(concat("receive from rank ", src, " aborted"));
    if (out && !out->waitSend(options_.timeout))
      throw gloo::IoException(concat("send to rank ", dst, " aborted"));
  });
}

Expected<std::unique_ptr<Communicator>> GlooCommunicator::split(int color, int key) {
  // Everyone learns everyone's (color, key) (not counted: setup traffic).
  std::vector<int32_t> mine = {color < 0 ? -1 : color, key};
  std::vector<int32_t> all(2 * static_cast<size_t>(size_));
  CommCounters saved = counters_;
  Error e = run("split", CollectiveKind::AllGather, 0, [&] {
    if (size_ == 1) {
      all = mine;
      return;
    }
    gloo::AllgatherOptions opts(context_);
    opts.setInput(mine.data(), 2);
    opts.setOutput(all.data(), all.size());
    opts.setTag(nextTag());
    opts.setTimeout(options_.timeout);
    gloo::allgather(opts);
  });
  counters_ = saved;
  if (!e.ok())
    return e;
  const uint32_t index = splits_++;
  if (color < 0)
    return std::unique_ptr<Communicator>();

  std::vector<int> members;
  for (int r = 0; r < size_; ++r)
    if (all[2 * r] == color)
      members.push_back(r);
  std::sort(members.begin(), members.end(), [&](int a, int b) {
    return std::pair(all[2 * a + 1], a) < std::pair(all[2 * b + 1], b);
  });
  const int newRank =
      static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  const int newSize = static_cast<int>(members.size());

  GlooOptions options = options_;
  options.prefix = concat(options_.prefix, "/split", index, "/color", color);
  try {
    auto context = std::make_shared<gloo::rendezvous::Context>(newRank, newSize);
    context->setTimeout(options.timeout);
    gloo::rendezvous::PrefixStore prefixed(options.prefix + "/mesh", *store_.client);
    connectAndVerify(*context, prefixed, device_);
    return std::unique_ptr<Communicator>(
        new GlooCommunicator(store_, device_, std::move(context), std::move(options)));
  } catch (const std::exception &ex) {
    return makeError("gloo split (rank ", rank_, " of ", size_, ", color ", color,
                     "): connecting rank ", newRank, " of ", newSize, ": ", ex.what());
  }
}

} // namespace mtc::rt
