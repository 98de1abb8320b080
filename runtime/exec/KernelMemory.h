//===- KernelMemory.h - The allocator compiled kernels call -------*- C++ -*-===//
//
// Compiled step functions allocate every temporary buffer through the process that loads
// them (compiler/codegen/CPUCodegen.h): the backend redirects the object's `malloc`,
// `calloc`, `aligned_alloc` and `free` calls to
//
//   void *mtc_kernel_alloc(size_t size);                   // malloc
//   void *mtc_kernel_calloc(size_t count, size_t size);    // calloc (zeroed)
//   void *mtc_kernel_aligned_alloc(size_t align, size_t size);
//   void  mtc_kernel_free(void *pointer);                  // any of the above, or null
//
// with the C library's semantics (null when out of memory). The runtime defines them here
// on top of the C library and counts the bytes requested: the live total and its high-water
// mark, which is what the plan's `predictions.memory_bytes.workspace` predicts. Each block
// carries a header with its size, so that free needs no table; headers and the C library's
// own overhead are not counted (the compiler's prediction does not see them either).
// The counters are atomics: kernels run on the calling thread, but several threads may run
// kernels at once.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_RUNTIME_EXEC_KERNELMEMORY_H
#define MTC_RUNTIME_EXEC_KERNELMEMORY_H

#include <cstddef>
#include <cstdint>

extern "C" void *mtc_kernel_alloc(size_t size);
extern "C" void *mtc_kernel_calloc(size_t count, size_t size);
extern "C" void *mtc_kernel_aligned_alloc(size_t align, size_t size);
extern "C" void mtc_kernel_free(void *pointer);

namespace mtc::rt {

/// Bytes the kernels hold now, in blocks allocated and not yet freed.
int64_t kernelLiveBytes();
/// The most bytes the kernels held at once since the process started or the last
/// resetKernelPeakBytes.
int64_t kernelPeakBytes();
/// Restarts the high-water mark at the bytes live now.
void resetKernelPeakBytes();

} // namespace mtc::rt

#endif // MTC_RUNTIME_EXEC_KERNELMEMORY_H
