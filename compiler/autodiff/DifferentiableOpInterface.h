//===- DifferentiableOpInterface.h - VJPs of mt ops -------------*- C++ -*-===//

#ifndef MTC_COMPILER_AUTODIFF_DIFFERENTIABLEOPINTERFACE_H
#define MTC_COMPILER_AUTODIFF_DIFFERENTIABLEOPINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/OpDefinition.h"

#include "compiler/autodiff/DifferentiableOpInterface.h.inc"

namespace mtc::autodiff {

/// Attaches the VJP rules of every differentiable `mt` op.
void registerVJPRules(mlir::DialectRegistry &registry);

} // namespace mtc::autodiff

#endif // MTC_COMPILER_AUTODIFF_DIFFERENTIABLEOPINTERFACE_H
