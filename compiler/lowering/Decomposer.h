//===- Decomposer.h - building composite mt ops from core ops ---*- C++ -*-===//
//
// What mt-decompose's rewrites share, and what attention's partition rule shares with them
// (ring attention builds each block step from the same pieces as the whole op's
// decomposition): fresh dimension names, a TensorBuilder with the compositions the rewrites
// use (softmax, one-hot, positions), and attention in the form whose contractions pair
// query, key and value by name.
//
//===----------------------------------------------------------------------===//

#ifndef MTC_COMPILER_LOWERING_DECOMPOSER_H
#define MTC_COMPILER_LOWERING_DECOMPOSER_H

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/TensorBuilder.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

namespace mtc::lowering {

/// The dimension names of a module and their sizes. A new dimension must not clash with
/// the dimensions of the tensors it meets, and the module keeps its rule that dimensions
/// of one name have one size: a name already in use is reused only with its size.
class DimNames {
public:
  explicit DimNames(mlir::ModuleOp module);

  /// `base`, else `base_2`, `base_3`, ...: the first name that none of `avoid` has (nor
  /// `avoidNames` lists) and that the module does not use with another size.
  mlir::StringAttr fresh(mlir::MLIRContext *ctx, const llvm::Twine &base, int64_t size,
                         llvm::ArrayRef<mt::NamedTensorType> avoid,
                         llvm::ArrayRef<llvm::StringRef> avoidNames = {});

private:
  llvm::StringMap<int64_t> sizes;
};

/// TensorBuilder plus the ops it lacks and the compositions the rewrites share.
class Decomposer {
public:
  Decomposer(mlir::OpBuilder &builder, mlir::Location loc, DimNames &names)
      : b(builder), loc(loc), t(builder, loc), names(names) {}

  mt::TensorBuilder &tensors() { return t; }
  DimNames &dimNames() { return names; }
  mlir::MLIRContext *context() { return b.getContext(); }
  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }

  static mt::NamedTensorType typeOf(mlir::Value value) { return mt::TensorBuilder::typeOf(value); }

  /// `value` with its dimension `from` called `to`.
  mlir::Value rename(mlir::Value value, llvm::StringRef from, mlir::StringAttr to);
  /// `value` with dimension `dim` split, in place, into `into` (row-major).
  mlir::Value split(mlir::Value value, llvm::StringRef dim, llvm::ArrayRef<mt::NamedDim> into);
  /// `value` with the dimensions `merged` (row-major in that order) merged into `into`,
  /// placed where the first of them was.
  mlir::Value merge(mlir::Value value, llvm::ArrayRef<llvm::StringRef> merged,
                    mlir::StringAttr into);
  /// `value` in `target`'s type: its element type converted and its dimensions reordered.
  mlir::Value conform(mlir::Value value, mlir::Type target) {
    return t.transposeTo(value, llvm::cast<mt::NamedTensorType>(target));
  }
  /// The mean of `value` over all its dimensions (itself when it is a scalar): the mean
  /// over the positions of a per-position loss.
  mlir::Value meanOverPositions(mlir::Value value);
  /// Stable softmax along `dim`: exp(x - max) / sum(exp(x - max)).
  mlir::Value softmax(mlir::Value x, llvm::StringRef dim);
  /// The one-hot encoding of integer `labels` along `dim` of `logits`, in the logits'
  /// type: `mt.topk_grad` scattering ones at the labels, both given a unit `k` dimension.
  mlir::Value oneHot(mlir::Value logits, mlir::Value labels, llvm::StringRef dim);
  /// Positions 0, 1, ... along `dim` (size `size`): in `elementType` where it holds every
  /// position below `extent` (`size` when 0) exactly, else in f32 (bf16 is exact only up
  /// to 256).
  mt::IotaOp positions(mlir::StringAttr dim, int64_t size, mlir::Type elementType,
                       int64_t extent = 0);

private:
  mlir::OpBuilder &b;
  mlir::Location loc;
  mt::TensorBuilder t;
  DimNames &names;
};

/// Query, key and value of an attention op rewritten so that contractions pair them by
/// name: the key's and value's sequence dimension is `kvSeq`, and for grouped-query
/// attention the query's heads are split into (`kvHeads`, `group`).
struct AttentionForm {
  mlir::StringAttr seq, kvSeq, heads, kvHeads, group, headDim;
  int64_t groupSize = 1;
  bool causal;
  double scale;
  mlir::Value q, k, v;
  /// The document positions (mt.attention's `positions`), or null.
  mlir::Value positions;

  template <typename AttentionLikeOp>
  static AttentionForm of(Decomposer &d, AttentionLikeOp op,
                          llvm::ArrayRef<mt::NamedTensorType> others = {}) {
    AttentionForm form;
    form.seq = op.getSeqDimAttr();
    form.heads = op.getHeadsDimAttr();
    form.kvHeads = op.getKvHeadsDimAttr();
    form.headDim = op.getHeadDimAttr();
    form.causal = op.getCausal();
    form.scale = op.getScale().convertToDouble();
    form.positions = op.getPositions();
    form.init(d, op.getQuery(), op.getKey(), op.getValue(), others);
    return form;
  }

  bool isGrouped() const { return heads != kvHeads; }

  /// A key or value (with the op's sequence dimension) with its sequence called `kvSeq`.
  mlir::Value asKeyValue(Decomposer &d, mlir::Value keyOrValue) const {
    return d.rename(keyOrValue, seq, kvSeq);
  }
  /// A tensor with the query's dimensions, heads split as the query's.
  mlir::Value splitHeads(Decomposer &d, mlir::Value value) const;
  /// The inverse of splitHeads.
  mlir::Value mergeHeads(Decomposer &d, mlir::Value value) const;
  /// The query dimensions that one key/value head serves: the sequence and the group.
  llvm::SmallVector<llvm::StringRef> queryDimsPerKeyHead() const;

  /// scale * q.key for a key with dimension `kvSeq`.
  mlir::Value scores(Decomposer &d, mlir::Value key) const;
  /// softmax over kvSeq of scale * q.k, with keys after the query position masked.
  mlir::Value probabilities(Decomposer &d) const;
  /// scale * q.k with keys after the query position masked (causalBias), and with
  /// `positions` also the keys before the query's document (documentBias): the scores
  /// probabilities takes the softmax of.
  mlir::Value maskedScores(Decomposer &d) const;
  /// [kvSeq, seq]: 0 where the key position (`keyPositions`, along kvSeq) is at most the
  /// query position (`queryPositions`, along seq), else a large negative value: half the
  /// largest finite value of `element`, so that adding a score cannot overflow and
  /// multiplying by the 0/1 mask yields no NaN, while exp of it minus the row maximum is
  /// exactly 0. The positions must be in a type that holds them exactly, so that no two
  /// round to one value.
  mlir::Value causalBias(Decomposer &d, mlir::Value queryPositions, mlir::Value keyPositions,
                         mlir::Type element) const {
    return causalBias(d, queryPositions, keyPositions, element, positions);
  }
  /// causalBias with `documentIds` (each query's position in its document, along the
  /// queries' dimension of `queryPositions`; null: none) in place of the op's `positions`:
  /// ring attention's chunk pairs pass the ids of their query chunk.
  mlir::Value causalBias(Decomposer &d, mlir::Value queryPositions, mlir::Value keyPositions,
                         mlir::Type element, mlir::Value documentIds) const;

private:
  void init(Decomposer &d, mlir::Value query, mlir::Value key, mlir::Value value,
            llvm::ArrayRef<mt::NamedTensorType> others);
};

/// `type` in f32 if it is a tensor of a float narrower than 32 bits (bf16, f16), else null.
mt::NamedTensorType widenedType(mlir::Type type);

/// A copy of `op` (inserted at `builder`'s point) reading its bf16/f16 operands cast to
/// f32 and producing f32 in place of those types, or null when `op` has no such operand or
/// result. Mixed precision keeps tensors in the low type between kernels but computes every
/// reduction of the composite ops (statistics of the norms, softmax sums, log-sum-exp, the
/// products of attention, ring attention's block steps) in f32, as Megatron's fused
/// kernels do; the caller decomposes the copy and casts its results down once.
mlir::Operation *widenedClone(mlir::OpBuilder &builder, mlir::Operation *op);

/// The decompositions of attention and its backward (softmax over the whole key sequence).
llvm::SmallVector<mlir::Value> decomposeAttention(Decomposer &d, mt::AttentionOp op);
llvm::SmallVector<mlir::Value> decomposeAttentionGrad(Decomposer &d, mt::AttentionGradOp op);

} // namespace mtc::lowering

#endif // MTC_COMPILER_LOWERING_DECOMPOSER_H
