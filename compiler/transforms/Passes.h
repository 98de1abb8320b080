//===- Passes.h - cross-dialect transforms ----------------------*- C++ -*-===//

#ifndef MTC_COMPILER_TRANSFORMS_PASSES_H
#define MTC_COMPILER_TRANSFORMS_PASSES_H

#include "dialects/mt/IR/MTDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mtc::transforms {

/// Unit attribute on a module whose functions take their parameters and states as
/// arguments (after -mt-outline-parameters).
inline constexpr llvm::StringLiteral kOutlinedAttrName = "mt.outlined";
/// Argument and result attributes naming the `mt.param` / `mt.state` a value holds.
inline constexpr llvm::StringLiteral kParamAttrName = "mt.param";
inline constexpr llvm::StringLiteral kStateAttrName = "mt.state";

#define GEN_PASS_DECL
#include "compiler/transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/transforms/Passes.h.inc"

} // namespace mtc::transforms

#endif // MTC_COMPILER_TRANSFORMS_PASSES_H
