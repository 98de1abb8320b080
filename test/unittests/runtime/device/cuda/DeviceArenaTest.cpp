//===- DeviceArenaTest.cpp - The device arena and streams on a GPU -------===//

#include "runtime/device/cuda/DeviceArena.h"
#include "runtime/device/cuda/Stream.h"

#include "CudaTestSupport.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

namespace mtc::rt::cuda::test {
namespace {

using DeviceArenaOnGpu = CudaDeviceTest;

TEST_F(DeviceArenaOnGpu, PointersAreOffsetsOfOneAllocation) {
  Expected<DeviceArena> arena = DeviceArena::create(device(), 1 << 20);
  ASSERT_TRUE(arena.ok()) << arena.error().message();
  Expected<void *> first = arena->allocate(1000);
  Expected<void *> second = arena->allocate(1000);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, arena->base());
  EXPECT_EQ(static_cast<char *>(*second) - static_cast<char *>(*first), 1024);
  Expected<void *> planned = arena->at(4096, 256);
  ASSERT_TRUE(planned.ok());
  EXPECT_EQ(static_cast<char *>(*planned) - static_cast<char *>(arena->base()), 4096);
  EXPECT_EQ(arena->layout().highWaterBytes(), 4096 + 256);
  Expected<void *> outside = arena->at((1 << 20) - 8, 16);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().message().find("ends past the arena"), std::string::npos);

  // The memory is usable: a round trip through it.
  std::vector<int> host(250), back(250);
  for (int i = 0; i < 250; ++i)
    host[i] = i * 7;
  ASSERT_EQ(cudaMemcpy(*second, host.data(), 1000, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), *second, 1000, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);
}

TEST_F(DeviceArenaOnGpu, TooLargeIsAnErrorNamingTheSize) {
  int64_t tooMuch = device().totalMemoryBytes() * 4;
  Expected<DeviceArena> arena = DeviceArena::create(device(), tooMuch);
  ASSERT_FALSE(arena.ok());
  EXPECT_NE(arena.error().message().find(concat("allocating the device arena (", tooMuch)),
            std::string::npos)
      << arena.error().message();
  EXPECT_NE(arena.error().message().find("cudaErrorMemoryAllocation"), std::string::npos);
  EXPECT_FALSE(DeviceArena::create(device(), -1).ok());
}

using StreamsOnGpu = CudaDeviceTest;

// Work on the collectives stream that waits for an event recorded on the compute stream sees
// the compute stream's result.
TEST_F(StreamsOnGpu, AnEventOrdersTwoStreams) {
  Expected<RankStreams> streams = RankStreams::create();
  ASSERT_TRUE(streams.ok()) << streams.error().message();
  Expected<DeviceArena> arena = DeviceArena::create(device(), 8 << 20);
  ASSERT_TRUE(arena.ok()) << arena.error().message();
  constexpr int64_t kBytes = 4 << 20;
  void *a = *arena->allocate(kBytes);
  void *b = *arena->allocate(kBytes);
  std::vector<unsigned char> host(kBytes, 0xab), back(kBytes, 0);

  Expected<Event> produced = Event::create(/*timing=*/true);
  Expected<Event> start = Event::create(/*timing=*/true);
  ASSERT_TRUE(produced.ok() && start.ok());
  ASSERT_TRUE(start->record(streams->compute).ok());
  ASSERT_EQ(
      cudaMemcpyAsync(a, host.data(), kBytes, cudaMemcpyHostToDevice, streams->compute.handle()),
      cudaSuccess);
  ASSERT_TRUE(produced->record(streams->compute).ok());
  ASSERT_TRUE(streams->collectives.waitFor(*produced).ok());
  ASSERT_EQ(cudaMemcpyAsync(b, a, kBytes, cudaMemcpyDeviceToDevice, streams->collectives.handle()),
            cudaSuccess);
  ASSERT_TRUE(streams->collectives.synchronize().ok());
  ASSERT_EQ(cudaMemcpy(back.data(), b, kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);

  Expected<bool> done = produced->completed();
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(*done);
  Expected<float> ms = elapsedMilliseconds(*start, *produced);
  ASSERT_TRUE(ms.ok()) << ms.error().message();
  EXPECT_GE(*ms, 0.0f);

  // A synchronisation-only event has no timing.
  Expected<Event> untimed = Event::create();
  ASSERT_TRUE(untimed.ok());
  ASSERT_TRUE(untimed->record(streams->send).ok());
  ASSERT_TRUE(untimed->synchronize().ok());
  EXPECT_FALSE(elapsedMilliseconds(*start, *untimed).ok());
}

} // namespace
} // namespace mtc::rt::cuda::test
