//===- Passes.h - optimizer passes ------------------------------*- C++ -*-===//

#ifndef MTC_COMPILER_OPTIMIZER_PASSES_H
#define MTC_COMPILER_OPTIMIZER_PASSES_H

#include "dialects/mt/IR/MTDialect.h"
#include "mlir/Pass/Pass.h"

namespace mtc::optimizer {

#define GEN_PASS_DECL
#include "compiler/optimizer/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/optimizer/Passes.h.inc"

} // namespace mtc::optimizer

#endif // MTC_COMPILER_OPTIMIZER_PASSES_H
