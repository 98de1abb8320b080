//===- Passes.h - lowering passes -------------------------------*- C++ -*-===//

#ifndef MTC_COMPILER_LOWERING_PASSES_H
#define MTC_COMPILER_LOWERING_PASSES_H

#include "dialects/mt/IR/MTDialect.h"
#include "mlir/Pass/Pass.h"

namespace mtc::lowering {

#define GEN_PASS_DECL
#include "compiler/lowering/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/lowering/Passes.h.inc"

} // namespace mtc::lowering

#endif // MTC_COMPILER_LOWERING_PASSES_H
