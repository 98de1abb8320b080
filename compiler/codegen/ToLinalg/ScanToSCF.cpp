//===- ScanToSCF.cpp - mt.repeat to an scf.for of calls -------------------===//
//
// `mt.repeat @layer(carried..., stacked...) count N` is a scan over the layer stack: one
// `scf.for` over the N calls (instance i = iv, or N - 1 - iv with `reverse`) whose
// iter_args are the carried values followed by one accumulator per stacked result (a
// `tensor.empty` of the stacked type). Each iteration takes slice i of every stacked
// operand (a rank-reducing `tensor.extract_slice` of the leading stacking dimension),
// `func.call`s the layer (converted by the same pass), yields the carried results and
// `tensor.insert_slice`s each stacked result at slice i of its accumulator. The layer stays
// one function, called N times, whatever the depth.
//
// When the module has dropout (declareDropoutFunctions declared kDropoutLayerFunction), each
// iteration first tells the runtime the instance i it runs (first + i for a pipeline chunk's
// repeat marked `mt.first_instance = first`), and the scan ends by setting -1,
// so that every repeat of a layer draws its own masks and a backward scan (`reverse`)
// redraws the masks of the same instance as its forward. Nested scans are not supported by
// this protocol (the inner scan's -1 would hide the outer instance).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/ToLinalg/MTToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::codegen::lowering;
using mt::NamedTensorType;

namespace {

/// Offsets, sizes and strides of slice `instance` of a tensor stacked along its leading
/// dimension: [instance, 0, ...] [1, sizes...] [1, ...].
struct StackedSlice {
  SmallVector<OpFoldResult> offsets, sizes, strides;

  StackedSlice(OpBuilder &b, Value instance, RankedTensorType stacked) {
    offsets.push_back(instance);
    sizes.push_back(b.getIndexAttr(1));
    for (int64_t size : stacked.getShape().drop_front()) {
      offsets.push_back(b.getIndexAttr(0));
      sizes.push_back(b.getIndexAttr(size));
    }
    strides.assign(sizes.size(), b.getIndexAttr(1));
  }
};

struct RepeatLowering : OpConversionPattern<mt::RepeatOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::RepeatOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(op, op.getCalleeAttr());
    if (!callee)
      return rewriter.notifyMatchFailure(op, "callee is not a func.func");
    SmallVector<Type> argTypes, resultTypes;
    if (failed(getTypeConverter()->convertTypes(callee.getArgumentTypes(), argTypes)) ||
        failed(getTypeConverter()->convertTypes(callee.getResultTypes(), resultTypes)))
      return rewriter.notifyMatchFailure(op, "cannot convert the callee's signature");

    unsigned carried = op.getNumCarried();
    auto count = static_cast<int64_t>(op.getCount());
    bool reverse = op.getReverse();
    // A pipeline chunk's repeat runs the layers from `mt.first_instance` on
    // (mt-pipeline-chunks): their dropout masks are those of the whole stack's calls.
    int64_t firstInstance = 0;
    if (auto first = op->getAttrOfType<IntegerAttr>(mt::MTDialect::kFirstInstanceAttrName))
      firstInstance = first.getInt();
    ValueRange inputs = adaptor.getInputs();
    SmallVector<Value> inits(inputs.take_front(carried));
    for (Value result : op.getResults().drop_front(carried))
      inits.push_back(emptyTensor(rewriter, loc, namedType(result)));

    // Calls of kDropoutLayerFunction, when the module declares it.
    bool tellsInstance = static_cast<bool>(
        SymbolTable::lookupNearestSymbolFrom(op, rewriter.getStringAttr(kDropoutLayerFunction)));
    auto setInstance = [&](OpBuilder &b, Location l, Value instance) {
      if (tellsInstance)
        func::CallOp::create(b, l, kDropoutLayerFunction, TypeRange{}, ValueRange{instance});
    };
    auto loop = scf::ForOp::create(
        rewriter, loc, indexConstant(rewriter, loc, 0), indexConstant(rewriter, loc, count),
        indexConstant(rewriter, loc, 1), inits,
        [&](OpBuilder &b, Location l, Value iv, ValueRange iterArgs) {
          Value instance =
              reverse ? Value(arith::SubIOp::create(b, l, indexConstant(b, l, count - 1), iv)) : iv;
          Value layer = arith::IndexCastUIOp::create(b, l, b.getI64Type(), instance);
          if (firstInstance != 0)
            layer = arith::AddIOp::create(
                b, l, layer, arith::ConstantOp::create(b, l, b.getI64IntegerAttr(firstInstance)));
          setInstance(b, l, layer);
          SmallVector<Value> args(iterArgs.take_front(carried));
          unsigned invariant = op.getNumInvariant();
          for (auto [position, stacked] :
               llvm::enumerate(inputs.drop_front(carried).drop_back(invariant))) {
            auto stackedType = cast<RankedTensorType>(stacked.getType());
            StackedSlice slice(b, instance, stackedType);
            args.push_back(tensor::ExtractSliceOp::create(
                b, l, cast<RankedTensorType>(argTypes[carried + position]), stacked,
                slice.offsets, slice.sizes, slice.strides));
          }
          // Invariant operands: every call reads them whole.
          llvm::append_range(args, inputs.take_back(invariant));
          auto call = func::CallOp::create(b, l, op.getCallee(), resultTypes, args);
          SmallVector<Value> yields(call.getResults().take_front(carried));
          for (auto [result, accumulator] :
               llvm::zip_equal(call.getResults().drop_front(carried),
                               iterArgs.drop_front(carried))) {
            StackedSlice slice(b, instance, cast<RankedTensorType>(accumulator.getType()));
            yields.push_back(tensor::InsertSliceOp::create(b, l, result, accumulator,
                                                           slice.offsets, slice.sizes,
                                                           slice.strides));
          }
          scf::YieldOp::create(b, l, yields);
        });
    setInstance(rewriter, loc,
                arith::ConstantOp::create(rewriter, loc, rewriter.getI64IntegerAttr(-1)));
    rewriter.replaceOp(op, loop.getResults());
    return success();
  }
};

} // namespace

void codegen::lowering::populateScanPatterns(const TypeConverter &types,
                                             RewritePatternSet &patterns) {
  patterns.add<RepeatLowering>(types, patterns.getContext());
}
