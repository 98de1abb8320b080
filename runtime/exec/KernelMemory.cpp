//===- KernelMemory.cpp - The allocator compiled kernels call -------------===//

#include "runtime/exec/KernelMemory.h"

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

/// From the call's arena, else the heap.
void *allocateForKernel(const MtcKernelContext *context, size_t align, size_t size) {
  if (mtc::rt::KernelArenaCall *arena = mtc::rt::KernelArenaCall::of(context))
    if (void *pointer = arena->allocate(align, size))
      return pointer;
  return allocate(align, size);
}

} // namespace

extern "C" void *mtc_kernel_alloc(MtcKernelContext *context, size_t size) {
  return allocateForKernel(context, kMinAlign, size);
}

extern "C" void *mtc_kernel_calloc(MtcKernelContext *context, size_t count, size_t size) {
  if (size != 0 && count > SIZE_MAX / size)
    return nullptr;
  void *pointer = allocateForKernel(context, kMinAlign, count * size);
  if (pointer)
    std::memset(pointer, 0, count * size);
  return pointer;
}

extern "C" void *mtc_kernel_aligned_alloc(MtcKernelContext *context, size_t align, size_t size) {
  // C11 aligned_alloc: the alignment must be a power of two.
  if (align == 0 || (align & (align - 1)) != 0)
    return nullptr;
  return allocateForKernel(context, align < kMinAlign ? kMinAlign : align, size);
}

extern "C" void mtc_kernel_free(MtcKernelContext *context, void *pointer) {
  if (!pointer)
    return;
  if (mtc::rt::KernelArenaCall *arena = mtc::rt::KernelArenaCall::of(context);
      arena && arena->release(pointer))
    return;
  Header header = static_cast<Header *>(pointer)[-1];
  record(-static_cast<int64_t>(header.size));
  std::free(static_cast<char *>(pointer) - header.offset);
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

KernelArenaCall::KernelArenaCall(const KernelArena &arena, const KernelArenaPlan &plan)
    : base_(arena.data()), bytes_(arena.size()), plan_(plan.allocations) {}

KernelArenaCall *KernelArenaCall::of(const MtcKernelContext *context) {
  const MtcKernelContext *checked = mtc_kernel_context_checked(context);
  return checked ? static_cast<KernelArenaCall *>(checked->arena) : nullptr;
}

void *KernelArenaCall::allocate(size_t align, size_t size) {
  auto fallBack = [&]() -> void * {
    ++fellBack_;
    arenaFallbacks.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  };
  if (next_ >= plan_.size())
    return fallBack();
  const ArenaAllocation &planned = plan_[next_++];
  // Empty blocks come from the heap (an arena pointer one past its end could not be told
  // from the next block's).
  if (size == 0)
    return nullptr;
  int64_t begin = planned.offset, end = planned.offset + planned.size;
  bool fits = base_ && static_cast<int64_t>(size) == planned.size && align <= kArenaAlign &&
              end <= bytes_;
  if (fits) {
    // A planned block whose life has not ended yet (the plan assumed a free that did not
    // happen) keeps its bytes.
    auto after = live_.upper_bound(begin);
    fits = (after == live_.end() || after->first >= end) &&
           (after == live_.begin() || std::prev(after)->second <= begin);
  }
  if (!fits)
    return fallBack();
  live_[begin] = end;
  ++served_;
  return base_ + begin;
}

bool KernelArenaCall::release(void *pointer) {
  char *p = static_cast<char *>(pointer);
  if (!base_ || p < base_ || p >= base_ + bytes_)
    return false;
  live_.erase(p - base_);
  return true;
}

int64_t kernelArenaFallbacks() { return arenaFallbacks.load(std::memory_order_relaxed); }

int64_t kernelLiveBytes() { return liveBytes.load(std::memory_order_relaxed); }

int64_t kernelPeakBytes() { return peakBytes.load(std::memory_order_relaxed); }

void resetKernelPeakBytes() {
  peakBytes.store(liveBytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

} // namespace mtc::rt
