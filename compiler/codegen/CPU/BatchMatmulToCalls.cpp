//===- BatchMatmulToCalls.cpp - batched products as f32 GEMM calls --------===//

#include "compiler/codegen/CPU/CPUCodegen.h"
#include "compiler/codegen/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
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

Type elementOf(Value buffer) { return cast<MemRefType>(buffer.getType()).getElementType(); }

/// bf16 and f16: the operands of a mixed-precision product (f32 result) that the f32 GEMM
/// reads through an f32 copy (OpenBLAS has no bf16 GEMM in Debian's build; products of
/// bf16 or f16 values are exact in f32, so only the order of the f32 sums differs from a
/// GEMM with bf16 inputs and f32 accumulation).
bool isWidenable(Type element) {
  auto floatType = dyn_cast<FloatType>(element);
  return floatType && floatType.getWidth() < 32;
}

/// `buffer` copied into a new contiguous f32 buffer of its shape.
Value widenedCopy(OpBuilder &builder, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  auto wideType = MemRefType::get(type.getShape(), builder.getF32Type());
  Value wide = memref::AllocOp::create(builder, loc, wideType);
  unsigned rank = type.getRank();
  SmallVector<AffineMap> maps(2, builder.getMultiDimIdentityMap(rank));
  SmallVector<utils::IteratorType> iterators(rank, utils::IteratorType::parallel);
  linalg::GenericOp::create(builder, loc, ValueRange{buffer}, ValueRange{wide}, maps, iterators,
                            [&](OpBuilder &b, Location l, ValueRange args) {
                              Value x = arith::ExtFOp::create(b, l, b.getF32Type(), args[0]);
                              linalg::YieldOp::create(b, l, ValueRange{x});
                            });
  return wide;
}

struct BatchMatmulToCallsPass
    : public mtc::codegen::impl::BatchMatmulToCallsPassBase<BatchMatmulToCallsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<linalg::BatchMatmulOp> matmuls;
    module.walk([&](linalg::BatchMatmulOp op) {
      if (op.hasPureBufferSemantics() && !op.hasUserDefinedMaps() &&
          elementOf(op.getDpsInits()[0]).isF32() &&
          llvm::all_of(op.getDpsInputs(), [](Value input) {
            return elementOf(input).isF32() || isWidenable(elementOf(input));
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
        if (isWidenable(elementOf(operand)))
          operand = widenedCopy(rewriter, op.getLoc(), operand);
        return Value(memref::CastOp::create(rewriter, op.getLoc(), operandType, operand));
      });
      rewriter.replaceOpWithNewOp<func::CallOp>(op, kBatchMatmulF32Function, TypeRange{},
                                                operands);
    }
  }
};

} // namespace
