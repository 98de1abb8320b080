//===- AttentionToLinalg.cpp - fused attention: FlashAttention-2's loops ---===//
//
// Under `mtc compile --fused-attention` (`mt.fused_attention`, dialects/mt/Utils/
// FusedAttention.h) `mt.attention` and `mt.attention_grad` reach mt-to-linalg whole and
// become FlashAttention-2's computation (Dao, 2023) over blocks of `block` query and key
// positions, as `scf.for` loops around batched products and elementwise/reduction
// `linalg.generic`s on the blocks, so no tensor of the whole sequence squared is ever made:
//
//   forward, per query block i (m = -big, l = 0, acc = 0), per key block j (j <= i when
//   causal: the blocks above the diagonal are skipped):
//     s = scale * q_i k_j^T (+ the causal bias where the key is after the query, and within
//     documents, the op's `positions`, also where it is before the query's document),
//     m' = max(m, rowmax s),
//     p = exp(s - m'), l = l exp(m - m') + rowsum p, acc = acc exp(m - m') + p v_j, m = m'
//   and o_i = acc / l, lse_i = m + log l (the second result under `save_lse`).
//
//   backward, D = rowsum(do * o); per key block j (dk_j = dv_j = 0), per query block i
//   (i >= j when causal): p = exp(s - lse_i), dv_j += p^T do_i, dp = do_i v_j^T,
//   ds = scale * p * (dp - D_i), dq_i += ds k_j, dk_j += ds^T q_i.
//
// The operands are first brought into rows: [B, R, head_dim] with B the batch dimensions
// and the key/value heads collapsed, and R the query positions times the heads of a group
// (grouped-query attention: the query rows of one key/value head are (position, group)
// pairs, row r at position r / group), or the key positions for keys and values. So one
// batched product per block pair serves every head, and a key/value gradient sums over
// its group's query heads by contracting over the rows. The products are
// `linalg.batch_matmul`s the CPU backend calls OpenBLAS for; the causal bias is the
// decomposition's (half the type's largest finite value, negated: compiler/lowering/
// Decomposer.h), so the fused op computes what the decomposed one does up to the order of
// its sums.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/ToLinalg/MTToLinalg.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/FusedAttention.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/APFloat.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::codegen::lowering;
using mt::NamedTensorType;

namespace {

/// The internal names of the row layout's dimensions (no mt dimension name starts with
/// '@').
constexpr StringLiteral kRowHeads = "@kv_heads", kRowGroup = "@group", kRowSeq = "@seq",
                        kRowHeadDim = "@head_dim";

/// One attention op's sizes and names, and the builders of its block loops.
class FlashAttention {
public:
  template <typename AttentionLikeOp>
  FlashAttention(AttentionLikeOp op, int64_t requestedBlock)
      : seq(op.getSeqDim()), heads(op.getHeadsDim()), kvHeads(op.getKvHeadsDim()),
        headDim(op.getHeadDim()), causal(op.getCausal()),
        scale(op.getScale().convertToDouble()) {
    NamedTensorType query = namedType(op.getQuery()), key = namedType(op.getKey());
    element = query.getElementType();
    seqLength = query.getDimSizes()[*query.getDimIndex(seq)];
    headSize = query.getDimSizes()[*query.getDimIndex(headDim)];
    int64_t numHeads = query.getDimSizes()[*query.getDimIndex(heads)];
    numKvHeads = key.getDimSizes()[*key.getDimIndex(kvHeads)];
    group = numHeads / numKvHeads;
    batch = numKvHeads;
    for (const mt::NamedDim &dim : query.getDims())
      if (dim.name.getValue() != seq && dim.name.getValue() != heads &&
          dim.name.getValue() != headDim) {
        batchDims.push_back(dim.name.getValue());
        batchSizes.push_back(dim.size);
        batch *= dim.size;
      }
    block = mt::fusedAttentionBlockFor(seqLength, requestedBlock);
  }

  Type element;
  StringRef seq, heads, kvHeads, headDim;
  bool causal;
  double scale;
  int64_t seqLength = 0, headSize = 0, numKvHeads = 0, group = 1, batch = 1, block = 1;
  SmallVector<StringRef> batchDims;
  SmallVector<int64_t> batchSizes;

  int64_t rows() const { return seqLength * group; }
  int64_t blockRows() const { return block * group; }
  int64_t numBlocks() const { return seqLength / block; }

  /// `value` (of `type`, a query-, key- or row-shaped tensor of the op) in the row layout:
  /// [B, R, head_dim], or [B, R] without head_dim.
  Value toRows(OpBuilder &b, Location loc, Value value, NamedTensorType type) const;
  /// The inverse of toRows: `rowsValue` in `type`'s dimensions and order.
  Value fromRows(OpBuilder &b, Location loc, Value rowsValue, NamedTensorType type) const;

  /// The document ids (the op's `positions`: each query's position in its document, of
  /// `type`) in the row layout: [B, R] of index, every row of a query position holding its
  /// id.
  Value documentRows(OpBuilder &b, Location loc, Value ids, NamedTensorType type) const;

  /// The forward over rows q [B, R, d], keys transposed kT [B, d, S] and values v [B, S, d],
  /// with the document ids in rows `ids` (documentRows; null: none): the output [B, R, d]
  /// and the log-sum-exp [B, R].
  std::pair<Value, Value> forward(OpBuilder &b, Location loc, Value q, Value kT, Value v,
                                  Value ids) const;
  /// The backward: dq [B, R, d], dk and dv [B, S, d].
  std::array<Value, 3> backward(OpBuilder &b, Location loc, Value q, Value k, Value kT, Value vT,
                                Value dout, Value out, Value lse, Value ids) const;

private:
  /// `type`'s dimensions in the row layout's terms, heads split into (kv heads, group) for a
  /// query-shaped type of grouped-query attention (`splitsHeads`).
  struct RowDims {
    SmallVector<std::string> names;
    SmallVector<int64_t> sizes;
    bool splitsHeads = false;
  };
  RowDims rowDims(NamedTensorType type) const;

  Value filled(OpBuilder &b, Location loc, ArrayRef<int64_t> shape, double value) const;
  Value product(OpBuilder &b, Location loc, Value lhs, Value rhs, Value init) const;
  /// scale * scores, plus the causal bias where the key position (kStart + column) is after
  /// the query position (qStart + row / group), or with the query's document id
  /// `documentId` (null: none) before the query's document (position - id).
  Value scaledScalar(OpBuilder &b, Location loc, Value score, Value qStart, Value kStart,
                     Value documentId) const;
  /// The scores block's scaled, masked scores (scaledScalar) and `then` of them and
  /// `extra` (read as rows), in one `linalg.generic` over [B, Rb, block]; `idsBlock` the
  /// block's rows of the document ids or null.
  Value maskedScores(OpBuilder &b, Location loc, Value scores, ArrayRef<Value> extra,
                     Value idsBlock, Value qStart, Value kStart,
                     function_ref<Value(OpBuilder &, Location, Value, ValueRange)> then) const;
  Value constant(OpBuilder &b, Location loc, double value) const {
    return scalarConstant(b, loc, element, value);
  }
  double causalBias() const {
    const llvm::fltSemantics &semantics = cast<FloatType>(element).getFloatSemantics();
    return -llvm::APFloat::getLargest(semantics).convertToDouble() / 2;
  }
};

//===----------------------------------------------------------------------===//
// The row layout
//===----------------------------------------------------------------------===//

FlashAttention::RowDims FlashAttention::rowDims(NamedTensorType type) const {
  RowDims dims;
  for (const mt::NamedDim &dim : type.getDims()) {
    StringRef n = dim.name.getValue();
    if (n == heads && group > 1) {
      dims.names.append({kRowHeads.str(), kRowGroup.str()});
      dims.sizes.append({numKvHeads, group});
      dims.splitsHeads = true;
      continue;
    }
    if (n == seq)
      dims.names.push_back(kRowSeq.str());
    else if (n == headDim)
      dims.names.push_back(kRowHeadDim.str());
    else if (n == heads || n == kvHeads)
      dims.names.push_back(kRowHeads.str());
    else
      dims.names.push_back(n.str());
    dims.sizes.push_back(dim.size);
  }
  return dims;
}

/// The row layout's order of `names`' dimensions and its groups (B, R[, d]).
static void rowOrder(ArrayRef<std::string> names, ArrayRef<StringRef> batchDims,
                     SmallVector<std::string> &order,
                     SmallVector<ReassociationIndices> &groups) {
  order.clear();
  groups.assign(1, {});
  auto add = [&](StringRef name) {
    if (!llvm::is_contained(names, name))
      return false;
    order.push_back(name.str());
    groups.back().push_back(order.size() - 1);
    return true;
  };
  for (StringRef dim : batchDims)
    add(dim);
  add(kRowHeads);
  groups.emplace_back();
  add(kRowSeq);
  add(kRowGroup);
  groups.emplace_back();
  if (!add(kRowHeadDim))
    groups.pop_back();
}

/// The reassociation of `names` that splits the heads into (kv heads, group) in place.
static SmallVector<ReassociationIndices> headSplit(ArrayRef<std::string> names) {
  SmallVector<ReassociationIndices> groups;
  for (int64_t i = 0, e = names.size(); i < e; ++i) {
    if (i > 0 && names[i] == kRowGroup)
      groups.back().push_back(i);
    else
      groups.push_back({i});
  }
  return groups;
}

Value FlashAttention::documentRows(OpBuilder &b, Location loc, Value ids,
                                   NamedTensorType type) const {
  // The rows before they are collapsed: the batch dimensions, the key/value heads, the
  // positions and the group (as toRows orders a query), the ids broadcast over the heads.
  MLIRContext *context = b.getContext();
  SmallVector<int64_t> sizes(batchSizes);
  sizes.append({numKvHeads, seqLength, group});
  int64_t rank = static_cast<int64_t>(sizes.size());
  // The ids' dimensions are the query's but the heads (mt.attention's verifier).
  SmallVector<AffineExpr> read;
  for (const mt::NamedDim &dim : type.getDims()) {
    StringRef name = dim.name.getValue();
    int64_t at = name == seq ? rank - 2 : llvm::find(batchDims, name) - batchDims.begin();
    read.push_back(getAffineDimExpr(at, context));
  }
  Type idType = type.getElementType();
  Value init = tensor::EmptyOp::create(b, loc, sizes, idType);
  Value broadcast = linalg::GenericOp::create(
                        b, loc, TypeRange{init.getType()}, ValueRange{ids}, ValueRange{init},
                        SmallVector<AffineMap>{AffineMap::get(rank, 0, read, context),
                                               AffineMap::getMultiDimIdentityMap(rank, context)},
                        SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
                        [&](OpBuilder &b, Location l, ValueRange a) {
                          linalg::YieldOp::create(b, l, ValueRange{a[0]});
                        })
                        .getResult(0);
  ReassociationIndices batchGroup, rowGroup = {rank - 2, rank - 1};
  for (int64_t i = 0; i < rank - 2; ++i)
    batchGroup.push_back(i);
  return tensor::CollapseShapeOp::create(b, loc, broadcast,
                                         SmallVector<ReassociationIndices>{batchGroup, rowGroup});
}

Value FlashAttention::toRows(OpBuilder &b, Location loc, Value value,
                             NamedTensorType type) const {
  auto [names, sizes, splitsHeads] = rowDims(type);
  if (splitsHeads)
    value = tensor::ExpandShapeOp::create(b, loc, RankedTensorType::get(sizes, element), value,
                                          headSplit(names));
  SmallVector<std::string> order;
  SmallVector<ReassociationIndices> groups;
  rowOrder(names, batchDims, order, groups);
  SmallVector<int64_t> permutation = llvm::map_to_vector(
      order, [&](const std::string &name) -> int64_t { return llvm::find(names, name) - names.begin(); });
  value = transposed(b, loc, value, permutation);
  return tensor::CollapseShapeOp::create(b, loc, value, groups);
}

Value FlashAttention::fromRows(OpBuilder &b, Location loc, Value rowsValue,
                               NamedTensorType type) const {
  auto [names, sizes, splitsHeads] = rowDims(type);
  SmallVector<std::string> order;
  SmallVector<ReassociationIndices> groups;
  rowOrder(names, batchDims, order, groups);
  SmallVector<int64_t> orderedSizes = llvm::map_to_vector(order, [&](const std::string &name) {
    return sizes[llvm::find(names, name) - names.begin()];
  });
  Value value = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(orderedSizes, element), rowsValue, groups);
  SmallVector<int64_t> permutation = llvm::map_to_vector(
      names, [&](const std::string &name) -> int64_t { return llvm::find(order, name) - order.begin(); });
  value = transposed(b, loc, value, permutation);
  if (splitsHeads)
    value = tensor::CollapseShapeOp::create(b, loc, value, headSplit(names));
  return value;
}

//===----------------------------------------------------------------------===//
// Block pieces
//===----------------------------------------------------------------------===//

Value FlashAttention::filled(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                             double value) const {
  Value empty = tensor::EmptyOp::create(b, loc, shape, element);
  return linalg::FillOp::create(b, loc, constant(b, loc, value), empty).getResult(0);
}

Value FlashAttention::product(OpBuilder &b, Location loc, Value lhs, Value rhs,
                              Value init) const {
  return linalg::BatchMatmulOp::create(b, loc, ValueRange{lhs, rhs}, ValueRange{init})
      .getResult(0);
}

Value FlashAttention::scaledScalar(OpBuilder &b, Location loc, Value score, Value qStart,
                                   Value kStart, Value documentId) const {
  Value scaled = arith::MulFOp::create(b, loc, score, constant(b, loc, scale));
  if (!causal)
    return scaled;
  Value row = linalg::IndexOp::create(b, loc, 1), column = linalg::IndexOp::create(b, loc, 2);
  Value position = row;
  if (group > 1)
    position = arith::DivUIOp::create(b, loc, row, indexConstant(b, loc, group));
  Value queryPosition = arith::AddIOp::create(b, loc, qStart, position);
  Value keyPosition = arith::AddIOp::create(b, loc, kStart, column);
  Value hidden =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ugt, keyPosition, queryPosition);
  if (documentId) {
    // Signed: a document start of the query position minus an id past it would be negative
    // (ids are never past their position, but the comparison must not wrap).
    Value id = arith::IndexCastOp::create(b, loc, b.getIndexType(), documentId);
    Value documentStart = arith::SubIOp::create(b, loc, queryPosition, id);
    Value before =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, keyPosition, documentStart);
    hidden = arith::OrIOp::create(b, loc, hidden, before);
  }
  Value biased = arith::AddFOp::create(b, loc, scaled, constant(b, loc, causalBias()));
  return arith::SelectOp::create(b, loc, hidden, biased, scaled);
}

/// A `linalg.generic` over a 3-d space (B, rows, columns or head_dim) with `inputs` read
/// through `maps` (then `outMap` for the output `init`), parallel but for `reduced` (the
/// last dimension, reduced into `init`), computing `body(args)`.
static Value generic3(OpBuilder &b, Location loc, ValueRange inputs, ArrayRef<AffineMap> maps,
                      Value init, AffineMap outMap, bool reduced,
                      function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
  SmallVector<AffineMap> all(maps);
  all.push_back(outMap);
  SmallVector<utils::IteratorType> iterators(3, utils::IteratorType::parallel);
  if (reduced)
    iterators[2] = utils::IteratorType::reduction;
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, inputs, ValueRange{init}, all, iterators,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        linalg::YieldOp::create(nb, l, ValueRange{body(nb, l, args)});
      });
  return generic.getResult(0);
}

/// The maps of a 3-d space: all of it, and its first two dimensions (a row statistic).
static AffineMap whole3(MLIRContext *context) {
  return AffineMap::getMultiDimIdentityMap(3, context);
}
static AffineMap rows3(MLIRContext *context) {
  return AffineMap::get(3, 0, {getAffineDimExpr(0, context), getAffineDimExpr(1, context)},
                        context);
}

/// Offsets, sizes and unit strides of a block of `sizes` at `offsets`.
static Value sliceOf(OpBuilder &b, Location loc, Value source, ArrayRef<OpFoldResult> offsets,
                     ArrayRef<int64_t> sizes) {
  SmallVector<OpFoldResult> sizeAttrs =
      llvm::map_to_vector(sizes, [&](int64_t s) -> OpFoldResult { return b.getIndexAttr(s); });
  SmallVector<OpFoldResult> strides(sizes.size(), b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(b, loc, source, offsets, sizeAttrs, strides);
}

static Value insertBlock(OpBuilder &b, Location loc, Value block, Value into,
                         ArrayRef<OpFoldResult> offsets) {
  auto type = cast<RankedTensorType>(block.getType());
  SmallVector<OpFoldResult> sizes = llvm::map_to_vector(
      type.getShape(), [&](int64_t s) -> OpFoldResult { return b.getIndexAttr(s); });
  SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
  return tensor::InsertSliceOp::create(b, loc, block, into, offsets, sizes, strides);
}

Value FlashAttention::maskedScores(
    OpBuilder &b, Location loc, Value scores, ArrayRef<Value> extra, Value idsBlock, Value qStart,
    Value kStart, function_ref<Value(OpBuilder &, Location, Value, ValueRange)> then) const {
  MLIRContext *context = b.getContext();
  int64_t Rb = blockRows(), B = batch;
  SmallVector<Value> inputs = {scores};
  SmallVector<AffineMap> maps = {whole3(context)};
  for (Value x : extra) {
    inputs.push_back(x);
    maps.push_back(rows3(context));
  }
  if (idsBlock) {
    inputs.push_back(idsBlock);
    maps.push_back(rows3(context));
  }
  size_t numExtra = extra.size();
  return generic3(b, loc, inputs, maps,
                  tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{B, Rb, block}, element),
                  whole3(context), false, [&](OpBuilder &b, Location l, ValueRange a) {
                    Value s = scaledScalar(b, l, a[0], qStart, kStart,
                                           idsBlock ? a[1 + numExtra] : Value());
                    return then(b, l, s, a.slice(1, numExtra));
                  });
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

std::pair<Value, Value> FlashAttention::forward(OpBuilder &b, Location loc, Value q, Value kT,
                                                Value v, Value ids) const {
  MLIRContext *context = b.getContext();
  int64_t B = batch, R = rows(), Rb = blockRows(), d = headSize, blk = block;
  OpFoldResult zeroIndex = b.getIndexAttr(0);
  Value zero = indexConstant(b, loc, 0), one = indexConstant(b, loc, 1);
  Value blocks = indexConstant(b, loc, numBlocks());
  Value outInit = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{B, R, d}, element);
  Value lseInit = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{B, R}, element);
  auto outer = scf::ForOp::create(
      b, loc, zero, blocks, one, ValueRange{outInit, lseInit},
      [&](OpBuilder &b, Location loc, Value i, ValueRange carried) {
        Value qStart = arith::MulIOp::create(b, loc, i, indexConstant(b, loc, blk));
        Value rowStart = arith::MulIOp::create(b, loc, i, indexConstant(b, loc, Rb));
        Value qi = sliceOf(b, loc, q, {zeroIndex, rowStart, zeroIndex}, {B, Rb, d});
        Value idsi = ids ? sliceOf(b, loc, ids, {zeroIndex, rowStart}, {B, Rb}) : Value();
        Value m0 = filled(b, loc, {B, Rb}, causalBias());
        Value l0 = filled(b, loc, {B, Rb}, 0.0);
        Value acc0 = filled(b, loc, {B, Rb, d}, 0.0);
        // Causal: key blocks 0..i (the diagonal block is the last).
        Value keyBlocks =
            causal ? Value(arith::AddIOp::create(b, loc, i, one)) : blocks;
        auto inner = scf::ForOp::create(
            b, loc, zero, keyBlocks, one, ValueRange{m0, l0, acc0},
            [&](OpBuilder &b, Location loc, Value j, ValueRange state) {
              Value m = state[0], l = state[1], acc = state[2];
              Value kStart = arith::MulIOp::create(b, loc, j, indexConstant(b, loc, blk));
              Value kj = sliceOf(b, loc, kT, {zeroIndex, zeroIndex, kStart}, {B, d, blk});
              Value vj = sliceOf(b, loc, v, {zeroIndex, kStart, zeroIndex}, {B, blk, d});
              Value scores = product(b, loc, qi, kj, filled(b, loc, {B, Rb, blk}, 0.0));
              Value s = maskedScores(b, loc, scores, {}, idsi, qStart, kStart,
                                     [](OpBuilder &, Location, Value s, ValueRange) { return s; });
              // m' = max(m, rowmax s)
              Value mNew = generic3(b, loc, {s}, {whole3(context)}, m, rows3(context), true,
                                    [&](OpBuilder &b, Location l, ValueRange a) {
                                      return arith::MaximumFOp::create(b, l, a[0], a[1]);
                                    });
              Value p = generic3(
                  b, loc, {s, mNew}, {whole3(context), rows3(context)},
                  tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{B, Rb, blk}, element),
                  whole3(context), false, [&](OpBuilder &b, Location l, ValueRange a) {
                    return math::ExpOp::create(b, l, arith::SubFOp::create(b, l, a[0], a[1]));
                  });
              auto rescale = [&](OpBuilder &b, Location l, Value x, Value mOld, Value mNow) {
                Value alpha =
                    math::ExpOp::create(b, l, arith::SubFOp::create(b, l, mOld, mNow));
                return arith::MulFOp::create(b, l, x, alpha);
              };
              // l' = l exp(m - m') + rowsum p: the rescaled l is the reduction's init.
              AffineMap id2 = AffineMap::getMultiDimIdentityMap(2, context);
              Value lScaled =
                  linalg::GenericOp::create(
                      b, loc, TypeRange{l.getType()}, ValueRange{l, m, mNew},
                      ValueRange{tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{B, Rb},
                                                         element)},
                      SmallVector<AffineMap>(4, id2),
                      SmallVector<utils::IteratorType>(2, utils::IteratorType::parallel),
                      [&](OpBuilder &b, Location l, ValueRange a) {
                        linalg::YieldOp::create(b, l, ValueRange{rescale(b, l, a[0], a[1], a[2])});
                      })
                      .getResult(0);
              Value lNew = generic3(b, loc, {p}, {whole3(context)}, lScaled, rows3(context), true,
                                    [&](OpBuilder &b, Location l, ValueRange a) {
                                      return arith::AddFOp::create(b, l, a[0], a[1]);
                                    });
              // acc' = acc exp(m - m') + p v_j: the product accumulates into the rescaled acc.
              Value accScaled = generic3(
                  b, loc, {acc, m, mNew}, {whole3(context), rows3(context), rows3(context)},
                  tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{B, Rb, d}, element),
                  whole3(context), false, [&](OpBuilder &b, Location l, ValueRange a) {
                    return rescale(b, l, a[0], a[1], a[2]);
                  });
              Value accNew = product(b, loc, p, vj, accScaled);
              scf::YieldOp::create(b, loc, ValueRange{mNew, lNew, accNew});
            });
        Value m = inner.getResult(0), l = inner.getResult(1), acc = inner.getResult(2);
        Value oi = generic3(
            b, loc, {acc, l}, {whole3(context), rows3(context)},
            tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{B, Rb, d}, element),
            whole3(context), false, [&](OpBuilder &b, Location loc, ValueRange a) {
              return arith::DivFOp::create(b, loc, a[0], a[1]);
            });
        AffineMap id2 = AffineMap::getMultiDimIdentityMap(2, context);
        Value lsei =
            linalg::GenericOp::create(
                b, loc, TypeRange{l.getType()}, ValueRange{m, l},
                ValueRange{tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{B, Rb}, element)},
                SmallVector<AffineMap>(3, id2),
                SmallVector<utils::IteratorType>(2, utils::IteratorType::parallel),
                [&](OpBuilder &b, Location loc, ValueRange a) {
                  Value logSum = math::LogOp::create(b, loc, a[1]);
                  linalg::YieldOp::create(b, loc,
                                          ValueRange{arith::AddFOp::create(b, loc, a[0], logSum)});
                })
                .getResult(0);
        Value out = insertBlock(b, loc, oi, carried[0], {zeroIndex, rowStart, zeroIndex});
        Value lse = insertBlock(b, loc, lsei, carried[1], {zeroIndex, rowStart});
        scf::YieldOp::create(b, loc, ValueRange{out, lse});
      });
  return {outer.getResult(0), outer.getResult(1)};
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

std::array<Value, 3> FlashAttention::backward(OpBuilder &b, Location loc, Value q, Value k,
                                              Value kT, Value vT, Value dout, Value out, Value lse,
                                              Value ids) const {
  MLIRContext *context = b.getContext();
  int64_t B = batch, R = rows(), S = seqLength, Rb = blockRows(), d = headSize, blk = block;
  OpFoldResult zeroIndex = b.getIndexAttr(0);
  Value zero = indexConstant(b, loc, 0), one = indexConstant(b, loc, 1);
  Value blocks = indexConstant(b, loc, numBlocks());
  // D = rowsum(do * o)
  Value rowDot = generic3(b, loc, {dout, out}, {whole3(context), whole3(context)},
                          filled(b, loc, {B, R}, 0.0), rows3(context), true,
                          [&](OpBuilder &b, Location l, ValueRange a) {
                            Value x = arith::MulFOp::create(b, l, a[0], a[1]);
                            return arith::AddFOp::create(b, l, a[2], x);
                          });
  Value dqInit = filled(b, loc, {B, R, d}, 0.0);
  Value dkInit = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{B, S, d}, element);
  Value dvInit = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{B, S, d}, element);
  auto outer = scf::ForOp::create(
      b, loc, zero, blocks, one, ValueRange{dqInit, dkInit, dvInit},
      [&](OpBuilder &b, Location loc, Value j, ValueRange carried) {
        Value kStart = arith::MulIOp::create(b, loc, j, indexConstant(b, loc, blk));
        Value kj = sliceOf(b, loc, k, {zeroIndex, kStart, zeroIndex}, {B, blk, d});
        Value kTj = sliceOf(b, loc, kT, {zeroIndex, zeroIndex, kStart}, {B, d, blk});
        Value vTj = sliceOf(b, loc, vT, {zeroIndex, zeroIndex, kStart}, {B, d, blk});
        Value dk0 = filled(b, loc, {B, blk, d}, 0.0);
        Value dv0 = filled(b, loc, {B, blk, d}, 0.0);
        // Causal: query blocks j..n-1 (the diagonal block is the first).
        Value firstQuery = causal ? j : zero;
        auto inner = scf::ForOp::create(
            b, loc, firstQuery, blocks, one, ValueRange{carried[0], dk0, dv0},
            [&](OpBuilder &b, Location loc, Value i, ValueRange state) {
              Value dq = state[0], dkj = state[1], dvj = state[2];
              Value qStart = arith::MulIOp::create(b, loc, i, indexConstant(b, loc, blk));
              Value rowStart = arith::MulIOp::create(b, loc, i, indexConstant(b, loc, Rb));
              SmallVector<OpFoldResult> rowBlock = {zeroIndex, rowStart, zeroIndex};
              Value qi = sliceOf(b, loc, q, rowBlock, {B, Rb, d});
              Value doi = sliceOf(b, loc, dout, rowBlock, {B, Rb, d});
              Value lsei = sliceOf(b, loc, lse, {zeroIndex, rowStart}, {B, Rb});
              Value rowDoti = sliceOf(b, loc, rowDot, {zeroIndex, rowStart}, {B, Rb});
              Value idsi = ids ? sliceOf(b, loc, ids, {zeroIndex, rowStart}, {B, Rb}) : Value();
              Value scores = product(b, loc, qi, kTj, filled(b, loc, {B, Rb, blk}, 0.0));
              // p = exp(s - lse)
              Value p = maskedScores(b, loc, scores, {lsei}, idsi, qStart, kStart,
                                     [](OpBuilder &b, Location l, Value s, ValueRange a) -> Value {
                                       return math::ExpOp::create(
                                           b, l, arith::SubFOp::create(b, l, s, a[0]));
                                     });
              Value dvNew = product(b, loc, transposed(b, loc, p, {0, 2, 1}), doi, dvj);
              Value dp = product(b, loc, doi, vTj, filled(b, loc, {B, Rb, blk}, 0.0));
              // ds = scale * p * (dp - D)
              Value ds = generic3(
                  b, loc, {p, dp, rowDoti}, {whole3(context), whole3(context), rows3(context)},
                  tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{B, Rb, blk}, element),
                  whole3(context), false, [&](OpBuilder &b, Location l, ValueRange a) {
                    Value centred = arith::SubFOp::create(b, l, a[1], a[2]);
                    Value x = arith::MulFOp::create(b, l, a[0], centred);
                    return arith::MulFOp::create(b, l, x, constant(b, l, scale));
                  });
              Value dqi = product(b, loc, ds, kj, sliceOf(b, loc, dq, rowBlock, {B, Rb, d}));
              Value dqNew = insertBlock(b, loc, dqi, dq, rowBlock);
              Value dkNew = product(b, loc, transposed(b, loc, ds, {0, 2, 1}), qi, dkj);
              scf::YieldOp::create(b, loc, ValueRange{dqNew, dkNew, dvNew});
            });
        SmallVector<OpFoldResult> keyBlock = {zeroIndex, kStart, zeroIndex};
        Value dk = insertBlock(b, loc, inner.getResult(1), carried[1], keyBlock);
        Value dv = insertBlock(b, loc, inner.getResult(2), carried[2], keyBlock);
        scf::YieldOp::create(b, loc, ValueRange{inner.getResult(0), dk, dv});
      });
  return {outer.getResult(0), outer.getResult(1), outer.getResult(2)};
}

//===----------------------------------------------------------------------===//
// The patterns
//===----------------------------------------------------------------------===//

/// The block size the module asks for (the default where mt-opt is given no module
/// attribute), or an error when the op computes in a type the loops do not.
template <typename AttentionLikeOp>
FailureOr<FlashAttention> flashAttentionOf(AttentionLikeOp op) {
  Type element = namedType(op.getQuery()).getElementType();
  if (!element.isF32() && !element.isF64())
    return op.emitOpError() << "fused attention computes in f32 or f64, not " << element
                            << " (mt-decompose widens bf16 and f16 attention to f32)";
  return FlashAttention(op, mt::getFusedAttentionBlock(op).value_or(
                                mt::kDefaultFusedAttentionBlock));
}

struct AttentionLowering : OpConversionPattern<mt::AttentionOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::AttentionOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    FailureOr<FlashAttention> fa = flashAttentionOf(op);
    if (failed(fa))
      return failure();
    Location loc = op.getLoc();
    Value q = fa->toRows(rewriter, loc, adaptor.getQuery(), namedType(op.getQuery()));
    Value k = fa->toRows(rewriter, loc, adaptor.getKey(), namedType(op.getKey()));
    Value v = fa->toRows(rewriter, loc, adaptor.getValue(), namedType(op.getValue()));
    Value ids = op.getPositions() ? fa->documentRows(rewriter, loc, adaptor.getPositions(),
                                                     namedType(op.getPositions()))
                                  : Value();
    auto [out, lse] =
        fa->forward(rewriter, loc, q, transposed(rewriter, loc, k, {0, 2, 1}), v, ids);
    SmallVector<Value> results = {fa->fromRows(rewriter, loc, out, op.getResultType())};
    if (op.getLse())
      results.push_back(fa->fromRows(rewriter, loc, lse, namedType(op.getLse())));
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct AttentionGradLowering : OpConversionPattern<mt::AttentionGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(mt::AttentionGradOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    FailureOr<FlashAttention> fa = flashAttentionOf(op);
    if (failed(fa))
      return failure();
    Location loc = op.getLoc();
    Value q = fa->toRows(rewriter, loc, adaptor.getQuery(), namedType(op.getQuery()));
    Value k = fa->toRows(rewriter, loc, adaptor.getKey(), namedType(op.getKey()));
    Value v = fa->toRows(rewriter, loc, adaptor.getValue(), namedType(op.getValue()));
    Value dout = fa->toRows(rewriter, loc, adaptor.getResultGrad(), namedType(op.getResultGrad()));
    Value kT = transposed(rewriter, loc, k, {0, 2, 1});
    Value ids = op.getPositions() ? fa->documentRows(rewriter, loc, adaptor.getPositions(),
                                                     namedType(op.getPositions()))
                                  : Value();
    Value out, lse;
    if (adaptor.getSaved().size() == 2) {
      out = fa->toRows(rewriter, loc, adaptor.getSaved()[0], namedType(op.getSaved()[0]));
      lse = fa->toRows(rewriter, loc, adaptor.getSaved()[1], namedType(op.getSaved()[1]));
    } else {
      // Without the forward's statistics (an attention_grad mt-opt is given): the forward's
      // loops again.
      std::tie(out, lse) = fa->forward(rewriter, loc, q, kT, v, ids);
    }
    std::array<Value, 3> grads = fa->backward(
        rewriter, loc, q, k, kT, transposed(rewriter, loc, v, {0, 2, 1}), dout, out, lse, ids);
    rewriter.replaceOp(op, {fa->fromRows(rewriter, loc, grads[0], namedType(op.getQueryGrad())),
                            fa->fromRows(rewriter, loc, grads[1], namedType(op.getKeyGrad())),
                            fa->fromRows(rewriter, loc, grads[2], namedType(op.getValueGrad()))});
    return success();
  }
};

} // namespace

void codegen::lowering::populateAttentionPatterns(const TypeConverter &types,
                                                  RewritePatternSet &patterns) {
  patterns.add<AttentionLowering, AttentionGradLowering>(types, patterns.getContext());
}
