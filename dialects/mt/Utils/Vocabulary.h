//===- Vocabulary.h - the dimension a model classifies over -----*- C++ -*-===//
//
// The frontend's divisibility checks, mtc's parallel flags and mt-pad-vocabulary agree on
// which dimension is the vocabulary a tp degree may pad: the one the loss classifies over.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_DIALECTS_MT_UTILS_VOCABULARY_H
#define MTC_DIALECTS_MT_UTILS_VOCABULARY_H

#include "dialects/mt/IR/MTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mtc::mt {

/// The dimension the first `mt.cross_entropy` of `module`'s `forward` classifies over; the
/// op itself through `loss` when given. Empty when there is none.
inline llvm::StringRef lossClassDim(mlir::ModuleOp module, CrossEntropyOp *loss = nullptr) {
  auto forward = module.lookupSymbol<mlir::func::FuncOp>("forward");
  if (!forward)
    return {};
  CrossEntropyOp first;
  forward.walk([&](CrossEntropyOp op) {
    first = op;
    return mlir::WalkResult::interrupt();
  });
  if (loss)
    *loss = first;
  return first ? first.getDim() : llvm::StringRef();
}

} // namespace mtc::mt

#endif // MTC_DIALECTS_MT_UTILS_VOCABULARY_H
