//===- Decompose.cpp - composite mt ops into the core ops -----------------===//
//
// Softmax, the norms, attention and its backward, cross-entropy and its backward become
// reductions, elementwise ops (with named broadcasting), contractions and the dimension
// manipulations (rename, split, merge, transpose), with mt.iota for the positions of the
// causal mask, so that kernel generation only needs the core ops. The formulas are those
// of the reference interpreter; the unit tests check each rewrite against it.
//
//===----------------------------------------------------------------------===//

#include "compiler/lowering/Passes.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/TensorBuilder.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mtc::lowering {
#define GEN_PASS_DEF_MTDECOMPOSEPASS
#include "compiler/lowering/Passes.h.inc"
} // namespace mtc::lowering

using namespace mlir;
using namespace mtc;
using mt::NamedDim;
using mt::NamedTensorType;
using mt::TensorBuilder;

namespace {

//===----------------------------------------------------------------------===//
// Fresh dimension names
//===----------------------------------------------------------------------===//

/// The dimension names of a module and their sizes. A new dimension must not clash with
/// the dimensions of the tensors it meets, and the module keeps its rule that dimensions
/// of one name have one size: a name already in use is reused only with its size.
class DimNames {
public:
  explicit DimNames(ModuleOp module) {
    auto note = [&](Type type) {
      if (auto tensor = dyn_cast<NamedTensorType>(type))
        for (const NamedDim &dim : tensor.getDims())
          sizes.try_emplace(dim.name.getValue(), dim.size);
    };
    module.walk([&](Operation *op) {
      for (Type type : op->getResultTypes())
        note(type);
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (BlockArgument arg : block.getArguments())
            note(arg.getType());
      if (auto param = dyn_cast<mt::ParamOp>(op))
        note(param.getType());
      else if (auto state = dyn_cast<mt::StateOp>(op))
        note(state.getType());
      else if (auto func = dyn_cast<func::FuncOp>(op))
        for (Type type : llvm::concat<const Type>(func.getArgumentTypes(), func.getResultTypes()))
          note(type);
    });
    if (auto dims = module->getAttrOfType<DictionaryAttr>(mt::MTDialect::kDimsAttrName))
      for (NamedAttribute entry : dims)
        if (auto size = dyn_cast<IntegerAttr>(entry.getValue()))
          sizes.try_emplace(entry.getName().getValue(), size.getInt());
  }

  /// `base`, else `base_2`, `base_3`, ...: the first name that none of `avoid` has (nor
  /// `avoidNames` lists) and that the module does not use with another size.
  StringAttr fresh(MLIRContext *ctx, const Twine &base, int64_t size,
                   ArrayRef<NamedTensorType> avoid, ArrayRef<StringRef> avoidNames = {}) {
    std::string stem = base.str();
    for (unsigned suffix = 1;; ++suffix) {
      std::string name = suffix == 1 ? stem : stem + "_" + std::to_string(suffix);
      if (llvm::any_of(avoid, [&](NamedTensorType type) { return type.hasDim(name); }) ||
          llvm::is_contained(avoidNames, name))
        continue;
      auto [it, inserted] = sizes.try_emplace(name, size);
      if (inserted || it->second == size)
        return StringAttr::get(ctx, name);
    }
  }

private:
  llvm::StringMap<int64_t> sizes;
};

//===----------------------------------------------------------------------===//
// Building blocks
//===----------------------------------------------------------------------===//

/// TensorBuilder plus the ops it lacks and the compositions the rewrites share.
class Decomposer {
public:
  Decomposer(OpBuilder &builder, Location loc, DimNames &names)
      : b(builder), loc(loc), t(builder, loc), names(names) {}

  TensorBuilder &tensors() { return t; }
  DimNames &dimNames() { return names; }
  MLIRContext *context() { return b.getContext(); }

  static NamedTensorType typeOf(Value value) { return TensorBuilder::typeOf(value); }

  /// `value` with its dimension `from` called `to`.
  Value rename(Value value, StringRef from, StringAttr to) {
    return mt::RenameOp::create(b, loc, value, b.getStringAttr(from), to);
  }

  /// `value` with dimension `dim` split, in place, into `into` (row-major).
  Value split(Value value, StringRef dim, ArrayRef<NamedDim> into) {
    SmallVector<NamedDim> dims;
    for (const NamedDim &d : typeOf(value).getDims()) {
      if (d.name.getValue() == dim)
        dims.append(into.begin(), into.end());
      else
        dims.push_back(d);
    }
    SmallVector<Attribute> intoNames;
    for (const NamedDim &d : into)
      intoNames.push_back(d.name);
    return mt::SplitOp::create(b, loc, typeOf(value).withDims(dims), value, b.getStringAttr(dim),
                               b.getArrayAttr(intoNames));
  }

  /// `value` with the dimensions `merged` (row-major in that order) merged into `into`,
  /// placed where the first of them was.
  Value merge(Value value, ArrayRef<StringRef> merged, StringAttr into) {
    return mt::MergeOp::create(b, loc, value, b.getStrArrayAttr(merged), into);
  }

  /// `value` in `target`'s type: its element type converted and its dimensions reordered.
  Value conform(Value value, Type target) {
    return t.transposeTo(value, cast<NamedTensorType>(target));
  }

  /// The mean of `value` over all its dimensions (itself when it is a scalar): the mean
  /// over the positions of a per-position loss.
  Value meanOverPositions(Value value) {
    SmallVector<StringRef> positions;
    for (StringAttr name : typeOf(value).getDimNames())
      positions.push_back(name.getValue());
    return positions.empty() ? value : t.reduceMean(value, positions);
  }

  /// Stable softmax along `dim`: exp(x - max) / sum(exp(x - max)).
  Value softmax(Value x, StringRef dim) {
    Value e = t.exp(t.sub(x, t.reduceMax(x, {dim})));
    return t.div(e, t.reduceSum(e, {dim}));
  }

  /// The one-hot encoding of integer `labels` along `dim` of `logits`, in the logits'
  /// type: `mt.topk_grad` scattering ones at the labels, both given a unit `k` dimension.
  Value oneHot(Value logits, Value labels, StringRef dim) {
    NamedTensorType logitsType = typeOf(logits), labelsType = typeOf(labels);
    StringAttr k = names.fresh(context(), dim + "_label", 1, {logitsType, labelsType});
    SmallVector<NamedDim> onesDims = logitsType.getDims();
    for (NamedDim &d : onesDims)
      if (d.name.getValue() == dim)
        d = {k, 1};
    SmallVector<NamedDim> indexDims = labelsType.getDims();
    indexDims.push_back({k, 1});
    Value ones = t.broadcastTo(t.scalar(1.0, logits), logitsType.withDims(onesDims));
    Value indices = mt::BroadcastOp::create(b, loc, labelsType.withDims(indexDims), labels);
    return mt::TopKGradOp::create(b, loc, logitsType, ones, indices, b.getStringAttr(dim), k);
  }

  /// Positions 0, 1, ... along `dim` (size `size`): in `elementType` where it holds them
  /// all exactly, else in f32 (bf16 is exact only up to 256).
  Value positions(StringAttr dim, int64_t size, Type elementType) {
    if (!mt::IotaOp::holdsPositions(elementType, size))
      elementType = b.getF32Type();
    return mt::IotaOp::create(b, loc, NamedTensorType::get({NamedDim{dim, size}}, elementType),
                              dim);
  }

private:
  OpBuilder &b;
  Location loc;
  TensorBuilder t;
  DimNames &names;
};

//===----------------------------------------------------------------------===//
// Softmax and norms
//===----------------------------------------------------------------------===//

SmallVector<Value> decompose(Decomposer &d, mt::SoftmaxOp op) {
  return {d.softmax(op.getInput(), op.getDim())};
}

SmallVector<Value> decompose(Decomposer &d, mt::LayerNormOp op) {
  TensorBuilder &t = d.tensors();
  Value x = op.getInput();
  StringRef dim = op.getDim();
  Value centred = t.sub(x, t.reduceMean(x, {dim}));
  Value variance = t.reduceMean(t.mul(centred, centred), {dim});
  Value inverse = t.rsqrt(t.add(variance, t.scalar(op.getEpsilon().convertToDouble(), x)));
  Value y = t.mul(t.mul(centred, inverse), op.getScale());
  if (Value bias = op.getBias())
    y = t.add(y, bias);
  return {d.conform(y, op.getType())};
}

SmallVector<Value> decompose(Decomposer &d, mt::RMSNormOp op) {
  TensorBuilder &t = d.tensors();
  Value x = op.getInput();
  Value meanSquare = t.reduceMean(t.mul(x, x), {op.getDim()});
  Value inverse = t.rsqrt(t.add(meanSquare, t.scalar(op.getEpsilon().convertToDouble(), x)));
  return {d.conform(t.mul(t.mul(x, inverse), op.getScale()), op.getType())};
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// Query, key and value of an attention op rewritten so that contractions pair them by
/// name: the key's and value's sequence dimension is `kvSeq`, and for grouped-query
/// attention the query's heads are split into (`kvHeads`, `group`).
struct AttentionForm {
  StringAttr seq, kvSeq, heads, kvHeads, group, headDim;
  int64_t groupSize = 1;
  bool causal;
  double scale;
  Value q, k, v;

  template <typename AttentionLikeOp>
  static AttentionForm of(Decomposer &d, AttentionLikeOp op,
                          ArrayRef<NamedTensorType> others = {}) {
    AttentionForm form;
    form.seq = op.getSeqDimAttr();
    form.heads = op.getHeadsDimAttr();
    form.kvHeads = op.getKvHeadsDimAttr();
    form.headDim = op.getHeadDimAttr();
    form.causal = op.getCausal();
    form.scale = op.getScale().convertToDouble();
    NamedTensorType qType = Decomposer::typeOf(op.getQuery());
    NamedTensorType kType = Decomposer::typeOf(op.getKey());
    SmallVector<NamedTensorType> avoid = {qType, kType};
    avoid.append(others.begin(), others.end());
    form.kvSeq = d.dimNames().fresh(d.context(), form.seq.getValue() + "_kv",
                                    kType.getDimSize(form.seq), avoid);
    form.k = d.rename(op.getKey(), form.seq, form.kvSeq);
    form.v = d.rename(op.getValue(), form.seq, form.kvSeq);
    form.q = op.getQuery();
    if (form.isGrouped()) {
      form.groupSize = qType.getDimSize(form.heads) / kType.getDimSize(form.kvHeads);
      form.group = d.dimNames().fresh(d.context(), form.heads.getValue() + "_group", form.groupSize,
                                      avoid, {form.kvSeq.getValue()});
      form.q = form.splitHeads(d, form.q);
    }
    return form;
  }

  bool isGrouped() const { return heads != kvHeads; }

  /// A tensor with the query's dimensions, heads split as the query's.
  Value splitHeads(Decomposer &d, Value value) const {
    if (!isGrouped())
      return value;
    NamedTensorType type = Decomposer::typeOf(value);
    return d.split(value, heads,
                   {{kvHeads, type.getDimSize(heads) / groupSize}, {group, groupSize}});
  }

  /// The inverse of splitHeads.
  Value mergeHeads(Decomposer &d, Value value) const {
    if (!isGrouped())
      return value;
    return d.merge(value, {kvHeads.getValue(), group.getValue()}, heads);
  }

  /// The query dimensions that one key/value head serves: the sequence and the group.
  SmallVector<StringRef> queryDimsPerKeyHead() const {
    SmallVector<StringRef> dims = {seq.getValue()};
    if (isGrouped())
      dims.push_back(group.getValue());
    return dims;
  }

  /// softmax over kvSeq of scale * q.k, with keys after the query position masked.
  Value probabilities(Decomposer &d) const {
    TensorBuilder &t = d.tensors();
    Value scores = t.contract(q, k, {headDim.getValue()});
    scores = t.mul(scores, t.scalar(scale, scores));
    if (causal)
      scores = t.add(scores, causalBias(d, Decomposer::typeOf(scores)));
    return d.softmax(scores, kvSeq.getValue());
  }

  /// [kvSeq, seq]: 0 where the key position is at most the query position, else a large
  /// negative value: half the element type's largest finite value, so that adding a score
  /// cannot overflow and multiplying by the 0/1 mask yields no NaN, while exp of it minus
  /// the row maximum is exactly 0. The positions are compared in a type that holds them
  /// exactly, so that no two round to one value.
  Value causalBias(Decomposer &d, NamedTensorType scores) const {
    TensorBuilder &t = d.tensors();
    Type element = scores.getElementType();
    int64_t length = scores.getDimSize(seq.getValue());
    Value queryPos = d.positions(seq, length, element);
    Value keyPos = d.rename(queryPos, seq.getValue(), kvSeq);
    Value mask = t.greater(keyPos, queryPos);
    mask = d.conform(mask, Decomposer::typeOf(mask).withElementType(element));
    const llvm::fltSemantics &semantics = cast<FloatType>(element).getFloatSemantics();
    double large = llvm::APFloat::getLargest(semantics).convertToDouble() / 2;
    return t.mul(mask, t.scalar(-large, mask));
  }
};

SmallVector<Value> decompose(Decomposer &d, mt::AttentionOp op) {
  AttentionForm form = AttentionForm::of(d, op);
  Value p = form.probabilities(d);
  Value out = d.tensors().contract(p, form.v, {form.kvSeq.getValue()});
  return {d.conform(form.mergeHeads(d, out), op.getType())};
}

/// With s = scale * q.k (masked), p = softmax(s) and the output gradient do:
///   dv = p^T do,  dp = do v^T,  ds = p * (dp - sum_kv(dp * p)),
///   dq = scale * ds k,  dk = scale * ds^T q,
/// where contracting over the query's sequence and group sums the key and value
/// gradients over the query heads that share a key/value head.
SmallVector<Value> decompose(Decomposer &d, mt::AttentionGradOp op) {
  TensorBuilder &t = d.tensors();
  AttentionForm form = AttentionForm::of(d, op, {Decomposer::typeOf(op.getResultGrad())});
  Value p = form.probabilities(d);
  Value dout = form.splitHeads(d, op.getResultGrad());
  SmallVector<StringRef> perKeyHead = form.queryDimsPerKeyHead();
  StringRef kvSeq = form.kvSeq.getValue();

  Value dv = t.contract(p, dout, perKeyHead);
  Value dp = t.contract(dout, form.v, {form.headDim.getValue()});
  Value ds = t.mul(p, t.sub(dp, t.reduceSum(t.mul(dp, p), {kvSeq})));
  ds = t.mul(ds, t.scalar(form.scale, ds));
  Value dq = t.contract(ds, form.k, {kvSeq});
  Value dk = t.contract(ds, form.q, perKeyHead);

  return {d.conform(form.mergeHeads(d, dq), op.getQueryGrad().getType()),
          d.conform(d.rename(dk, kvSeq, form.seq), op.getKeyGrad().getType()),
          d.conform(d.rename(dv, kvSeq, form.seq), op.getValueGrad().getType())};
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

SmallVector<Value> decompose(Decomposer &d, mt::CrossEntropyOp op) {
  TensorBuilder &t = d.tensors();
  Value x = op.getLogits();
  StringRef dim = op.getDim();
  Value logSumExp = t.logSumExp(x, dim);
  Value picked = t.reduceSum(t.mul(x, d.oneHot(x, op.getLabels(), dim)), {dim});
  Value loss = t.sub(logSumExp, picked);
  return {d.conform(d.meanOverPositions(loss), op.getType())};
}

SmallVector<Value> decompose(Decomposer &d, mt::CrossEntropyGradOp op) {
  TensorBuilder &t = d.tensors();
  Value x = op.getLogits();
  StringRef dim = op.getDim();
  Value lossGrad = d.conform(
      op.getLossGrad(),
      Decomposer::typeOf(op.getLossGrad()).withElementType(Decomposer::typeOf(x).getElementType()));
  double positions = static_cast<double>(Decomposer::typeOf(op.getLabels()).getNumElements());
  Value factor = t.div(lossGrad, t.scalar(positions, x));
  Value delta = t.sub(d.softmax(x, dim), d.oneHot(x, op.getLabels(), dim));
  return {d.conform(t.mul(delta, factor), op.getType())};
}

//===----------------------------------------------------------------------===//
// Router z-loss
//===----------------------------------------------------------------------===//

SmallVector<Value> decompose(Decomposer &d, mt::ZLossOp op) {
  TensorBuilder &t = d.tensors();
  Value logSumExp = t.logSumExp(op.getLogits(), op.getDim());
  return {d.conform(d.meanOverPositions(t.mul(logSumExp, logSumExp)), op.getType())};
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

class DecomposePass : public mtc::lowering::impl::MTDecomposePassBase<DecomposePass> {
public:
  void runOnOperation() override;
};

void DecomposePass::runOnOperation() {
  ModuleOp module = getOperation();
  DimNames names(module);
  SmallVector<Operation *> composite;
  for (auto func : module.getOps<func::FuncOp>())
    func.walk([&](Operation *op) {
      if (isa<mt::SoftmaxOp, mt::LayerNormOp, mt::RMSNormOp, mt::AttentionOp, mt::AttentionGradOp,
              mt::CrossEntropyOp, mt::CrossEntropyGradOp, mt::ZLossOp>(op))
        composite.push_back(op);
    });
  for (Operation *op : composite) {
    OpBuilder builder(op);
    Decomposer d(builder, op->getLoc(), names);
    SmallVector<Value> replacements =
        TypeSwitch<Operation *, SmallVector<Value>>(op)
            .Case<mt::SoftmaxOp, mt::LayerNormOp, mt::RMSNormOp, mt::AttentionOp,
                  mt::AttentionGradOp, mt::CrossEntropyOp, mt::CrossEntropyGradOp,
                  mt::ZLossOp>(
                [&](auto concrete) { return decompose(d, concrete); });
    for (auto [result, replacement] : llvm::zip_equal(op->getResults(), replacements))
      if (result.getType() != replacement.getType()) {
        op->emitOpError() << "decomposition produced " << replacement.getType() << " in place of "
                          << result.getType();
        return signalPassFailure();
      }
    op->replaceAllUsesWith(replacements);
    op->erase();
  }
}

} // namespace
