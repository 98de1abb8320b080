//===- Heartbeat.h - Ranks beat in the store; a failure names the silent ones -*- C++ -*-===//
//
// A rank that is stopped (SIGSTOP), hung with all its threads, or dead does not say so: its
// peers only see a collective time out or a connection close, and in a ring the peer a rank
// waits on is a neighbour, not necessarily the silent rank. So every rank of a job runs a
// Heartbeat: a thread that sets `<prefix>/heartbeat/<rank>` to "<pid> <host>" every `interval`
// over a store connection of its own (a beat never queues behind a waiting request of the
// rank's main connection), and `<prefix>/heartbeat/<rank>/ended` when it is destroyed (the
// rank's process is ending). The store notes when each key was last set by its own clock, so the
// hosts' clocks need not agree (TcpStore::ages).
//
// When an operation fails, `explainSilentPeers` asks the store how long ago every rank last
// beat and names the ranks silent for more than `missedBeats` intervals (torchelastic's
// rendezvous keep-alive marks a node dead after 3 missed beats too; it beats every 5 s, this one
// every second so that a short --comm-timeout still finds the silent rank): "rank 3 (pid 1234
// on host h) has not been heard from for 3.4 s: stopped or hung". A failure can come before
// the silent rank has missed enough beats (the operation started before the rank stopped), so
// the explanation waits up to one threshold for a rank to become silent. Like PyTorch's NCCL
// desync report, the diagnosis comes from the store after the failure, never before: the
// heartbeat only writes, so it cannot make a healthy job fail or change what it computes, and
// a beat that cannot be delivered is dropped (the next one reconnects).
//
// Limit: a beat says the process runs, not that it progresses. A rank hung in computation
// while its heartbeat thread still runs is alive to the store; the explanation then says that
// every rank has beaten recently.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_COMM_HEARTBEAT_H
#define MTC_RUNTIME_COMM_HEARTBEAT_H

#include "runtime/comm/Rendezvous.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace mtc::rt {

struct HeartbeatOptions {
  /// Namespace of the heartbeat keys in the store.
  std::string prefix = "mtc";
  std::chrono::milliseconds interval{1000};
  /// A rank whose last beat is older than this many intervals is silent.
  int missedBeats = 3;

  std::chrono::milliseconds silenceThreshold() const { return interval * missedBeats; }
  std::string key(int rank) const;
  /// Set once, when the rank's heartbeat stops.
  std::string endedKey(int rank) const;
};

/// What the store knows of one rank's heartbeat.
struct RankHeartbeat {
  int rank = 0;
  /// Since the last beat, by the store's clock; nullopt: the rank never beat.
  std::optional<std::chrono::milliseconds> age;
  /// The rank said goodbye: its process is ending.
  bool ended = false;
  /// "pid 1234 on host h" (empty when the rank never beat).
  std::string identity;

  /// Ended, never beat, or beat longer ago than the threshold.
  bool silent(const HeartbeatOptions &options) const;
  /// "rank 3 (pid 1234 on host h) has not been heard from for 3.4 s: stopped or hung",
  /// "rank 2 (pid 99 on host h) has ended", "rank 1 has never been heard from".
  std::string describe() const;
};

/// Every rank's heartbeat as the store knows it now (`size` ranks): one request for the ages of
/// all keys, then one per silent rank for who it is.
Expected<std::vector<RankHeartbeat>> readHeartbeats(TcpStore &store, int size,
                                                    const HeartbeatOptions &options,
                                                    std::chrono::milliseconds replyTimeout);

/// Waits until every rank but `self` has ended or gone silent, or `limit` passes. The rank
/// whose process runs the store does this after a failure, before its store goes: its peers,
/// failing a little later, still ask the store which ranks went silent.
void waitUntilPeersAreSilent(TcpStore &store, int self, int size, const HeartbeatOptions &options,
                             std::chrono::milliseconds limit);

class Heartbeat {
public:
  /// Beats once on a new connection to `store`'s server (an error if that fails), then every
  /// interval on a thread. `store` (the rank's main connection) answers the queries of
  /// explainSilentPeers.
  static Expected<std::unique_ptr<Heartbeat>> start(std::shared_ptr<TcpStore> store, int rank,
                                                    int size, HeartbeatOptions options = {});
  /// Says the rank ended, then stops the thread.
  ~Heartbeat();
  Heartbeat(const Heartbeat &) = delete;
  Heartbeat &operator=(const Heartbeat &) = delete;

  /// For the error of a failed operation: the ranks other than this one that are silent,
  /// waiting up to one silence threshold for one to become so; or that every rank has beaten
  /// recently; or that the store (rank 0's process) does not answer.
  std::string explainSilentPeers() const;

private:
  Heartbeat(std::shared_ptr<TcpStore> store, std::shared_ptr<TcpStore> beats, int rank, int size,
            HeartbeatOptions options, std::string identity);
  /// Sets `key` to "<pid> <host>"; reconnects first after a failed beat.
  Error beat(const std::string &key);
  void run();

  std::shared_ptr<TcpStore> store_;
  std::shared_ptr<TcpStore> beats_; // the beating thread's connection (null after a failure)
  int rank_ = 0, size_ = 1;
  HeartbeatOptions options_;
  std::string identity_; // "<pid> <host>"
  std::mutex mutex_;
  std::condition_variable stopCv_;
  bool stopping_ = false;
  std::thread thread_; // last: starts once the rest is built
};

} // namespace mtc::rt

#endif // MTC_RUNTIME_COMM_HEARTBEAT_H
