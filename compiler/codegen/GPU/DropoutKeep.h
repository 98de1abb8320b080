//===- DropoutKeep.h - Philox's dropout decision for the GPU kernels --*- C++ -*-===//
//
// The x86 kernels link the dropout decision in as C (compiler/codegen/CPU/DropoutKeep.c);
// a GPU kernel cannot call into the host, so the GPU backend defines the same function in
// the kernels' module, built from arith ops: Philox4x32-10 (runtime/support/Philox.h) on
// the element's counter, kept iff the top 24 bits of the first word, as a float in [0, 1),
// are below the keep probability. Same bits as the runtime on every target.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_GPU_DROPOUTKEEP_H
#define MTC_COMPILER_CODEGEN_GPU_DROPOUTKEEP_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mtc::codegen {

/// Replaces the declaration of kDropoutKeepFunction in `kernels` (gpu-kernel-outlining
/// copies it there from the host module), if there is one, by its definition; fails if the
/// symbol has another type.
mlir::LogicalResult defineDropoutKeep(mlir::gpu::GPUModuleOp kernels);

} // namespace mtc::codegen

#endif // MTC_COMPILER_CODEGEN_GPU_DROPOUTKEEP_H
