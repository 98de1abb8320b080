//===- Registration.cpp - the one place tools register things -------------===//

#include "compiler/registration/Registration.h"

#include "compiler/autodiff/DifferentiableOpInterface.h"
#include "compiler/autodiff/Passes.h"
#include "compiler/codegen/Passes.h"
#include "compiler/fusion/Passes.h"
#include "compiler/lowering/Passes.h"
#include "compiler/optimizer/Passes.h"
#include "compiler/pipelines/Pipelines.h"
#include "compiler/sharding/PartitionOpInterface.h"
#include "compiler/sharding/Passes.h"
#include "compiler/transforms/Passes.h"
#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mtp/IR/MTPDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/IR/DialectRegistry.h"

void mtc::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<mt::MTDialect, mtp::MTPDialect, mlir::func::FuncDialect>();
  // What mt-to-linalg produces, so lit tests can feed its output back in.
  registry.insert<mlir::arith::ArithDialect, mlir::linalg::LinalgDialect,
                  mlir::math::MathDialect, mlir::scf::SCFDialect,
                  mlir::tensor::TensorDialect>();
  // The buffers the CPU backend's passes on memrefs take (mtc-gemm-operand-views, ...).
  registry.insert<mlir::memref::MemRefDialect>();
  autodiff::registerVJPRules(registry);
  sharding::registerPartitionRules(registry);
}

void mtc::registerAllPasses() {
  // Upstream clean-ups the pipelines use (canonicalize, cse, ...).
  mlir::registerTransformsPasses();
  autodiff::registerAutodiffPasses();
  codegen::registerCodegenPasses();
  fusion::registerFusionPasses();
  optimizer::registerOptimizerPasses();
  lowering::registerLoweringPasses();
  transforms::registerTransformsPasses();
  sharding::registerShardingPasses();
  registerPipelines();
}
