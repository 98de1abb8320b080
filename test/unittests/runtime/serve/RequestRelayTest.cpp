//===- RequestRelayTest.cpp - Rank 0 hands requests to the other ranks ----===//
//
// Ranks are threads of this process over a loopback store and Gloo (CommTestUtil.h), with a
// fast heartbeat so that a silent rank 0 is found in a fraction of a second.
//
//===----------------------------------------------------------------------===//

#include "runtime/serve/RequestRelay.h"

#include "test/unittests/runtime/comm/CommTestUtil.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

using namespace mtc::rt;
using namespace mtc::rt::test;

namespace {

RelayOptions fastOptions() {
  RelayOptions o;
  o.poll = 100ms;
  o.heartbeat.interval = 100ms;
  return o;
}

TEST(RequestRelayTest, MessagesRoundTrip) {
  for (RelayedRequest message :
       {RelayedRequest{RelayedRequest::Kind::Generate, CompletionApi::Megatron,
                       0x0123456789abcdefULL, "{\"prompts\": [\"hi\"]}"},
        RelayedRequest{RelayedRequest::Kind::Generate, CompletionApi::OpenAI, ~uint64_t(0),
                       std::string("\0binary\xff", 8)},
        RelayedRequest{RelayedRequest::Kind::Stop, CompletionApi::OpenAI, 0, ""},
        RelayedRequest{RelayedRequest::Kind::Abort, CompletionApi::OpenAI, 0, "rank 1 died"}}) {
    Expected<RelayedRequest> back = decodeRelayedRequest(encodeRelayedRequest(message));
    ASSERT_TRUE(back) << back.error().message();
    EXPECT_EQ(*back, message);
  }
}

TEST(RequestRelayTest, DecodingRefusesWhatWasNotEncoded) {
  EXPECT_FALSE(decodeRelayedRequest(""));
  EXPECT_FALSE(decodeRelayedRequest("short"));
  std::string bytes = encodeRelayedRequest({});
  bytes[0] = 9;
  Expected<RelayedRequest> kind = decodeRelayedRequest(bytes);
  ASSERT_FALSE(kind);
  EXPECT_EQ(kind.error().message(), "a relayed request of unknown kind 9");
  bytes = encodeRelayedRequest({});
  bytes[1] = 2;
  EXPECT_FALSE(decodeRelayedRequest(bytes));
}

// The listeners get rank 0's messages in order, however long they wait between two (many
// slices of the poll), and an emptied key is not read again.
TEST(RequestRelayTest, ListenersGetEveryMessageInOrder) {
  TestJob job;
  JobStore zero = job.storeFor(0);
  auto beat = Heartbeat::start(zero.client, 0, 3, fastOptions().heartbeat);
  ASSERT_TRUE(beat) << beat.error().message();
  std::vector<std::vector<RelayedRequest>> received(3);
  std::atomic<int> idleCalls{0};
  std::thread ranks[2];
  for (int rank = 1; rank <= 2; ++rank)
    ranks[rank - 1] = std::thread([&, rank] {
      RequestListener listener(job.storeFor(rank).client, rank, 3, fastOptions());
      for (;;) {
        Expected<RelayedRequest> m = listener.next([&] {
          ++idleCalls;
          return Error::success();
        });
        ASSERT_TRUE(m) << m.error().message();
        received[size_t(rank)].push_back(*m);
        if (m->kind == RelayedRequest::Kind::Stop)
          return;
      }
    });
  RequestBell bell(zero.client, fastOptions());
  std::this_thread::sleep_for(500ms); // the listeners wait through several slices
  const RelayedRequest first{RelayedRequest::Kind::Generate, CompletionApi::Megatron, 7, "one"};
  const RelayedRequest second{RelayedRequest::Kind::Generate, CompletionApi::OpenAI, 8, "two"};
  ASSERT_TRUE(bell.ring(first).ok());
  std::this_thread::sleep_for(200ms);
  ASSERT_TRUE(bell.forgetLast().ok());
  ASSERT_TRUE(bell.ring(second).ok());
  ASSERT_TRUE(bell.ring({RelayedRequest::Kind::Stop, CompletionApi::OpenAI, 0, ""}).ok());
  EXPECT_EQ(bell.rung(), 3u);
  for (std::thread &t : ranks)
    t.join();
  for (int rank = 1; rank <= 2; ++rank) {
    ASSERT_EQ(received[size_t(rank)].size(), 3u);
    EXPECT_EQ(received[size_t(rank)][0], first);
    EXPECT_EQ(received[size_t(rank)][1], second);
    EXPECT_EQ(received[size_t(rank)][2].kind, RelayedRequest::Kind::Stop);
  }
  EXPECT_GT(idleCalls.load(), 4);
}

// A rank 0 whose heartbeat ends (its process is ending) or stops ends the wait with an error
// naming it: nothing waits forever for a server that is gone.
TEST(RequestRelayTest, AListenerNoticesThatRankZeroEnded) {
  TestJob job;
  JobStore zero = job.storeFor(0);
  auto beat = Heartbeat::start(zero.client, 0, 2, fastOptions().heartbeat);
  ASSERT_TRUE(beat) << beat.error().message();
  RequestListener listener(job.storeFor(1).client, 1, 2, fastOptions());
  std::thread end([&] {
    std::this_thread::sleep_for(300ms);
    beat->reset();
  });
  auto start = std::chrono::steady_clock::now();
  Expected<RelayedRequest> m = listener.next();
  end.join();
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("waiting for rank 0's next request: rank 0 (pid "),
            std::string::npos)
      << m.error().message();
  EXPECT_NE(m.error().message().find("has ended"), std::string::npos) << m.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

TEST(RequestRelayTest, AListenerNoticesThatTheStoreIsGone) {
  auto job = std::make_unique<TestJob>();
  RequestListener listener(job->storeFor(1).client, 1, 2, fastOptions());
  std::thread end([&] {
    std::this_thread::sleep_for(300ms);
    job->server.reset();
  });
  Expected<RelayedRequest> m = listener.next();
  end.join();
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("the store, which rank 0 runs, does not answer"),
            std::string::npos)
      << m.error().message();
}

// The idle hook runs between the slices of the wait; its error ends the wait.
TEST(RequestRelayTest, TheIdleHookCanEndTheWait) {
  TestJob job;
  RequestListener listener(job.storeFor(1).client, 1, 2, fastOptions());
  int calls = 0;
  Expected<RelayedRequest> m =
      listener.next([&] { return ++calls == 3 ? makeError("enough") : Error::success(); });
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message(), "enough");
  EXPECT_EQ(calls, 3);
}

// A rank sent a signal asks rank 0 to stop; rank 0 reads the note.
TEST(RequestRelayTest, AnyRankCanAskRankZeroToStop) {
  TestJob job;
  RequestBell bell(job.storeFor(0).client, fastOptions());
  Expected<std::optional<std::string>> asked = bell.stopAsked();
  ASSERT_TRUE(asked) << asked.error().message();
  EXPECT_FALSE(*asked);
  RequestListener listener(job.storeFor(1).client, 1, 2, fastOptions());
  ASSERT_TRUE(listener.askToStop("rank 1 was sent SIGTERM").ok());
  asked = bell.stopAsked();
  ASSERT_TRUE(asked) << asked.error().message();
  EXPECT_EQ(asked->value_or(""), "rank 1 was sent SIGTERM");
}

TEST(RequestRelayTest, AnyRankIsTheFlagOfEveryRank) {
  Expected<bool> alone = anyRank(nullptr, true, "alone");
  ASSERT_TRUE(alone);
  EXPECT_TRUE(*alone);
  TestJob job;
  std::vector<int> results(3, -1);
  runRanks(3, [&](int rank) {
    auto world = job.connect(rank, 3, "any-rank");
    ASSERT_TRUE(world);
    Expected<bool> none = anyRank(world.get(), false, "none");
    Expected<bool> one = anyRank(world.get(), rank == 2, "one");
    ASSERT_TRUE(none && one);
    results[size_t(rank)] = (*none ? 1 : 0) + (*one ? 2 : 0);
  });
  EXPECT_EQ(results, (std::vector<int>{2, 2, 2}));
}

} // namespace
