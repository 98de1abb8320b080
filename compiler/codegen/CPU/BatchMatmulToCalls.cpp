//===- BatchMatmulToCalls.cpp - batched products as GEMM calls ------------===//

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
using mtc::codegen::kBatchMatmulBF16Function;
using mtc::codegen::kBatchMatmulF32Function;

namespace {

Type elementOf(Value buffer) { return cast<MemRefType>(buffer.getType()).getElementType(); }

/// bf16 and f16: the operands of a mixed-precision product (f32 result) that the f32 GEMM
/// can read through an f32 copy (products of bf16 or f16 values are exact in f32, so only
/// the order of the f32 sums differs from a GEMM with low-precision inputs and f32
/// accumulation). Products of two bf16 inputs call the bf16 GEMM instead, unless disabled;
/// f16 ones are always widened (Debian's oneDNN 2.6 has no f16 matmul for CPUs).
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

/// A fully dynamic strided rank-3 memref of `element`: one declaration serves every shape
/// and layout.
MemRefType dynamicOperandType(Type element) {
  MLIRContext *context = element.getContext();
  int64_t dynamic = ShapedType::kDynamic;
  return MemRefType::get({dynamic, dynamic, dynamic}, element,
                         StridedLayoutAttr::get(context, dynamic, {dynamic, dynamic, dynamic}));
}

/// The external GEMM `name` of the given operand types, declared on first use; null (after
/// an error) when a symbol of that name is something else.
func::FuncOp declareGemm(ModuleOp module, StringRef name, TypeRange operandTypes,
                         StringRef description) {
  MLIRContext *context = module.getContext();
  FunctionType type = FunctionType::get(context, operandTypes, {});
  if (Operation *existing = module.lookupSymbol(name)) {
    auto func = dyn_cast<func::FuncOp>(existing);
    if (!func || !func.isExternal() || func.getFunctionType() != type) {
      existing->emitOpError() << "'" << name << "' is reserved for the " << description
                              << ": it must be an external function of type " << type;
      return nullptr;
    }
    return func;
  }
  OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
  auto func = func::FuncOp::create(builder, module.getLoc(), name, type);
  func.setPrivate();
  func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(), UnitAttr::get(context));
  return func;
}

struct BatchMatmulToCallsPass
    : public mtc::codegen::impl::BatchMatmulToCallsPassBase<BatchMatmulToCallsPass> {
  using Base::Base;

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

    // Which products call the bf16 GEMM: both inputs bf16.
    auto callsBF16 = [&](linalg::BatchMatmulOp op) {
      return llvm::all_of(op.getDpsInputs(), [](Value input) {
               return elementOf(input).isBF16();
             });
    };
    MLIRContext *context = &getContext();
    MemRefType f32Operand = dynamicOperandType(Float32Type::get(context));
    MemRefType bf16Operand = dynamicOperandType(BFloat16Type::get(context));
    bool anyF32 = !llvm::all_of(matmuls, callsBF16);
    bool anyBF16 = llvm::any_of(matmuls, callsBF16);
    if (anyF32 && !declareGemm(module, kBatchMatmulF32Function,
                               {f32Operand, f32Operand, f32Operand},
                               "f32 batched matrix product"))
      return signalPassFailure();
    if (anyBF16 && !declareGemm(module, kBatchMatmulBF16Function,
                                {bf16Operand, bf16Operand, f32Operand},
                                "bf16 batched matrix product"))
      return signalPassFailure();

    IRRewriter rewriter(context);
    for (linalg::BatchMatmulOp op : matmuls) {
      rewriter.setInsertionPoint(op);
      bool bf16 = callsBF16(op);
      SmallVector<Value> operands = llvm::map_to_vector(op->getOperands(), [&](Value operand) {
        if (!bf16 && isWidenable(elementOf(operand)))
          operand = widenedCopy(rewriter, op.getLoc(), operand);
        Type castType = elementOf(operand).isF32() ? f32Operand : bf16Operand;
        return Value(memref::CastOp::create(rewriter, op.getLoc(), castType, operand));
      });
      rewriter.replaceOpWithNewOp<func::CallOp>(
          op, bf16 ? kBatchMatmulBF16Function : kBatchMatmulF32Function, TypeRange{}, operands);
    }
  }
};

} // namespace
