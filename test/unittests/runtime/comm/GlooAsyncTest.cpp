//===- GlooAsyncTest.cpp - Work handles, point-to-point, all-to-all-v, errors -===//
//
// Thread ranks over loopback, as in GlooCommunicatorTest.cpp: operations in flight while the
// caller goes on, a ring of separately started sends and receives (in both orders), uneven
// all-to-all-v with a rank that sends and receives nothing, and the failures: rejected
// arguments, a peer that dies while a receive or an all-to-all-v waits on it.
//
//===----------------------------------------------------------------------===//

#include "CommTestUtil.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <numeric>

namespace mtc::rt::test {
namespace {

using Clock = std::chrono::steady_clock;

class GlooAsync : public ::testing::TestWithParam<int> {
protected:
  int n() const { return GetParam(); }
  TestJob job;
};

INSTANTIATE_TEST_SUITE_P(Ranks, GlooAsync, ::testing::Values(2, 4),
                         [](const auto &info) { return std::to_string(info.param) + "ranks"; });

TEST_P(GlooAsync, TwoOperationsInFlightWhileTheCallerWorks) {
  const int n = this->n();
  const size_t count = 100000;
  std::vector<std::vector<float>> sums(n);
  std::vector<std::vector<int64_t>> gathered(n);
  std::vector<char> pendingAtStart(n); // not vector<bool>: the ranks write concurrently
  std::vector<Clock::duration> startTook(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "overlap");
    ASSERT_TRUE(comm);
    ASSERT_TRUE(comm->barrier().ok());
    // The last rank starts late: the others' operations cannot finish before it joins.
    if (rank == n - 1)
      std::this_thread::sleep_for(300ms);
    sums[rank].assign(count, float(rank + 1));
    int64_t mine[2] = {rank, -rank};
    gathered[rank].assign(2 * size_t(n), -1);
    auto start = Clock::now();
    Work sum = comm->startAllReduce(sums[rank].data(), count, MTC_F32, MTC_SUM);
    Work gather = comm->startAllGather(mine, gathered[rank].data(), 2, MTC_I64);
    startTook[rank] = Clock::now() - start;
    pendingAtStart[rank] = !gather.test();
    // Waited for in the other order than started.
    Error g = gather.wait();
    ASSERT_TRUE(g.ok()) << g.message();
    EXPECT_TRUE(sum.test()) << "operations finish in start order";
    Error s = sum.wait();
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_TRUE(sum.wait().ok()) << "a second wait returns the same result";
  });
  const float total = float(n * (n + 1) / 2);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(sums[r], std::vector<float>(count, total)) << "rank " << r;
    for (int s = 0; s < n; ++s) {
      EXPECT_EQ(gathered[r][2 * s], s);
      EXPECT_EQ(gathered[r][2 * s + 1], -s);
    }
    EXPECT_LT(startTook[r], 100ms) << "starting must not wait for the peers, rank " << r;
  }
  for (int r = 0; r + 1 < n; ++r)
    EXPECT_TRUE(pendingAtStart[r]) << "rank " << r << " finished before the last rank joined";
}

// A blocking call does not wake the worker (the caller runs it when the context is free):
// behind an operation the worker is running (it waits for the late rank) the blocking calls
// must still run, by the worker once that operation ends, and behind a posted receive the
// caller runs them itself.
TEST_P(GlooAsync, BlockingCallsBehindOperationsInFlight) {
  const int n = this->n();
  const size_t count = 50000;
  std::vector<std::vector<float>> first(n), second(n);
  std::vector<std::vector<int32_t>> gathered(n);
  std::vector<int32_t> received(n, -1);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "blocking");
    ASSERT_TRUE(comm);
    ASSERT_TRUE(comm->barrier().ok());
    if (rank == n - 1)
      std::this_thread::sleep_for(200ms);
    first[rank].assign(count, float(rank + 1));
    second[rank].assign(count, float(2 * rank));
    Work inFlight = comm->startAllReduce(first[rank].data(), count, MTC_F32, MTC_SUM);
    std::this_thread::sleep_for(20ms); // the worker holds the context now (but the late rank)
    Error e = comm->allReduce(second[rank].data(), count, MTC_F32, MTC_SUM);
    ASSERT_TRUE(e.ok()) << e.message();
    EXPECT_TRUE(inFlight.test()) << "operations finish in start order";
    // A receive posted and left to the completer, then blocking calls, then its send.
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    Work recv = comm->startRecv(&received[rank], 1, MTC_I32, prev);
    int32_t mine = 10 * rank;
    gathered[rank].assign(size_t(n), -1);
    e = comm->allGather(&mine, gathered[rank].data(), 1, MTC_I32);
    ASSERT_TRUE(e.ok()) << e.message();
    e = comm->send(&mine, 1, MTC_I32, next);
    ASSERT_TRUE(e.ok()) << e.message();
    e = recv.wait();
    ASSERT_TRUE(e.ok()) << e.message();
    e = inFlight.wait();
    ASSERT_TRUE(e.ok()) << e.message();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(first[r], std::vector<float>(count, float(n * (n + 1) / 2))) << "rank " << r;
    EXPECT_EQ(second[r], std::vector<float>(count, float(n * (n - 1)))) << "rank " << r;
    for (int s = 0; s < n; ++s)
      EXPECT_EQ(gathered[r][size_t(s)], 10 * s) << "rank " << r;
    EXPECT_EQ(received[r], 10 * ((r + n - 1) % n)) << "rank " << r;
  }
}

TEST_P(GlooAsync, SendRecvRingInBothOrders) {
  const int n = this->n();
  const size_t count = 50000; // beyond socket buffers: a send waits for its receiver
  std::vector<std::vector<double>> first(n), second(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "ring");
    ASSERT_TRUE(comm);
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    std::vector<double> out(count);
    std::iota(out.begin(), out.end(), double(rank) * 1e6);
    // Receive first, then send.
    first[rank].assign(count, -1);
    Work recv = comm->startRecv(first[rank].data(), count, MTC_F64, left);
    Work send = comm->startSend(out.data(), count, MTC_F64, right);
    Error e = recv.wait();
    ASSERT_TRUE(e.ok()) << e.message();
    e = send.wait();
    ASSERT_TRUE(e.ok()) << e.message();
    // Send first, then receive: every rank blocks nothing until it waits.
    second[rank].assign(count, -1);
    Work send2 = comm->startSend(out.data(), count, MTC_F64, right);
    Work recv2 = comm->startRecv(second[rank].data(), count, MTC_F64, left);
    e = send2.wait();
    ASSERT_TRUE(e.ok()) << e.message();
    e = recv2.wait();
    ASSERT_TRUE(e.ok()) << e.message();
    EXPECT_EQ(comm->counters().bytesSentBy(CollectiveKind::SendRecv), 2 * count * sizeof(double));
    EXPECT_EQ(comm->counters().callsOf(CollectiveKind::SendRecv), 4u);
  });
  for (int r = 0; r < n; ++r) {
    const int left = (r + n - 1) % n;
    std::vector<double> expected(count);
    std::iota(expected.begin(), expected.end(), double(left) * 1e6);
    EXPECT_EQ(first[r], expected) << "rank " << r;
    EXPECT_EQ(second[r], expected) << "rank " << r;
  }
}

TEST_P(GlooAsync, ManyMixedOperationsWaitedInReverse) {
  const int n = this->n();
  const int rounds = 40;
  std::vector<std::vector<int64_t>> sums(n), fromLeft(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "mixed");
    ASSERT_TRUE(comm);
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    std::vector<int64_t> outgoing(rounds);
    sums[rank].assign(rounds, 0);
    fromLeft[rank].assign(rounds, -1);
    std::vector<Work> works;
    for (int i = 0; i < rounds; ++i) {
      sums[rank][i] = rank * 1000 + i;
      outgoing[i] = rank * 1000 + i;
      works.push_back(comm->startAllReduce(&sums[rank][i], 1, MTC_I64, MTC_SUM));
      if ((rank + i) % 2) { // half the rounds receive first
        works.push_back(comm->startRecv(&fromLeft[rank][i], 1, MTC_I64, left));
        works.push_back(comm->startSend(&outgoing[i], 1, MTC_I64, right));
      } else {
        works.push_back(comm->startSend(&outgoing[i], 1, MTC_I64, right));
        works.push_back(comm->startRecv(&fromLeft[rank][i], 1, MTC_I64, left));
      }
    }
    for (auto w = works.rbegin(); w != works.rend(); ++w) {
      Error e = w->wait();
      ASSERT_TRUE(e.ok()) << e.message();
    }
  });
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < rounds; ++i) {
      EXPECT_EQ(sums[r][i], int64_t(1000) * n * (n - 1) / 2 + int64_t(n) * i);
      EXPECT_EQ(fromLeft[r][i], ((r + n - 1) % n) * 1000 + i) << "rank " << r << " round " << i;
    }
}

TEST(GlooAsyncOrder, ReceivesOutstandingOnOneLinkAreReportedInPostingOrder) {
  // A pipeline link (ScheduleExecutor.h): rank 1 has several receives outstanding, and rank 0
  // sends the next message only once rank 1 has waited for the previous one (the ack comes
  // back on a second communicator). Waiting for the first receive, rank 1's thread runs the
  // queued ones while the worker runs others; the completer must still report them in
  // posting order, or it waits for a message that is only sent after the one it skipped.
  const int rounds = 60, depth = 6;
  TestJob job;
  runRanks(2, [&](int rank) {
    auto data = job.connect(rank, 2, "order-data", 5000ms);
    auto acks = job.connect(rank, 2, "order-acks", 5000ms);
    ASSERT_TRUE(data && acks);
    for (int round = 0; round < rounds; ++round) {
      std::vector<int32_t> values(depth, -1);
      int32_t ack = 0;
      if (rank == 0) {
        for (int k = 0; k < depth; ++k) {
          values[size_t(k)] = round * depth + k;
          Error e = data->send(&values[size_t(k)], 1, MTC_I32, 1);
          ASSERT_TRUE(e.ok()) << e.message();
          e = acks->recv(&ack, 1, MTC_I32, 1);
          ASSERT_TRUE(e.ok()) << e.message();
          ASSERT_EQ(ack, k);
        }
        continue;
      }
      std::vector<Work> receives;
      for (int k = 0; k < depth; ++k)
        receives.push_back(data->startRecv(&values[size_t(k)], 1, MTC_I32, 0));
      for (int k = 0; k < depth; ++k) {
        Error e = receives[size_t(k)].wait();
        ASSERT_TRUE(e.ok()) << "round " << round << " receive " << k << ": " << e.message();
        ASSERT_EQ(values[size_t(k)], round * depth + k);
        ack = k;
        e = acks->send(&ack, 1, MTC_I32, 0);
        ASSERT_TRUE(e.ok()) << e.message();
      }
    }
  });
}

/// Elements rank s sends rank d: uneven, none from or to rank 0, none from a rank to itself
/// when s + d is even.
size_t countOf(int s, int d) { return s == 0 || d == 0 ? 0 : size_t((3 * s + d) % 5 + (s == d)); }
int32_t elementOf(int s, int d, size_t k) { return int32_t(s * 100000 + d * 1000 + int(k)); }

TEST_P(GlooAsync, UnevenAllToAllVWithAnIdleRank) {
  const int n = this->n();
  std::vector<std::vector<int32_t>> received(n);
  std::vector<uint64_t> bytes(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "a2av");
    ASSERT_TRUE(comm);
    std::vector<size_t> sendCounts(n), recvCounts(n);
    std::vector<int32_t> in;
    for (int d = 0; d < n; ++d) {
      sendCounts[d] = countOf(rank, d);
      recvCounts[d] = countOf(d, rank);
      for (size_t k = 0; k < sendCounts[d]; ++k)
        in.push_back(elementOf(rank, d, k));
    }
    received[rank].assign(std::accumulate(recvCounts.begin(), recvCounts.end(), size_t(0)), -1);
    // Twice, the second time started asynchronously behind a barrier.
    Error e = comm->allToAllV(in.data(), sendCounts, received[rank].data(), recvCounts, MTC_I32);
    ASSERT_TRUE(e.ok()) << e.message();
    std::vector<int32_t> again(received[rank].size(), -1);
    Work barrier = comm->startBarrier();
    Work a2a = comm->startAllToAllV(in.data(), sendCounts, again.data(), recvCounts, MTC_I32);
    ASSERT_TRUE(a2a.wait().ok());
    ASSERT_TRUE(barrier.wait().ok());
    EXPECT_EQ(again, received[rank]);
    bytes[rank] = comm->counters().bytesSentBy(CollectiveKind::AllToAll);
  });
  for (int r = 0; r < n; ++r) {
    std::vector<int32_t> expected;
    uint64_t sent = 0;
    for (int s = 0; s < n; ++s) {
      for (size_t k = 0; k < countOf(s, r); ++k)
        expected.push_back(elementOf(s, r, k));
      if (s != r)
        sent += countOf(r, s) * sizeof(int32_t);
    }
    EXPECT_EQ(received[r], expected) << "rank " << r;
    EXPECT_EQ(bytes[r], 2 * sent) << "rank " << r;
  }
  EXPECT_TRUE(received[0].empty());
}

TEST(GlooAsyncErrors, RejectedArgumentsLeaveTheCommunicatorUsable) {
  TestJob job;
  const int n = 2;
  std::vector<std::vector<std::string>> messages(n);
  std::vector<float> sums(n);
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "badargs");
    ASSERT_TRUE(comm);
    float x[4] = {1, 2, 3, 4}, y[8];
    size_t two[2] = {2, 2}, three[3] = {1, 1, 1}, skewed[2] = {1, 3};
    std::vector<Work> refused;
    refused.push_back(comm->startAllReduce(x, 4, MtcElementType(6), MTC_SUM));
    refused.push_back(comm->startAllReduce(x, 4, MTC_F32, MtcReduction(3)));
    refused.push_back(comm->startAllReduce(nullptr, 4, MTC_F32, MTC_SUM));
    refused.push_back(comm->startReduceScatter(x, y, 2, MtcElementType(-1), MTC_MAX));
    refused.push_back(comm->startAllToAllV(x, three, y, two, MTC_F32));
    refused.push_back(comm->startAllToAllV(x, two, y, skewed, MTC_F32));
    refused.push_back(comm->startSend(x, 1, MTC_F32, rank));
    refused.push_back(comm->startRecv(y, 1, MTC_F32, -1));
    refused.push_back(comm->startSendRecv(x, 1, 1 - rank, y, 1, 2, MTC_F32));
    refused.push_back(comm->startBroadcast(x, 1, MTC_F32, 2));
    for (Work &w : refused) {
      EXPECT_TRUE(w.test()) << "refused at once";
      Error e = w.wait();
      EXPECT_FALSE(e.ok()) << "call " << messages[rank].size();
      messages[rank].push_back(e.message());
    }
    EXPECT_TRUE(comm->failure().empty());
    float s = float(rank + 1);
    ASSERT_TRUE(comm->allReduce(&s, 1, MTC_F32, MTC_SUM).ok());
    sums[rank] = s;
  });
  const std::vector<std::string> &m = messages[0];
  EXPECT_EQ(m[0], "gloo allReduce (rank 0 of 2): unknown element type code 6 (0-5: f32, f64, "
                  "bf16, f16, i32, i64)");
  EXPECT_EQ(m[1], "gloo allReduce (rank 0 of 2): unknown reduction code 3 (0 = sum, 1 = max, "
                  "2 = min)");
  EXPECT_EQ(m[2], "gloo allReduce (rank 0 of 2): the data buffer is null but holds 4 elements");
  EXPECT_NE(m[3].find("unknown element type code -1"), std::string::npos) << m[3];
  EXPECT_EQ(m[4], "gloo allToAllV (rank 0 of 2): expected 2 send and 2 receive counts (one per "
                  "rank), got 3 and 2");
  EXPECT_EQ(m[5], "gloo allToAllV (rank 0 of 2): this rank sends itself 2 elements but expects 1");
  EXPECT_EQ(m[6], "gloo send (rank 0 of 2): peer 0 is not another rank of the group");
  EXPECT_EQ(m[7], "gloo recv (rank 0 of 2): peer -1 is not another rank of the group");
  EXPECT_EQ(m[8], "gloo sendRecv (rank 0 of 2): peer 2 is not another rank of the group");
  EXPECT_EQ(m[9], "gloo broadcast (rank 0 of 2): root 2 is not in [0, 2)");
  EXPECT_EQ(sums[0], 3.0f);
  EXPECT_EQ(sums[1], 3.0f);
}

TEST(GlooAsyncErrors, PeerDiesDuringAReceiveAndAnAllToAllV) {
  TestJob job;
  const int n = 3;
  std::vector<Error> recvErrors(n), a2aErrors(n), after(n);
  std::vector<Clock::duration> elapsed(n);
  std::promise<void> othersDone;
  std::shared_future<void> done = othersDone.get_future().share();
  std::atomic<int> finished{0};
  runRanks(n, [&](int rank) {
    auto comm = job.connect(rank, n, "dies", 500ms);
    ASSERT_TRUE(comm);
    ASSERT_TRUE(comm->barrier().ok());
    if (rank == 0) {
      comm.reset(); // dies: its connections close
      done.wait();
      return;
    }
    auto start = Clock::now();
    float x[4];
    Work recv = comm->startRecv(x, 4, MTC_F32, 0);
    size_t counts[3] = {1, 1, 1};
    float in[3] = {1, 2, 3}, out[3];
    Work a2a = comm->startAllToAllV(in, counts, out, counts, MTC_F32);
    recvErrors[rank] = recv.wait();
    a2aErrors[rank] = a2a.wait();
    elapsed[rank] = Clock::now() - start;
    after[rank] = comm->barrier();
    if (++finished == n - 1)
      othersDone.set_value();
  });
  for (int r = 1; r < n; ++r) {
    ASSERT_FALSE(recvErrors[r].ok()) << "rank " << r;
    EXPECT_NE(recvErrors[r].message().find(concat("gloo recv (rank ", r, " of 3) failed: ")),
              std::string::npos)
        << recvErrors[r].message();
    ASSERT_FALSE(a2aErrors[r].ok()) << "rank " << r;
    // Named by the backend's operation ("gloo allToAll (rank r of 3) ...") when it was
    // running, or by the call ("gloo allToAllV (rank r of 3): communicator unusable ...")
    // when the receive's failure came first (about 1 run in 20 under load).
    EXPECT_TRUE(a2aErrors[r].message().find("gloo allToAll") != std::string::npos &&
                a2aErrors[r].message().find(concat("(rank ", r, " of 3)")) != std::string::npos)
        << a2aErrors[r].message();
    EXPECT_LT(elapsed[r], 3s) << "rank " << r;
    ASSERT_FALSE(after[r].ok());
    EXPECT_NE(after[r].message().find("unusable after an earlier failure"), std::string::npos)
        << after[r].message();
  }
}

TEST(GlooAsyncErrors, DestroyingACommunicatorWaitsForItsOperations) {
  TestJob job;
  const int n = 2;
  std::vector<std::vector<float>> values(n);
  runRanks(n, [&](int rank) {
    values[rank].assign(1000, float(rank + 1));
    Work w;
    {
      auto comm = job.connect(rank, n, "drain");
      ASSERT_TRUE(comm);
      w = comm->startAllReduce(values[rank].data(), 1000, MTC_F32, MTC_SUM);
    } // the communicator goes first; the Work outlives it
    EXPECT_TRUE(w.test());
    EXPECT_TRUE(w.wait().ok());
  });
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(values[r], std::vector<float>(1000, 3.0f));
}

} // namespace
} // namespace mtc::rt::test
