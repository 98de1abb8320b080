//===- Passes.h - mt to linalg ----------------------------------*- C++ -*-===//
//
// mt-to-linalg: the `mt` (and `mtp`) functions of a module onto builtin tensors, linalg,
// tensor and scf, the input both backends take (compiler/codegen/CPU/, GPU/).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_TOLINALG_PASSES_H
#define MTC_COMPILER_CODEGEN_TOLINALG_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mtc::codegen {

#define GEN_PASS_DECL
#include "compiler/codegen/ToLinalg/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/codegen/ToLinalg/Passes.h.inc"

} // namespace mtc::codegen

#endif // MTC_COMPILER_CODEGEN_TOLINALG_PASSES_H
