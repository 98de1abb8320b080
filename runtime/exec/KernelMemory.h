//===- KernelMemory.h - The allocator compiled kernels call -------*- C++ -*-===//
//
// Compiled step functions take their temporary buffers from the process that loads them
// (compiler/codegen/CPU/CPUCodegen.h): from one workspace per call (below), and the few the
// compiler does not place there through the object's `malloc`, `calloc`, `aligned_alloc`
// and `free` calls, which the backend redirects to (runtime/exec/KernelABI.h)
//
//   void *mtc_kernel_alloc(MtcKernelContext *c, size_t size);                  // malloc
//   void *mtc_kernel_calloc(MtcKernelContext *c, size_t count, size_t size);   // calloc
//   void *mtc_kernel_aligned_alloc(MtcKernelContext *c, size_t align, size_t size);
//   void  mtc_kernel_free(MtcKernelContext *c, void *pointer);  // any of the above, or null
//
// with the C library's semantics (null when out of memory) and the call's kernel context
// in front. The runtime defines them here on top of the C library and counts the bytes
// requested, with the workspaces: the live total and its high-water mark, which is what the
// plan's `predictions.memory_bytes.workspace` predicts. Each block
// carries a header with its size, so that free needs no table; headers and the C library's
// own overhead are not counted (the compiler's prediction does not see them either).
// The counters are atomics: kernels run on the calling thread, but several threads may run
// kernels at once.
//
// The workspace. The compiler places the temporaries of each function at offsets in one
// workspace and compiles them in (compiler/codegen/CPU/Workspace.h, mtc-workspace-views);
// the plan's `arena.bytes` is its size. A `KernelArena` is that block, 64-byte aligned and
// counted as live kernel bytes while it exists; a call passes it in its kernel context
// (MtcKernelContext::workspace), and the compiled function asks for it once per call:
//
//   void *mtc_kernel_workspace(MtcKernelContext *c, size_t bytes);   // 64-byte aligned
//   void  mtc_kernel_workspace_release(MtcKernelContext *c, void *workspace);
//
// which returns the context's workspace when it holds `bytes`, else (a null context, none,
// one too small) a block of `bytes` from the heap, counted, which the release frees. Heap
// blocks of any kind, workspaces and the temporaries the compiler did not place, are counted
// in kernelArenaFallbacks: a plan whose kernels match it makes none.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_KERNELMEMORY_H
#define MTC_RUNTIME_EXEC_KERNELMEMORY_H

#include "runtime/exec/KernelABI.h"

#include <cstddef>
#include <cstdint>

namespace mtc::rt {

/// The workspace placed temporaries live in: `bytes` at a 64-byte aligned address, counted
/// in kernelLiveBytes while it exists. Empty (the kernels then take their workspace from the
/// heap) when the memory cannot be had.
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

/// Heap blocks the kernels allocated since the process started, over all threads: their
/// temporaries the compiler did not place, and workspaces their context did not hold.
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
