//===- GlooCommunicatorTest.cpp - Gloo collectives against serial references -===//
//
// 2 and 4 ranks as threads over loopback. Results are compared bit for bit across ranks, with
// a serial reference (exactly where the reduction order is known or the values are exact),
// and across two runs.
//
//===----------------------------------------------------------------------===//

#include "CommTestUtil.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>

#include <sched.h>

namespace mtc::rt::test {
namespace {

/// Deterministic values of varied sign and magnitude, so that the reduction order matters.
float valueOf(int rank, size_t i) {
  uint64_t x = (uint64_t(rank) + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  double u = double(x >> 11) * 0x1.0p-53 * 2 - 1;
  return static_cast<float>(u * std::pow(10.0, double(int(i % 7) - 3)));
}

std::vector<float> inputOf(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = valueOf(rank, i);
  return v;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class GlooCollectives : public ::testing::TestWithParam<int> {
protected:
  int n() const { return GetParam(); }
  TestJob job;
};

INSTANTIATE_TEST_SUITE_P(Ranks, GlooCollectives, ::testing::Values(2, 4),
                         [](const auto &info) { return std::to_string(info.param) + "ranks"; });

TEST_P(GlooCollectives, AllReduceSumFloat) {
  const int n = this->n();
  for (size_t count : {size_t(0), size_t(1), size_t(3), size_t(1000), size_t(300001)}) {
    std::vector<std::vector<float>> first(n), second(n);
    std::vector<uint64_t> counted(n);
    runRanks(n, [&](int rank) {
      auto comm = job.connect(rank, n, "ar" + std::to_string(count));
      ASSERT_TRUE(comm);
      first[rank] = inputOf(rank, count);
      ASSERT_TRUE(comm->allReduce(first[rank].data(), count, MTC_F32, MTC_SUM).ok());
      second[rank] = inputOf(rank, count);
      ASSERT_TRUE(comm->allReduce(second[rank].data(), count, MTC_F32, MTC_SUM).ok());
      counted[rank] = comm->counters().bytesSentBy(CollectiveKind::AllReduce);
      EXPECT_EQ(comm->counters().callsOf(CollectiveKind::AllReduce), 2u);
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(sameBits(first[r], first[0])) << "rank " << r << " count " << count;
      EXPECT_TRUE(sameBits(second[r], first[0])) << "run-to-run, rank " << r;
      EXPECT_EQ(counted[r], 2 * GlooCommunicator::ringAllReduceBytesSent(
                                    r, n, count * sizeof(float), sizeof(float)));
    }
    for (size_t i = 0; i < count; ++i) {
      double sum = 0, mag = 0;
      for (int r = 0; r < n; ++r)
        sum += valueOf(r, i), mag += std::fabs(valueOf(r, i));
      ASSERT_NEAR(first[0][i], sum, 1e-6 * mag + 1e-30) << "element " << i;
    }
  }
  // Two ranks swap buffers of up to 1 MiB whole (one message each way, the same bytes as the
  // ring's); larger buffers and larger groups run the ring.
  EXPECT_TRUE(GlooCommunicator::usesPairExchange(2, 8));
  EXPECT_TRUE(GlooCommunicator::usesPairExchange(2, GlooCommunicator::kPairExchangeMaxBytes));
  EXPECT_FALSE(GlooCommunicator::usesPairExchange(2, GlooCommunicator::kPairExchangeMaxBytes + 4));
  EXPECT_FALSE(GlooCommunicator::usesPairExchange(4, 8));
  // The ring sends 2 (n - 1) / n of the buffer when it divides evenly.
  EXPECT_EQ(GlooCommunicator::ringAllReduceBytesSent(0, 2, 4000, 4), 4000u);
  EXPECT_EQ(GlooCommunicator::ringAllReduceBytesSent(3, 4, 4000, 4), 6000u);
}

TEST_P(GlooCollectives, AllReduceSumExactValuesAndDouble) {
  const int n = this->n();
  const size_t count = 257;
  std::vector<std::vector<float>> f(n);
  std::vector<std::vector<double>> d(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "exact");
    ASSERT_TRUE(comm);
    f[rank].resize(count);
    d[rank].resize(count);
    for (size_t i = 0; i < count; ++i) {
      f[rank][i] = float(int(i) * (rank + 1) - 100);
      d[rank][i] = 1.0 / double(i + 1 + rank);
    }
    ASSERT_TRUE(comm->allReduce(f[rank].data(), count, MTC_F32, MTC_SUM).ok());
    ASSERT_TRUE(comm->allReduce(d[rank].data(), count, MTC_F64, MTC_SUM).ok());
  });
  for (size_t i = 0; i < count; ++i) {
    float exact = 0;
    double approx = 0;
    for (int r = 0; r < n; ++r) {
      exact += float(int(i) * (r + 1) - 100);
      approx += 1.0 / double(i + 1 + r);
    }
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(f[r][i], exact);
      EXPECT_EQ(std::memcmp(&d[r][i], &d[0][i], sizeof(double)), 0);
      EXPECT_NEAR(d[r][i], approx, 1e-15);
    }
  }
}

TEST_P(GlooCollectives, AllGather) {
  const int n = this->n();
  const size_t per = 37;
  std::vector<std::vector<float>> out(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "ag");
    ASSERT_TRUE(comm);
    std::vector<float> in = inputOf(rank, per);
    out[rank].assign(per * n, -1);
    ASSERT_TRUE(comm->allGather(in.data(), out[rank].data(), per, MTC_F32).ok());
    EXPECT_EQ(comm->counters().bytesSentBy(CollectiveKind::AllGather),
              uint64_t(n - 1) * per * sizeof(float));
  });
  std::vector<float> expected;
  for (int r = 0; r < n; ++r) {
    auto v = inputOf(r, per);
    expected.insert(expected.end(), v.begin(), v.end());
  }
  for (int r = 0; r < n; ++r)
    EXPECT_TRUE(sameBits(out[r], expected)) << "rank " << r;
}

TEST_P(GlooCollectives, ReduceScatterSumInRingOrder) {
  const int n = this->n();
  for (size_t per : {size_t(1), size_t(1000)}) {
    std::vector<std::vector<float>> out(n), again(n);
    runRanks(n, [&](int rank) {
      auto comm = job.connect(rank, n, "rs" + std::to_string(per));
      ASSERT_TRUE(comm);
      std::vector<float> in = inputOf(rank, per * n);
      out[rank].assign(per, -1);
      again[rank].assign(per, -1);
      ASSERT_TRUE(comm->reduceScatter(in.data(), out[rank].data(), per, MTC_F32, MTC_SUM).ok());
      ASSERT_TRUE(comm->reduceScatter(in.data(), again[rank].data(), per, MTC_F32, MTC_SUM).ok());
      EXPECT_EQ(comm->counters().bytesSentBy(CollectiveKind::ReduceScatter),
                2 * uint64_t(n - 1) * per * sizeof(float));
    });
    // Block c is summed along the ring starting after c: ((x[c+1] + x[c+2]) + ...) + x[c].
    for (int c = 0; c < n; ++c) {
      std::vector<float> expected(per);
      for (size_t i = 0; i < per; ++i) {
        float acc = valueOf((c + 1) % n, c * per + i);
        for (int k = 2; k <= n; ++k)
          acc = acc + valueOf((c + k) % n, c * per + i);
        expected[i] = acc;
      }
      EXPECT_TRUE(sameBits(out[c], expected)) << "rank " << c << " per " << per;
      EXPECT_TRUE(sameBits(again[c], expected)) << "run-to-run, rank " << c;
    }
  }
}

TEST_P(GlooCollectives, Broadcast) {
  const int n = this->n();
  const std::string message = "fifteen bytes, ";
  std::vector<std::string> got(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "bc");
    ASSERT_TRUE(comm);
    for (int root = 0; root < n; ++root) {
      std::string buf = rank == root ? message + char('0' + root) : std::string(16, '?');
      ASSERT_TRUE(comm->broadcast(buf.data(), 4, MTC_I32, root).ok()); // 16 bytes
      got[rank] += buf;
    }
    Error bad = comm->broadcast(got[rank].data(), 1, MTC_I32, n);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.message().find(concat("gloo broadcast (rank ", rank, " of ", n, "): root ", n,
                                        " is not in [0, ", n, ")")),
              std::string::npos)
        << bad.message();
  });
  std::string expected;
  for (int root = 0; root < n; ++root)
    expected += message + char('0' + root);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(got[r], expected);
}

TEST_P(GlooCollectives, AllToAll) {
  const int n = this->n();
  const size_t per = 5;
  std::vector<std::vector<float>> out(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "a2a");
    ASSERT_TRUE(comm);
    std::vector<float> in(per * n);
    for (int dst = 0; dst < n; ++dst)
      for (size_t i = 0; i < per; ++i)
        in[dst * per + i] = float(rank * 1000 + dst * 10 + int(i));
    out[rank].assign(per * n, -1);
    ASSERT_TRUE(comm->allToAll(in.data(), out[rank].data(), per, MTC_F32).ok());
    EXPECT_EQ(comm->counters().bytesSentBy(CollectiveKind::AllToAll),
              uint64_t(n - 1) * per * sizeof(float));
  });
  for (int r = 0; r < n; ++r)
    for (int src = 0; src < n; ++src)
      for (size_t i = 0; i < per; ++i)
        EXPECT_EQ(out[r][src * per + i], float(src * 1000 + r * 10 + int(i)));
}

TEST_P(GlooCollectives, BarrierWaitsForTheSlowest) {
  const int n = this->n();
  std::vector<std::chrono::steady_clock::duration> waited(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "barrier");
    ASSERT_TRUE(comm);
    ASSERT_TRUE(comm->barrier().ok()); // everyone connected
    auto start = std::chrono::steady_clock::now();
    if (rank == n - 1)
      std::this_thread::sleep_for(200ms);
    ASSERT_TRUE(comm->barrier().ok());
    waited[rank] = std::chrono::steady_clock::now() - start;
  });
  for (int r = 0; r < n; ++r)
    EXPECT_GE(waited[r], 150ms) << "rank " << r;
}

TEST_P(GlooCollectives, SendRecvAndShift) {
  const int n = this->n();
  std::vector<std::vector<int>> shifted(n);
  std::vector<std::vector<int32_t>> received(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "p2p");
    ASSERT_TRUE(comm);
    // 0 -> last, two messages in order.
    if (rank == 0) {
      int32_t a[2] = {11, 12}, b[1] = {13};
      ASSERT_TRUE(comm->send(a, 2, MTC_I32, n - 1).ok());
      ASSERT_TRUE(comm->send(b, 1, MTC_I32, n - 1).ok());
      EXPECT_EQ(comm->counters().bytesSentBy(CollectiveKind::SendRecv), 12u);
    } else if (rank == n - 1) {
      received[rank].assign(3, -1);
      ASSERT_TRUE(comm->recv(received[rank].data(), 2, MTC_I32, 0).ok());
      ASSERT_TRUE(comm->recv(received[rank].data() + 2, 1, MTC_I32, 0).ok());
    }
    int32_t x = 1;
    EXPECT_FALSE(comm->send(&x, 1, MTC_I32, rank).ok()); // to itself
    EXPECT_FALSE(comm->recv(&x, 1, MTC_I32, n).ok());
    // Everyone sends to the right and receives from the left.
    std::vector<int> mine = {rank, rank * rank, -rank};
    shifted[rank].assign(3, -7);
    ASSERT_TRUE(comm->sendRecv(mine.data(), 3, (rank + 1) % n, shifted[rank].data(), 3,
                               (rank + n - 1) % n, MTC_I32)
                    .ok());
  });
  EXPECT_EQ(received[n - 1], (std::vector<int32_t>{11, 12, 13}));
  for (int r = 0; r < n; ++r) {
    int left = (r + n - 1) % n;
    EXPECT_EQ(shifted[r], (std::vector<int>{left, left * left, -left}));
  }
}

TEST(GlooSubgroups, SplitAndSubgroup) {
  TestJob job;
  const int n = 4;
  struct Seen {
    int evenOddRank = -1, evenOddSize = -1;
    float evenOddSum = 0;
    bool inSub = false;
    int subRank = -1;
    std::string subBroadcast;
    float worldSum = 0;
    int singleSize = -1;
  };
  std::vector<Seen> seen(n);
  runRanks(n, [&](int rank) {
    auto world = job.connect(rank, n, "sub");
    ASSERT_TRUE(world);
    Seen &s = seen[rank];
    // Even and odd ranks, in reverse order of rank (key = -rank).
    auto evenOdd = world->split(rank % 2, -rank);
    ASSERT_TRUE(evenOdd.ok()) << evenOdd.error().message();
    ASSERT_TRUE(*evenOdd);
    s.evenOddRank = (*evenOdd)->rank();
    s.evenOddSize = (*evenOdd)->size();
    float v = float(rank + 1);
    ASSERT_TRUE((*evenOdd)->allReduce(&v, 1, MTC_F32, MTC_SUM).ok());
    s.evenOddSum = v;
    EXPECT_EQ((*evenOdd)->counters().callsOf(CollectiveKind::AllReduce), 1u);

    // Ranks 3 and 1, in that order; 0 and 2 get nothing.
    auto sub = world->subgroup({3, 1});
    ASSERT_TRUE(sub.ok()) << sub.error().message();
    s.inSub = bool(*sub);
    if (*sub) {
      s.subRank = (*sub)->rank();
      std::string buf = rank == 3 ? "from parent 3..." : std::string(16, '?');
      ASSERT_TRUE((*sub)->broadcast(buf.data(), 2, MTC_F64, 0).ok()); // 16 bytes
      s.subBroadcast = buf;
      // A group of one, split from a sub-group.
      auto single = (*sub)->split((*sub)->rank(), 0);
      ASSERT_TRUE(single.ok() && *single) << single.error().message();
      s.singleSize = (*single)->size();
      float x = 5;
      ASSERT_TRUE((*single)->allReduce(&x, 1, MTC_F32, MTC_SUM).ok());
      EXPECT_EQ(x, 5);
      ASSERT_TRUE((*single)->barrier().ok());
    }
    // The parent still works, and is not charged for the splits.
    float w = 1;
    ASSERT_TRUE(world->allReduce(&w, 1, MTC_F32, MTC_SUM).ok());
    s.worldSum = w;
    EXPECT_EQ(world->counters().callsOf(CollectiveKind::AllGather), 0u);
    // Bad lists fail the same way on every rank.
    EXPECT_FALSE(world->subgroup({0, 0}).ok());
    EXPECT_FALSE(world->subgroup({4}).ok());
    EXPECT_FALSE(world->subgroup({}).ok());
  });
  // Even: ranks 2 (new 0) and 0 (new 1); odd: 3 (new 0) and 1 (new 1).
  EXPECT_EQ(seen[0].evenOddRank, 1);
  EXPECT_EQ(seen[2].evenOddRank, 0);
  EXPECT_EQ(seen[1].evenOddRank, 1);
  EXPECT_EQ(seen[3].evenOddRank, 0);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(seen[r].evenOddSize, 2);
    EXPECT_EQ(seen[r].evenOddSum, r % 2 == 0 ? 4.0f : 6.0f);
    EXPECT_EQ(seen[r].worldSum, 4.0f);
    EXPECT_EQ(seen[r].inSub, r == 1 || r == 3);
  }
  EXPECT_EQ(seen[3].subRank, 0);
  EXPECT_EQ(seen[1].subRank, 1);
  EXPECT_EQ(seen[1].subBroadcast, "from parent 3...");
  EXPECT_EQ(seen[1].singleSize, 1);
}

class GlooSilentPeer : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Ranks, GlooSilentPeer, ::testing::Values(2, 4),
                         [](const auto &info) { return std::to_string(info.param) + "ranks"; });

TEST_P(GlooSilentPeer, OthersFailWithinTheTimeout) {
  // The last rank stays alive but stops participating.
  TestJob job;
  const int n = GetParam();
  std::promise<void> othersDone;
  std::shared_future<void> done = othersDone.get_future().share();
  std::atomic<int> finished{0};
  std::vector<Error> errors(n), after(n);
  std::vector<std::chrono::steady_clock::duration> elapsed(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "silent", 500ms);
    ASSERT_TRUE(comm);
    ASSERT_TRUE(comm->barrier().ok());
    if (rank == n - 1) {
      done.wait();
      return;
    }
    std::vector<float> v(100, 1.0f);
    auto start = std::chrono::steady_clock::now();
    errors[rank] = comm->allReduce(v.data(), v.size(), MTC_F32, MTC_SUM);
    elapsed[rank] = std::chrono::steady_clock::now() - start;
    after[rank] = comm->barrier();
    EXPECT_FALSE(comm->failure().empty());
    if (++finished == n - 1)
      othersDone.set_value();
  });
  for (int r = 0; r + 1 < n; ++r) {
    ASSERT_FALSE(errors[r].ok()) << "rank " << r;
    EXPECT_NE(errors[r].message().find(concat("gloo allReduce (rank ", r, " of ", n)),
              std::string::npos)
        << errors[r].message();
    EXPECT_LT(elapsed[r], 3s) << "rank " << r;
    ASSERT_FALSE(after[r].ok());
    EXPECT_NE(after[r].message().find("unusable after an earlier failure"), std::string::npos)
        << after[r].message();
  }
  // The silent rank's neighbour waited the whole timeout.
  EXPECT_GE(elapsed[n - 2], 400ms);
}

TEST(GlooFailures, DeadPeerMakesTheOthersFail) {
  TestJob job;
  const int n = 4;
  std::vector<Error> errors(n);
  std::vector<std::chrono::steady_clock::duration> elapsed(n);
  std::promise<void> allDone;
  std::shared_future<void> done = allDone.get_future().share();
  std::atomic<int> finished{0};
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "dead", 500ms);
    ASSERT_TRUE(comm);
    ASSERT_TRUE(comm->barrier().ok());
    if (rank == 2) {
      comm.reset(); // dies: its connections close
      done.wait();
      return;
    }
    std::vector<float> in(8 * n, 1.0f), out(8);
    auto start = std::chrono::steady_clock::now();
    errors[rank] = comm->reduceScatter(in.data(), out.data(), 8, MTC_F32, MTC_SUM);
    elapsed[rank] = std::chrono::steady_clock::now() - start;
    if (++finished == n - 1)
      allDone.set_value();
  });
  for (int r = 0; r < n; ++r) {
    if (r == 2)
      continue;
    ASSERT_FALSE(errors[r].ok()) << "rank " << r;
    EXPECT_NE(errors[r].message().find("gloo reduceScatter (rank "), std::string::npos)
        << errors[r].message();
    EXPECT_LT(elapsed[r], 3s) << "rank " << r;
  }
}

// A rank that arrives but never connects (its process died or stopped right after the
// rendezvous) and so never posts its verdict on the attempt: the others name it instead of
// waiting for it forever.
TEST(GlooFailures, ARankThatArrivesButNeverConnectsIsNamed) {
  TestJob job;
  JobStore ghost = job.storeFor(1);
  ASSERT_TRUE(ghost.client->trySet("ghost/arrived/1", {'2'}).ok()); // as waitForRanks does
  GlooOptions o = job.options("ghost", 200ms);
  o.rendezvousTimeout = 200ms; // the verdicts are awaited 200 + 2 x 200 ms
  auto start = std::chrono::steady_clock::now();
  auto comm = GlooCommunicator::create(job.storeFor(0), 0, 2, o);
  ASSERT_FALSE(comm.ok());
  const std::string &m = comm.error().message();
  EXPECT_EQ(m.rfind("gloo: connecting rank 0 of 2 (prefix 'ghost'): ", 0), 0u) << m;
  const std::string tail = "; rank(s) 1 did not finish connecting within 600 ms";
  EXPECT_TRUE(m.size() > tail.size() && m.ends_with(tail)) << m;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

// Every attempt failing on some rank (here: a rank 1 that posts a failed verdict for each
// attempt and never connects, so rank 0 times out waiting for its address): rank 0 gives up
// after three attempts and says why each rank's last attempt failed.
TEST(GlooFailures, ThreeFailedAttemptsEndTheConnecting) {
  TestJob job;
  JobStore peer = job.storeFor(1);
  ASSERT_TRUE(peer.client->trySet("retry/arrived/1", {'2'}).ok());
  const std::string why = "refused by the test";
  for (const char *attempt : {"retry", "retry/attempt2", "retry/attempt3"}) {
    ASSERT_TRUE(peer.client->trySet(concat(attempt, "/failed/1"), {why.begin(), why.end()}).ok());
    ASSERT_TRUE(peer.client->trySet(concat(attempt, "/done/1"), {}).ok());
  }
  GlooOptions o = job.options("retry", 200ms);
  o.rendezvousTimeout = 200ms;
  auto start = std::chrono::steady_clock::now();
  auto comm = GlooCommunicator::create(job.storeFor(0), 0, 2, o);
  ASSERT_FALSE(comm.ok());
  const std::string &m = comm.error().message();
  EXPECT_EQ(m.rfind("gloo: connecting rank 0 of 2 (prefix 'retry'): 3 attempts to connect "
                    "failed (a stray client on a port? a rank that died?); the last: rank 0: ",
                    0),
            0u)
      << m;
  EXPECT_TRUE(m.ends_with("; rank 1: refused by the test")) << m;
  // The third attempt ran under its own prefix, and there was no fourth.
  auto attempts = peer.client->ages({"retry/attempt3/done/0", "retry/attempt4/done/0"}, 1000ms);
  ASSERT_TRUE(attempts.ok()) << attempts.error().message();
  EXPECT_TRUE((*attempts)[0].has_value());
  EXPECT_FALSE((*attempts)[1].has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(GlooFailures, BadArguments) {
  TestJob job;
  EXPECT_FALSE(GlooCommunicator::create(job.storeFor(0), 2, 2, job.options("bad")).ok());
  EXPECT_FALSE(GlooCommunicator::create(JobStore{}, 0, 1, job.options("bad")).ok());
  // A world of one works without peers.
  auto one = GlooCommunicator::create(job.storeFor(0), 0, 1, job.options("one"));
  ASSERT_TRUE(one.ok()) << one.error().message();
  float x[3] = {1, 2, 3}, y[3];
  EXPECT_TRUE((*one)->allReduce(x, 3, MTC_F32, MTC_MAX).ok());
  EXPECT_TRUE((*one)->allGather(x, y, 3, MTC_F32).ok());
  EXPECT_EQ(y[2], 3);
  EXPECT_TRUE((*one)->reduceScatter(x, y, 3, MTC_F32, MTC_MIN).ok());
  EXPECT_TRUE((*one)->allToAll(x, y, 3, MTC_F32).ok());
  EXPECT_EQ(y[1], 2);
  size_t counts[1] = {2};
  EXPECT_TRUE((*one)->allToAllV(x, counts, y, counts, MTC_F32).ok());
  EXPECT_TRUE((*one)->broadcast(x, 3, MTC_F32, 0).ok());
  EXPECT_TRUE((*one)->barrier().ok());
  EXPECT_EQ((*one)->counters().totalBytesSent(), 0u);
}

/// The scheduling policy of each thread of this process, by thread id.
std::map<int, int> threadPolicies() {
  std::map<int, int> policies;
  for (const auto &task : std::filesystem::directory_iterator("/proc/self/task")) {
    int tid = std::stoi(task.path().filename().string());
    policies[tid] = sched_getscheduler(tid);
  }
  return policies;
}

// Gloo's event-loop thread runs under SCHED_BATCH, so that a message waking it does not
// preempt the rank's thread holding the pair's lock (docs/runtime.md, "Collectives on CPU
// ranks"); the creating thread and the engine's threads keep SCHED_OTHER.
TEST(GlooScheduling, TheEventLoopThreadRunsUnderBatchAndNothingElseDoes) {
  if (sched_getscheduler(0) != SCHED_OTHER)
    GTEST_SKIP() << "the test runs under a policy other than SCHED_OTHER";
  TestJob job;
  JobStore store = job.storeFor(0);
  std::map<int, int> before = threadPolicies();
  auto one = GlooCommunicator::create(std::move(store), 0, 1, job.options("batch"));
  ASSERT_TRUE(one.ok()) << one.error().message();
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
  std::map<int, int> started; // policy -> threads started by create()
  for (auto [tid, policy] : threadPolicies())
    if (!before.count(tid))
      ++started[policy];
  EXPECT_EQ(started[SCHED_BATCH], 1) << "one event-loop thread under SCHED_BATCH";
  EXPECT_GE(started[SCHED_OTHER], 2) << "the engine's worker and completer under SCHED_OTHER";
  EXPECT_EQ(started.size(), 2u) << "no thread under another policy";
}

} // namespace
} // namespace mtc::rt::test
