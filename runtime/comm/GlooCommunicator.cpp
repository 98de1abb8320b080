//===- GlooCommunicator.cpp - The Gloo (CPU, TCP) backend -------------------===//

#include "runtime/comm/GlooCommunicator.h"

#include "runtime/comm/ElementTypes.h"
#include "runtime/comm/Heartbeat.h"

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
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include <sched.h>

namespace mtc::rt {

namespace {

// Slot prefixes of the operations written here (Gloo's own use 0x01-0x08).
constexpr uint8_t kPointToPointSlotPrefix = 0x40;
constexpr uint8_t kReduceScatterSlotPrefix = 0x41;
constexpr uint8_t kAllToAllSlotPrefix = 0x42;
constexpr uint8_t kAllReduceSlotPrefix = 0x43;

using Clock = std::chrono::steady_clock;

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

/// Puts the calling thread under SCHED_BATCH while it lives, when the thread runs under
/// SCHED_OTHER (a real-time or idle policy is left alone), and restores SCHED_OTHER after:
/// the threads it starts meanwhile inherit SCHED_BATCH. Unprivileged either way (the nice
/// value stays); if the kernel refuses, nothing changes.
class BatchSchedulingScope {
public:
  BatchSchedulingScope() {
    sched_param none{};
    switched_ =
        sched_getscheduler(0) == SCHED_OTHER && sched_setscheduler(0, SCHED_BATCH, &none) == 0;
  }
  ~BatchSchedulingScope() {
    sched_param none{};
    if (switched_)
      sched_setscheduler(0, SCHED_OTHER, &none);
  }
  BatchSchedulingScope(const BatchSchedulingScope &) = delete;
  BatchSchedulingScope &operator=(const BatchSchedulingScope &) = delete;

private:
  bool switched_;
};

/// Gloo's TCP device, its event-loop thread under SCHED_BATCH. The loop thread reads every
/// message and hands it over under the pair's lock, which it only try-locks, polling again
/// while the lock is held. Woken by a message, a SCHED_OTHER loop thread preempts the thread
/// on its core, often its own rank's thread holding that lock, and then spins until the next
/// scheduler tick (docs/runtime.md, "Collectives on CPU ranks"). A woken SCHED_BATCH thread
/// does not preempt the running one (it keeps a normal thread's share of the core), so the
/// lock holder finishes first. Gloo starts the loop thread in the device's constructor.
std::shared_ptr<gloo::transport::Device> createTcpDevice(const gloo::transport::tcp::attr &attr) {
  BatchSchedulingScope batch;
  return gloo::transport::tcp::CreateDevice(attr);
}

constexpr int kConnectAttempts = 3;

/// Connects a verified context of `size` ranks under `prefix` (connectAndVerify), trying
/// again while any rank's attempt failed. Debian's Gloo gives every pair a listening socket
/// that takes the first connection it accepts as the peer, with no handshake: a stray client
/// (a port scanner, a health check) that connects in that window takes the peer's place, and
/// the peer's connection is refused. Every rank then fails its attempt (the mesh check cannot
/// pass), but not all alike and not at once, so each posts its verdict under the attempt's
/// prefix (`done/<rank>`, and `failed/<rank>` with the reason first), waits for all of them,
/// and if any failed, all try again under a new prefix, on new ports. `verdictTimeout`
/// bounds the wait for the others' verdicts.
Expected<std::shared_ptr<gloo::Context>>
connectMesh(TcpStore &store, const std::string &prefix, int rank, int size,
            std::shared_ptr<gloo::transport::Device> &device, std::chrono::milliseconds timeout,
            std::chrono::milliseconds verdictTimeout) {
  std::string lastFailure;
  for (int attempt = 1; attempt <= kConnectAttempts; ++attempt) {
    const std::string base = attempt == 1 ? prefix : concat(prefix, "/attempt", attempt);
    std::shared_ptr<gloo::rendezvous::Context> context;
    std::string failure;
    try {
      auto connecting = std::make_shared<gloo::rendezvous::Context>(rank, size);
      connecting->setTimeout(timeout);
      gloo::rendezvous::PrefixStore prefixed(base + "/mesh", store);
      connectAndVerify(*connecting, prefixed, device);
      context = std::move(connecting);
    } catch (const std::exception &e) {
      failure = *e.what() ? e.what() : "an unnamed failure";
    }
    if (size == 1)
      return failure.empty() ? Expected<std::shared_ptr<gloo::Context>>(context)
                             : makeError(failure);
    // The verdicts: the failure (if any) is set before `done`, so whoever sees all `done`
    // keys sees every failure.
    auto key = [&](const char *what, int r) { return concat(base, "/", what, "/", r); };
    if (!failure.empty())
      if (Error e = store.trySet(key("failed", rank), {failure.begin(), failure.end()}); !e.ok())
        return e;
    if (Error e = store.trySet(key("done", rank), {}); !e.ok())
      return e;
    std::vector<std::string> done, failed;
    for (int r = 0; r < size; ++r) {
      done.push_back(key("done", r));
      failed.push_back(key("failed", r));
    }
    auto missing = store.waitMissing(done, verdictTimeout);
    if (!missing)
      return missing.takeError();
    if (!missing->empty()) {
      std::string list;
      for (const auto &k : *missing)
        list += (list.empty() ? "" : ", ") + k.substr(k.rfind('/') + 1);
      return makeError(failure.empty() ? "" : concat(failure, "; "), "rank(s) ", list,
                       " did not finish connecting within ", verdictTimeout.count(), " ms");
    }
    auto set = store.ages(failed, verdictTimeout);
    if (!set)
      return set.takeError();
    std::string failures;
    for (int r = 0; r < size; ++r) {
      if (!(*set)[static_cast<size_t>(r)])
        continue;
      auto why = store.tryGet(failed[static_cast<size_t>(r)], std::chrono::milliseconds(0));
      std::string text = why ? std::string(why->begin(), why->end()) : why.error().message();
      failures += concat(failures.empty() ? "" : "; ", "rank ", r, ": ", text);
    }
    if (failures.empty())
      return std::shared_ptr<gloo::Context>(std::move(context));
    lastFailure = std::move(failures);
  }
  constexpr const char *kWhy = "a stray client on a port? a rank that died?";
  return makeError(kConnectAttempts, " attempts to connect failed (", kWhy,
                   "); the last: ", lastFailure);
}

} // namespace

bool GlooCommunicator::usesPairExchange(int size, size_t bytes) {
  return size == 2 && bytes <= kPairExchangeMaxBytes;
}

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

//===----------------------------------------------------------------------===//
// The engine: operations run one at a time in start order, by the worker or by a caller that
// waits; a completer for point-to-point
//===----------------------------------------------------------------------===//

namespace {

/// The unbound buffers a point-to-point operation posted, with their peers.
struct Posted {
  std::vector<std::pair<std::unique_ptr<gloo::transport::UnboundBuffer>, int>> recvs, sends;
  bool empty() const { return recvs.empty() && sends.empty(); }
};

/// What runs an operation: throws Gloo's exceptions; a point-to-point operation posts its
/// buffers into `posted` instead of waiting for them.
using OperationBody = std::function<void(const std::shared_ptr<gloo::Context> &, Posted &)>;

} // namespace

/// The state of one started operation, finished by whoever runs or completes it.
class GlooCommunicator::OperationState final : public WorkState {
public:
  explicit OperationState(Engine *engine) : engine_(engine) {}
  void finish(Error result) {
    std::lock_guard<std::mutex> lock(mutex_);
    result_ = std::move(result);
    done_ = true;
    doneCv_.notify_all();
  }
  bool poll() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }
  Error wait() override;

private:
  Engine *engine_; // alive while the operation is unfinished (the engine drains first)
  std::mutex mutex_;
  std::condition_variable doneCv_;
  bool done_ = false;
  Error result_;
};

class GlooCommunicator::Engine {
public:
  Engine(std::shared_ptr<gloo::Context> context, std::shared_ptr<FailureRecord> failure,
         std::chrono::milliseconds timeout, std::shared_ptr<const Heartbeat> heartbeat)
      : context_(std::move(context)), failure_(std::move(failure)), timeout_(timeout),
        heartbeat_(std::move(heartbeat)), worker_([this] { runWorker(); }),
        completer_([this] { runCompleter(); }) {}

  /// Runs what was started, then stops.
  ~Engine() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopWorker_ = true;
    }
    workerCv_.notify_one();
    worker_.join();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopCompleter_ = true;
    }
    completerCv_.notify_one();
    completer_.join();
  }

  /// Queues `body`; `where` (describe(op)) starts its messages. Wakes the worker unless
  /// `callerWaits`: a caller that waits at once runs the operation itself when the context is
  /// free (runNextHere), and the end of the operation holding it wakes the worker otherwise,
  /// so a blocking call costs no switch to the worker and back.
  Work submit(std::string where, OperationBody body, bool callerWaits) {
    auto work = std::make_shared<OperationState>(this);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(Operation{std::move(where), std::move(body), work});
    }
    if (!callerWaits)
      workerCv_.notify_one();
    return Work(work);
  }

  /// Runs the next queued operation on the calling thread (which waits for `waiter`) when no
  /// operation is running: a blocking call then costs no switch to the worker. Completes
  /// `waiter`'s own point-to-point transfers here too. Returns whether it ran one.
  bool runNextHere(const OperationState *waiter) {
    Operation op;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (running_ || queue_.empty())
        return false;
      op = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    execute(std::move(op), waiter);
    return true;
  }

private:
  struct Operation {
    std::string where;
    OperationBody body;
    std::shared_ptr<OperationState> work;
  };
  struct Pending {
    Operation op;
    Posted posted;
    Clock::time_point deadline;
  };

  /// Fails `op` with `what`, naming the job's silent ranks when the job has heartbeats (the
  /// peer this rank waited on may only be a neighbour of the rank that stopped); the
  /// communicator is unusable from now on. The silent ranks are asked for once (it can take
  /// a heartbeat's silence threshold), not once per operation that fails after the first.
  void fail(const Operation &op, std::string_view what) {
    failure_->record(concat(op.where, ": ", what));
    if (heartbeat_)
      std::call_once(silentPeersAsked_,
                     [&] { silentPeers_ = "; " + heartbeat_->explainSilentPeers(); });
    op.work->finish(makeError(op.where, " failed: ", what, " (operation timeout ", timeout_.count(),
                              " ms; the communicator is unusable now)", silentPeers_));
  }

  /// Runs `op`, which the caller took off the queue setting running_, and ends running_
  /// once the context is free again. Point-to-point transfers are completed here when `op`
  /// is `completeHere`'s, else by the completer.
  void execute(Operation op, const OperationState *completeHere) {
    Posted posted;
    std::string failed;
    const bool refused = failure_->failed(); // started before an earlier operation failed
    if (!refused) {
      try {
        op.body(context_, posted);
      } catch (const std::exception &e) {
        failed = e.what();
      } catch (...) {
        failed = "an exception that is not a std::exception";
      }
    }
    // Finished before the next operation may run, so that operations finish in start order
    // (but for the transfers of point-to-point operations, which complete in the background).
    const bool finished = refused || !failed.empty() || posted.empty();
    if (refused)
      op.work->finish(failure_->unusable(op.where));
    else if (!failed.empty())
      fail(op, failed);
    else if (posted.empty())
      op.work->finish(Error::success());
    std::optional<Pending> completeNow;
    bool queued;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_ = false;
      queued = !queue_.empty();
      // Handed to the completer before the next operation can post: the completer waits in
      // posting order, the order in which a link's messages arrive. Queued behind a later
      // receive (a message that may only be sent once this one has been consumed), a transfer
      // that has arrived would never be reported, and two pipeline stages would each wait for
      // the other's next message.
      if (!finished) {
        Pending p{std::move(op), std::move(posted), Clock::now() + timeout_};
        if (p.op.work.get() == completeHere)
          completeNow.emplace(std::move(p));
        else
          pending_.push_back(std::move(p));
      }
    }
    // Only an operation waiting for the context wakes the worker: a wake-up for nothing is
    // two context switches per operation, taken from the ranks' compute.
    if (queued)
      workerCv_.notify_one();
    if (completeNow)
      return complete(*completeNow);
    if (!finished)
      completerCv_.notify_one();
  }

  /// Waits for the posted transfers of `p` and finishes its operation.
  void complete(Pending &p) {
    auto left = [&] {
      return std::max(
          std::chrono::duration_cast<std::chrono::milliseconds>(p.deadline - Clock::now()),
          std::chrono::milliseconds(1));
    };
    try {
      for (auto &[buffer, peer] : p.posted.recvs)
        if (!buffer->waitRecv(nullptr, left()))
          throw gloo::IoException(concat("receive from rank ", peer, " aborted"));
      for (auto &[buffer, peer] : p.posted.sends)
        if (!buffer->waitSend(nullptr, left()))
          throw gloo::IoException(concat("send to rank ", peer, " aborted"));
    } catch (const std::exception &e) {
      return fail(p.op, e.what());
    } catch (...) {
      return fail(p.op, "an exception that is not a std::exception");
    }
    p.op.work->finish(Error::success());
  }

  void runWorker() {
    for (;;) {
      Operation op;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        workerCv_.wait(lock, [&] { return !running_ && (stopWorker_ || !queue_.empty()); });
        if (queue_.empty())
          return;
        op = std::move(queue_.front());
        queue_.pop_front();
        running_ = true;
      }
      execute(std::move(op), nullptr);
    }
  }

  void runCompleter() {
    for (;;) {
      Pending p;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        completerCv_.wait(lock, [&] { return stopCompleter_ || !pending_.empty(); });
        if (pending_.empty())
          return;
        p = std::move(pending_.front());
        pending_.pop_front();
      }
      complete(p);
    }
  }

  std::shared_ptr<gloo::Context> context_; // used by one operation at a time (running_)
  std::shared_ptr<FailureRecord> failure_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<const Heartbeat> heartbeat_; // null: no names for a failure
  std::once_flag silentPeersAsked_;
  std::string silentPeers_; // written once, under silentPeersAsked_
  std::mutex mutex_;
  std::condition_variable workerCv_, completerCv_;
  std::deque<Operation> queue_; // started, not run yet
  bool running_ = false;        // an operation uses the context
  std::deque<Pending> pending_; // posted, not complete yet
  bool stopWorker_ = false, stopCompleter_ = false;
  std::thread worker_, completer_; // last: they start once the rest is built
};

Error GlooCommunicator::OperationState::wait() {
  // Run the operations ahead (and this one) here while the worker is not running one.
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (done_)
        return result_;
    }
    if (!engine_->runNextHere(this))
      break;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  doneCv_.wait(lock, [&] { return done_; });
  return result_;
}

GlooCommunicator::GlooCommunicator(JobStore store, std::shared_ptr<gloo::transport::Device> device,
                                   std::shared_ptr<gloo::Context> context, GlooOptions options)
    : store_(std::move(store)), device_(std::move(device)), options_(std::move(options)),
      rank_(context->rank), size_(context->size),
      engine_(std::make_unique<Engine>(std::move(context), failure_, options_.timeout,
                                       store_.heartbeat)) {}

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
    auto device = createTcpDevice(attr);
    auto context = connectMesh(*store.client, options.prefix, rank, size, device, options.timeout,
                               options.rendezvousTimeout + 2 * options.timeout);
    if (!context)
      return context.takeError().withContext(
          concat("gloo: connecting rank ", rank, " of ", size, " (prefix '", options.prefix, "')"));
    return std::unique_ptr<GlooCommunicator>(
        new GlooCommunicator(std::move(store), std::move(device), std::move(*context), options));
  } catch (const std::exception &e) {
    return makeError("gloo: connecting rank ", rank, " of ", size, " (prefix '", options.prefix,
                     "'): ", e.what());
  }
}

//===----------------------------------------------------------------------===//
// Operations: counted and tagged at start (on the caller's thread), run by the worker
//===----------------------------------------------------------------------===//

namespace {

/// Gloo sizes its segments by the element type; only the size matters to it.
void setOutputOfSize(gloo::AllreduceOptions &opts, void *data, size_t count, size_t size) {
  switch (size) {
  case 2:
    return opts.setOutput(static_cast<uint16_t *>(data), count);
  case 4:
    return opts.setOutput(static_cast<uint32_t *>(data), count);
  default:
    return opts.setOutput(static_cast<uint64_t *>(data), count);
  }
}

} // namespace

Work GlooCommunicator::doAllReduce(void *data, size_t count, MtcElementType type,
                                   MtcReduction reduction) {
  const size_t size = elementSize(type);
  const size_t bytes = count * size;
  const bool exchange = usesPairExchange(size_, bytes);
  counters_.record(CollectiveKind::AllReduce,
                   exchange ? bytes : ringAllReduceBytesSent(rank_, size_, bytes, size));
  const uint32_t tag = nextTag();
  const ReduceFunction reduce = reduceFunction(type, reduction);
  const std::chrono::milliseconds timeout = options_.timeout;
  const int peer = 1 - rank_;
  const bool first = rank_ == 0;
  return engine_->submit(
      describe("allReduce"),
      [=](const auto &context, Posted &) {
        if (count == 0)
          return;
        if (exchange) {
          // Both ranks swap their buffers in one message each way and reduce rank 0's values
          // with rank 1's, in that order on both: the same bits on both ranks (and, the
          // reductions being commutative, the bits Gloo's ring gives).
          std::vector<uint8_t> incoming(bytes);
          auto mine = context->createUnboundBuffer(data, bytes);
          auto theirs = context->createUnboundBuffer(incoming.data(), bytes);
          const uint64_t slot = gloo::Slot::build(kAllReduceSlotPrefix, tag);
          theirs->recv(peer, slot);
          mine->send(peer, slot);
          if (!theirs->waitRecv(timeout) || !mine->waitSend(timeout))
            throw gloo::IoException("all-reduce exchange aborted");
          if (first)
            reduce(data, data, incoming.data(), count);
          else
            reduce(data, incoming.data(), data, count);
          return;
        }
        gloo::AllreduceOptions opts(context);
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        setOutputOfSize(opts, data, count, size);
        opts.setReduceFunction(reduce);
        opts.setTag(tag);
        opts.setTimeout(timeout);
        gloo::allreduce(opts);
      },
      callerWaits());
}

Work GlooCommunicator::doAllGather(const void *in, void *out, size_t countPerRank,
                                   MtcElementType type) {
  const size_t bytes = countPerRank * elementSize(type);
  counters_.record(CollectiveKind::AllGather, uint64_t(size_ - 1) * bytes);
  const uint32_t tag = nextTag();
  const std::chrono::milliseconds timeout = options_.timeout;
  const int n = size_;
  return engine_->submit(
      describe("allGather"),
      [=](const auto &context, Posted &) {
        if (bytes == 0)
          return;
        gloo::AllgatherOptions opts(context);
        opts.setInput(static_cast<uint8_t *>(const_cast<void *>(in)), bytes);
        opts.setOutput(static_cast<uint8_t *>(out), bytes * size_t(n));
        opts.setTag(tag);
        opts.setTimeout(timeout);
        gloo::allgather(opts);
      },
      callerWaits());
}

Work GlooCommunicator::doReduceScatter(const void *in, void *out, size_t countPerRank,
                                       MtcElementType type, MtcReduction reduction) {
  const size_t n = static_cast<size_t>(size_), r = static_cast<size_t>(rank_);
  const size_t blockBytes = countPerRank * elementSize(type);
  counters_.record(CollectiveKind::ReduceScatter, uint64_t(n - 1) * blockBytes);
  const uint32_t tag = nextTag();
  const ReduceFunction reduce = reduceFunction(type, reduction);
  const std::chrono::milliseconds timeout = options_.timeout;
  return engine_->submit(
      describe("reduceScatter"),
      [=](const auto &context, Posted &) {
        if (blockBytes == 0)
          return;
        if (n == 1) {
          std::memmove(out, in, blockBytes);
          return;
        }
        // Ring: in step s, send block (r - 1 - s) to the right neighbour (holding s + 1
        // contributions) and receive block (r - 2 - s) from the left, reducing ours into it.
        // After n - 1 steps block r has all n contributions.
        const auto *bytesIn = static_cast<const uint8_t *>(in);
        std::vector<uint8_t> work(bytesIn, bytesIn + n * blockBytes), incoming(blockBytes);
        auto workBuf = context->createUnboundBuffer(work.data(), work.size());
        auto inBuf = context->createUnboundBuffer(incoming.data(), blockBytes);
        const uint64_t slot = gloo::Slot::build(kReduceScatterSlotPrefix, tag);
        const int right = static_cast<int>((r + 1) % n), left = static_cast<int>((r + n - 1) % n);
        for (size_t s = 0; s + 1 < n; ++s) {
          size_t sendBlock = (r + 2 * n - 1 - s) % n;
          size_t recvBlock = (r + 2 * n - 2 - s) % n;
          inBuf->recv(left, slot, 0, blockBytes);
          workBuf->send(right, slot, sendBlock * blockBytes, blockBytes);
          if (!inBuf->waitRecv(timeout) || !workBuf->waitSend(timeout))
            throw gloo::IoException("reduce-scatter step aborted");
          uint8_t *acc = work.data() + recvBlock * blockBytes;
          reduce(acc, incoming.data(), acc, countPerRank);
        }
        std::memcpy(out, work.data() + r * blockBytes, blockBytes);
      },
      callerWaits());
}

Work GlooCommunicator::doBroadcast(void *data, size_t count, MtcElementType type, int root) {
  const size_t bytes = count * elementSize(type);
  counters_.record(CollectiveKind::Broadcast, broadcastBytesSent(rank_, size_, root, bytes));
  const uint32_t tag = nextTag();
  const std::chrono::milliseconds timeout = options_.timeout;
  const int n = size_;
  return engine_->submit(
      describe("broadcast"),
      [=](const auto &context, Posted &) {
        if (bytes == 0 || n == 1)
          return;
        gloo::BroadcastOptions opts(context);
        opts.setOutput(static_cast<uint8_t *>(data), bytes);
        opts.setRoot(root);
        opts.setTag(tag);
        opts.setTimeout(timeout);
        gloo::broadcast(opts);
      },
      callerWaits());
}

Work GlooCommunicator::doAllToAllV(const void *in, std::vector<size_t> sendCounts, void *out,
                                   std::vector<size_t> recvCounts, MtcElementType type) {
  const size_t n = static_cast<size_t>(size_), me = static_cast<size_t>(rank_);
  const size_t size = elementSize(type);
  // Byte offsets and lengths of the blocks, per peer.
  std::vector<size_t> sendOffsets(n), recvOffsets(n);
  size_t sendTotal = 0, recvTotal = 0;
  uint64_t sent = 0;
  for (size_t p = 0; p < n; ++p) {
    sendOffsets[p] = sendTotal, recvOffsets[p] = recvTotal;
    sendCounts[p] *= size, recvCounts[p] *= size;
    sendTotal += sendCounts[p], recvTotal += recvCounts[p];
    if (p != me)
      sent += sendCounts[p];
  }
  counters_.record(CollectiveKind::AllToAll, sent);
  const uint32_t tag = nextTag();
  const std::chrono::milliseconds timeout = options_.timeout;
  return engine_->submit(
      describe("allToAll"),
      [=, sendCounts = std::move(sendCounts),
       recvCounts = std::move(recvCounts)](const auto &context, Posted &) {
        if (sendCounts[me] > 0)
          std::memcpy(static_cast<uint8_t *>(out) + recvOffsets[me],
                      static_cast<const uint8_t *>(in) + sendOffsets[me], sendCounts[me]);
        std::unique_ptr<gloo::transport::UnboundBuffer> inBuf, outBuf;
        if (sendTotal > sendCounts[me])
          inBuf = context->createUnboundBuffer(const_cast<void *>(in), sendTotal);
        if (recvTotal > recvCounts[me])
          outBuf = context->createUnboundBuffer(out, recvTotal);
        const uint64_t slot = gloo::Slot::build(kAllToAllSlotPrefix, tag);
        // Pairwise: in step i, send to rank + i and receive from rank - i.
        size_t sends = 0, recvs = 0;
        for (size_t i = 1; i < n; ++i) {
          const size_t to = (me + i) % n, from = (me + n - i) % n;
          if (sendCounts[to] > 0) {
            inBuf->send(int(to), slot, sendOffsets[to], sendCounts[to]);
            ++sends;
          }
          if (recvCounts[from] > 0) {
            outBuf->recv(int(from), slot, recvOffsets[from], recvCounts[from]);
            ++recvs;
          }
        }
        for (; sends > 0; --sends)
          if (!inBuf->waitSend(timeout))
            throw gloo::IoException("all-to-all send aborted");
        for (; recvs > 0; --recvs)
          if (!outBuf->waitRecv(timeout))
            throw gloo::IoException("all-to-all receive aborted");
      },
      callerWaits());
}

Work GlooCommunicator::doBarrier() {
  counters_.record(CollectiveKind::Barrier, 0);
  const uint32_t tag = nextTag();
  const std::chrono::milliseconds timeout = options_.timeout;
  const int n = size_;
  return engine_->submit(
      describe("barrier"),
      [=](const auto &context, Posted &) {
        if (n == 1)
          return;
        gloo::BarrierOptions opts(context);
        opts.setTag(tag);
        opts.setTimeout(timeout);
        gloo::barrier(opts);
      },
      callerWaits());
}

namespace {

/// Posts a send (or receive) of `bytes` at `data` to (from) `peer` on the point-to-point slot.
void post(const std::shared_ptr<gloo::Context> &context, Posted &posted, bool send, void *data,
          size_t bytes, int peer) {
  if (bytes == 0)
    return;
  auto buffer = context->createUnboundBuffer(data, bytes);
  const uint64_t slot = gloo::Slot::build(kPointToPointSlotPrefix, 0);
  if (send) {
    buffer->send(peer, slot);
    posted.sends.emplace_back(std::move(buffer), peer);
  } else {
    buffer->recv(peer, slot);
    posted.recvs.emplace_back(std::move(buffer), peer);
  }
}

} // namespace

Work GlooCommunicator::doSend(const void *data, size_t count, MtcElementType type, int peer) {
  const size_t bytes = count * elementSize(type);
  counters_.record(CollectiveKind::SendRecv, bytes);
  return engine_->submit(
      describe("send"),
      [=](const auto &context, Posted &posted) {
        post(context, posted, true, const_cast<void *>(data), bytes, peer);
      },
      callerWaits());
}

Work GlooCommunicator::doRecv(void *data, size_t count, MtcElementType type, int peer) {
  const size_t bytes = count * elementSize(type);
  counters_.record(CollectiveKind::SendRecv, 0);
  return engine_->submit(
      describe("recv"),
      [=](const auto &context, Posted &posted) { post(context, posted, false, data, bytes, peer); },
      callerWaits());
}

Work GlooCommunicator::doSendRecv(const void *sendData, size_t sendCount, int dst, void *recvData,
                                  size_t recvCount, int src, MtcElementType type) {
  const size_t sendBytes = sendCount * elementSize(type);
  const size_t recvBytes = recvCount * elementSize(type);
  counters_.record(CollectiveKind::SendRecv, sendBytes);
  return engine_->submit(
      describe("sendRecv"),
      [=](const auto &context, Posted &posted) {
        post(context, posted, false, recvData, recvBytes, src);
        post(context, posted, true, const_cast<void *>(sendData), sendBytes, dst);
      },
      callerWaits());
}

Expected<std::unique_ptr<Communicator>> GlooCommunicator::split(int color, int key) {
  if (failure_->failed())
    return unusable("split").wait();
  // Everyone learns everyone's (color, key) (not counted: setup traffic), then the members
  // connect a new context, on the worker (after the operations started before).
  const std::vector<int32_t> mine = {color < 0 ? -1 : color, key};
  const uint32_t tag = nextTag();
  const uint32_t index = splits_++;
  GlooOptions options = options_;
  options.prefix = concat(options_.prefix, "/split", index, "/color", color);
  std::shared_ptr<gloo::Context> context;
  int newRank = 0, newSize = 0;
  Error connectError;
  Work gather = engine_->submit(
      describe("split"),
      [&](const auto &parent, Posted &) {
        std::vector<int32_t> all(2 * static_cast<size_t>(size_));
        if (size_ == 1) {
          all = mine;
        } else {
          gloo::AllgatherOptions opts(parent);
          opts.setInput(const_cast<int32_t *>(mine.data()), 2);
          opts.setOutput(all.data(), all.size());
          opts.setTag(tag);
          opts.setTimeout(options_.timeout);
          gloo::allgather(opts);
        }
        if (color < 0)
          return;
        std::vector<int> members;
        for (int r = 0; r < size_; ++r)
          if (all[2 * r] == color)
            members.push_back(r);
        std::sort(members.begin(), members.end(), [&](int a, int b) {
          return std::pair(all[2 * a + 1], a) < std::pair(all[2 * b + 1], b);
        });
        newRank =
            static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
        newSize = static_cast<int>(members.size());
        // A failure to connect the new group leaves this one usable.
        auto connected =
            connectMesh(*store_.client, options.prefix, newRank, newSize, device_, options.timeout,
                        options.rendezvousTimeout + 2 * options.timeout);
        if (connected)
          context = std::move(*connected);
        else
          connectError = makeError(describe("split"), " (color ", color, "): connecting rank ",
                                   newRank, " of ", newSize, ": ", connected.error().message());
      },
      true);
  if (Error e = gather.wait(); !e.ok())
    return e;
  if (!connectError.ok())
    return connectError;
  if (color < 0)
    return std::unique_ptr<Communicator>();
  return std::unique_ptr<Communicator>(
      new GlooCommunicator(store_, device_, std::move(context), std::move(options)));
}

} // namespace mtc::rt
