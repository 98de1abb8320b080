//===- FusedKernels.h - the kernels mtc's fusion forms from mt ops -*- C++ -*-===//
//
// Groups the ops of one block of the partitioned step into the kernels mtc-fuse-elementwise
// makes of them after mt-to-linalg, by the fusion's own rule (compiler/fusion/FusionRule.h):
// an op whose loop nest is parallel is fused into the generic kernel that is its result's
// only use, transitively, unless that kernel reads it broadcast and it (or what is fused
// into it) is costly per element. Each kernel has a root, the op that writes its result;
// the other ops' results never reach memory. Ops that lower to no code (`isPassThrough`) are looked
// through: a value used by a rename is used by the rename's users.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_ANALYSIS_FUSEDKERNELS_H
#define MTC_COMPILER_ANALYSIS_FUSEDKERNELS_H

#include "mlir/IR/Block.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mtc {

class FusedKernels {
public:
  /// `isKernel`: the ops that are kernels of their own before fusion (what the caller
  /// prices by traffic); `isPassThrough`: the ops that are no code, their result being
  /// their first operand.
  FusedKernels(mlir::Block &block, llvm::function_ref<bool(mlir::Operation *)> isKernel,
               llvm::function_ref<bool(mlir::Operation *)> isPassThrough);

  /// The root of the kernel `op` belongs to (`op` itself when it writes its result);
  /// null for an op that is no kernel.
  mlir::Operation *rootOf(mlir::Operation *op) const;

  /// The ops of the kernel rooted at `root`, in block order, the root last.
  llvm::ArrayRef<mlir::Operation *> members(mlir::Operation *root) const;

  /// What `value` is a view of: through the pass-through ops that define it.
  mlir::Value source(mlir::Value value) const;

private:
  llvm::function_ref<bool(mlir::Operation *)> isPassThrough;
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> fusedInto;
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Operation *, 4>> kernels;
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> roots;
};

} // namespace mtc

#endif // MTC_COMPILER_ANALYSIS_FUSEDKERNELS_H
