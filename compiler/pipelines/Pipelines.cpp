//===- Pipelines.cpp - the compiler's pass pipelines ----------------------===//

#include "compiler/pipelines/Pipelines.h"

#include "compiler/autodiff/Passes.h"
#include "compiler/codegen/CPU/Passes.h"
#include "compiler/codegen/Common/Passes.h"
#include "compiler/codegen/GPU/Passes.h"
#include "compiler/codegen/ToLinalg/Passes.h"
#include "compiler/lowering/Passes.h"
#include "compiler/optimizer/Passes.h"
#include "compiler/pipeline/Passes.h"
#include "compiler/sharding/Passes.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/OpenMPToLLVM/ConvertOpenMPToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/SCFToOpenMP/SCFToOpenMP.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

/// Canonicalisation and CSE close every stage that creates `mt`/`mtp` ops (autodiff's
/// adjoints multiply by ones and add zeros; partitioning repeats layouts), so the next stage
/// reads the simplest form of the program.
static void addCleanup(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mtc::buildTrainingPipeline(OpPassManager &pm, const TrainingPipelineOptions &options) {
  pm.addPass(transforms::createMTLossMaskPass());
  pm.addPass(transforms::createMTResetDocumentsPass());
  pm.addPass(sharding::createMTPadVocabularyPass());
  autodiff::MTAutodiffPassOptions autodiffOptions;
  autodiffOptions.recompute = options.recompute;
  pm.addPass(autodiff::createMTAutodiffPass(autodiffOptions));
  pm.addPass(transforms::createMTExpertLoadPass());
  pm.addPass(optimizer::createMTOptimizerPass());
  pm.addPass(transforms::createMTLogitsPass());
  pm.addPass(transforms::createMTKVCachePass());
  addCleanup(pm);
}

void mtc::buildPartitionPipeline(OpPassManager &pm) {
  pm.addPass(lowering::createMTDecomposePass());
  pm.addPass(transforms::createMTOutlineParametersPass());
  // With pipeline parallelism, the chunk functions and the stages' optimizer steps are
  // partitioned like the whole step.
  pm.addPass(pipeline::createMTPipelineChunksPass());
  pm.addPass(pipeline::createMTPipelineOptimizerPass());
  pm.addPass(sharding::createMTPPartitionPass());
  pm.addNestedPass<func::FuncOp>(sharding::createMTPFilledAllToAllPass());
  addCleanup(pm);
}

void mtc::buildToLinalgPipeline(OpPassManager &pm) {
  pm.addPass(codegen::createMTToLinalgPass());
}

/// Every temporary freed, as early as it can be: ownership-based deallocation
/// (buffer-deallocation-pipeline) frees each at the end of its block, mtc-early-deallocation
/// moves the frees up to the last uses. Both backends' temporaries, so that the workspace
/// planner overlaps those not live at the same time.
static void addDeallocation(OpPassManager &pm) {
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(mtc::codegen::createEarlyDeallocationPass());
}

void mtc::buildCPUBufferizePipeline(OpPassManager &pm) {
  pm.addPass(codegen::createEraseMTDeclarationsPass());
  pm.addPass(codegen::createRequestCInterfacesPass());
  codegen::buildBufferizePassPipeline(pm);
  pm.addPass(codegen::createGemmOperandViewsPass());
  pm.addPass(codegen::createExpandStridedCopiesPass());
  pm.addPass(codegen::createBatchMatmulToCallsPass());
  addDeallocation(pm);
}

namespace {

/// buildCPUToLLVMPipeline after the workspace is placed, shared with the GPU host code.
void addPlacedBuffersToLLVM(OpPassManager &pm) {
  pm.addPass(mtc::codegen::createThreadKernelContextPass());
  pm.addPass(mtc::codegen::createReductionLoopOrderPass());
  // Loops over the parallel dimensions of large linalg ops run on OpenMP threads; the
  // others, and every reduction dimension, stay sequential.
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToParallelLoopsPass());
  pm.addNestedPass<func::FuncOp>(mtc::codegen::createSelectParallelLoopsPass());
  pm.addPass(createConvertSCFToOpenMPPass());
  // The conversion wraps each iteration in a memref.alloca_scope, which must keep a single
  // block; loops without allocations are inlined back into the work-sharing loop.
  pm.addPass(createCanonicalizerPass());
  // Views (subview, expand_shape, collapse_shape, from slices and reshapes) become
  // reinterpret_casts with explicit strides, which finalize-memref-to-llvm lowers.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  // f16/bf16 transcendental functions are computed in f32.
  pm.addPass(math::createMathExtendToSupportedTypes());
  pm.addPass(mtc::codegen::createApproximateMathPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(mtc::codegen::createWorkspaceAliasScopesPass());
  pm.addPass(mtc::codegen::createRedirectAllocationsPass());
  pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

} // namespace

void mtc::buildCPUToLLVMPipeline(OpPassManager &pm) {
  // On the module mtc plans the plan's `arena` on (the bufferize pipeline's output).
  pm.addPass(codegen::createWorkspaceViewsPass());
  addPlacedBuffersToLLVM(pm);
}

void mtc::buildGPUHostDeallocationPipeline(OpPassManager &pm) {
  addDeallocation(pm);
  // The lowered deallocations' scratch arrays, which the host reads and writes: not device
  // memory.
  pm.addPass(codegen::createGPUHostScratchToStackPass());
}

void mtc::buildGPUHostToLLVMPipeline(OpPassManager &pm) {
  // The entry points of the x86 object (mtc-gpu-bufferize-pipeline does not ask for them:
  // the kernels need none).
  pm.addPass(codegen::createRequestCInterfacesPass());
  // The workspace is device memory: placed as on the CPU, then reached through the
  // device-memory imports.
  pm.addPass(codegen::createWorkspaceViewsPass());
  pm.addPass(codegen::createGPUHostImportsPass());
  addPlacedBuffersToLLVM(pm);
}

void mtc::buildCPUPipeline(OpPassManager &pm) {
  buildCPUBufferizePipeline(pm);
  buildCPUToLLVMPipeline(pm);
}

void mtc::buildCPUStepPipeline(OpPassManager &pm) {
  buildPartitionPipeline(pm);
  buildToLinalgPipeline(pm);
  buildCPUPipeline(pm);
}

void mtc::buildGPUBufferizePipeline(OpPassManager &pm) {
  pm.addPass(codegen::createEraseMTDeclarationsPass());
  codegen::buildBufferizePassPipeline(pm, codegen::UpdateGuard::InKernels);
  pm.addPass(codegen::createBatchMatmulToCallsPass());
}

void mtc::registerPipelines() {
  PassPipelineRegistration<TrainingPipelineOptions>(
      "mtc-training-pipeline", "From the frontend's mt module to the training step",
      buildTrainingPipeline);
  PassPipelineRegistration<>(
      "mtc-partition-pipeline",
      "From the training step to per-rank functions: decompose, outline parameters, partition",
      buildPartitionPipeline);
  PassPipelineRegistration<>("mtc-to-linalg-pipeline",
                             "Per-rank mt functions onto builtin tensors and linalg",
                             buildToLinalgPipeline);
  PassPipelineRegistration<>(
      "mtc-bufferize-pipeline",
      "Linalg on tensors to buffers with caller-allocated results (both backends; the "
      "optimizer's update guarded by a branch, as on the CPU)",
      [](OpPassManager &pm) { codegen::buildBufferizePassPipeline(pm); });
  PassPipelineRegistration<>(
      "mtc-cpu-bufferize-pipeline",
      "CPU backend, first half: linalg on tensors to buffers, GEMM calls and deallocations",
      buildCPUBufferizePipeline);
  PassPipelineRegistration<>("mtc-cpu-to-llvm-pipeline",
                             "CPU backend, second half: buffers to the LLVM dialect",
                             buildCPUToLLVMPipeline);
  PassPipelineRegistration<>("mtc-cpu-pipeline",
                             "CPU backend: linalg on tensors to the LLVM dialect",
                             buildCPUPipeline);
  PassPipelineRegistration<>(
      "mtc-gpu-bufferize-pipeline",
      "GPU backend: linalg on tensors to buffers with f32 batched products as GEMM calls",
      buildGPUBufferizePipeline);
  PassPipelineRegistration<>(
      "mtc-gpu-host-deallocation-pipeline",
      "GPU backend: the host code's temporaries freed after their last uses",
      buildGPUHostDeallocationPipeline);
  PassPipelineRegistration<>(
      "mtc-gpu-host-to-llvm-pipeline",
      "GPU backend: the host code launching the kernels (buffers) to the LLVM dialect",
      buildGPUHostToLLVMPipeline);
  PassPipelineRegistration<>("mtc-cpu-step-pipeline",
                             "From the training step to the LLVM dialect for the CPU",
                             buildCPUStepPipeline);
}
