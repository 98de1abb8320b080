//===- PartitionedCosts.cpp - a plan's predictions without kernels --------===//

#include "PartitionedCosts.h"

#include "compiler/analysis/FunctionCost.h"
#include "compiler/pipelines/Pipelines.h"
#include "compiler/sharding/CommunicationVolume.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;

FailureOr<mtc::PlanKernels> mtc::partitionedCosts(ModuleOp trained) {
  OwningOpRef<ModuleOp> step(trained.clone());
  PassManager pm(step->getContext());
  buildPartitionPipeline(pm);
  if (failed(pm.run(*step)))
    return failure();
  PlanKernels kernels;
  kernels.collectiveBytes = sharding::predictCollectiveBytes(*step);
  kernels.functionCosts = computeFunctionCosts(*step);
  return kernels;
}
