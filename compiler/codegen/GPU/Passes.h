//===- Passes.h - GPU backend passes ----------------------------*- C++ -*-===//
//
// The passes that make the host side of a CUDA step (GPUCodegen.h, "Host code"); the
// pipeline that runs them with the CPU backend's lowering is mtc-gpu-host-to-llvm-pipeline
// (compiler/pipelines/).
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_GPU_PASSES_H
#define MTC_COMPILER_CODEGEN_GPU_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mtc::codegen {

#define GEN_PASS_DECL
#include "compiler/codegen/GPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/codegen/GPU/Passes.h.inc"

} // namespace mtc::codegen

#endif // MTC_COMPILER_CODEGEN_GPU_PASSES_H
