//===- Passes.h - autodiff passes -------------------------------*- C++ -*-===//

#ifndef MTC_COMPILER_AUTODIFF_PASSES_H
#define MTC_COMPILER_AUTODIFF_PASSES_H

#include "dialects/mt/IR/MTDialect.h"
#include "mlir/Pass/Pass.h"

namespace mtc::autodiff {

#define GEN_PASS_DECL
#include "compiler/autodiff/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/autodiff/Passes.h.inc"

} // namespace mtc::autodiff

#endif // MTC_COMPILER_AUTODIFF_PASSES_H
