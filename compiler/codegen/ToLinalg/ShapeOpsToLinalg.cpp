//===- ShapeOpsToLinalg.cpp - rename, split, merge and iota to linalg -----===//
//
// The dimension-manipulation ops change only the type: on builtin tensors (sizes in
// physical order) `mt.rename` is nothing, `mt.split` is a `tensor.expand_shape` and
// `mt.merge` a `tensor.collapse_shape`, after a `linalg.transpose` when the merged
// dimensions are not already adjacent in the listed order. `mt.iota` is a `linalg.generic`
// writing `linalg.index`.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/ToLinalg/MTToLinalg.h"

#include "dialects/mtp/IR/MTPOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::codegen::lowering;
using mt::NamedTensorType;

namespace {

/// The same tensor under a new name for one dimension.
struct RenameLowering : OpConversionPattern<mt::RenameOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::RenameOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, adaptor.getInput());
    return success();
  }
};

/// `dim` becomes the `into` dimensions in its place, row-major: an expand_shape whose group
/// at `dim`'s position lists the new dimensions.
struct SplitLowering : OpConversionPattern<mt::SplitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::SplitOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    SmallVector<ReassociationIndices> groups;
    int64_t next = 0;
    for (StringAttr name : namedType(op.getInput()).getDimNames()) {
      int64_t width = name.getValue() == op.getDim() ? op.getInto().size() : 1;
      ReassociationIndices &group = groups.emplace_back();
      for (int64_t i = 0; i < width; ++i)
        group.push_back(next++);
    }
    rewriter.replaceOpWithNewOp<tensor::ExpandShapeOp>(op, builtinType(namedType(op.getResult())),
                                                       adaptor.getInput(), groups);
    return success();
  }
};

/// The merged dimensions, row-major in the listed order, become one dimension where the
/// first listed one was. The input is first transposed so that they are adjacent in that
/// order (unless they already are), then collapsed.
struct MergeLowering : OpConversionPattern<mt::MergeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::MergeOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NamedTensorType inputType = namedType(op.getInput());
    SmallVector<StringAttr> merged(op.getDims().getAsRange<StringAttr>());
    // permutation[i]: the input dimension at position i of the transposed tensor.
    SmallVector<int64_t> permutation;
    SmallVector<ReassociationIndices> groups;
    for (auto [position, name] : llvm::enumerate(inputType.getDimNames())) {
      if (name == merged.front()) {
        ReassociationIndices &group = groups.emplace_back();
        for (StringAttr dim : merged) {
          group.push_back(static_cast<int64_t>(permutation.size()));
          permutation.push_back(*inputType.getDimIndex(dim.getValue()));
        }
      } else if (!llvm::is_contained(merged, name)) {
        groups.push_back({static_cast<int64_t>(permutation.size())});
        permutation.push_back(static_cast<int64_t>(position));
      }
    }

    Value source = adaptor.getInput();
    if (!llvm::equal(permutation, llvm::seq<int64_t>(0, permutation.size()))) {
      SmallVector<int64_t> sizes;
      for (int64_t dim : permutation)
        sizes.push_back(inputType.getDimSizes()[dim]);
      Value init = tensor::EmptyOp::create(rewriter, loc, sizes, inputType.getElementType());
      source = linalg::TransposeOp::create(rewriter, loc, source, init, permutation)->getResult(0);
    }
    rewriter.replaceOpWithNewOp<tensor::CollapseShapeOp>(
        op, builtinType(namedType(op.getResult())), source, groups);
    return success();
  }
};

/// result[i] = i, converted to the element type (exact: the verifier checks the type
/// holds every position). On a rank's part of a split dimension (the op's `mtp.layout`:
/// ring attention's positions of a query or key block) the positions are global: those
/// the part holds (PartPositions).
struct IotaLowering : OpConversionPattern<mt::IotaOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::IotaOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NamedTensorType type = namedType(op.getResult());
    Type element = type.getElementType();
    std::optional<PartPositions> positions;
    if (mtp::ShardedTensorType sharded = mtp::getLocalLayout(op))
      positions.emplace(rewriter, loc, sharded, op.getDim());
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{builtinType(type)}, ValueRange{},
        ValueRange{emptyTensor(rewriter, loc, type)},
        ArrayRef<AffineMap>{rewriter.getMultiDimIdentityMap(1)},
        ArrayRef<utils::IteratorType>{utils::IteratorType::parallel},
        [&](OpBuilder &b, Location l, ValueRange) {
          Value index = linalg::IndexOp::create(b, l, 0);
          if (positions)
            index = positions->at(b, l, index);
          Type integer = isa<IntegerType>(element) ? element : b.getI64Type();
          Value value = arith::IndexCastOp::create(b, l, integer, index);
          linalg::YieldOp::create(b, l, convertScalar(b, l, value, element));
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

} // namespace

void codegen::lowering::populateShapeOpPatterns(const TypeConverter &types,
                                                RewritePatternSet &patterns) {
  patterns.add<RenameLowering, SplitLowering, MergeLowering, IotaLowering>(types,
                                                                            patterns.getContext());
}
