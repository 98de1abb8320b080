//===- Pipelines.h - the compiler's pass pipelines --------------*- C++ -*-===//
//
// Pipelines are plain functions over an OpPassManager (registered for mt-opt as
// `-mtc-training-pipeline`), so `mtc` and the lit tests run exactly the same passes.
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

/// From the frontend's `mt` module to the training step: autodiff (forward_backward and
/// the layers' fwd/bwd), then the optimizer step.
void buildTrainingPipeline(mlir::OpPassManager &pm, const TrainingPipelineOptions &options);

void registerPipelines();

} // namespace mtc

#endif // MTC_COMPILER_PIPELINES_PIPELINES_H
