//===- Pipelines.cpp - the compiler's pass pipelines ----------------------===//

#include "compiler/pipelines/Pipelines.h"

#include "compiler/autodiff/Passes.h"
#include "compiler/optimizer/Passes.h"
#include "mlir/Pass/PassRegistry.h"

void mtc::buildTrainingPipeline(mlir::OpPassManager &pm,
                                const TrainingPipelineOptions &options) {
  autodiff::MTAutodiffPassOptions autodiffOptions;
  autodiffOptions.recompute = options.recompute;
  pm.addPass(autodiff::createMTAutodiffPass(autodiffOptions));
  pm.addPass(optimizer::createMTOptimizerPass());
}

void mtc::registerPipelines() {
  mlir::PassPipelineRegistration<TrainingPipelineOptions>(
      "mtc-training-pipeline", "From the frontend's mt module to the training step",
      buildTrainingPipeline);
}
