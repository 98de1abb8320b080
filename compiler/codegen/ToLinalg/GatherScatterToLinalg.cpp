//===- GatherScatterToLinalg.cpp - gather and embedding_grad --------------===//
//
// `mt.gather` reads the table at data-dependent rows: a `linalg.generic` over the result
// whose body reads the row index from the indices operand (an ordinary input with a
// projection map) and `tensor.extract`s the table element. Its adjoint `mt.embedding_grad`
// adds each gradient row into the table row its index selects: an `scf.for` nest over the
// index positions carrying the accumulated table, with a `tensor.extract_slice` of the row,
// a `linalg.generic` add and a `tensor.insert_slice` back, which one-shot bufferization
// turns into an in-place update of one buffer (O(positions * row) work, no table-sized
// temporaries per position).
//
// Indices out of range: the reference interpreter rejects them; generated code cannot
// report an error, so it clamps every index into [0, rows) (a bad index reads or updates
// the first or last row rather than memory outside the table).
//
// A table split along the indexed dimension (vocabulary parallelism; the op carries the
// table's laid-out type as `mtp.layout`) holds rows [start, start + rows) on this rank:
// an index is shifted by `start`, and one outside the part reads 0 (the lookup is then a
// partial sum over the ranks) or updates nothing.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/ToLinalg/MTToLinalg.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::codegen::lowering;
using mt::NamedTensorType;

namespace {

/// Where this rank's rows of a table split along `dim` start (the op's `mtp.layout`), or
/// null for a whole table.
FailureOr<Value> partOf(OpBuilder &b, Operation *op, StringRef dim) {
  mtp::ShardedTensorType layout = mtp::getLocalLayout(op);
  if (!layout)
    return Value();
  if (isTwoChunkSplit(layout, dim))
    return op->emitOpError() << "on a table whose '" << dim
                             << "' is split in two chunks per rank (a two_chunk axis): "
                                "not supported, its rows are not one range";
  return partStart(b, op->getLoc(), layout, dim);
}

/// The local row of index `index` (any integer type), clamped into [0, rows), and whether
/// it lies in this rank's part (null without a part: every row is).
std::pair<Value, Value> localRow(OpBuilder &b, Location loc, Value index, Value start,
                                 int64_t rows) {
  if (!start)
    return {clampedIndex(b, loc, index, rows), nullptr};
  Value shifted = arith::SubIOp::create(
      b, loc, arith::IndexCastOp::create(b, loc, b.getIndexType(), index), start);
  Value zero = indexConstant(b, loc, 0);
  Value inPart = arith::AndIOp::create(
      b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, shifted, zero),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, shifted,
                            indexConstant(b, loc, rows)));
  Value clamped = arith::MaxSIOp::create(
      b, loc, zero,
      arith::MinSIOp::create(b, loc, shifted, indexConstant(b, loc, rows - 1)));
  return {clamped, inPart};
}

/// result[positions..., others...] = table[others with dim = clamp(indices[positions...])].
struct GatherLowering : OpConversionPattern<mt::GatherOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::GatherOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NamedTensorType tableType = namedType(op.getTable());
    NamedTensorType resultType = namedType(op.getResult());
    ArrayRef<StringAttr> space = resultType.getDimNames();
    int64_t rows = tableType.getDimSize(op.getDim());
    Value table = adaptor.getTable();
    FailureOr<Value> part = partOf(rewriter, op, op.getDim());
    if (failed(part))
      return failure();
    Value start = *part;
    SmallVector<AffineMap> maps{mapInto(space, namedType(op.getIndices())),
                                mapInto(space, resultType)};
    SmallVector<utils::IteratorType> iterators(space.size(), utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{builtinType(resultType)}, ValueRange{adaptor.getIndices()},
        ValueRange{emptyTensor(rewriter, loc, resultType)}, maps, iterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          auto [row, inPartRow] = localRow(b, l, args[0], start, rows);
          Value inPart = inPartRow;
          SmallVector<Value> coords;
          for (StringAttr name : tableType.getDimNames()) {
            if (name.getValue() == op.getDim()) {
              coords.push_back(row);
              continue;
            }
            auto position = static_cast<uint64_t>(llvm::find(space, name) - space.begin());
            coords.push_back(linalg::IndexOp::create(b, l, position));
          }
          Value value = tensor::ExtractOp::create(b, l, table, coords);
          if (inPart)
            value = arith::SelectOp::create(
                b, l, inPart, value,
                arith::ConstantOp::create(b, l, b.getZeroAttr(value.getType())));
          linalg::YieldOp::create(b, l, ValueRange{value});
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

/// A zero table, then for each index position p (row-major over the indices):
/// table[row clamp(indices[p])] += grad[p, ...].
struct EmbeddingGradLowering : OpConversionPattern<mt::EmbeddingGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::EmbeddingGradOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    NamedTensorType indicesType = namedType(op.getIndices());
    NamedTensorType tableType = namedType(op.getResult());
    unsigned dimPosition = *tableType.getDimIndex(op.getDim());
    int64_t rows = tableType.getDimSizes()[dimPosition];
    // One row: the table's other dimensions in its order, which are also the gradient's
    // dimensions after the indices' ones.
    SmallVector<int64_t> rowSizes(tableType.getDimSizes());
    rowSizes.erase(rowSizes.begin() + dimPosition);
    auto rowType = RankedTensorType::get(rowSizes, tableType.getElementType());
    unsigned rowRank = rowSizes.size();

    Value zero = fill(rewriter, loc, tableType,
                      rewriter.getFloatAttr(tableType.getElementType(), 0.0));
    SmallVector<Value> lbs, ubs, steps;
    for (int64_t size : indicesType.getDimSizes()) {
      lbs.push_back(indexConstant(rewriter, loc, 0));
      ubs.push_back(indexConstant(rewriter, loc, size));
      steps.push_back(indexConstant(rewriter, loc, 1));
    }
    Value indices = adaptor.getIndices(), grad = adaptor.getGrad();
    FailureOr<Value> part = partOf(rewriter, op, op.getDim());
    if (failed(part))
      return failure();
    Value start = *part;
    scf::LoopNest nest = scf::buildLoopNest(
        rewriter, loc, lbs, ubs, steps, ValueRange{zero},
        [&](OpBuilder &b, Location l, ValueRange ivs, ValueRange acc) -> scf::ValueVector {
          auto [row, inPartRow] =
              localRow(b, l, tensor::ExtractOp::create(b, l, indices, ivs), start, rows);
          Value inPart = inPartRow;
          OpFoldResult zeroAttr = b.getIndexAttr(0), oneAttr = b.getIndexAttr(1);

          SmallVector<OpFoldResult> gradOffsets(ivs.begin(), ivs.end());
          SmallVector<OpFoldResult> gradSizes(ivs.size(), oneAttr);
          for (int64_t size : rowSizes) {
            gradOffsets.push_back(zeroAttr);
            gradSizes.push_back(b.getIndexAttr(size));
          }
          SmallVector<OpFoldResult> gradStrides(gradSizes.size(), oneAttr);
          Value gradRow = tensor::ExtractSliceOp::create(b, l, rowType, grad, gradOffsets,
                                                         gradSizes, gradStrides);

          SmallVector<OpFoldResult> offsets, sizes;
          for (auto [position, size] : llvm::enumerate(tableType.getDimSizes())) {
            bool isRow = position == dimPosition;
            offsets.push_back(isRow ? OpFoldResult(row) : zeroAttr);
            sizes.push_back(isRow ? oneAttr : b.getIndexAttr(size));
          }
          SmallVector<OpFoldResult> strides(sizes.size(), oneAttr);
          Value tableRow =
              tensor::ExtractSliceOp::create(b, l, rowType, acc[0], offsets, sizes, strides);

          SmallVector<AffineMap> maps(2, b.getMultiDimIdentityMap(rowRank));
          SmallVector<utils::IteratorType> iterators(rowRank, utils::IteratorType::parallel);
          auto sum = linalg::GenericOp::create(
              b, l, TypeRange{rowType}, ValueRange{gradRow}, ValueRange{tableRow}, maps,
              iterators, [&](OpBuilder &bb, Location ll, ValueRange args) {
                Value sum = arith::AddFOp::create(bb, ll, args[1], args[0]);
                if (inPart)
                  sum = arith::SelectOp::create(bb, ll, inPart, sum, args[1]);
                linalg::YieldOp::create(bb, ll, ValueRange{sum});
              });
          Value updated = tensor::InsertSliceOp::create(b, l, sum.getResult(0), acc[0], offsets,
                                                        sizes, strides);
          return {updated};
        });
    rewriter.replaceOp(op, nest.results.front());
    return success();
  }
};

} // namespace

void codegen::lowering::populateGatherScatterPatterns(const TypeConverter &types,
                                                      RewritePatternSet &patterns) {
  patterns.add<GatherLowering, EmbeddingGradLowering>(types, patterns.getContext());
}
