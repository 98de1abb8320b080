//===- ParameterRead.h - mixed precision's read of a parameter --*- C++ -*-===//
//
// Under mixed precision (bf16, fp16) parameters keep their f32 master weights and the
// model reads each through an `mt.cast` to the training precision. Passes treat that cast
// like the read itself: autodiff recomputes it in the backward rather than save it, the
// pipeline chunks and the stage cut count it as the parameter (not an activation), so no
// low-precision copy of the weights is kept per micro-batch or sent between stages. One
// cast may serve several reads (the embedding and the head of a tied embedding).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_DIALECTS_MT_UTILS_PARAMETERREAD_H
#define MTC_DIALECTS_MT_UTILS_PARAMETERREAD_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mtc::mt {

/// The parameter `op` casts when `op` is mixed precision's read of one: an `mt.cast` of an
/// `mt.param_ref`'s result, or, after -mt-outline-parameters, of a block argument that
/// `isParameterArgument` accepts. Null otherwise (and for a null `op`).
mlir::Value
getCastParameter(mlir::Operation *op,
                 llvm::function_ref<bool(mlir::BlockArgument)> isParameterArgument = nullptr);

} // namespace mtc::mt

#endif // MTC_DIALECTS_MT_UTILS_PARAMETERREAD_H
