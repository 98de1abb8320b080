//===- Pipelines.h - the compiler's pass pipelines --------------*- C++ -*-===//
//
// Each stage of the compiler is a plain function over an OpPassManager, registered for
// mt-opt under the name in brackets, so that `mtc`, the tests and `mt-opt` run exactly the
// same passes (`mt-opt --help` lists them; `--mlir-print-ir-after-all` shows every step):
//
//   mt (frontend)
//     -> training step              buildTrainingPipeline      [mtc-training-pipeline]
//     -> per-rank step functions    buildPartitionPipeline     [mtc-partition-pipeline]
//     -> linalg on tensors          buildToLinalgPipeline      [mtc-to-linalg-pipeline]
//     -> buffers (CPU backend)      buildCPUBufferizePipeline  [mtc-cpu-bufferize-pipeline]
//     -> LLVM dialect               buildCPUToLLVMPipeline     [mtc-cpu-to-llvm-pipeline]
//     -> buffers (GPU backend)      buildGPUBufferizePipeline  [mtc-gpu-bufferize-pipeline]
//     -> GPU host code, freed       buildGPUHostDeallocationPipeline
//                                     [mtc-gpu-host-deallocation-pipeline]
//     -> GPU host code, LLVM dialect buildGPUHostToLLVMPipeline [mtc-gpu-host-to-llvm-pipeline]
//
// `mtc compile --kernels=x86` runs them one after the other because it reads the module
// between stages: the calling convention and the collectives after partitioning, the arena
// plan on the buffers. [mtc-cpu-pipeline] is the two CPU stages, [mtc-cpu-step-pipeline]
// everything from the training step to the LLVM dialect. The bufferization both backends
// share is compiler/codegen/Common's ([mtc-bufferize-pipeline]; the GPU backend runs it
// inside compileToPTX). What follows the LLVM dialect is LLVM IR, not MLIR:
// compiler/codegen/CPU/CPUCodegen.h.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_PIPELINES_PIPELINES_H
#define MTC_COMPILER_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mtc {

struct TrainingPipelineOptions
    : public mlir::PassPipelineOptions<TrainingPipelineOptions> {
  Option<std::string> recompute{*this, "recompute",
                                llvm::cl::desc("Activation recomputation: none, selective or full"),
                                llvm::cl::init("none")};
};

/// From the frontend's `mt` module to the training step: a vocabulary tp does not divide
/// padded with its padded classes masked (mt-pad-vocabulary: before autodiff, so every
/// derived function has the padded types), autodiff (forward_backward and the layers'
/// fwd/bwd), then the optimizer step, and the model's logits for generation (mt-logits:
/// `forward` without its loss) with their cached form on one rank (mt-kv-cache: prefill and
/// decode_step); canonicalize + CSE after.
void buildTrainingPipeline(mlir::OpPassManager &pm, const TrainingPipelineOptions &options);

/// From the training step to the functions one rank runs: composite ops decomposed into
/// the core the code generators handle (mt-decompose), parameters and optimizer state
/// outlined into explicit arguments (mt-outline-parameters), and the functions partitioned
/// for the module's mesh with derived collectives (mtp-partition); canonicalize + CSE after.
void buildPartitionPipeline(mlir::OpPassManager &pm);

/// The per-rank `mt`/`mtp` functions onto builtin tensors and linalg (mt-to-linalg): the
/// input of both backends.
void buildToLinalgPipeline(mlir::OpPassManager &pm);

/// The CPU backend's first half, linalg on tensors to buffers ready for the lowering to
/// LLVM: the module-level `mt` declarations erased, C interfaces requested, the shared
/// bufferization (mtc-bufferize-pipeline), GEMM operands read in place, strided copies as
/// loops, f32 batched products as GEMM calls, deallocations placed
/// (buffer-deallocation-pipeline) and moved up to each buffer's last use. This is the
/// module planKernelMemory reads.
void buildCPUBufferizePipeline(mlir::OpPassManager &pm);

/// The CPU backend's second half, buffers to the LLVM dialect: the temporaries placed in the
/// workspace (mtc-workspace-views, the plan planKernelMemory reads off the first half's
/// output), then the sequence measured with mlir-opt-22, with the backend's own loop order
/// and math approximations.
void buildCPUToLLVMPipeline(mlir::OpPassManager &pm);

/// Both halves of the CPU backend: linalg on tensors to the LLVM dialect, what
/// codegen::compileToSharedObject takes.
void buildCPUPipeline(mlir::OpPassManager &pm);

/// From the training step to the LLVM dialect for the CPU: buildPartitionPipeline,
/// buildToLinalgPipeline, buildCPUPipeline.
void buildCPUStepPipeline(mlir::OpPassManager &pm);

/// The GPU backend's buffers, what codegen::compileStepKernels takes: the module-level `mt`
/// declarations erased, the shared bufferization (mtc-bufferize-pipeline), and f32 batched
/// products as calls of the runtime's GEMM (mtc-batch-matmul-to-calls, as on the CPU: on a
/// GPU the call is meant for cuBLASLt), so that GEMMs do not become naive kernels.
void buildGPUBufferizePipeline(mlir::OpPassManager &pm);

/// The host side of a CUDA step (compileStepKernels' `host`: buffers whose launches are
/// mtc_gpu_launch calls, mtc-gpu-launches-to-calls) with its temporaries freed after their
/// last uses, as the CPU backend's (buffer-deallocation-pipeline, mtc-early-deallocation),
/// and the lowered deallocations' scratch arrays, which the host reads and writes, on the
/// stack rather than in the device workspace (mtc-gpu-host-scratch-to-stack): the module
/// planKernelMemory reads. It runs on the host code, after the kernels are
/// outlined, rather than in buildGPUBufferizePipeline: there, the lowered deallocations'
/// loads and stores would be host code among the loops mapped to kernels, and a serial
/// kernel's allocations are hoisted out of its loop after bufferization.
void buildGPUHostDeallocationPipeline(mlir::OpPassManager &pm);

/// The host side of a CUDA step (buildGPUHostDeallocationPipeline's output) to the LLVM
/// dialect: C interfaces for the
/// public functions (mtc-request-c-interfaces), then the CPU backend's lowering
/// (buildCPUToLLVMPipeline) with the workspace and GEMM imports renamed to their
/// device-memory variants (mtc-gpu-host-imports) after the workspace is placed.
void buildGPUHostToLLVMPipeline(mlir::OpPassManager &pm);

/// Registers every pipeline above for mt-opt.
void registerPipelines();

} // namespace mtc

#endif // MTC_COMPILER_PIPELINES_PIPELINES_H
