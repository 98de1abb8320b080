//===- CommTestUtil.h - Ranks as threads over loopback ----------*- C++ -*-===//
//
// A job for tests: a store server on 127.0.0.1 and a free port, clients per rank, and
// `runRanks(n, fn)` that runs fn(rank) on n threads. Timeouts are short so nothing hangs.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_TEST_UNITTESTS_RUNTIME_COMM_COMMTESTUTIL_H
#define MTC_TEST_UNITTESTS_RUNTIME_COMM_COMMTESTUTIL_H

#include "runtime/comm/GlooCommunicator.h"
#include "runtime/comm/Rendezvous.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <thread>
#include <vector>

namespace mtc::rt::test {

using namespace std::chrono_literals;

inline constexpr const char *kToken = "0123456789abcdef0123456789abcdef";

struct TestJob {
  std::shared_ptr<StoreServer> server;

  TestJob() {
    // The process runs as mtrun runs its ranks: with SIGPIPE ignored, so a write to a peer
    // that died is an error the communicator reports, not a signal that ends the test.
    std::signal(SIGPIPE, SIG_IGN);
    auto s = StoreServer::start("127.0.0.1", 0, kToken);
    EXPECT_TRUE(s.ok()) << s.error().message();
    if (s)
      server = std::move(*s);
  }
  uint16_t port() const { return server ? server->port() : 1; }

  /// The store as rank `rank` holds it (rank 0 also keeps the server).
  JobStore storeFor(int rank, std::chrono::milliseconds timeout = 2000ms) {
    JobStore js;
    auto c = TcpStore::connect("127.0.0.1", port(), kToken, timeout);
    EXPECT_TRUE(c.ok()) << c.error().message();
    if (c)
      js.client = std::move(*c);
    if (rank == 0)
      js.server = server;
    return js;
  }

  GlooOptions options(std::string prefix, std::chrono::milliseconds timeout = 2000ms) {
    GlooOptions o;
    o.hostname = "127.0.0.1";
    o.timeout = timeout;
    o.rendezvousTimeout = 2000ms;
    o.prefix = std::move(prefix);
    return o;
  }

  std::unique_ptr<GlooCommunicator> connect(int rank, int size, const std::string &prefix,
                                            std::chrono::milliseconds timeout = 2000ms) {
    auto c = GlooCommunicator::create(storeFor(rank), rank, size, options(prefix, timeout));
    EXPECT_TRUE(c.ok()) << c.error().message();
    return c ? std::move(*c) : nullptr;
  }
};

/// Runs fn(rank) for rank in [0, n) on n threads and joins them.
inline void runRanks(int n, const std::function<void(int)> &fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&fn, r] { fn(r); });
  for (auto &t : threads)
    t.join();
}

} // namespace mtc::rt::test

#endif // MTC_TEST_UNITTESTS_RUNTIME_COMM_COMMTESTUTIL_H
