//===- Rendezvous.h - TCP key-value store for rendezvous --------*- C++ -*-===//
//
// Ranks find each other through a small key-value store: rank 0 runs a `StoreServer` on
// MASTER_ADDR:MASTER_PORT and every rank (rank 0 too) connects a `TcpStore` client. Gloo's
// context setup and NCCL's unique-id broadcast go through it. Debian's Gloo has file, hash,
// prefix and Redis stores but no TCP store, hence this one (`TcpStore` is a
// `gloo::rendezvous::Store`).
//
// Security: the first message of every connection must carry the job token (the launcher
// generates 32 hex digits and passes MTC_JOB_TOKEN to every rank); the server refuses and
// closes a connection whose token differs, so a stray process or an old job's rank cannot
// join; whatever bytes such a process sends (garbage, a huge length, half a frame, nothing
// for 10 s) end its connection alone, never the server or the job. The token is not a secret against someone who can read the job's environment or the
// traffic (no TLS).
//
// Protocol (one TCP connection per client, requests answered in order): frames of a u32
// little-endian length then the payload; payloads start with an op byte:
//   HELLO token                      -> OK | REFUSED (then closed)
//   SET key value                    -> OK
//   GET key timeout_ms               -> OK value | TIMEOUT     (waits for the key)
//   WAIT n key... timeout_ms         -> OK | TIMEOUT n missing-key...
//   AGES n key...                    -> OK n (present u8, age_ms u64)...
// AGES answers how long ago each key was last set, by the server's clock (so the hosts' clocks
// need not agree): the heartbeats of Heartbeat.h are keys that ranks set every second.
// Strings are a u32 length then bytes. Frames above 64 MiB are refused.
//
// Errors are values on this API (`trySet`, `tryGet`, `waitMissing`); the gloo::Store overrides
// that Gloo calls throw `gloo::IoException`, which GlooCommunicator catches.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_COMM_RENDEZVOUS_H
#define MTC_RUNTIME_COMM_RENDEZVOUS_H

#include "runtime/support/Error.h"

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::rt {

/// A fresh job token: 32 lowercase hex digits from /dev/urandom.
Expected<std::string> generateJobToken();

/// The store server (rank 0). Serves until destroyed; the destructor stops every connection
/// and joins its threads.
class StoreServer {
public:
  /// Listens on `bindAddress` ("" or "0.0.0.0": all IPv4 interfaces; "::" all IPv6;
  /// "127.0.0.1" loopback) and `port` (0: a free port, see port()). The token must not be
  /// empty.
  static Expected<std::unique_ptr<StoreServer>> start(const std::string &bindAddress, uint16_t port,
                                                      std::string token);
  ~StoreServer();
  StoreServer(const StoreServer &) = delete;
  StoreServer &operator=(const StoreServer &) = delete;

  uint16_t port() const;

  struct State;

private:
  explicit StoreServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// A client connection to the store. Thread-safe (one request at a time).
class TcpStore final : public gloo::rendezvous::Store {
public:
  /// Connects to host:port and presents `token`, retrying refused connections until
  /// `timeout` (rank 0 may start its server after the others start). `timeout` is also the
  /// default wait of the gloo::Store interface.
  static Expected<std::shared_ptr<TcpStore>> connect(const std::string &host, uint16_t port,
                                                     const std::string &token,
                                                     std::chrono::milliseconds timeout);
  ~TcpStore() override;
  TcpStore(const TcpStore &) = delete;
  TcpStore &operator=(const TcpStore &) = delete;

  Error trySet(const std::string &key, const std::vector<char> &value);
  /// Waits up to `timeout` for `key`, then returns its value.
  Expected<std::vector<char>> tryGet(const std::string &key, std::chrono::milliseconds timeout);
  /// Waits up to `timeout` for all `keys`; returns those still missing (empty: all present).
  Expected<std::vector<std::string>> waitMissing(const std::vector<std::string> &keys,
                                                 std::chrono::milliseconds timeout);
  /// How long ago each of `keys` was last set, by the server's clock (nullopt: never set).
  /// Fails when the server does not answer within `replyTimeout`.
  Expected<std::vector<std::optional<std::chrono::milliseconds>>>
  ages(const std::vector<std::string> &keys, std::chrono::milliseconds replyTimeout);

  /// A new connection to the same store with the same token, connecting and then waiting by
  /// default within `timeout` (for a thread whose requests must not queue behind this
  /// connection's waits).
  Expected<std::shared_ptr<TcpStore>> connectAgain(std::chrono::milliseconds timeout) const;

  /// "host:port".
  const std::string &endpoint() const { return endpoint_; }
  std::chrono::milliseconds defaultTimeout() const { return timeout_; }

  // gloo::rendezvous::Store (throw gloo::IoException on failure).
  void set(const std::string &key, const std::vector<char> &data) override;
  std::vector<char> get(const std::string &key) override;
  void wait(const std::vector<std::string> &keys) override;
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override;

private:
  TcpStore(int fd, std::string host, uint16_t port, std::string token,
           std::chrono::milliseconds timeout);
  /// Sends `payload` and reads the reply, which the server sends within `wait` (a waiting
  /// request's own deadline); fails after `wait` + `replyTimeout`.
  Expected<std::string> request(const std::string &payload, std::chrono::milliseconds wait,
                                std::chrono::milliseconds replyTimeout);
  /// Allows for the trip and a busy server: the default wait and a second.
  std::chrono::milliseconds defaultReplyTimeout() const {
    return timeout_ + std::chrono::seconds(1);
  }

  std::mutex mutex_;
  int fd_ = -1;
  std::string host_;
  uint16_t port_ = 0;
  std::string token_;
  std::string endpoint_;
  std::chrono::milliseconds timeout_;
};

class Heartbeat;

/// What a rank holds of the job's store: every rank a client, rank 0 also the server, and the
/// rank's heartbeat once started (kept alive by whoever holds a copy, e.g. the communicators;
/// members are destroyed last to first, so the heartbeat says goodbye while the server runs).
struct JobStore {
  std::shared_ptr<StoreServer> server; // rank 0 only
  std::shared_ptr<TcpStore> client;
  std::shared_ptr<Heartbeat> heartbeat; // Heartbeat.h
};

/// Rank 0 starts the server on `bindAddress`:`port`, then every rank connects to
/// `masterAddr`:`port` with the token, within `timeout`. Loopback by default: only a job
/// that spans hosts listens on other interfaces ("0.0.0.0", runsOnOneHost).
Expected<JobStore> openJobStore(int rank, const std::string &masterAddr, uint16_t port,
                                const std::string &token, std::chrono::milliseconds timeout,
                                const std::string &bindAddress = "127.0.0.1");

/// Announces `rank` under `prefix` and waits up to `timeout` for all `size` ranks. If some
/// do not arrive, the error names them ("rendezvous 'p' of 4 ranks timed out after 1000 ms:
/// rank(s) 1, 3 did not arrive").
Error waitForRanks(TcpStore &store, std::string_view prefix, int rank, int size,
                   std::chrono::milliseconds timeout);

} // namespace mtc::rt

#endif // MTC_RUNTIME_COMM_RENDEZVOUS_H
