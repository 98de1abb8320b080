//===- KernelMemory.cpp - The allocator compiled kernels call -------------===//

#include "runtime/exec/KernelMemory.h"
#include "runtime/plan/Plan.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

std::atomic<int64_t> liveBytes{0};
std::atomic<int64_t> peakBytes{0};
std::atomic<int64_t> arenaFallbacks{0};
constexpr auto kArenaAlign = static_cast<size_t>(mtc::rt::kKernelArenaAlignment);

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

/// From the heap, counted as a block the workspace did not hold.
void *allocateForKernel(size_t align, size_t size) {
  arenaFallbacks.fetch_add(1, std::memory_order_relaxed);
  return allocate(align, size);
}

void release(void *pointer) {
  Header header = static_cast<Header *>(pointer)[-1];
  record(-static_cast<int64_t>(header.size));
  std::free(static_cast<char *>(pointer) - header.offset);
}

} // namespace

extern "C" void *mtc_kernel_workspace(MtcKernelContext *context, size_t bytes) {
  const MtcKernelContext *checked = mtc_kernel_context_checked(context);
  if (checked && checked->workspace && checked->workspace_bytes >= bytes)
    return checked->workspace;
  return allocateForKernel(kArenaAlign, bytes);
}

extern "C" void mtc_kernel_workspace_release(MtcKernelContext *context, void *workspace) {
  const MtcKernelContext *checked = mtc_kernel_context_checked(context);
  if (!workspace || (checked && workspace == checked->workspace))
    return;
  release(workspace);
}

extern "C" void *mtc_kernel_alloc(MtcKernelContext *, size_t size) {
  return allocateForKernel(kMinAlign, size);
}

extern "C" void *mtc_kernel_calloc(MtcKernelContext *, size_t count, size_t size) {
  if (size != 0 && count > SIZE_MAX / size)
    return nullptr;
  void *pointer = allocateForKernel(kMinAlign, count * size);
  if (pointer)
    std::memset(pointer, 0, count * size);
  return pointer;
}

extern "C" void *mtc_kernel_aligned_alloc(MtcKernelContext *, size_t align, size_t size) {
  // C11 aligned_alloc: the alignment must be a power of two.
  if (align == 0 || (align & (align - 1)) != 0)
    return nullptr;
  return allocateForKernel(align < kMinAlign ? kMinAlign : align, size);
}

extern "C" void mtc_kernel_free(MtcKernelContext *, void *pointer) {
  if (pointer)
    release(pointer);
}

namespace mtc::rt {

KernelArena::KernelArena(int64_t bytes) : bytes_(bytes) {
  if (bytes <= 0)
    return;
  auto total = static_cast<size_t>((bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign);
  data_ = static_cast<char *>(std::aligned_alloc(kArenaAlign, total));
  if (data_)
    record(bytes_);
}

KernelArena::~KernelArena() {
  if (!data_)
    return;
  record(-bytes_);
  std::free(data_);
}

int64_t kernelArenaFallbacks() { return arenaFallbacks.load(std::memory_order_relaxed); }

int64_t kernelLiveBytes() { return liveBytes.load(std::memory_order_relaxed); }

int64_t kernelPeakBytes() { return peakBytes.load(std::memory_order_relaxed); }

void resetKernelPeakBytes() {
  peakBytes.store(liveBytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

} // namespace mtc::rt
