//===- Heartbeat.cpp - Ranks beat in the store; a failure names the silent ones ---===//

#include "runtime/comm/Heartbeat.h"

#include "runtime/support/TemporaryFiles.h"

#include <algorithm>
#include <cstdio>

#include <unistd.h>

namespace mtc::rt {

namespace {

using Clock = std::chrono::steady_clock;

/// Silent ranks named in one message; the rest are counted.
constexpr size_t kMaxNamed = 8;

/// "3.4 s".
std::string seconds(std::chrono::milliseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(d.count()) / 1000.0);
  return text;
}

} // namespace

std::string HeartbeatOptions::key(int rank) const { return concat(prefix, "/heartbeat/", rank); }

std::string HeartbeatOptions::endedKey(int rank) const { return concat(key(rank), "/ended"); }

bool RankHeartbeat::silent(const HeartbeatOptions &options) const {
  return ended || !age || *age > options.silenceThreshold();
}

std::string RankHeartbeat::describe() const {
  std::string who =
      identity.empty() ? concat("rank ", rank) : concat("rank ", rank, " (", identity, ")");
  if (!age)
    return concat(who, " has never been heard from");
  if (ended)
    return concat(who, " has ended");
  return concat(who, " has not been heard from for ", seconds(*age), ": stopped or hung");
}

Expected<std::vector<RankHeartbeat>> readHeartbeats(TcpStore &store, int size,
                                                    const HeartbeatOptions &options,
                                                    std::chrono::milliseconds replyTimeout) {
  // One request for every rank's beat and goodbye keys; then who the silent ranks are.
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) {
    keys.push_back(options.key(r));
    keys.push_back(options.endedKey(r));
  }
  auto ages = store.ages(keys, replyTimeout);
  if (!ages)
    return ages.takeError();
  std::vector<RankHeartbeat> result(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    RankHeartbeat &h = result[static_cast<size_t>(r)];
    const size_t i = 2 * static_cast<size_t>(r);
    h.rank = r;
    h.age = (*ages)[i];
    h.ended = (*ages)[i + 1].has_value();
    if (!h.age || !h.silent(options))
      continue;
    auto value = store.tryGet(keys[i], std::chrono::milliseconds(0));
    if (!value)
      return value.takeError();
    // "<pid> <host>"
    std::string_view text(value->data(), value->size());
    size_t space = text.find(' ');
    if (space != std::string_view::npos)
      h.identity = concat("pid ", text.substr(0, space), " on host ", text.substr(space + 1));
  }
  return result;
}

void waitUntilPeersAreSilent(TcpStore &store, int self, int size, const HeartbeatOptions &options,
                             std::chrono::milliseconds limit) {
  const Clock::time_point giveUp = Clock::now() + limit;
  for (;;) {
    auto all = readHeartbeats(store, size, options, 2 * options.interval);
    if (!all)
      return;
    if (std::all_of(all->begin(), all->end(),
                    [&](const RankHeartbeat &h) { return h.rank == self || h.silent(options); }))
      return;
    if (Clock::now() >= giveUp)
      return;
    std::this_thread::sleep_for(std::min(options.interval / 4, std::chrono::milliseconds(250)));
  }
}

Expected<std::unique_ptr<Heartbeat>> Heartbeat::start(std::shared_ptr<TcpStore> store, int rank,
                                                      int size, HeartbeatOptions options) {
  if (!store)
    return makeError("heartbeat: no store");
  if (size < 1 || rank < 0 || rank >= size)
    return makeError("heartbeat: rank ", rank, " is not in [0, ", size, ")");
  if (options.interval.count() <= 0 || options.missedBeats < 1)
    return makeError("heartbeat: the interval and the missed beats must be positive");
  auto beats = store->connectAgain(options.interval);
  if (!beats)
    return beats.takeError().withContext("heartbeat");
  std::string identity = concat(::getpid(), " ", hostName());
  std::unique_ptr<Heartbeat> h(new Heartbeat(std::move(store), std::move(*beats), rank, size,
                                             std::move(options), std::move(identity)));
  if (Error e = h->beat(h->options_.key(rank)); !e.ok())
    return std::move(e).withContext("heartbeat");
  try {
    h->thread_ = std::thread([p = h.get()] { p->run(); });
  } catch (const std::exception &e) {
    return makeError("heartbeat: cannot start its thread: ", e.what());
  }
  return h;
}

Heartbeat::Heartbeat(std::shared_ptr<TcpStore> store, std::shared_ptr<TcpStore> beats, int rank,
                     int size, HeartbeatOptions options, std::string identity)
    : store_(std::move(store)), beats_(std::move(beats)), rank_(rank), size_(size),
      options_(std::move(options)), identity_(std::move(identity)) {}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stopCv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

Error Heartbeat::beat(const std::string &key) {
  if (!beats_) {
    auto again = store_->connectAgain(options_.interval);
    if (!again)
      return again.takeError();
    beats_ = std::move(*again);
  }
  Error e = beats_->trySet(key, {identity_.begin(), identity_.end()});
  if (!e.ok())
    beats_.reset(); // the connection is closed after a failed request
  return e;
}

void Heartbeat::run() {
  // A beat that fails is dropped: the store may be slow or gone (rank 0 ended), and the
  // heartbeat must never be what ends a rank.
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopCv_.wait_for(lock, options_.interval, [&] { return stopping_; })) {
    lock.unlock();
    (void)beat(options_.key(rank_));
    lock.lock();
  }
  lock.unlock();
  // The goodbye only over a live connection: after a failed beat the store is slow or gone,
  // and reconnecting would hold up the rank's exit.
  if (beats_)
    (void)beat(options_.endedKey(rank_));
}

std::string Heartbeat::explainSilentPeers() const {
  const auto threshold = options_.silenceThreshold();
  const auto replyTimeout = 2 * options_.interval;
  // The store answers ages in whole milliseconds and a rank is silent above the threshold:
  // one millisecond more makes a beat older than this call count.
  const Clock::time_point giveUp = Clock::now() + threshold + std::chrono::milliseconds(1);
  for (;;) {
    // The last read starts at or after giveUp: a beat older than this call is then silent
    // in the store's answer (a read that only ended after giveUp could still see it younger,
    // and the rank that stopped would pass for alive).
    const bool last = Clock::now() >= giveUp;
    auto all = readHeartbeats(*store_, size_, options_, replyTimeout);
    if (!all)
      return concat("the rendezvous store, which rank 0 runs, does not answer (",
                    all.error().message(), "): rank 0 may be stopped, hung or gone");
    std::vector<const RankHeartbeat *> silent;
    for (const RankHeartbeat &h : *all)
      if (h.rank != rank_ && h.silent(options_))
        silent.push_back(&h);
    if (!silent.empty()) {
      std::string text;
      for (size_t i = 0; i < std::min(silent.size(), kMaxNamed); ++i)
        text += (i ? "; " : "") + silent[i]->describe();
      if (silent.size() > kMaxNamed)
        text += concat("; and ", silent.size() - kMaxNamed, " more silent ranks");
      return text;
    }
    if (last)
      return concat("every rank has beaten within the last ", seconds(threshold),
                    " (alive: a rank may be hung in computation or in another operation)");
    std::this_thread::sleep_for(std::min(options_.interval / 4, std::chrono::milliseconds(250)));
  }
}

} // namespace mtc::rt
