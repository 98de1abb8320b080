//===- Registration.cpp - the one place tools register things -------------===//

#include "compiler/registration/Registration.h"

#include "compiler/autodiff/DifferentiableOpInterface.h"
#include "compiler/autodiff/Passes.h"
#include "compiler/codegen/Passes.h"
#include "compiler/lowering/Passes.h"
#include "compiler/optimizer/Passes.h"
#include "compiler/pipelines/Pipelines.h"
#include "compiler/transforms/Passes.h"
#include "dialects/mt/IR/MTDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"

void mtc::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<mt::MTDialect, mlir::func::FuncDialect>();
  autodiff::registerVJPRules(registry);
}

void mtc::registerAllPasses() {
  autodiff::registerAutodiffPasses();
  codegen::registerCodegenPasses();
  optimizer::registerOptimizerPasses();
  lowering::registerLoweringPasses();
  transforms::registerTransformsPasses();
  registerPipelines();
}
