//===- HeartbeatTest.cpp - Heartbeats in the store and the names of silent ranks -===//

#include "CommTestUtil.h"

#include "runtime/comm/Heartbeat.h"

#include <unistd.h>

#include <gtest/gtest.h>

namespace mtc::rt::test {
namespace {

using Clock = std::chrono::steady_clock;

/// Short beats for tests, with a threshold that a loaded machine's scheduling does not reach.
HeartbeatOptions fastBeats() {
  HeartbeatOptions o;
  o.interval = 50ms;
  o.missedBeats = 6; // 300 ms
  return o;
}

bool contains(const std::string &text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

/// What a rank that beat once and then stopped (SIGSTOP) leaves in the store.
void beatOnceAs(TcpStore &store, const HeartbeatOptions &o, int rank, std::string_view identity) {
  ASSERT_TRUE(store.trySet(o.key(rank), {identity.begin(), identity.end()}).ok());
}

TEST(Heartbeat, BeatingRanksAreAliveAndAnEndedOneSaysSo) {
  TestJob job;
  const HeartbeatOptions o = fastBeats();
  JobStore observer = job.storeFor(1);
  auto beating = Heartbeat::start(job.storeFor(1).client, 1, 3, o);
  ASSERT_TRUE(beating.ok()) << beating.error().message();
  // Several thresholds long: a rank that keeps beating never counts as silent.
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(o.silenceThreshold());
    auto all = readHeartbeats(*observer.client, 3, o, 1000ms);
    ASSERT_TRUE(all.ok()) << all.error().message();
    ASSERT_EQ(all->size(), 3u);
    const RankHeartbeat &one = (*all)[1];
    EXPECT_FALSE(one.silent(o)) << one.describe();
    EXPECT_FALSE(one.ended);
    // Ranks 0 and 2 never beat.
    EXPECT_TRUE((*all)[2].silent(o));
    EXPECT_EQ((*all)[2].describe(), "rank 2 has never been heard from");
  }
  beating->reset(); // the rank's process ends
  auto all = readHeartbeats(*observer.client, 3, o, 1000ms);
  ASSERT_TRUE(all.ok()) << all.error().message();
  const RankHeartbeat &one = (*all)[1];
  EXPECT_TRUE(one.ended);
  EXPECT_TRUE(one.silent(o));
  EXPECT_TRUE(contains(one.describe(), concat("rank 1 (pid ", ::getpid(), " on host ")))
      << one.describe();
  EXPECT_TRUE(contains(one.describe(), ") has ended")) << one.describe();
}

// A rank that stopped beating is named by its peers, with who it is and for how long it has
// been silent; the explanation waits until the silence is long enough to count (the failure
// that asks may come first), and it leaves out the ranks that beat.
TEST(Heartbeat, PeersNameTheRankThatStoppedBeating) {
  TestJob job;
  const HeartbeatOptions o = fastBeats();
  JobStore rank0 = job.storeFor(0), rank1 = job.storeFor(1), rank2 = job.storeFor(2);
  auto h0 = Heartbeat::start(rank0.client, 0, 3, o);
  auto h1 = Heartbeat::start(rank1.client, 1, 3, o);
  ASSERT_TRUE(h0.ok() && h1.ok());
  beatOnceAs(*rank2.client, o, 2, "4242 node7");
  const Clock::time_point stopped = Clock::now();
  std::string said = (*h0)->explainSilentPeers();
  EXPECT_EQ(said.rfind("rank 2 (pid 4242 on host node7) has not been heard from for ", 0), 0u)
      << said;
  EXPECT_TRUE(contains(said, " s: stopped or hung")) << said;
  EXPECT_FALSE(contains(said, "rank 1")) << said;
  EXPECT_GE(Clock::now() - stopped, o.silenceThreshold());
  // Rank 1 says the same; it does not name itself or rank 0.
  std::string saidBy1 = (*h1)->explainSilentPeers();
  EXPECT_EQ(saidBy1.rfind("rank 2 (pid 4242 on host node7)", 0), 0u) << saidBy1;
  EXPECT_FALSE(contains(saidBy1, "rank 0")) << saidBy1;
}

TEST(Heartbeat, WhenEveryRankBeatsTheExplanationSaysSo) {
  TestJob job;
  const HeartbeatOptions o = fastBeats();
  auto h0 = Heartbeat::start(job.storeFor(0).client, 0, 2, o);
  auto h1 = Heartbeat::start(job.storeFor(1).client, 1, 2, o);
  ASSERT_TRUE(h0.ok() && h1.ok());
  const Clock::time_point asked = Clock::now();
  std::string said = (*h0)->explainSilentPeers();
  EXPECT_EQ(said, "every rank has beaten within the last 0.3 s (alive: a rank may be hung in "
                  "computation or in another operation)");
  // It waited one threshold for a rank to fall silent, not longer.
  EXPECT_GE(Clock::now() - asked, o.silenceThreshold());
  EXPECT_LT(Clock::now() - asked, 5s);
}

// The store runs in rank 0's process: when it is gone, the explanation says so, and ending a
// heartbeat whose store is gone neither hangs nor fails.
TEST(Heartbeat, AStoreThatIsGoneIsNamedAndEndingStaysQuick) {
  TestJob job;
  const HeartbeatOptions o = fastBeats();
  auto h1 = Heartbeat::start(job.storeFor(1).client, 1, 2, o);
  ASSERT_TRUE(h1.ok()) << h1.error().message();
  job.server.reset();
  std::string said = (*h1)->explainSilentPeers();
  EXPECT_EQ(said.rfind("the rendezvous store, which rank 0 runs, does not answer (", 0), 0u)
      << said;
  EXPECT_TRUE(contains(said, "): rank 0 may be stopped, hung or gone")) << said;
  const Clock::time_point ending = Clock::now();
  h1->reset();
  EXPECT_LT(Clock::now() - ending, 3s);
}

// The heartbeat never fails a healthy job: with the store gone (rank 0's process would run
// it), beats fail quietly while the ranks go on communicating, and they end quickly.
TEST(Heartbeat, AGoneStoreDoesNotDisturbTheRanks) {
  TestJob job;
  const HeartbeatOptions o = fastBeats();
  std::vector<std::unique_ptr<GlooCommunicator>> comms(2);
  runRanks(2, [&](int rank) {
    JobStore store = job.storeFor(1); // neither rank holds the server
    auto h = Heartbeat::start(store.client, rank, 2, o);
    ASSERT_TRUE(h.ok()) << h.error().message();
    store.heartbeat = std::move(*h);
    auto comm = GlooCommunicator::create(store, rank, 2, job.options("gone"));
    ASSERT_TRUE(comm.ok()) << comm.error().message();
    comms[static_cast<size_t>(rank)] = std::move(*comm);
  });
  ASSERT_TRUE(comms[0] && comms[1]);
  job.server.reset();
  // Both ranks run the same number of rounds (a deadline per rank would leave one rank
  // waiting in a collective its peer never enters); each round sleeps, so together they last
  // at least four silence thresholds.
  const Clock::duration pause = 10ms;
  const int rounds = static_cast<int>(4 * o.silenceThreshold() / pause) + 1;
  runRanks(2, [&](int rank) {
    const Clock::time_point start = Clock::now();
    for (int round = 0; round < rounds; ++round) {
      float x = static_cast<float>(rank + 1);
      Error e = comms[static_cast<size_t>(rank)]->allReduce(&x, 1, MTC_F32, MTC_SUM);
      ASSERT_TRUE(e.ok()) << e.message();
      ASSERT_EQ(x, 3.0f);
      std::this_thread::sleep_for(pause);
    }
    EXPECT_GE(Clock::now() - start, 4 * o.silenceThreshold());
  });
  const Clock::time_point ending = Clock::now();
  comms.clear();
  EXPECT_LT(Clock::now() - ending, 3s);
}

// A heartbeat beats on a connection of its own: when the store's server is gone (or refuses
// one more connection), starting it is an error that says so; mtrun then warns and runs on
// without one.
TEST(Heartbeat, StartingWithoutAStoreServerIsAnError) {
  TestJob job;
  JobStore store = job.storeFor(1);
  job.server.reset();
  const Clock::time_point start = Clock::now();
  auto h = Heartbeat::start(store.client, 1, 2, fastBeats());
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().message().rfind("heartbeat: ", 0), 0u) << h.error().message();
  EXPECT_GT(h.error().message().size(), std::string("heartbeat: ").size());
  EXPECT_LT(Clock::now() - start, 3s);
}

TEST(Heartbeat, BadArgumentsAreErrors) {
  TestJob job;
  JobStore s = job.storeFor(1);
  EXPECT_FALSE(Heartbeat::start(nullptr, 0, 1).ok());
  auto outside = Heartbeat::start(s.client, 2, 2);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.error().message(), "heartbeat: rank 2 is not in [0, 2)");
  HeartbeatOptions never;
  never.interval = 0ms;
  EXPECT_FALSE(Heartbeat::start(s.client, 0, 1, never).ok());
}

// The point of it all: a collective that times out names the silent rank, on every rank that
// waited, although in the ring rank 0 waits on rank 2 and rank 1 on rank 0.
TEST(Heartbeat, AFailedCollectiveNamesTheSilentRank) {
  TestJob job;
  const HeartbeatOptions o = fastBeats();
  std::vector<std::string> errors(3);
  runRanks(3, [&](int rank) {
    JobStore store = job.storeFor(rank);
    if (rank != 2) {
      auto h = Heartbeat::start(store.client, rank, 3, o);
      ASSERT_TRUE(h.ok()) << h.error().message();
      store.heartbeat = std::move(*h);
    }
    auto comm = GlooCommunicator::create(store, rank, 3, job.options("silent", 500ms));
    ASSERT_TRUE(comm.ok()) << comm.error().message();
    if (rank == 2) {
      // Stopped: it beat once, then does nothing until its peers have failed.
      beatOnceAs(*store.client, o, 2, "777 stopped-host");
      std::this_thread::sleep_for(2500ms);
      return;
    }
    float x = 1;
    Error e = (*comm)->allReduce(&x, 1, MTC_F32, MTC_SUM);
    errors[static_cast<size_t>(rank)] = e.message();
  });
  for (int rank : {0, 1}) {
    const std::string &m = errors[static_cast<size_t>(rank)];
    EXPECT_TRUE(contains(m, concat("gloo allReduce (rank ", rank, " of 3) failed: "))) << m;
    EXPECT_TRUE(contains(m, "; rank 2 (pid 777 on host stopped-host) has not been heard from for "))
        << m;
  }
}

} // namespace
} // namespace mtc::rt::test
