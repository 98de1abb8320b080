//===- Passes.h - CPU backend passes ----------------------------*- C++ -*-===//
//
// The passes of the CPU backend, from linalg on tensors to the LLVM dialect; the pipeline
// that runs them with upstream's passes is mtc-cpu-pipeline (compiler/pipelines/). What
// follows the LLVM dialect (LLVM IR, O2, the objects, the link) is not MLIR and lives in
// CPUCodegen.h.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_CPU_PASSES_H
#define MTC_COMPILER_CODEGEN_CPU_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mtc::codegen {

#define GEN_PASS_DECL
#include "compiler/codegen/CPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/codegen/CPU/Passes.h.inc"

} // namespace mtc::codegen

#endif // MTC_COMPILER_CODEGEN_CPU_PASSES_H
