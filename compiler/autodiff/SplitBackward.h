//===- SplitBackward.h - B/W split of one layer backward --------*- C++ -*-===//
//
// What -mt-split-backward does to each layer backward, for passes that need the parts of
// one (the pipeline chunks' backward_input / backward_weight). Passes.td describes them.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_AUTODIFF_SPLITBACKWARD_H
#define MTC_COMPILER_AUTODIFF_SPLITBACKWARD_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mtc::autodiff {

struct BackwardParts {
  mlir::func::FuncOp input;  // @L.bwd.input
  mlir::func::FuncOp weight; // @L.bwd.weight
  /// The leading arguments of @L.bwd (and @L.bwd.input) that are the gradients of the
  /// layer's results; @L.bwd.weight does not take them.
  unsigned numResultGrads = 0;
};

/// Adds `@L.bwd.input` and `@L.bwd.weight` after layer backward `backward` (a function
/// with `mt.layer_of` and `mt.param_grads`) whose last `numInvariant` arguments are its
/// repeat's invariant operands (W takes them last, after the stash, as a repeat of W passes
/// them); emits an error and fails on one it cannot split.
mlir::FailureOr<BackwardParts> splitLayerBackward(mlir::func::FuncOp backward,
                                                  unsigned numInvariant = 0);

} // namespace mtc::autodiff

#endif // MTC_COMPILER_AUTODIFF_SPLITBACKWARD_H
