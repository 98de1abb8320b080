//===- Workspace.h - the kernels' temporaries, simulated and planned -*- C++ -*-===//
//
// Predicts the most bytes a compiled function holds in temporaries at once, and traces the
// allocations one call makes for the arena the runtime serves them from, on the module the
// CPU backend lowers to LLVM (mtc-cpu-bufferize-pipeline's output: see
// planKernelMemory in CPUCodegen.h). The function is run abstractly in program order:
//
//   memref.alloc      allocates its static size (plus its alignment: finalize-memref-to-llvm
//                     asks malloc for size + alignment and aligns by hand)
//   memref.dealloc    frees the allocation its operand points into (through views, casts and
//                     extract_strided_metadata), if that is still live
//   func.call         peaks at the live bytes plus the callee's own peak (callees free what
//                     they allocate: results are out-parameters)
//   scf.for           runs its iterations one by one (constant bounds), with the iteration
//                     arguments bound to the allocations carried from the previous one, so
//                     a buffer carried across layers is freed when its successor exists
//   scf.if            runs the branch a constant condition picks; on a condition known only
//                     at run time (ownership flags computed by dealloc_helper), the then
//                     branch: the deallocation happens
//
// Loops and branches with no allocation, deallocation or call of a function with a body
// are skipped. memref.alloca is on the stack and not counted. The result counts exactly
// what the kernels request from mtc_kernel_alloc before LLVM's optimisations; those may
// remove an allocation whose contents are never read, which the simulation still counts.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_CPU_WORKSPACE_H
#define MTC_COMPILER_CODEGEN_CPU_WORKSPACE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mtc::codegen {

/// One allocation of a simulated call: its bytes and the ticks of a clock that advances at
/// every allocation and deallocation, when it is allocated and freed.
struct TracedAllocation {
  int64_t bytes;
  int64_t begin, end;
};

/// One simulated call of a function: every allocation it makes, in the order the compiled
/// code makes them (callees' included), with when each is freed; and the most bytes live
/// at once.
struct SimulatedCall {
  llvm::SmallVector<TracedAllocation> allocations;
  int64_t peakBytes = 0;
};

/// Simulates one call of `func` (a function of `module`, on memrefs after the buffer
/// deallocation pipeline). Fails with a diagnostic on the operation it cannot size (a
/// dynamically shaped allocation, a loop with bounds not known at compile time).
mlir::FailureOr<SimulatedCall> simulateTemporaries(mlir::ModuleOp module, mlir::func::FuncOp func);

/// Where each allocation of a trace lives in one arena: offsets (64-byte aligned, in trace
/// order) such that allocations live at the same time do not overlap, and the arena's size.
struct ArenaPlan {
  int64_t bytes = 0;
  llvm::SmallVector<int64_t> offsets;
};
ArenaPlan planArena(llvm::ArrayRef<TracedAllocation> trace);

} // namespace mtc::codegen

#endif // MTC_COMPILER_CODEGEN_CPU_WORKSPACE_H
