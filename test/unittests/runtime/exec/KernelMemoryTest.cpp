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
  void *a = mtc_kernel_alloc(1000);
  void *b = mtc_kernel_alloc(24);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(live(), 1024);
  mtc_kernel_free(a);
  EXPECT_EQ(live(), 24);
  EXPECT_EQ(peak(), 1024) << "the high-water mark stays";
  void *c = mtc_kernel_alloc(500);
  EXPECT_EQ(peak(), 1024);
  mtc_kernel_free(b);
  mtc_kernel_free(c);
  EXPECT_EQ(live(), 0);
  EXPECT_EQ(peak(), 1024);
  resetKernelPeakBytes();
  EXPECT_EQ(peak(), 0);
}

TEST_F(KernelMemoryTest, FreeOfNullIsANoOp) {
  mtc_kernel_free(nullptr);
  EXPECT_EQ(live(), 0);
}

TEST_F(KernelMemoryTest, ZeroBytesGiveAFreeablePointer) {
  void *p = mtc_kernel_alloc(0);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(live(), 0);
  mtc_kernel_free(p);
}

TEST_F(KernelMemoryTest, MallocAlignmentAndUsableBytes) {
  std::vector<void *> blocks;
  for (size_t size : {1, 3, 16, 17, 4096, 100000}) {
    auto *p = static_cast<unsigned char *>(mtc_kernel_alloc(size));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(alignedTo(p, alignof(std::max_align_t))) << size;
    std::memset(p, 0xab, size); // the whole block is usable (sanitizers check the bounds)
    blocks.push_back(p);
  }
  for (void *p : blocks)
    mtc_kernel_free(p);
  EXPECT_EQ(live(), 0);
  EXPECT_EQ(peak(), 1 + 3 + 16 + 17 + 4096 + 100000);
}

TEST_F(KernelMemoryTest, AlignedAllocRespectsTheAlignment) {
  for (size_t align : {1, 8, 16, 32, 64, 128, 4096}) {
    void *p = mtc_kernel_aligned_alloc(align, 200);
    ASSERT_NE(p, nullptr) << align;
    EXPECT_TRUE(alignedTo(p, align)) << align;
    EXPECT_EQ(live(), 200) << "the header is not counted";
    std::memset(p, 0, 200);
    mtc_kernel_free(p);
    EXPECT_EQ(live(), 0);
  }
  EXPECT_EQ(mtc_kernel_aligned_alloc(48, 96), nullptr) << "not a power of two";
  EXPECT_EQ(mtc_kernel_aligned_alloc(0, 96), nullptr);
  EXPECT_EQ(live(), 0);
}

TEST_F(KernelMemoryTest, CallocZeroes) {
  auto *p = static_cast<unsigned char *>(mtc_kernel_calloc(10, 7));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(live(), 70);
  for (int i = 0; i < 70; ++i)
    EXPECT_EQ(p[i], 0) << i;
  mtc_kernel_free(p);
  EXPECT_EQ(mtc_kernel_calloc(SIZE_MAX / 2, 4), nullptr) << "the product overflows";
  EXPECT_EQ(live(), 0);
}

TEST_F(KernelMemoryTest, OutOfMemoryIsNullAndNotCounted) {
  EXPECT_EQ(mtc_kernel_alloc(SIZE_MAX - 8), nullptr);
  EXPECT_EQ(live(), 0);
  EXPECT_EQ(peak(), 0);
}

TEST_F(KernelMemoryTest, ThreadsShareTheCounters) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 1000; ++i)
        mtc_kernel_free(mtc_kernel_alloc(64));
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(live(), 0);
  EXPECT_GE(peak(), 64);
  EXPECT_LE(peak(), 4 * 64);
}
