//===- Passes.h - passes both backends run ----------------------*- C++ -*-===//
//
// What the CPU (compiler/codegen/CPU/) and GPU (compiler/codegen/GPU/) backends share: the
// passes of the bufferization both run (mtc-bufferize-pipeline, compiler/pipelines/) and
// the dialects and interface models the backends need in their context.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_CODEGEN_COMMON_PASSES_H
#define MTC_COMPILER_CODEGEN_COMMON_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace mtc::codegen {

#define GEN_PASS_DECL
#include "compiler/codegen/Common/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/codegen/Common/Passes.h.inc"

/// Linalg on tensors to buffers, in place, for both backends (mtc-bufferize-pipeline):
/// mtc-copy-repeated-results; elementwise chains fused into their consumers
/// (mtc-fuse-elementwise, compiler/fusion/) and canonicalized; the optimizer steps' updates
/// made in place (mtc-update-in-place, eliminate-empty-tensors); one-shot bufferization across
/// function boundaries with identity layouts (plain row-major memrefs at the interface),
/// loops allowed to yield fresh buffers (a scan's carried values); the results updated in
/// place erased (mtc-drop-in-place-results); the other function results turned
/// into caller-allocated out-parameters (hoisting static allocations, public functions
/// too); canonicalized. The context needs registerCodegenDialects' registry. `guard` says
/// where a step with a non-finite gradient norm is kept from updating: a branch in the host
/// code (the CPU), or a select in each update kernel (the GPU, whose host code cannot read
/// the norm in device memory).
enum class UpdateGuard { Branch, InKernels };
void buildBufferizePassPipeline(mlir::OpPassManager &pm, UpdateGuard guard = UpdateGuard::Branch);

/// The dialects, bufferization and deallocation models and LLVM IR translations the
/// backends use. The tools register them (compiler/registration/); each backend also
/// appends them to the context of the module it compiles.
void registerCodegenDialects(mlir::DialectRegistry &registry);

} // namespace mtc::codegen

#endif // MTC_COMPILER_CODEGEN_COMMON_PASSES_H
