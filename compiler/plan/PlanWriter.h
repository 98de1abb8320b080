//===- PlanWriter.h - writing the plan directory ----------------*- C++ -*-===//
//
// Writes docs/plan-format.md: MANIFEST, plan.json and program.mlir, from the module after
// the training pipeline. The directory appears atomically: it is written under a temporary
// name next to the destination and renamed into place, so a reader never sees half a plan.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_PLAN_PLANWRITER_H
#define MTC_COMPILER_PLAN_PLANWRITER_H

#include "compiler/analysis/FunctionCost.h"
#include "compiler/analysis/ModelStats.h"
#include "compiler/codegen/GPU/GPUCodegen.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "compiler/sharding/CommunicationVolume.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>

namespace mtc {

/// Whether `module` is compiled for ZeRO-2 (sharding::kZeroStageAttrName 2).
bool usesGradientShards(mlir::ModuleOp module);

struct PlanSource {
  std::string path;
  std::string contents;
  std::string compilerVersion;
};

/// The CUDA kernels of the step (`--target=cuda`): the launches and calls of each function,
/// per chip the PTX and the cubin `ptxas` assembled (absent without ptxas), and the host
/// code launching them (`kernels/cuda_host.so`, GPUCodegen.h) with its calling convention
/// and device workspace.
struct PlanCudaKernels {
  codegen::GPUStepKernels step;
  int64_t blockSize = 0;
  std::string hostSharedObject;
  llvm::json::Object callingConvention;
  int64_t workspaceBytes = 0;
  /// (chip, cubin), the chips of step.ptx that have one.
  std::vector<std::pair<std::string, std::string>> cubins;
};

/// Compiled step functions: for x86 (`--target=x86`) the bytes of `kernels/x86_64.so`,
/// how to call them (CallingConvention.h, with each function's planned "arena") and the
/// largest arena (CPUCodegen.h, planKernelMemory); for CUDA the kernels above.
struct PlanKernels {
  std::optional<std::string> x86SharedObject;
  llvm::json::Object callingConvention;
  int64_t workspaceBytes = 0;
  std::optional<PlanCudaKernels> cuda;
  /// What one rank sends in the step's collectives (compiler/sharding).
  sharding::CollectiveBytes collectiveBytes;
  /// What one call of each step function computes on one rank (compiler/analysis).
  std::map<std::string, FunctionCost> functionCosts;
};

/// The bytes one rank holds for training: the buffers runtime/exec/Trainer.h allocates
/// (parameters and optimizer state, which the optimizer updates in place; gradients; a
/// second gradient buffer when the global batch takes several micro-batches; the token and
/// label buffers of a micro-batch) plus the compiled kernels' workspace.
struct MemoryPrediction {
  int64_t parameters = 0;
  int64_t optimizerState = 0;
  /// What the layers' forward passes keep for their backward, per micro-batch (part of the
  /// workspace when the kernels run).
  int64_t savedActivations = 0;
  int64_t microBatchGradients = 0; // 0 with a single micro-batch (per rank, under ZeRO-2)
  /// ZeRO-2: the f32 accumulator of the rank's gradient shards, and the staging buffer of the
  /// largest reduce-scattered gradient (runtime/exec/GradientBuffer.h).
  int64_t gradientShards = 0;
  int64_t gradientStaging = 0;
  int64_t tokens = 0;
  std::optional<int64_t> workspace; // known once the step is compiled
  int64_t gradients() const { return parameters; }
  /// The runtime's buffers, all but the workspace.
  int64_t buffers() const {
    return parameters + optimizerState + gradients() + microBatchGradients +
           gradientShards + gradientStaging + tokens;
  }
  /// What the runtime's peak bytes measure (Trainer::peakBytes).
  std::optional<int64_t> peak() const {
    return workspace ? std::optional<int64_t>(buffers() + *workspace) : std::nullopt;
  }
};

/// The memory prediction of `trained` (the output of buildTrainingPipeline) with the
/// compiled kernels' `workspace` bytes, if known.
MemoryPrediction predictMemory(mlir::ModuleOp trained, std::optional<int64_t> workspace);

/// The lines `mtc compile --stats --kernels=x86` prints about memory (`memory` has its
/// workspace).
void printMemoryPrediction(const MemoryPrediction &memory, llvm::raw_ostream &os);

/// Writes the plan of `trained` (the output of buildTrainingPipeline; `stats` are those of
/// the frontend's module) to the directory `path`, replacing an existing plan there;
/// `kernels` (optional) adds the compiled steps.
llvm::Error writePlan(mlir::ModuleOp trained, const ModelStats &stats, const PlanSource &source,
                      llvm::StringRef path, const PlanKernels *kernels = nullptr);

/// Lowercase hex SHA-256 of `bytes`.
std::string sha256Hex(llvm::StringRef bytes);

} // namespace mtc

#endif // MTC_COMPILER_PLAN_PLANWRITER_H
