//===- KernelMemoryTest.cpp - The allocator compiled kernels call ---------===//

#include "runtime/exec/KernelMemory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

using namespace mtc::rt;

namespace {

/// The counters are process-wide: each test measures from where the previous one left them.
class KernelMemoryTest : public ::testing::Test {
protected:
  void SetUp() override {
    base = kernelLiveBytes();
    resetKernelPeakBytes();
  }
  int64_t live() const { return kernelLiveBytes() - base; }
  int64_t peak() const { return kernelPeakBytes() - base; }
  int64_t base = 0;
};

bool alignedTo(const void *pointer, size_t align) {
  return reinterpret_cast<uintptr_t>(pointer) % align == 0;
}

} // namespace

TEST_F(KernelMemoryTest, CountsLiveBytesAndThePeak) {
  void *a = mtc_kernel_alloc(nullptr, 1000);
  void *b = mtc_kernel_alloc(nullptr, 24);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(live(), 1024);
  mtc_kernel_free(nullptr, a);
  EXPECT_EQ(live(), 24);
  EXPECT_EQ(peak(), 1024) << "the high-water mark stays";
  void *c = mtc_kernel_alloc(nullptr, 500);
  EXPECT_EQ(peak(), 1024);
  mtc_kernel_free(nullptr, b);
  mtc_kernel_free(nullptr, c);
  EXPECT_EQ(live(), 0);
  EXPECT_EQ(peak(), 1024);
  resetKernelPeakBytes();
  EXPECT_EQ(peak(), 0);
}

TEST_F(KernelMemoryTest, FreeOfNullIsANoOp) {
  mtc_kernel_free(nullptr, nullptr);
  EXPECT_EQ(live(), 0);
}

TEST_F(KernelMemoryTest, ZeroBytesGiveAFreeablePointer) {
  void *p = mtc_kernel_alloc(nullptr, 0);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(live(), 0);
  mtc_kernel_free(nullptr, p);
}

TEST_F(KernelMemoryTest, MallocAlignmentAndUsableBytes) {
  std::vector<void *> blocks;
  for (size_t size : {1, 3, 16, 17, 4096, 100000}) {
    auto *p = static_cast<unsigned char *>(mtc_kernel_alloc(nullptr, size));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(alignedTo(p, alignof(std::max_align_t))) << size;
    std::memset(p, 0xab, size); // the whole block is usable (sanitizers check the bounds)
    blocks.push_back(p);
  }
  for (void *p : blocks)
    mtc_kernel_free(nullptr, p);
  EXPECT_EQ(live(), 0);
  EXPECT_EQ(peak(), 1 + 3 + 16 + 17 + 4096 + 100000);
}

TEST_F(KernelMemoryTest, AlignedAllocRespectsTheAlignment) {
  for (size_t align : {1, 8, 16, 32, 64, 128, 4096}) {
    void *p = mtc_kernel_aligned_alloc(nullptr, align, 200);
    ASSERT_NE(p, nullptr) << align;
    EXPECT_TRUE(alignedTo(p, align)) << align;
    EXPECT_EQ(live(), 200) << "the header is not counted";
    std::memset(p, 0, 200);
    mtc_kernel_free(nullptr, p);
    EXPECT_EQ(live(), 0);
  }
  EXPECT_EQ(mtc_kernel_aligned_alloc(nullptr, 48, 96), nullptr) << "not a power of two";
  EXPECT_EQ(mtc_kernel_aligned_alloc(nullptr, 0, 96), nullptr);
  EXPECT_EQ(live(), 0);
}

TEST_F(KernelMemoryTest, CallocZeroes) {
  auto *p = static_cast<unsigned char *>(mtc_kernel_calloc(nullptr, 10, 7));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(live(), 70);
  for (int i = 0; i < 70; ++i)
    EXPECT_EQ(p[i], 0) << i;
  mtc_kernel_free(nullptr, p);
  EXPECT_EQ(mtc_kernel_calloc(nullptr, SIZE_MAX / 2, 4), nullptr) << "the product overflows";
  EXPECT_EQ(live(), 0);
}

TEST_F(KernelMemoryTest, OutOfMemoryIsNullAndNotCounted) {
  EXPECT_EQ(mtc_kernel_alloc(nullptr, SIZE_MAX - 8), nullptr);
  EXPECT_EQ(live(), 0);
  EXPECT_EQ(peak(), 0);
}

TEST_F(KernelMemoryTest, ThreadsShareTheCounters) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 1000; ++i)
        mtc_kernel_free(nullptr, mtc_kernel_alloc(nullptr, 64));
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(live(), 0);
  EXPECT_GE(peak(), 64);
  EXPECT_LE(peak(), 4 * 64);
}

namespace {

KernelArenaPlan arenaPlan(std::vector<ArenaAllocation> allocations, int64_t bytes) {
  KernelArenaPlan plan;
  plan.bytes = bytes;
  plan.allocations = std::move(allocations);
  return plan;
}

bool inArena(const KernelArena &arena, const void *pointer) {
  auto p = static_cast<const char *>(pointer);
  return p >= arena.data() && p < arena.data() + arena.size();
}

} // namespace

TEST_F(KernelMemoryTest, ArenaServesThePlanInOrderAndCountsOnce) {
  KernelArena arena(4096);
  ASSERT_NE(arena.data(), nullptr);
  EXPECT_TRUE(alignedTo(arena.data(), 64));
  EXPECT_EQ(live(), 4096) << "the arena is counted while it exists";
  // Two blocks that share bytes at different times, and a third beside them.
  KernelArenaPlan plan = arenaPlan({{1000, 0}, {200, 1024}, {800, 0}}, 4096);
  {
    KernelArenaCall call(arena, plan);
    MtcKernelContext context = mtc_kernel_context(nullptr, nullptr, &call);
    void *a = mtc_kernel_alloc(&context, 1000);
    void *b = mtc_kernel_aligned_alloc(&context, 64, 200);
    EXPECT_EQ(a, arena.data());
    EXPECT_EQ(b, arena.data() + 1024);
    mtc_kernel_free(&context, a);
    void *c = mtc_kernel_calloc(&context, 100, 8);
    EXPECT_EQ(c, arena.data()) << "the bytes a freed block had";
    EXPECT_EQ(static_cast<char *>(c)[799], 0) << "calloc still zeroes";
    mtc_kernel_free(&context, b);
    mtc_kernel_free(&context, c);
    EXPECT_EQ(call.served(), 3);
    EXPECT_EQ(call.fellBack(), 0);
    EXPECT_EQ(live(), 4096) << "planned blocks add nothing to the count";
  }
  void *heap = mtc_kernel_alloc(nullptr, 16);
  EXPECT_FALSE(inArena(arena, heap)) << "no context: the heap";
  mtc_kernel_free(nullptr, heap);
}

TEST_F(KernelMemoryTest, ArenaFallsBackWhereThePlanDoesNotHold) {
  KernelArena arena(2048);
  KernelArenaPlan plan = arenaPlan({{512, 0}, {256, 256}, {128, 1024}}, 2048);
  int64_t fallbacksBefore = kernelArenaFallbacks();
  KernelArenaCall call(arena, plan);
  MtcKernelContext context = mtc_kernel_context(nullptr, nullptr, &call);
  void *a = mtc_kernel_alloc(&context, 512);
  EXPECT_EQ(a, arena.data());
  // The plan expected a's life over: its bytes are still in use, so the heap.
  void *b = mtc_kernel_alloc(&context, 256);
  EXPECT_FALSE(inArena(arena, b));
  // A size the plan did not predict.
  void *c = mtc_kernel_alloc(&context, 100);
  EXPECT_FALSE(inArena(arena, c));
  // Past the end of the plan.
  void *d = mtc_kernel_alloc(&context, 64);
  EXPECT_FALSE(inArena(arena, d));
  // An alignment the arena's offsets do not give.
  KernelArenaPlan wide = arenaPlan({{64, 0}}, 2048);
  {
    KernelArenaCall inner(arena, wide);
    MtcKernelContext innerContext = mtc_kernel_context(nullptr, nullptr, &inner);
    void *e = mtc_kernel_aligned_alloc(&innerContext, 4096, 64);
    EXPECT_FALSE(inArena(arena, e));
    EXPECT_TRUE(alignedTo(e, 4096));
    mtc_kernel_free(&innerContext, e);
  }
  EXPECT_EQ(call.served(), 1);
  EXPECT_EQ(call.fellBack(), 3);
  EXPECT_EQ(kernelArenaFallbacks() - fallbacksBefore, 4);
  for (void *p : {a, b, c, d})
    mtc_kernel_free(&context, p);
  EXPECT_EQ(live(), 2048);
}

TEST_F(KernelMemoryTest, OnlyTheCallsContextReachesItsArena) {
  KernelArena arena(1024);
  KernelArenaPlan plan = arenaPlan({{64, 0}}, 1024);
  KernelArenaCall call(arena, plan);
  MtcKernelContext context = mtc_kernel_context(nullptr, nullptr, &call);
  // Another thread with no context, and a context of another version of the ABI, get the
  // heap; the arena's plan is not advanced by them.
  void *other = nullptr;
  std::thread([&] { other = mtc_kernel_alloc(nullptr, 64); }).join();
  EXPECT_FALSE(inArena(arena, other)) << "another call has no arena";
  mtc_kernel_free(nullptr, other);
  MtcKernelContext otherVersion = context;
  otherVersion.version = MTC_KERNEL_CONTEXT_VERSION + 1;
  void *stale = mtc_kernel_alloc(&otherVersion, 64);
  EXPECT_FALSE(inArena(arena, stale)) << "a context of another version is not read";
  mtc_kernel_free(&otherVersion, stale);
  // The call's own allocation from another thread still gets the call's arena.
  void *mine = nullptr;
  std::thread([&] { mine = mtc_kernel_alloc(&context, 64); }).join();
  EXPECT_EQ(mine, arena.data());
  mtc_kernel_free(&context, mine);
  EXPECT_EQ(call.served(), 1);
  EXPECT_EQ(call.fellBack(), 0);
}
