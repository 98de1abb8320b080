//===- TopKToLinalg.cpp - topk and topk_grad to linalg --------------------===//
//
// Both are data parallel, with no sorting and no loops carried across elements, so that the
// same linalg runs on the CPU and maps to GPU threads:
//
// `mt.topk` ranks every element of a lane (the input along `dim`) by counting the elements
// that rank above it, in one `linalg.generic` reducing over a second copy of `dim`:
// rank(i) = #{j : j ranks above i}, where j ranks above i when it is NaN and i is not, else
// when it is larger, else (equal, or both NaN) when j < i: descending order, ties to the
// lower position, NaN above every number, exactly the interpreter's order. The ranks are a
// permutation of 0..size-1, so a second generic over the results and `dim` (reduction)
// selects, for slot c of `k_dim`, the one element of rank c and its position. O(size^2)
// per lane: meant for small lanes (experts, positions), not for a vocabulary.
//
// `mt.topk_grad` is a generic over the result's dimensions and `k_dim` (reduction):
// result[..., j] = sum over c of (indices[..., c] == j ? values_grad[..., c] : 0). An index
// outside [0, size) matches no position and contributes nothing (the interpreter rejects
// it). With k = 1 this is the one-hot that mt-decompose builds for cross-entropy.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/ToLinalg/MTToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::codegen::lowering;
using mt::NamedTensorType;

namespace {

/// The map from a space of `rank` + 1 loops to the dimensions of `type`, each found by name
/// among the first `rank` loops (`space`), except `dim`, which is the last loop.
AffineMap mapWithExtraLoop(ArrayRef<StringAttr> space, NamedTensorType type, StringRef dim) {
  MLIRContext *context = type.getContext();
  SmallVector<AffineExpr> results;
  for (StringAttr name : type.getDimNames()) {
    if (name.getValue() == dim) {
      results.push_back(getAffineDimExpr(space.size(), context));
      continue;
    }
    const auto *it = llvm::find(space, name);
    assert(it != space.end() && "dimension missing from the iteration space");
    results.push_back(getAffineDimExpr(it - space.begin(), context));
  }
  return AffineMap::get(space.size() + 1, /*symbolCount=*/0, results, context);
}

/// Whether the element x_j at position j ranks above x_i at position i (both `index`).
Value ranksAbove(OpBuilder &b, Location loc, Value xj, Value j, Value xi, Value i) {
  using Pred = arith::CmpFPredicate;
  Value jNaN = arith::CmpFOp::create(b, loc, Pred::UNO, xj, xj);
  Value iNaN = arith::CmpFOp::create(b, loc, Pred::UNO, xi, xi);
  Value oneNaN = arith::XOrIOp::create(b, loc, jNaN, iNaN);
  Value different = arith::CmpFOp::create(b, loc, Pred::ONE, xj, xi);
  Value larger = arith::CmpFOp::create(b, loc, Pred::OGT, xj, xi);
  Value lower = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, j, i);
  Value ordered = arith::SelectOp::create(b, loc, different, larger, lower);
  return arith::SelectOp::create(b, loc, oneNaN, jNaN, ordered);
}

struct TopKLowering : OpConversionPattern<mt::TopKOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::TopKOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NamedTensorType inputType = namedType(op.getInput());
    NamedTensorType valuesType = namedType(op.getValues());
    NamedTensorType indicesType = namedType(op.getIndices());
    StringRef dim = op.getDim();
    unsigned rank = inputType.getRank();
    unsigned dimPosition = *inputType.getDimIndex(dim);
    Value input = adaptor.getInput();

    // rank[..., i] = #{j : x[..., j] ranks above x[..., i]}: the input's dimensions, then j.
    auto rankType = mt::NamedTensorType::get(op.getContext(), inputType.getDimNames(),
                                             inputType.getDimSizes(), rewriter.getI64Type());
    Value zeros = fill(rewriter, loc, rankType, rewriter.getI64IntegerAttr(0));
    ArrayRef<StringAttr> inputSpace = inputType.getDimNames();
    SmallVector<AffineMap> rankMaps{
        mapWithExtraLoop(inputSpace, inputType, /*dim=*/""),
        mapWithExtraLoop(inputSpace, inputType, dim),
        mapWithExtraLoop(inputSpace, inputType, /*dim=*/"")};
    SmallVector<utils::IteratorType> rankIterators(rank, utils::IteratorType::parallel);
    rankIterators.push_back(utils::IteratorType::reduction);
    Value ranks =
        linalg::GenericOp::create(
            rewriter, loc, TypeRange{builtinType(rankType)}, ValueRange{input, input},
            ValueRange{zeros}, rankMaps, rankIterators,
            [&](OpBuilder &b, Location l, ValueRange args) {
              Value i = linalg::IndexOp::create(b, l, dimPosition);
              Value j = linalg::IndexOp::create(b, l, rank);
              Value above = ranksAbove(b, l, args[1], j, args[0], i);
              Value count = arith::ExtUIOp::create(b, l, b.getI64Type(), above);
              linalg::YieldOp::create(b, l,
                                      ValueRange{arith::AddIOp::create(b, l, args[2], count)});
            })
            .getResult(0);

    // Slot c of k_dim takes the element of rank c: the values' dimensions, then `dim`.
    ArrayRef<StringAttr> space = valuesType.getDimNames();
    unsigned kPosition = *valuesType.getDimIndex(op.getKDim());
    SmallVector<AffineMap> maps{mapWithExtraLoop(space, inputType, dim),
                                mapWithExtraLoop(space, rankType, dim),
                                mapWithExtraLoop(space, valuesType, /*dim=*/""),
                                mapWithExtraLoop(space, indicesType, /*dim=*/"")};
    SmallVector<utils::IteratorType> iterators(space.size(), utils::IteratorType::parallel);
    iterators.push_back(utils::IteratorType::reduction);
    // Every slot matches exactly one element; the fills only make the reduction's initial
    // values defined.
    Type indexElement = indicesType.getElementType();
    auto select = linalg::GenericOp::create(
        rewriter, loc, TypeRange{builtinType(valuesType), builtinType(indicesType)},
        ValueRange{input, ranks},
        ValueRange{
            fill(rewriter, loc, valuesType, rewriter.getFloatAttr(valuesType.getElementType(), 0)),
            fill(rewriter, loc, indicesType, rewriter.getIntegerAttr(indexElement, 0))},
        maps, iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          Value c = arith::IndexCastOp::create(b, l, b.getI64Type(),
                                               linalg::IndexOp::create(b, l, kPosition));
          Value i = linalg::IndexOp::create(b, l, space.size());
          Value match = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, args[1], c);
          Value position = arith::IndexCastOp::create(b, l, indexElement, i);
          linalg::YieldOp::create(
              b, l,
              ValueRange{arith::SelectOp::create(b, l, match, args[0], args[2]),
                         arith::SelectOp::create(b, l, match, position, args[3])});
        });
    rewriter.replaceOp(op, select.getResults());
    return success();
  }
};

struct TopKGradLowering : OpConversionPattern<mt::TopKGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::TopKGradOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NamedTensorType resultType = namedType(op.getResult());
    StringRef kDim = op.getKDim();
    ArrayRef<StringAttr> space = resultType.getDimNames();
    unsigned dimPosition = *resultType.getDimIndex(op.getDim());
    SmallVector<AffineMap> maps{mapWithExtraLoop(space, namedType(op.getValuesGrad()), kDim),
                                mapWithExtraLoop(space, namedType(op.getIndices()), kDim),
                                mapWithExtraLoop(space, resultType, /*dim=*/"")};
    SmallVector<utils::IteratorType> iterators(space.size(), utils::IteratorType::parallel);
    iterators.push_back(utils::IteratorType::reduction);
    Value zeros =
        fill(rewriter, loc, resultType, rewriter.getFloatAttr(resultType.getElementType(), 0.0));
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{builtinType(resultType)},
        ValueRange{adaptor.getValuesGrad(), adaptor.getIndices()}, ValueRange{zeros}, maps,
        iterators, [&](OpBuilder &b, Location l, ValueRange args) {
          Value j = linalg::IndexOp::create(b, l, dimPosition);
          Value index = arith::IndexCastOp::create(b, l, b.getIndexType(), args[1]);
          Value match = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, index, j);
          Value sum = arith::AddFOp::create(b, l, args[2], args[0]);
          linalg::YieldOp::create(b, l,
                                  ValueRange{arith::SelectOp::create(b, l, match, sum, args[2])});
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

} // namespace

void codegen::lowering::populateTopKPatterns(const TypeConverter &types,
                                             RewritePatternSet &patterns) {
  patterns.add<TopKLowering, TopKGradLowering>(types, patterns.getContext());
}
