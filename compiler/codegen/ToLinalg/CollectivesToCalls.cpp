//===- CollectivesToCalls.cpp - mtp collectives to runtime calls ----------===//
//
// A partitioned step (compiler/sharding) computes on local tensors and communicates
// through `mtp` collectives. Each collective becomes one call of a C function of the
// runtime (kAllReduceFunction and the others in MTToLinalg.h) on contiguous buffers:
//
//     %in  = bufferization.to_buffer %x read_only        (the operand's buffer)
//     %out = memref.alloc()                              (a fresh result buffer)
//     call @mtc_all_reduce(axis, dtype, op, ptr(%in), ptr(%out), count)
//     %y   = bufferization.to_tensor %out restrict writable
//
// The call sees addresses, not memrefs: the buffers must live until it returns, so moving
// frees up to a buffer's last use counts what is computed from its address as uses
// (compiler/codegen/CPU/EarlyDeallocation.cpp).
//
// The runtime's gathers and scatters move contiguous blocks, one per rank: a dimension
// gathered or scattered other than the outermost is transposed to the front first and
// back after; an all-to-all splits the dimension it scatters into (rank, part) and
// transposes both its dimensions to the front (AllToAllLowering); one of expert slots with
// filled counts calls the runtime's all-to-all of filled slots on the same blocks, with a
// scratch buffer for the rows it packs; a shift sends the whole local buffer
// (ShiftLowering). `all_slice` needs no
// communication: an `extract_slice` at this rank's coordinate (kMeshCoordinateFunction), and
// `to_partial` a select on it. `from_local` / `to_local` are nothing on builtin tensors.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/ToLinalg/MTToLinalg.h"

#include "dialects/mtp/IR/MTPOps.h"
#include "runtime/comm/CollectiveTypes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::codegen::lowering;

// The reduction of a collective travels as its runtime code (a plain C header with no
// dependency: the one place the compiler includes from the runtime).
static_assert(static_cast<int64_t>(mtp::Reduction::Sum) == MTC_SUM &&
                  static_cast<int64_t>(mtp::Reduction::Max) == MTC_MAX &&
                  static_cast<int64_t>(mtp::Reduction::Min) == MTC_MIN,
              "mtp.reduction values must be the runtime's MtcReduction codes");

namespace {

/// The position of `axis` in `mesh` (what the runtime's functions take).
int64_t axisIndex(mtp::MeshAttr mesh, StringRef axis) {
  for (auto [i, name] : llvm::enumerate(mesh.getAxisNames()))
    if (name.getValue() == axis)
      return static_cast<int64_t>(i);
  return -1;
}

Value i64Constant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(value));
}

/// The kernel ABI's element type code of the runtime's collectives (MTC_F32, MTC_F64,
/// MTC_BF16/MTC_F16 for mixed precision, and MTC_I32/MTC_I64 for token ids and routing
/// indices); other types get MTC_NUM_ELEMENT_TYPES, which the runtime rejects with an error
/// naming it.
int64_t dtypeCode(Type element) {
  if (element.isF32())
    return MTC_F32;
  if (element.isF64())
    return MTC_F64;
  if (element.isBF16())
    return MTC_BF16;
  if (element.isF16())
    return MTC_F16;
  if (element.isInteger(32))
    return MTC_I32;
  if (element.isInteger(64))
    return MTC_I64;
  return MTC_NUM_ELEMENT_TYPES;
}

/// The address of `memref`'s first element as an i64.
Value addressOf(OpBuilder &b, Location loc, Value memref) {
  Value index = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
}

/// Calls `function(axis, dtype, options..., in, out, count)` with `input` (a ranked tensor)
/// and a fresh buffer of `resultType`, which it returns as a tensor. `options` are the
/// integer arguments of the function between the dtype and the buffers (a reduction, a
/// shift's offset).
Value callCollective(OpBuilder &b, Location loc, StringRef function, int64_t axis,
                     ArrayRef<int64_t> options, Value input, RankedTensorType resultType,
                     int64_t count) {
  auto inType = cast<RankedTensorType>(input.getType());
  auto inMemref = MemRefType::get(inType.getShape(), inType.getElementType());
  auto outMemref = MemRefType::get(resultType.getShape(), resultType.getElementType());
  Value in = bufferization::ToBufferOp::create(b, loc, inMemref, input, /*read_only=*/true);
  Value out = memref::AllocOp::create(b, loc, outMemref);
  SmallVector<Value> args = {i64Constant(b, loc, axis),
                             i64Constant(b, loc, dtypeCode(inType.getElementType()))};
  for (int64_t option : options)
    args.push_back(i64Constant(b, loc, option));
  args.append({addressOf(b, loc, in), addressOf(b, loc, out), i64Constant(b, loc, count)});
  func::CallOp::create(b, loc, function, TypeRange{}, args);
  return bufferization::ToTensorOp::create(b, loc, resultType, out, /*restrict=*/true,
                                           /*writable=*/true);
}

/// Calls mtc_all_to_all_filled(axis, dtype, in, out, scratch, counts, slots_first, a, b,
/// row) on `blocks` ([parts, a, b, ...] elements, `row` per (a, b)) with the filled
/// `counts`; the scratch it packs the sent rows in is a fresh buffer of the blocks' size
/// (placed with the function's other temporaries). Returns the received blocks.
Value callFilledAllToAll(OpBuilder &b, Location loc, int64_t axis, Value blocks, Value counts,
                         bool slotsFirst, int64_t a, int64_t bSize, int64_t row) {
  auto type = cast<RankedTensorType>(blocks.getType());
  auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
  auto countsType = cast<RankedTensorType>(counts.getType());
  Value in = bufferization::ToBufferOp::create(b, loc, memrefType, blocks, /*read_only=*/true);
  Value countsBuffer = bufferization::ToBufferOp::create(
      b, loc, MemRefType::get(countsType.getShape(), countsType.getElementType()), counts,
      /*read_only=*/true);
  Value out = memref::AllocOp::create(b, loc, memrefType);
  Value scratch = memref::AllocOp::create(b, loc, memrefType);
  func::CallOp::create(b, loc, kAllToAllFilledFunction, TypeRange{},
                       ValueRange{i64Constant(b, loc, axis),
                                  i64Constant(b, loc, dtypeCode(type.getElementType())),
                                  addressOf(b, loc, in), addressOf(b, loc, out),
                                  addressOf(b, loc, scratch), addressOf(b, loc, countsBuffer),
                                  i64Constant(b, loc, slotsFirst), i64Constant(b, loc, a),
                                  i64Constant(b, loc, bSize), i64Constant(b, loc, row)});
  return bufferization::ToTensorOp::create(b, loc, type, out, /*restrict=*/true,
                                           /*writable=*/true);
}

/// The permutation bringing dimension `dim` of a rank-`rank` tensor to the front, and its
/// inverse.
std::pair<SmallVector<int64_t>, SmallVector<int64_t>> frontPermutation(int64_t dim,
                                                                       int64_t rank) {
  SmallVector<int64_t> toFront = {dim}, back(rank);
  for (int64_t i = 0; i < rank; ++i)
    if (i != dim)
      toFront.push_back(i);
  for (int64_t i = 0; i < rank; ++i)
    back[toFront[i]] = i;
  return {toFront, back};
}

/// A gather or scatter of blocks along `dim`: the operand transposed so `dim` leads (the
/// runtime's blocks are contiguous), the call, the result transposed back.
Value blockCollective(OpBuilder &b, Location loc, StringRef function, int64_t axis,
                      Value input, int64_t dim, RankedTensorType resultType, int64_t count) {
  int64_t rank = resultType.getRank();
  auto [toFront, back] = frontPermutation(dim, rank);
  Value front = transposed(b, loc, input, toFront);
  SmallVector<int64_t> shape;
  for (int64_t i : toFront)
    shape.push_back(resultType.getShape()[i]);
  Value result = callCollective(b, loc, function, axis, {}, front,
                                RankedTensorType::get(shape, resultType.getElementType()), count);
  return transposed(b, loc, result, back);
}

/// `value` with its chunks along `dim` (`order.size()` equal ones) reordered: chunk i of
/// the result is chunk order[i] of `value`.
Value reorderChunks(OpBuilder &b, Location loc, Value value, int64_t dim,
                    ArrayRef<int64_t> order) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t chunk = type.getDimSize(dim) / static_cast<int64_t>(order.size());
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes, strides(type.getRank(), b.getIndexAttr(1));
  for (int64_t size : type.getShape())
    sizes.push_back(b.getIndexAttr(size));
  sizes[dim] = b.getIndexAttr(chunk);
  Value result = tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  for (auto [to, from] : llvm::enumerate(order)) {
    offsets[dim] = b.getIndexAttr(from * chunk);
    Value piece = tensor::ExtractSliceOp::create(b, loc, value, offsets, sizes, strides);
    offsets[dim] = b.getIndexAttr(static_cast<int64_t>(to) * chunk);
    result = tensor::InsertSliceOp::create(b, loc, piece, result, offsets, sizes, strides);
  }
  return result;
}

/// Where the 2n chunks of a part cut by a `two_chunk` axis of size `parts` are when the
/// ranks' blocks lie side by side (rank c's: its chunks c and 2n - 1 - c): block order
/// position 2c holds chunk c, 2c + 1 chunk 2n - 1 - c.
SmallVector<int64_t> twoChunkBlockOrder(int64_t parts) {
  SmallVector<int64_t> order;
  for (int64_t c = 0; c < parts; ++c)
    order.append({c, 2 * parts - 1 - c});
  return order;
}

/// from_local / to_local: the same buffer either way.
template <typename Op>
struct LocalViewLowering : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, adaptor.getInput());
    return success();
  }
};

struct AllReduceLowering : OpConversionPattern<mtp::AllReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mtp::AllReduceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = cast<mtp::ShardedTensorType>(op.getInput().getType());
    auto resultType = cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    Value value = adaptor.getInput();
    // mtc_all_reduce sums or takes the maximum (runtime/exec/MeshCollectives.h).
    if (op.getReduction() == mtp::Reduction::Min)
      return op.emitOpError() << "reduction = min: the runtime's " << kAllReduceFunction
                              << " sums or takes the maximum only";
    auto reduction = static_cast<int64_t>(op.getReduction());
    // One call per axis: combining over each in turn combines over all of them.
    for (Attribute axis : op.getOver())
      value = callCollective(rewriter, op.getLoc(), kAllReduceFunction,
                             axisIndex(type.getMesh(), cast<StringAttr>(axis).getValue()),
                             {reduction}, value, resultType, resultType.getNumElements());
    rewriter.replaceOp(op, value);
    return success();
  }
};

template <typename Op, bool Gather>
struct BlockCollectiveLowering : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  LogicalResult matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = cast<mtp::ShardedTensorType>(op.getInput().getType());
    auto resultType =
        cast<RankedTensorType>(this->getTypeConverter()->convertType(op.getType()));
    auto inputType = cast<RankedTensorType>(adaptor.getInput().getType());
    if constexpr (!Gather) {
      // mtc_reduce_scatter takes no reduction: it sums.
      if (op.getReduction() != mtp::Reduction::Sum)
        return op.emitOpError() << "reduction = " << mtp::stringifyReduction(op.getReduction())
                                << ": the runtime's " << kReduceScatterFunction << " sums only";
    }
    int64_t dim = *type.getGlobal().getDimIndex(op.getAlong());
    int64_t count = Gather ? inputType.getNumElements() : resultType.getNumElements();
    // Over a `two_chunk` axis the ranks' blocks side by side are the chunks in block order
    // (twoChunkBlockOrder): a gather puts them back in place after the call, a scatter
    // takes them out of place before it.
    mtp::MeshAttr mesh = type.getMesh();
    SmallVector<int64_t> blockOrder;
    if (mesh.isTwoChunk(op.getOver()))
      blockOrder = twoChunkBlockOrder(*mesh.getAxisSize(op.getOver()));
    Value input = adaptor.getInput();
    if (!Gather && !blockOrder.empty())
      input = reorderChunks(rewriter, op.getLoc(), input, dim, blockOrder);
    Value result = blockCollective(rewriter, op.getLoc(),
                                   Gather ? kAllGatherFunction : kReduceScatterFunction,
                                   axisIndex(mesh, op.getOver()), input, dim, resultType, count);
    if (Gather && !blockOrder.empty()) {
      SmallVector<int64_t> inPlace(blockOrder.size());
      for (auto [position, chunk] : llvm::enumerate(blockOrder))
        inPlace[chunk] = static_cast<int64_t>(position);
      result = reorderChunks(rewriter, op.getLoc(), result, dim, inPlace);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// all_to_all: block j of the operand along `to` goes to coordinate j, and the block from
/// coordinate i lands at position i along `from`. The runtime exchanges contiguous blocks
/// laid out alike on both sides, so the operand's `to` is split into (coordinate, part)
/// and transposed to [coordinate, from, the others in order]; what arrives is [source,
/// from, the others], whose first two dimensions collapse into the whole `from` at the
/// front, transposed back into place.
struct AllToAllLowering : OpConversionPattern<mtp::AllToAllOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mtp::AllToAllOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = cast<mtp::ShardedTensorType>(op.getInput().getType());
    auto inputType = cast<RankedTensorType>(adaptor.getInput().getType());
    Location loc = op.getLoc();
    Type element = inputType.getElementType();
    int64_t rank = inputType.getRank();
    int64_t from = *type.getGlobal().getDimIndex(op.getFrom());
    int64_t to = *type.getGlobal().getDimIndex(op.getTo());
    int64_t parts = *type.getMesh().getAxisSize(op.getOver());
    if (type.getMesh().isTwoChunk(op.getOver()))
      return op.emitOpError() << "over the two_chunk axis '" << op.getOver()
                              << "': an all-to-all of chunked parts is not supported";

    // Dimension d of the operand is expandedDim(d) of the expanded tensor, whose `to` is
    // (coordinate, part) at (to, to + 1).
    auto expandedDim = [&](int64_t d) { return d > to ? d + 1 : d; };
    SmallVector<int64_t> expandedShape;
    SmallVector<ReassociationIndices> split;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t size = inputType.getDimSize(d);
      ReassociationIndices &group = split.emplace_back();
      group.push_back(static_cast<int64_t>(expandedShape.size()));
      if (d == to) {
        expandedShape.push_back(parts);
        group.push_back(static_cast<int64_t>(expandedShape.size()));
        size /= parts;
      }
      expandedShape.push_back(size);
    }
    Value expanded = tensor::ExpandShapeOp::create(
        rewriter, loc, RankedTensorType::get(expandedShape, element), adaptor.getInput(), split);
    SmallVector<int64_t> order = {to, expandedDim(from)};
    for (int64_t d = 0; d <= rank; ++d)
      if (d != to && d != expandedDim(from))
        order.push_back(d);
    Value blocks = transposed(rewriter, loc, expanded, order);

    Value received;
    if (Value filled = adaptor.getFilled()) {
      // Expert slots: the blocks are [parts, from, to's part, features], the verifier having
      // put `from` and `to` in front.
      auto blocksType = cast<RankedTensorType>(blocks.getType());
      StringRef expertDim = namedType(op.getFilled()).getDimNames().front().getValue();
      int64_t row = 1;
      for (int64_t d = 3; d < blocksType.getRank(); ++d)
        row *= blocksType.getDimSize(d);
      received = callFilledAllToAll(rewriter, loc, axisIndex(type.getMesh(), op.getOver()),
                                    blocks, filled, /*slotsFirst=*/op.getTo() == expertDim,
                                    blocksType.getDimSize(1), blocksType.getDimSize(2), row);
    } else {
      received = callCollective(rewriter, loc, kAllToAllFunction,
                                axisIndex(type.getMesh(), op.getOver()), {}, blocks,
                                cast<RankedTensorType>(blocks.getType()),
                                inputType.getNumElements() / parts);
    }
    SmallVector<ReassociationIndices> merge = {{0, 1}};
    for (int64_t d = 2; d <= rank; ++d)
      merge.push_back({d});
    Value front = tensor::CollapseShapeOp::create(rewriter, loc, received, merge);
    rewriter.replaceOp(op, transposed(rewriter, loc, front, frontPermutation(from, rank).second));
    return success();
  }
};

/// shift: the whole local buffer to the rank `offset` further along the axis (the result
/// has the operand's type).
struct ShiftLowering : OpConversionPattern<mtp::ShiftOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mtp::ShiftOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = cast<mtp::ShardedTensorType>(op.getInput().getType());
    auto resultType = cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    rewriter.replaceOp(op, callCollective(rewriter, op.getLoc(), kShiftFunction,
                                          axisIndex(type.getMesh(), op.getOver()),
                                          {static_cast<int64_t>(op.getOffset()), op.getRotate() ? 1 : 0},
                                          adaptor.getInput(), resultType,
                                          resultType.getNumElements()));
    return success();
  }
};

/// to_partial: the value where this rank's coordinate is 0, zero elsewhere.
struct ToPartialLowering : OpConversionPattern<mtp::ToPartialOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mtp::ToPartialOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = cast<mtp::ShardedTensorType>(op.getInput().getType());
    Location loc = op.getLoc();
    Value first = arith::CmpIOp::create(
        rewriter, loc, arith::CmpIPredicate::eq,
        meshCoordinate(rewriter, loc, axisIndex(type.getMesh(), op.getOver())),
        indexConstant(rewriter, loc, 0));
    rewriter.replaceOp(op, buildPointwise(rewriter, loc, type.getLocalType(), adaptor.getInput(),
                                          [&](OpBuilder &b, Location l, Value x) -> Value {
                                            Value zero = arith::ConstantOp::create(
                                                b, l, b.getZeroAttr(x.getType()));
                                            return arith::SelectOp::create(b, l, first, x, zero);
                                          }));
    return success();
  }
};

struct AllSliceLowering : OpConversionPattern<mtp::AllSliceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mtp::AllSliceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = cast<mtp::ShardedTensorType>(op.getInput().getType());
    auto resultType = cast<RankedTensorType>(getTypeConverter()->convertType(op.getType()));
    Location loc = op.getLoc();
    int64_t dim = *type.getGlobal().getDimIndex(op.getAlong());
    mtp::MeshAttr mesh = type.getMesh();
    Value coordinate = meshCoordinate(rewriter, loc, axisIndex(mesh, op.getOver()));
    SmallVector<OpFoldResult> offsets(resultType.getRank(), rewriter.getIndexAttr(0));
    SmallVector<OpFoldResult> sizes, strides(resultType.getRank(), rewriter.getIndexAttr(1));
    for (int64_t size : resultType.getShape())
      sizes.push_back(rewriter.getIndexAttr(size));
    if (!mesh.isTwoChunk(op.getOver())) {
      offsets[dim] = arith::MulIOp::create(
                         rewriter, loc, coordinate,
                         indexConstant(rewriter, loc, resultType.getDimSize(dim)))
                         .getResult();
      rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(op, resultType, adaptor.getInput(),
                                                          offsets, sizes, strides);
      return success();
    }
    // Chunks c and 2n - 1 - c of h positions, side by side.
    int64_t parts = *mesh.getAxisSize(op.getOver());
    int64_t chunk = resultType.getDimSize(dim) / 2;
    sizes[dim] = rewriter.getIndexAttr(chunk);
    Value result = tensor::EmptyOp::create(rewriter, loc, resultType.getShape(),
                                           resultType.getElementType());
    Value chunkIndices[] = {
        coordinate, arith::SubIOp::create(rewriter, loc,
                                          indexConstant(rewriter, loc, 2 * parts - 1), coordinate)};
    for (auto [half, chunkIndex] : llvm::enumerate(chunkIndices)) {
      offsets[dim] = arith::MulIOp::create(rewriter, loc, chunkIndex,
                                           indexConstant(rewriter, loc, chunk))
                         .getResult();
      Value piece = tensor::ExtractSliceOp::create(rewriter, loc, adaptor.getInput(), offsets,
                                                   sizes, strides);
      SmallVector<OpFoldResult> at(resultType.getRank(), rewriter.getIndexAttr(0));
      at[dim] = rewriter.getIndexAttr(static_cast<int64_t>(half) * chunk);
      result = tensor::InsertSliceOp::create(rewriter, loc, piece, result, at, sizes, strides);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

Value codegen::lowering::meshCoordinate(OpBuilder &b, Location loc, int64_t axis) {
  Value coordinate = func::CallOp::create(b, loc, kMeshCoordinateFunction, b.getI64Type(),
                                          ValueRange{i64Constant(b, loc, axis)})
                         .getResult(0);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), coordinate);
}

Value codegen::lowering::partStart(OpBuilder &b, Location loc, mtp::ShardedTensorType layout,
                                   StringRef dim) {
  // The combined coordinate over the dimension's axes (outermost first), times the local
  // size.
  Value part = indexConstant(b, loc, 0);
  for (StringRef axis : layout.getSplitAxes(dim))
    part = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, part,
                              indexConstant(b, loc, *layout.getMesh().getAxisSize(axis))),
        meshCoordinate(b, loc, axisIndex(layout.getMesh(), axis)));
  return arith::MulIOp::create(b, loc, part,
                               indexConstant(b, loc, layout.getLocalType().getDimSize(dim)));
}

bool codegen::lowering::isTwoChunkSplit(mtp::ShardedTensorType layout, StringRef dim) {
  return llvm::any_of(layout.getSplitAxes(dim),
                      [&](StringRef axis) { return layout.getMesh().isTwoChunk(axis); });
}

codegen::lowering::PartPositions::PartPositions(OpBuilder &b, Location loc,
                                                mtp::ShardedTensorType layout, StringRef dim) {
  if (!isTwoChunkSplit(layout, dim)) {
    start = partStart(b, loc, layout, dim);
    return;
  }
  mtp::MeshAttr mesh = layout.getMesh();
  int64_t extent = layout.getGlobal().getDimSize(dim);
  for (StringRef axis : layout.getSplitAxes(dim)) {
    int64_t parts = *mesh.getAxisSize(axis);
    Value coordinate = meshCoordinate(b, loc, axisIndex(mesh, axis));
    extent /= parts;
    Level &level = levels.emplace_back();
    if (!mesh.isTwoChunk(axis)) {
      level.pieceSize = extent;
      level.lowStart =
          arith::MulIOp::create(b, loc, coordinate, indexConstant(b, loc, extent));
      continue;
    }
    // Chunks of half the part: this rank's are c and 2n - 1 - c.
    int64_t chunk = extent / 2;
    level.pieceSize = chunk;
    level.lowStart = arith::MulIOp::create(b, loc, coordinate, indexConstant(b, loc, chunk));
    Value mirrored = arith::SubIOp::create(b, loc, indexConstant(b, loc, 2 * parts - 2),
                                           coordinate);
    level.highStart = arith::MulIOp::create(b, loc, mirrored, indexConstant(b, loc, chunk));
  }
  std::reverse(levels.begin(), levels.end());
}

Value codegen::lowering::PartPositions::at(OpBuilder &b, Location loc, Value local) const {
  if (start)
    return arith::AddIOp::create(b, loc, local, start);
  Value position = local;
  for (const Level &level : levels) {
    Value low = arith::AddIOp::create(b, loc, position, level.lowStart);
    if (!level.highStart) {
      position = low;
      continue;
    }
    // (2n - 1 - c) h + i - h = (2n - 2 - c) h + i.
    Value high = arith::AddIOp::create(b, loc, position, level.highStart);
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, position,
                                        indexConstant(b, loc, level.pieceSize));
    position = arith::SelectOp::create(b, loc, first, low, high);
  }
  return position;
}

LogicalResult codegen::lowering::declareMeshFunctions(ModuleOp module) {
  bool partitioned = false;
  module.walk([&](Operation *op) {
    if (isa<mtp::MTPDialect>(op->getDialect()) || mtp::getLocalLayout(op))
      partitioned = true;
  });
  if (!partitioned)
    return success();
  Builder builder(module.getContext());
  Type i64 = builder.getI64Type();
  std::pair<StringRef, FunctionType> declarations[] = {
      {kAllReduceFunction, builder.getFunctionType({i64, i64, i64, i64, i64, i64}, {})},
      {kAllGatherFunction, builder.getFunctionType({i64, i64, i64, i64, i64}, {})},
      {kReduceScatterFunction, builder.getFunctionType({i64, i64, i64, i64, i64}, {})},
      {kAllToAllFunction, builder.getFunctionType({i64, i64, i64, i64, i64}, {})},
      {kShiftFunction, builder.getFunctionType({i64, i64, i64, i64, i64, i64, i64}, {})},
      {kAllToAllFilledFunction,
       builder.getFunctionType({i64, i64, i64, i64, i64, i64, i64, i64, i64, i64}, {})},
      {kMeshCoordinateFunction, builder.getFunctionType({i64}, {i64})},
  };
  return declareRuntimeFunctions(module, declarations, "the runtime's collectives");
}

void codegen::lowering::populateCollectivePatterns(const TypeConverter &types,
                                                   RewritePatternSet &patterns) {
  patterns.add<LocalViewLowering<mtp::FromLocalOp>, LocalViewLowering<mtp::ToLocalOp>,
               AllReduceLowering,
               BlockCollectiveLowering<mtp::AllGatherOp, true>,
               BlockCollectiveLowering<mtp::ReduceScatterOp, false>, AllToAllLowering,
               ShiftLowering, AllSliceLowering, ToPartialLowering>(
      types, patterns.getContext());
}
