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

TEST_F(KernelMemoryTest, TheContextsWorkspaceServesWhatFitsInIt) {
  KernelArena arena(4096);
  ASSERT_NE(arena.data(), nullptr);
  EXPECT_TRUE(alignedTo(arena.data(), 64));
  EXPECT_EQ(live(), 4096) << "the arena is counted while it exists";
  int64_t fallbacks = kernelArenaFallbacks();
  MtcKernelContext context = mtc_kernel_context(nullptr, nullptr, arena.data(), 4096);
  // Every function of the call gets the same workspace (their offsets are planned together).
  void *outer = mtc_kernel_workspace(&context, 4096);
  void *inner = mtc_kernel_workspace(&context, 1000);
  EXPECT_EQ(outer, arena.data());
  EXPECT_EQ(inner, arena.data());
  mtc_kernel_workspace_release(&context, inner);
  mtc_kernel_workspace_release(&context, outer);
  EXPECT_EQ(live(), 4096) << "the workspace adds nothing to the count";
  EXPECT_EQ(kernelArenaFallbacks(), fallbacks);
}

TEST_F(KernelMemoryTest, AWorkspaceTheContextDoesNotHoldComesFromTheHeap) {
  KernelArena arena(1024);
  int64_t fallbacks = kernelArenaFallbacks();
  MtcKernelContext context = mtc_kernel_context(nullptr, nullptr, arena.data(), 1024);
  MtcKernelContext otherVersion = context;
  otherVersion.version = MTC_KERNEL_CONTEXT_VERSION + 1;
  MtcKernelContext none = mtc_kernel_context(nullptr, nullptr, nullptr, 4096);
  EXPECT_EQ(none.workspace_bytes, 0u) << "no workspace holds no bytes";
  // Too large for the context's, a context of another version (not read), none, no context.
  std::vector<std::pair<MtcKernelContext *, void *>> blocks;
  for (MtcKernelContext *c : {&context, &otherVersion, &none, static_cast<MtcKernelContext *>(nullptr)}) {
    void *block = mtc_kernel_workspace(c, c == &context ? 2048 : 512);
    ASSERT_NE(block, nullptr);
    EXPECT_NE(block, arena.data());
    EXPECT_TRUE(alignedTo(block, 64));
    std::memset(block, 1, 512);
    blocks.emplace_back(c, block);
  }
  EXPECT_EQ(kernelArenaFallbacks() - fallbacks, 4);
  EXPECT_EQ(live(), 1024 + 2048 + 3 * 512);
  for (auto [c, block] : blocks)
    mtc_kernel_workspace_release(c, block);
  EXPECT_EQ(live(), 1024) << "the release frees the heap's blocks";
  mtc_kernel_workspace_release(&context, nullptr);
}

TEST_F(KernelMemoryTest, TemporariesTheCompilerDidNotPlaceCountAsFallbacks) {
  KernelArena arena(1024);
  MtcKernelContext context = mtc_kernel_context(nullptr, nullptr, arena.data(), 1024);
  int64_t fallbacks = kernelArenaFallbacks();
  void *a = mtc_kernel_alloc(&context, 64);
  void *b = mtc_kernel_calloc(nullptr, 4, 16);
  auto inArena = [&](void *p) {
    return static_cast<char *>(p) >= arena.data() && static_cast<char *>(p) < arena.data() + 1024;
  };
  EXPECT_FALSE(inArena(a)) << "the heap, not the workspace";
  EXPECT_FALSE(inArena(b));
  EXPECT_EQ(kernelArenaFallbacks() - fallbacks, 2);
  mtc_kernel_free(&context, a);
  mtc_kernel_free(nullptr, b);
  EXPECT_EQ(live(), 1024);
}
