//===- Passes.h - kernel fusion passes --------------------------*- C++ -*-===//
//
// Fusion on linalg-on-tensors, between mt-to-linalg and the backends (CPUCodegen.h,
// GPUCodegen.h), which both run it before bufferization.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_FUSION_PASSES_H
#define MTC_COMPILER_FUSION_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mtc::fusion {

#define GEN_PASS_DECL
#include "compiler/fusion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/fusion/Passes.h.inc"

} // namespace mtc::fusion

#endif // MTC_COMPILER_FUSION_PASSES_H
