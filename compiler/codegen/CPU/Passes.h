//===- Passes.h - codegen passes --------------------------------*- C++ -*-===//
//
// The passes of the kernel level. The backends that take their output to machine code are
// functions, not passes: CPUCodegen.h (x86 shared object) and GPUCodegen.h (PTX).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_PASSES_H
#define MTC_COMPILER_CODEGEN_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mtc::codegen {

#define GEN_PASS_DECL
#include "compiler/codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/codegen/Passes.h.inc"

} // namespace mtc::codegen

#endif // MTC_COMPILER_CODEGEN_PASSES_H
