//===- KernelMemory.cpp - The allocator compiled kernels call -------------===//

#include "runtime/exec/KernelMemory.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

std::atomic<int64_t> liveBytes{0};
std::atomic<int64_t> peakBytes{0};

/// Every block starts with this, right before the pointer the kernel gets: the size the
/// kernel asked for and how far the C library's block starts before the kernel's pointer.
struct Header {
  size_t size;
  size_t offset;
};
// malloc's alignment: the header keeps the kernel's pointer aligned like malloc's.
constexpr size_t kMinAlign = alignof(std::max_align_t);
static_assert(sizeof(Header) <= kMinAlign);

void record(int64_t delta) {
  int64_t live = liveBytes.fetch_add(delta, std::memory_order_relaxed) + delta;
  int64_t peak = peakBytes.load(std::memory_order_relaxed);
  while (live > peak && !peakBytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

/// A block of `size` bytes at a multiple of `align` (a power of two, at least kMinAlign),
/// with its header in the `align` bytes before it.
void *allocate(size_t align, size_t size) {
  if (size > SIZE_MAX - 2 * align)
    return nullptr;
  // aligned_alloc wants a multiple of the alignment.
  size_t total = (align + size + align - 1) & ~(align - 1);
  void *base = align == kMinAlign ? std::malloc(total) : std::aligned_alloc(align, total);
  if (!base)
    return nullptr;
  char *pointer = static_cast<char *>(base) + align;
  reinterpret_cast<Header *>(pointer)[-1] = Header{size, align};
  record(static_cast<int64_t>(size));
  return pointer;
}

} // namespace

extern "C" void *mtc_kernel_alloc(size_t size) { return allocate(kMinAlign, size); }

extern "C" void *mtc_kernel_calloc(size_t count, size_t size) {
  if (size != 0 && count > SIZE_MAX / size)
    return nullptr;
  void *pointer = allocate(kMinAlign, count * size);
  if (pointer)
    std::memset(pointer, 0, count * size);
  return pointer;
}

extern "C" void *mtc_kernel_aligned_alloc(size_t align, size_t size) {
  // C11 aligned_alloc: the alignment must be a power of two.
  if (align == 0 || (align & (align - 1)) != 0)
    return nullptr;
  return allocate(align < kMinAlign ? kMinAlign : align, size);
}

extern "C" void mtc_kernel_free(void *pointer) {
  if (!pointer)
    return;
  Header header = static_cast<Header *>(pointer)[-1];
  record(-static_cast<int64_t>(header.size));
  std::free(static_cast<char *>(pointer) - header.offset);
}

namespace mtc::rt {

int64_t kernelLiveBytes() { return liveBytes.load(std::memory_order_relaxed); }

int64_t kernelPeakBytes() { return peakBytes.load(std::memory_order_relaxed); }

void resetKernelPeakBytes() {
  peakBytes.store(liveBytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

} // namespace mtc::rt
