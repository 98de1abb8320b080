//===- MLIRGen.h - lowering the .mtl AST to the mt dialect ------*- C++ -*-===//
//
// Checks what the grammar cannot (names, dimension sizes, builtin arguments, the train and
// parallel settings) and builds the `mt` module. Every problem is reported through the
// frontend's Diagnostics at the offending span; lowering goes on after an error where it
// can, so one run reports several independent problems.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_FRONTEND_MLIRGEN_H
#define MTC_FRONTEND_MLIRGEN_H

#include "frontend/AST.h"
#include "frontend/Diagnostics.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace mtc::frontend {

/// Lowers `module` to `mt`. Returns null when any error was reported.
mlir::OwningOpRef<mlir::ModuleOp> lowerToMT(const Module &module, mlir::MLIRContext &context,
                                            Diagnostics &diags);

} // namespace mtc::frontend

#endif // MTC_FRONTEND_MLIRGEN_H
