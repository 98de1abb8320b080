//===- Workspace.h - the kernels' temporaries, simulated and planned -*- C++ -*-===//
//
// Predicts the most bytes a compiled function holds in temporaries at once, traces the
// allocations one call makes, and places them in one workspace, on the module the CPU
// backend lowers to LLVM (mtc-cpu-bufferize-pipeline's output). mtc writes the plan into
// plan.json (its `arena`); mtc-workspace-views compiles the same plan into the code (each
// placed memref.alloc becomes a view of the workspace at its offset). The function is run
// abstractly in program order:
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
//                     branch, whose deallocations do not end a life: a buffer the code may
//                     still free later stays live until then (or the end of its call), so
//                     that nothing placed after it can take its bytes too early
//
// Loops and branches with no allocation, deallocation or call of a function with a body
// are skipped. memref.alloca is on the stack and not counted.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_CPU_WORKSPACE_H
#define MTC_COMPILER_CODEGEN_CPU_WORKSPACE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <string>

namespace mtc::codegen {

/// One allocation of a simulated call: its bytes and the ticks of a clock that advances at
/// every allocation and deallocation, when it is allocated and freed; the memref.alloc that
/// makes it and the iteration of the innermost scf.for around that op (in its function)
/// that runs it, 0 outside loops (both unset in traces made by hand).
struct TracedAllocation {
  int64_t bytes;
  int64_t begin, end;
  mlir::Operation *op = nullptr;
  int64_t iteration = 0;
};

/// One simulated call of a function: every allocation it makes, in the order the compiled
/// code makes them (callees' included), with when each is freed; the most bytes live at
/// once; every memref.dealloc it runs with the memref.alloc ops its operand points into
/// there (null: into none of them); and the memref.alloc ops whose memrefs an op the
/// simulation does not model reads while making memrefs of its own (a select of two
/// buffers, a branch that yields them without allocating): where those end is unknown.
struct SimulatedCall {
  llvm::SmallVector<TracedAllocation> allocations;
  int64_t peakBytes = 0;
  llvm::MapVector<mlir::Operation *, llvm::SmallSetVector<mlir::Operation *, 2>> frees;
  llvm::SetVector<mlir::Operation *> escaped;
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
/// `groups` is empty (every allocation placed on its own) or holds one group number per
/// allocation: the allocations of one group, never live at the same time, get one offset.
ArenaPlan planArena(llvm::ArrayRef<TracedAllocation> trace, llvm::ArrayRef<unsigned> groups = {});

/// The alignment of the workspace and of every offset in it (the plan format's
/// kKernelArenaAlignment, runtime/plan/Plan.h).
inline constexpr int64_t kWorkspaceAlignment = 64;

/// Where the temporaries of one function the runtime calls live: the allocations one call
/// makes, in the order it makes them, each at its offset in a workspace of `arenaBytes`.
struct KernelMemoryPlan {
  std::string function;
  int64_t arenaBytes = 0;
  /// The most bytes live at once (the workspace is at least this, more where it fragments).
  int64_t peakBytes = 0;
  llvm::SmallVector<int64_t> sizes, offsets;
};

/// The workspace plan of a module: one KernelMemoryPlan per entry function, and the offsets
/// each placed memref.alloc op gets in the code.
struct WorkspacePlan {
  llvm::SmallVector<KernelMemoryPlan> functions;
  /// A placed op's block in iteration i of its innermost scf.for (see TracedAllocation) is
  /// at offsets[i % offsets.size()]: one offset, or one per phase for a buffer a loop carries
  /// into the next iteration (two live at once). `bytes` is the block's traced size.
  struct Placement {
    llvm::SmallVector<int64_t> offsets;
    int64_t bytes = 0;
  };
  llvm::DenseMap<mlir::Operation *, Placement> placements;
  /// The memref.dealloc ops the simulation ran that only ever free placed allocations.
  llvm::DenseSet<mlir::Operation *> freesOfPlaced;
};

/// The entry functions of `module`: the public functions with a body that no function of the
/// module calls (what the runtime calls).
llvm::SmallVector<mlir::func::FuncOp> workspaceEntries(mlir::ModuleOp module);

/// Plans the temporaries of every entry function of `bufferizedModule` (the output of
/// mtc-cpu-bufferize-pipeline) in one workspace: each call simulated (simulateTemporaries),
/// the calls one after the other in one trace, and the trace packed by planArena with one
/// group per memref.alloc op (per phase, see Placement), so that an op's offset is the same
/// in every call and every function that reaches it. An op whose blocks cannot share one
/// offset (or a few by phase), with an alignment above kWorkspaceAlignment, that escapes
/// the simulation (SimulatedCall::escaped), or freed by a memref.dealloc that may also free
/// something else, is not placed (the runtime allocator serves it); its blocks still get offsets in the functions' plans. An entry that cannot
/// be simulated fails the plan with its diagnostic, or with `unplanned` is appended there
/// and left out.
mlir::FailureOr<WorkspacePlan>
planKernelMemory(mlir::ModuleOp bufferizedModule,
                 llvm::SmallVectorImpl<mlir::func::FuncOp> *unplanned = nullptr);

} // namespace mtc::codegen

#endif // MTC_COMPILER_CODEGEN_CPU_WORKSPACE_H
