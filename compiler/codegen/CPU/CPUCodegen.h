//===- CPUCodegen.h - linalg functions to an x86 shared object --*- C++ -*-===//
//
// The CPU backend: a module of `func.func`s on builtin tensors (mt-to-linalg's output) to a
// shared object, entirely in-process except for the final link. Its MLIR part is a pass
// pipeline (compiler/pipelines/: mtc-cpu-bufferize-pipeline, then mtc-cpu-to-llvm-pipeline,
// together mtc-cpu-pipeline; the passes are compiler/codegen/CPU/Passes.td); this header is
// what follows on LLVM IR (compileToObject, compileToSharedObject); the memory plan read off
// the bufferized module is Workspace.h's.
//
// Calling convention. Every public function `@f` is exported as `_mlir_ciface_f`, which
// takes the kernel context (an `MtcKernelContext *`, runtime/exec/KernelABI.h: the caller's
// state of the call, which the code passes on unread to the runtime functions it calls),
// then one pointer to a memref descriptor per tensor argument followed by one per result
// (results become out-parameters the caller allocates), and returns nothing:
//
//   func.func @f(%x: tensor<2x8xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32>
//   void _mlir_ciface_f(MtcKernelContext *context, StridedMemRefType<float, 2> *x,
//                       StridedMemRefType<float, 1> *b, StridedMemRefType<float, 2> *result);
//
// A descriptor is `{T *allocated, T *aligned, int64_t offset, int64_t sizes[rank],
// int64_t strides[rank]}` (mlir/ExecutionEngine/CRunnerUtils.h); the code reads and writes
// row-major contiguous data at `aligned + offset`. The object needs libm (erff, tanhf, ...)
// and libc; with `cc` as the linker both are recorded as dependencies.
//
// Every name the object imports or exports, and the codes it passes, are the kernel ABI's
// (runtime/exec/KernelABI.h), which the runtime's definitions include too. The context is
// an explicit argument of every function (mtc-thread-kernel-context), so nothing the
// runtime does for one call is per-thread.
//
// Temporaries. Intermediate buffers live in one workspace per call that the caller passes
// in the kernel context (runtime/exec/KernelABI.h). The compiler plans where each lives
// (compiler/codegen/CPU/Workspace.h: planKernelMemory, which mtc also writes into the
// plan's `arena`), and mtc-workspace-views compiles the plan in: each placed memref.alloc
// becomes a memref.view of the workspace at its offset, and its frees disappear. A function
// with placed temporaries asks for the workspace once per call, giving the bytes its views
// reach, and hands it back before it returns:
//
//   void *mtc_kernel_workspace(MtcKernelContext *context, size_t bytes);  // 64-byte aligned
//   void mtc_kernel_workspace_release(MtcKernelContext *context, void *workspace);
//
// The runtime returns the context's workspace when it holds `bytes`, else a block of its
// own (counted, freed by the release). Allocations the planner cannot place (none in the
// example models) are still allocated and freed through four external functions the process
// loading the object defines (runtime/exec/KernelMemory.h), with the C library's semantics
// and the context in front: kKernelAllocFunction (malloc), kKernelCallocFunction (calloc),
// kKernelAlignedAllocFunction (aligned_alloc) and kKernelFreeFunction (free).
// mtc-redirect-allocations rewrites the C library's calls finalize-memref-to-llvm emits into
// these; the backend then describes them to LLVM as the allocator they are (allockind,
// allocsize, a noalias result), so that LLVM's optimisations still remove allocations
// nothing uses.
//
//   void *mtc_kernel_alloc(MtcKernelContext *context, size_t size);
//   void *mtc_kernel_calloc(MtcKernelContext *context, size_t count, size_t size);
//   void *mtc_kernel_aligned_alloc(MtcKernelContext *context, size_t align, size_t size);
//   void mtc_kernel_free(MtcKernelContext *context, void *pointer);
//
// Each `_mlir_ciface_f` also gets a packed entry point, so that a runtime can call a
// function of any arity without generating calls itself, and the object exports the
// version of the context it was compiled for (the runtime refuses another):
//
//   void _mtc_packed_f(MtcKernelContext *context, void **descriptors);
//                                      // _mlir_ciface_f(context, descriptors[0], ...)
//   const uint32_t mtc_kernel_context_version;   // MTC_KERNEL_CONTEXT_VERSION
//
// GEMMs. Every f32 `linalg.batch_matmul` (mt-to-linalg's form of an f32 `mt.contract`)
// becomes a call of the external function kBatchMatmulF32Function (mtc-batch-matmul-to-calls),
// which the process loading the object defines (runtime/exec/Gemm.h, with BLAS):
//
//   void _mlir_ciface_mtc_batch_matmul_f32(MtcKernelContext *context,
//                                          StridedMemRefType<float, 3> *a,
//                                          StridedMemRefType<float, 3> *b,
//                                          StridedMemRefType<float, 3> *c);
//
// It computes c[i] += a[i] x b[i] for every i < sizes[0] (a: [batch, m, k], b:
// [batch, k, n], c: [batch, m, n]), the accumulation of linalg.batch_matmul (c arrives
// zero-filled from mt-to-linalg). The descriptors may have any strides and offset (views
// of larger buffers); the three buffers do not overlap. A product of two bf16 inputs into
// an f32 result calls kBatchMatmulBF16Function the same way (a and b bf16 descriptors,
// runtime/exec/GemmBf16.cpp, on the CPU's bf16 instructions).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_CPU_CPUCODEGEN_H
#define MTC_COMPILER_CODEGEN_CPU_CPUCODEGEN_H

#include "runtime/exec/KernelABI.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mtc::codegen {

// The names below are the kernel ABI's (runtime/exec/KernelABI.h).

/// The prefixes of the C interfaces and of the packed entry points (see the file comment).
inline constexpr llvm::StringLiteral kCInterfacePrefix = MTC_ABI_C_INTERFACE_PREFIX;
inline constexpr llvm::StringLiteral kPackedEntryPrefix = MTC_ABI_PACKED_ENTRY_PREFIX;

/// The external function f32 batched matrix products call (see the file comment); the
/// object imports kCInterfacePrefix followed by this name.
inline constexpr llvm::StringLiteral kBatchMatmulF32Function = MTC_ABI_BATCH_MATMUL_F32;
/// The same for products of two bf16 inputs into an f32 result (uint16_t elements).
inline constexpr llvm::StringLiteral kBatchMatmulBF16Function = MTC_ABI_BATCH_MATMUL_BF16;

/// The symbol of the exported version of the kernel context (see the file comment).
inline constexpr llvm::StringLiteral kKernelContextVersionSymbol = MTC_ABI_KERNEL_CONTEXT_VERSION;

/// The attribute of the kernel context argument (mtc-thread-kernel-context).
inline constexpr llvm::StringLiteral kKernelContextAttrName = "mtc.kernel_context";

/// The allocation functions the object imports (see the file comment).
inline constexpr llvm::StringLiteral kKernelAllocFunction = MTC_ABI_KERNEL_ALLOC;
inline constexpr llvm::StringLiteral kKernelCallocFunction = MTC_ABI_KERNEL_CALLOC;
inline constexpr llvm::StringLiteral kKernelAlignedAllocFunction = MTC_ABI_KERNEL_ALIGNED_ALLOC;
inline constexpr llvm::StringLiteral kKernelFreeFunction = MTC_ABI_KERNEL_FREE;

/// The workspace's functions the object imports (see the file comment).
inline constexpr llvm::StringLiteral kKernelWorkspaceFunction = MTC_ABI_KERNEL_WORKSPACE;
inline constexpr llvm::StringLiteral kKernelWorkspaceReleaseFunction =
    MTC_ABI_KERNEL_WORKSPACE_RELEASE;

/// The attribute of a block of the workspace (on the insertion of its aligned pointer into
/// the descriptor mtc-workspace-views builds): the byte ranges [begin, end) it may take, for
/// mtc-workspace-alias-scopes.
inline constexpr llvm::StringLiteral kWorkspaceRangesAttrName = "mtc.workspace_ranges";

struct CPUCodegenOptions {
  /// Target CPU: "native" (the host CPU and its features, the default: plans are run where
  /// they are compiled) or an LLVM CPU name such as "x86-64-v3" for a portable object.
  std::string cpu = "native";
  /// LLVM optimisation level, 0 to 3. 2: O3 took 1.8 times O2's optimisation time on
  /// gpt-tiny's step (18.5 s vs 10.4 s) for kernels of the same speed (the products are BLAS
  /// calls; O2 already vectorises the loops).
  unsigned optLevel = 2;
  /// The parts the module is cut into (partitionModule): their objects are compiled in
  /// parallel. It fixes the object code, unlike `threads`.
  unsigned parts = 8;
  /// Threads compiling the parts; 0: one per hardware thread.
  unsigned threads = 0;
  /// Linker to run; empty picks the first of `cc`, `ld.lld-22`, `ld.lld` on PATH.
  std::string linker;
};

/// Compiles `llvmDialectModule` (mtc-cpu-pipeline's output, left unchanged) to the shared
/// object `outputPath`: compileToObjects, linked.
llvm::Error compileToSharedObject(mlir::ModuleOp llvmDialectModule, llvm::StringRef outputPath,
                                  const CPUCodegenOptions &options = {});

/// The x86 object code of `llvmDialectModule`, before linking (for tests and for tools that
/// link several objects together): LLVM IR, the packed entry points and the context version
/// (addExports), the allocation functions described to LLVM (describeAllocationFunctions),
/// the dropout decision's bitcode (linkDropoutKeep), LLVM's O<optLevel> pipeline, object
/// emission: compileToObjects with the module whole (one part).
llvm::Expected<std::string> compileToObject(mlir::ModuleOp llvmDialectModule,
                                            const CPUCodegenOptions &options = {});

/// The same code as objects to link together: the module cut into `options.parts` parts
/// (ModulePartition.h), optimised and emitted on `options.threads` threads.
llvm::Expected<std::vector<std::string>>
compileToObjects(mlir::ModuleOp llvmDialectModule, const CPUCodegenOptions &options = {});

} // namespace mtc::codegen

#endif // MTC_COMPILER_CODEGEN_CPU_CPUCODEGEN_H
