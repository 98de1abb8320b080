//===- BatchMatmulToCalls.cpp - f32 batched products as GEMM calls --------===//

#include "compiler/codegen/CPU/CPUCodegen.h"
#include "compiler/codegen/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace mtc::codegen {
#define GEN_PASS_DEF_BATCHMATMULTOCALLSPASS
#include "compiler/codegen/CPU/Passes.h.inc"
} // namespace mtc::codegen

using namespace mlir;
using mtc::codegen::kBatchMatmulF32Function;

namespace {

struct BatchMatmulToCallsPass
    : public mtc::codegen::impl::BatchMatmulToCallsPassBase<BatchMatmulToCallsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<linalg::BatchMatmulOp> matmuls;
    module.walk([&](linalg::BatchMatmulOp op) {
      if (op.hasPureBufferSemantics() && !op.hasUserDefinedMaps() &&
          llvm::all_of(op->getOperandTypes(), [](Type type) {
            return cast<MemRefType>(type).getElementType().isF32();
          }))
        matmuls.push_back(op);
    });
    if (matmuls.empty())
      return;

    MLIRContext *context = &getContext();
    Type operandType = MemRefType::get(
        {ShapedType::kDynamic, ShapedType::kDynamic, ShapedType::kDynamic},
        Float32Type::get(context),
        StridedLayoutAttr::get(context, ShapedType::kDynamic,
                               {ShapedType::kDynamic, ShapedType::kDynamic, ShapedType::kDynamic}));
    FunctionType type = FunctionType::get(context, {operandType, operandType, operandType}, {});
    if (Operation *existing = module.lookupSymbol(kBatchMatmulF32Function)) {
      auto func = dyn_cast<func::FuncOp>(existing);
      if (!func || !func.isExternal() || func.getFunctionType() != type) {
        existing->emitOpError()
            << "'" << kBatchMatmulF32Function
            << "' is reserved for the f32 batched matrix product: it must be an external "
               "function of type "
            << type;
        return signalPassFailure();
      }
    } else {
      OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
      auto func = func::FuncOp::create(builder, module.getLoc(), kBatchMatmulF32Function, type);
      func.setPrivate();
      func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(), UnitAttr::get(context));
    }

    IRRewriter rewriter(context);
    for (linalg::BatchMatmulOp op : matmuls) {
      rewriter.setInsertionPoint(op);
      SmallVector<Value> operands = llvm::map_to_vector(op->getOperands(), [&](Value operand) {
        return Value(memref::CastOp::create(rewriter, op.getLoc(), operandType, operand));
      });
      rewriter.replaceOpWithNewOp<func::CallOp>(op, kBatchMatmulF32Function, TypeRange{},
                                                operands);
    }
  }
};

} // namespace
