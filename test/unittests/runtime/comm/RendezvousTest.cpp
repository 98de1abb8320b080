//===- RendezvousTest.cpp - The TCP store, the token, the rendezvous timeout -===//

#include "CommTestUtil.h"

#include "runtime/comm/LaunchEnvironment.h"

#include <gloo/common/error.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace mtc::rt::test {
namespace {

std::vector<char> bytes(std::string_view s) { return {s.begin(), s.end()}; }

/// A loopback port bound but not listening: connecting to it is refused, and no other
/// process (a concurrent test's Gloo pair, say) can take it while this lives. SO_REUSEADDR
/// lets a StoreServer bind the same port meanwhile.
struct ReservedPort {
  int fd = -1;
  uint16_t port = 0;
  ReservedPort() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~ReservedPort() { ::close(fd); }
};

TEST(Rendezvous, JobTokenIs32HexDigits) {
  auto a = generateJobToken();
  auto b = generateJobToken();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 32u);
  EXPECT_EQ(a->find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(*a, *b);
}

TEST(Rendezvous, SetGetWait) {
  TestJob job;
  JobStore a = job.storeFor(0), b = job.storeFor(1);
  ASSERT_TRUE(a.client && b.client);
  ASSERT_TRUE(a.client->trySet("k", bytes("value")).ok());
  auto v = b.client->tryGet("k", 100ms);
  ASSERT_TRUE(v.ok()) << v.error().message();
  EXPECT_EQ(std::string(v->begin(), v->end()), "value");

  // Binary values and an empty one.
  std::vector<char> bin = {'\0', '\xff', '\n'};
  ASSERT_TRUE(a.client->trySet("bin", bin).ok());
  ASSERT_TRUE(a.client->trySet("empty", {}).ok());
  EXPECT_EQ(*b.client->tryGet("bin", 100ms), bin);
  EXPECT_TRUE(b.client->tryGet("empty", 100ms)->empty());

  // get waits for a key another client sets later.
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    (void)a.client->trySet("later", bytes("x"));
  });
  auto later = b.client->tryGet("later", 2000ms);
  setter.join();
  ASSERT_TRUE(later.ok()) << later.error().message();

  // Timeouts and missing keys.
  auto start = std::chrono::steady_clock::now();
  auto none = b.client->tryGet("never", 200ms);
  EXPECT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("'never' not set within 200 ms"), std::string::npos)
      << none.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  auto missing = b.client->waitMissing({"k", "m1", "bin", "m2"}, 100ms);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, (std::vector<std::string>{"m1", "m2"}));

  // The gloo::Store interface throws.
  EXPECT_THROW(b.client->wait({"m1"}, std::chrono::milliseconds(50)), gloo::IoException);
  EXPECT_NO_THROW(b.client->wait({"k"}, std::chrono::milliseconds(50)));
}

// The heartbeats rest on this: how long ago a key was last set, by the server's clock.
TEST(Rendezvous, AgesCountFromTheLastSetOfEachKey) {
  TestJob job;
  JobStore a = job.storeFor(1);
  ASSERT_TRUE(a.client);
  ASSERT_TRUE(a.client->trySet("beat", bytes("1")).ok());
  std::this_thread::sleep_for(150ms);
  auto ages = a.client->ages({"beat", "never"}, 1000ms);
  ASSERT_TRUE(ages.ok()) << ages.error().message();
  ASSERT_EQ(ages->size(), 2u);
  ASSERT_TRUE((*ages)[0].has_value());
  EXPECT_GE((*ages)[0]->count(), 150);
  EXPECT_FALSE((*ages)[1].has_value());
  // Setting the key again (any value, the same one too) starts its age over.
  ASSERT_TRUE(a.client->trySet("beat", bytes("1")).ok());
  ages = a.client->ages({"beat"}, 1000ms);
  ASSERT_TRUE(ages.ok()) << ages.error().message();
  EXPECT_LT((*ages)[0]->count(), 150);
}

TEST(Rendezvous, WrongTokenIsRefused) {
  TestJob job;
  auto bad = TcpStore::connect("127.0.0.1", job.port(), "ffffffffffffffffffffffffffffffff", 1000ms);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("refused this process"), std::string::npos)
      << bad.error().message();
  auto empty = TcpStore::connect("127.0.0.1", job.port(), "", 1000ms);
  EXPECT_FALSE(empty.ok());
  // The server still serves the right token.
  auto good = TcpStore::connect("127.0.0.1", job.port(), kToken, 1000ms);
  ASSERT_TRUE(good.ok()) << good.error().message();
  EXPECT_TRUE((*good)->trySet("a", bytes("b")).ok());
}

/// Connects to the store at `port` on loopback and writes `garbage`; keeps it open while
/// alive unless `close` says otherwise.
struct StrayClient {
  int fd = -1;
  StrayClient(uint16_t port, std::string_view garbage) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    if (!garbage.empty())
      EXPECT_EQ(::send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL),
                static_cast<ssize_t>(garbage.size()));
  }
  ~StrayClient() { ::close(fd); }
};

// Bytes from a process that is not a rank (a port scanner, a browser, a stale job) must not
// take the store down: the server refuses the connection and keeps serving the job.
TEST(Rendezvous, StrayClientsWritingGarbageAreRefusedWithoutHarm) {
  TestJob job;
  std::string frame(4 + 16, '\x01'); // a well-formed length (16), then no valid HELLO
  frame[0] = 16, frame[1] = frame[2] = frame[3] = 0;
  std::string random;
  for (int i = 0; i < 4096; ++i)
    random.push_back(static_cast<char>((i * 2654435761u) >> 13));
  {
    StrayClient http(job.port(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    StrayClient huge(job.port(), std::string("\xff\xff\xff\xff") + "abc");
    StrayClient badHello(job.port(), frame);
    StrayClient noise(job.port(), random);
    StrayClient partial(job.port(), std::string("\x08\x00", 2)); // half a header, then silence
    StrayClient silent(job.port(), "");
    // The ranks join and use the store while the strays are connected.
    JobStore a = job.storeFor(0), b = job.storeFor(1);
    ASSERT_TRUE(a.client && b.client);
    ASSERT_TRUE(a.client->trySet("k", bytes("v")).ok());
    auto v = b.client->tryGet("k", 1000ms);
    ASSERT_TRUE(v.ok()) << v.error().message();
    EXPECT_EQ(std::string(v->begin(), v->end()), "v");
  }
  // And after they are gone.
  auto late = TcpStore::connect("127.0.0.1", job.port(), kToken, 1000ms);
  ASSERT_TRUE(late.ok()) << late.error().message();
  auto v = (*late)->tryGet("k", 1000ms);
  ASSERT_TRUE(v.ok()) << v.error().message();
}

// A one-host job's store listens on loopback only: this host's other addresses refuse it.
TEST(Rendezvous, LoopbackStoreIsNotReachableFromOtherAddresses) {
  auto token = generateJobToken();
  ASSERT_TRUE(token.ok());
  auto server = StoreServer::start("127.0.0.1", 0, *token);
  ASSERT_TRUE(server.ok()) << server.error().message();
  Expected<std::string> external = localAddressToward("192.0.2.1"); // TEST-NET-1: no packet sent
  if (!external || external->starts_with("127."))
    GTEST_SKIP() << "this host has no non-loopback IPv4 address";
  auto outside = TcpStore::connect(*external, (*server)->port(), *token, 300ms);
  EXPECT_FALSE(outside.ok());
  auto inside = TcpStore::connect("127.0.0.1", (*server)->port(), *token, 1000ms);
  EXPECT_TRUE(inside.ok()) << inside.error().message();
}

TEST(Rendezvous, ServerNeedsAToken) {
  auto s = StoreServer::start("127.0.0.1", 0, "");
  EXPECT_FALSE(s.ok());
}

TEST(Rendezvous, UnreachableStoreFailsWithinTheTimeout) {
  ReservedPort reserved;
  auto start = std::chrono::steady_clock::now();
  auto c = TcpStore::connect("127.0.0.1", reserved.port, kToken, 300ms);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("is rank 0 running?"), std::string::npos)
      << c.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(Rendezvous, ClientRetriesUntilTheServerStarts) {
  // Rank 0 may start its server after the others try to connect.
  ReservedPort reserved;
  std::unique_ptr<StoreServer> late;
  std::thread starter([&] {
    std::this_thread::sleep_for(200ms);
    auto s = StoreServer::start("127.0.0.1", reserved.port, kToken);
    EXPECT_TRUE(s.ok()) << s.error().message();
    if (s)
      late = std::move(*s);
  });
  auto c = TcpStore::connect("127.0.0.1", reserved.port, kToken, 3000ms);
  starter.join();
  EXPECT_TRUE(c.ok()) << c.error().message();
}

TEST(Rendezvous, OpenJobStore) {
  auto token = generateJobToken();
  ASSERT_TRUE(token.ok());
  auto zero = openJobStore(0, "127.0.0.1", 0, *token, 1000ms, "127.0.0.1");
  ASSERT_TRUE(zero.ok()) << zero.error().message();
  ASSERT_TRUE(zero->server && zero->client);
  auto one = openJobStore(1, "127.0.0.1", zero->server->port(), *token, 1000ms);
  ASSERT_TRUE(one.ok()) << one.error().message();
  EXPECT_FALSE(one->server);
  EXPECT_FALSE(openJobStore(1, "127.0.0.1", 0, *token, 100ms).ok());
}

TEST(Rendezvous, TimeoutNamesTheMissingRanks) {
  TestJob job;
  std::vector<Error> errors(4);
  auto start = std::chrono::steady_clock::now();
  runRanks(4, [&](int rank) {
    if (rank == 1 || rank == 3)
      return; // never arrive
    JobStore store = job.storeFor(rank);
    GlooOptions o = job.options("late");
    o.rendezvousTimeout = 1000ms;
    auto c = GlooCommunicator::create(store, rank, 4, o);
    errors[rank] = c ? Error::success() : c.takeError();
  });
  auto elapsed = std::chrono::steady_clock::now() - start;
  for (int rank : {0, 2}) {
    ASSERT_FALSE(errors[rank].ok());
    EXPECT_NE(errors[rank].message().find("rank(s) 1, 3 did not arrive"), std::string::npos)
        << errors[rank].message();
  }
  EXPECT_GE(elapsed, 900ms);
  EXPECT_LT(elapsed, 4s);
}

TEST(Rendezvous, WaitForRanksSucceedsWhenAllArrive) {
  TestJob job;
  std::vector<Error> errors(3);
  runRanks(3, [&](int rank) {
    JobStore store = job.storeFor(rank);
    errors[rank] = waitForRanks(*store.client, "all", rank, 3, 2000ms);
  });
  for (auto &e : errors)
    EXPECT_TRUE(e.ok()) << e.message();
}

} // namespace
} // namespace mtc::rt::test
