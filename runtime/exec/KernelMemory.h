//===- KernelMemory.h - The allocator compiled kernels call -------*- C++ -*-===//
//
// Compiled step functions allocate every temporary buffer through the process that loads
// them (compiler/codegen/CPU/CPUCodegen.h): the backend redirects the object's `malloc`,
// `calloc`, `aligned_alloc` and `free` calls to (runtime/exec/KernelABI.h)
//
//   void *mtc_kernel_alloc(MtcKernelContext *c, size_t size);                  // malloc
//   void *mtc_kernel_calloc(MtcKernelContext *c, size_t count, size_t size);   // calloc
//   void *mtc_kernel_aligned_alloc(MtcKernelContext *c, size_t align, size_t size);
//   void  mtc_kernel_free(MtcKernelContext *c, void *pointer);  // any of the above, or null
//
// with the C library's semantics (null when out of memory) and the call's kernel context
// in front. The runtime defines them here
// on top of the C library and counts the bytes requested: the live total and its high-water
// mark, which is what the plan's `predictions.memory_bytes.workspace` predicts. Each block
// carries a header with its size, so that free needs no table; headers and the C library's
// own overhead are not counted (the compiler's prediction does not see them either).
// The counters are atomics: kernels run on the calling thread, but several threads may run
// kernels at once.
//
// Arenas. The compiler plans where each temporary of a call lives (the plan's `arena`: the
// allocations one call makes, in order, at offsets in one block; compiler/codegen/CPU/
// Workspace.h). A `KernelArena` is that block, 64-byte aligned and counted as live kernel
// bytes while it exists; a `KernelArenaCall` in a call's kernel context
// (MtcKernelContext::arena) serves the call's allocations from it: the n-th allocation gets the
// n-th planned offset when its size is the planned one and its bytes do not overlap a planned block
// still live, and frees inside the arena only end a block's life. Anything else (a size the plan
// did not predict, an alignment above 64, a plan shorter than the call) falls back to the heap and
// is counted, so a plan that does not match the code costs memory, never correctness. Without a
// KernelArenaCall (a null context or arena, or a context of another ABI version) every block comes
// from the heap, counted.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_KERNELMEMORY_H
#define MTC_RUNTIME_EXEC_KERNELMEMORY_H

#include "runtime/exec/KernelABI.h"
#include "runtime/plan/Plan.h"

#include <cstddef>
#include <cstdint>

#include <map>

namespace mtc::rt {

/// The block planned temporaries live in: `bytes` at a 64-byte aligned address, counted in
/// kernelLiveBytes while it exists. Empty (every allocation then falls back to the heap)
/// when the memory cannot be had.
class KernelArena {
public:
  explicit KernelArena(int64_t bytes);
  ~KernelArena();
  KernelArena(const KernelArena &) = delete;
  KernelArena &operator=(const KernelArena &) = delete;
  char *data() const { return data_; }
  int64_t size() const { return data_ ? bytes_ : 0; }

private:
  char *data_ = nullptr;
  int64_t bytes_ = 0;
};

/// The arena side of one kernel call: serves the allocations of the call whose context
/// holds its address from `arena` at `plan`'s offsets (see the file comment). Both must
/// outlive it.
class KernelArenaCall {
public:
  KernelArenaCall(const KernelArena &arena, const KernelArenaPlan &plan);
  KernelArenaCall(const KernelArenaCall &) = delete;
  KernelArenaCall &operator=(const KernelArenaCall &) = delete;
  /// Allocations served from the arena, and those that fell back to the heap, so far.
  int64_t served() const { return served_; }
  int64_t fellBack() const { return fellBack_; }

  /// The kernels' allocation functions' side (null: not served from the arena).
  void *allocate(size_t align, size_t size);
  bool release(void *pointer);

  /// The KernelArenaCall of `context` (null when it has none or is not of this ABI version).
  static KernelArenaCall *of(const MtcKernelContext *context);

private:
  char *base_;
  int64_t bytes_;
  const std::vector<ArenaAllocation> &plan_;
  size_t next_ = 0;
  std::map<int64_t, int64_t> live_; // planned blocks in use: offset -> end
  int64_t served_ = 0, fellBack_ = 0;
};

/// Allocations that arena plans did not serve (fell back to the heap) since the process
/// started, over all threads.
int64_t kernelArenaFallbacks();

/// Bytes the kernels hold now, in blocks allocated and not yet freed.
int64_t kernelLiveBytes();
/// The most bytes the kernels held at once since the process started or the last
/// resetKernelPeakBytes.
int64_t kernelPeakBytes();
/// Restarts the high-water mark at the bytes live now.
void resetKernelPeakBytes();

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_KERNELMEMORY_H
