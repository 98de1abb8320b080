//===- Registration.cpp - the one place tools register things -------------===//

#include "compiler/registration/Registration.h"

#include "compiler/autodiff/DifferentiableOpInterface.h"
#include "compiler/autodiff/Passes.h"
#include "compiler/codegen/CPU/Passes.h"
#include "compiler/codegen/Common/Passes.h"
#include "compiler/codegen/GPU/Passes.h"
#include "compiler/codegen/ToLinalg/Passes.h"
#include "compiler/fusion/Passes.h"
#include "compiler/lowering/Passes.h"
#include "compiler/optimizer/Passes.h"
#include "compiler/pipeline/Passes.h"
#include "compiler/pipelines/Pipelines.h"
#include "compiler/sharding/PartitionOpInterface.h"
#include "compiler/sharding/Passes.h"
#include "compiler/transforms/Passes.h"
#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mtp/IR/MTPDialect.h"
#include "dialects/mts/IR/MTSDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/IR/DialectRegistry.h"

void mtc::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<mt::MTDialect, mtp::MTPDialect, mts::MTSDialect, mlir::func::FuncDialect>();
  // What mt-to-linalg and the backends produce, with the bufferization models their
  // pipelines need, so that lit tests run every stage and feed its output back in.
  codegen::registerCodegenDialects(registry);
  // The host code of a CUDA step launches outlined kernels (mtc-gpu-launches-to-calls).
  registry.insert<mlir::gpu::GPUDialect>();
  autodiff::registerVJPRules(registry);
  sharding::registerPartitionRules(registry);
}

void mtc::registerAllPasses() {
  // Upstream clean-ups the pipelines use (canonicalize, cse, ...).
  mlir::registerTransformsPasses();
  autodiff::registerAutodiffPasses();
  codegen::registerToLinalgPasses();
  codegen::registerCommonPasses();
  codegen::registerCPUPasses();
  codegen::registerGPUPasses();
  fusion::registerFusionPasses();
  optimizer::registerOptimizerPasses();
  pipeline::registerPipelinePasses();
  lowering::registerLoweringPasses();
  transforms::registerTransformsPasses();
  sharding::registerShardingPasses();
  registerPipelines();
}
