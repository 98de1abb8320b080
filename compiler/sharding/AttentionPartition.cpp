//===- AttentionPartition.cpp - ring attention: attention's partition rule ===//
//
// Under ring attention (`cp_comm_type = p2p`) mt-decompose leaves `mt.attention` and
// `mt.attention_grad` whole, and their partition rule lays them out with the query, key and
// value sequence split over the same axis (the data's: `seq` over cp), heads as their
// layouts split them, `head_dim` whole. Each rank keeps its query block; the key and value
// blocks travel around the axis (`mtp.shift ... offset 1 rotate`: send to the next rank,
// receive from the previous one), so at step t a rank holds the block of the rank t before
// it. The local op becomes the unrolled steps, built from the pieces of the whole op's
// decomposition (compiler/lowering/Decomposer.h):
//
//   forward   step t: s = scale * q.k_t (+ the causal bias of the global positions),
//             m' = max(m, max_kv s), p = exp(s - m'), l = l exp(m - m') + sum_kv p,
//             acc = acc exp(m - m') + p v_t, m = m';   out = acc / l
//   backward  the forward's steps again give lse = m + log l and out; D = sum_d(do * out);
//             step t: p = exp(s - lse), dv_t += p^T do, ds = scale * p * (do v_t^T - D),
//             dq += ds k_t, dk_t += ds^T q; the dk and dv blocks travel with the key and
//             value blocks and take one more step home after the last.
//
// The positions of the causal mask are global: the query block's are an `mt.iota` of the
// sequence's part this rank holds (its `mtp.layout`: the lowering offsets them), and each
// key block travels with its own positions. Where the sequence is not split, the local op is
// the whole op's decomposition.
//
//===----------------------------------------------------------------------===//

#include "compiler/lowering/Decomposer.h"
#include "compiler/sharding/PartitionOpInterface.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mtp/IR/MTPOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::sharding;
using lowering::AttentionForm;
using lowering::Decomposer;
using lowering::DimNames;
using mt::NamedDim;
using mt::NamedTensorType;
using mt::TensorBuilder;
using mtp::ShardedTensorType;

namespace {

NamedTensorType typeOf(Value value) { return cast<NamedTensorType>(value.getType()); }

//===----------------------------------------------------------------------===//
// The rule
//===----------------------------------------------------------------------===//

/// The layouts of attention's query-shaped and key-shaped operands: the union of their
/// splits without `head_dim`, one axis for the query's heads and the key's heads (or
/// neither), partial sums summed first.
struct AttentionLayouts {
  Layout query, key;

  template <typename AttentionLikeOp>
  static AttentionLayouts of(AttentionLikeOp op, const PartitionContext &context,
                             ArrayRef<Layout> in) {
    SmallVector<Layout> summed;
    for (auto [operand, layout] : llvm::zip(op->getOperands(), in))
      summed.push_back(layout.isPartial()
                           ? context.resolvePartial(typeOf(operand), layout, layout.split)
                           : layout);
    SmallVector<StringRef> dims = dimNames(typeOf(op.getQuery()));
    if (!llvm::is_contained(dims, op.getKvHeadsDim()))
      dims.push_back(op.getKvHeadsDim());
    llvm::StringMap<Axes> split = context.unionSplits(summed, dims, {});
    split.erase(op.getHeadDim());
    // The ring runs over one axis: a sequence split over more (seq = [cp, tp] under sp with
    // heads whole over tp) keeps its outermost one, the others are gathered.
    if (auto seq = split.find(op.getSeqDim()); seq != split.end() && seq->second.size() > 1)
      seq->second.resize(1);
    auto heads = split.find(op.getHeadsDim()), kvHeads = split.find(op.getKvHeadsDim());
    bool sameHeads = (heads == split.end()) == (kvHeads == split.end()) &&
                     (heads == split.end() || heads->second == kvHeads->second);
    if (!sameHeads) {
      split.erase(op.getHeadsDim());
      split.erase(op.getKvHeadsDim());
    }
    return {Layout::restrict(split, typeOf(op.getQuery())),
            Layout::restrict(split, typeOf(op.getKey()))};
  }
};

//===----------------------------------------------------------------------===//
// The ring
//===----------------------------------------------------------------------===//

/// The block steps of one attention op on this rank: what travels around the ring, and
/// the steps' shared pieces.
class Ring {
public:
  Ring(Decomposer &d, const PartitionContext &context, ValueLayouts &layouts,
       const AttentionForm &form, StringRef axis, Value key, Value value)
      : d(d), t(d.tensors()), context(context), layouts(layouts), form(form), axis(axis), key(key),
        value(value) {
    steps = context.axisSize(axis);
    if (form.causal)
      buildPositions();
  }

  /// The blocks held at step `step` (0: this rank's own) in `key`, `value` and `positions`,
  /// shifted one further from those of the step before.
  struct Blocks {
    Value key, value, positions;
  };
  Blocks first() const { return {key, value, positions}; }
  Blocks next(const Blocks &blocks) {
    return {shift(blocks.key), shift(blocks.value),
            blocks.positions ? shift(blocks.positions) : Value()};
  }
  int64_t numSteps() const { return steps; }

  /// Masked, scaled scores of the query against `blocks`.
  Value scores(const Blocks &blocks) {
    Value s = form.scores(d, asKeyValue(blocks.key));
    if (!form.causal)
      return s;
    Type element = Decomposer::typeOf(s).getElementType();
    Value keyPos = form.asKeyValue(d, blocks.positions);
    return t.add(s, form.causalBias(d, positions, keyPos, element));
  }

  /// The online softmax over every block: the running maximum, normaliser and unnormalised
  /// output after the last step.
  struct Softmax {
    Value max, sum, out;
  };
  Softmax forward() {
    StringRef kvSeq = form.kvSeq.getValue();
    Softmax state;
    Blocks blocks = first();
    for (int64_t step = 0; step < steps; ++step) {
      if (step)
        blocks = next(blocks);
      Value s = scores(blocks);
      Value v = asKeyValue(blocks.value);
      Value blockMax = t.reduceMax(s, {kvSeq});
      if (!step) {
        Value p = t.exp(t.sub(s, blockMax));
        state = {blockMax, t.reduceSum(p, {kvSeq}), t.contract(p, v, {kvSeq})};
        continue;
      }
      Value max = t.max(state.max, blockMax);
      Value rescale = t.exp(t.sub(state.max, max));
      Value p = t.exp(t.sub(s, max));
      state.sum = t.add(t.mul(state.sum, rescale), t.reduceSum(p, {kvSeq}));
      state.out = t.add(t.mul(state.out, rescale), t.contract(p, v, {kvSeq}));
      state.max = max;
    }
    return state;
  }

  /// A travelling block with its sequence called `kvSeq` (this rank's own key and value
  /// are the form's already).
  Value asKeyValue(Value block) const {
    if (block == key)
      return form.k;
    if (block == value)
      return form.v;
    return form.asKeyValue(d, block);
  }

  /// `local` (laid out as the key, or a travelling block) one step further around the
  /// ring.
  Value shift(Value local) {
    OpBuilder &b = d.builder();
    Location loc = d.location();
    ShardedTensorType layout = layoutOf(local);
    if (local.getType() != layout.getLocalType())
      local = d.conform(local, layout.getLocalType());
    Value sharded = mtp::FromLocalOp::create(b, loc, layout, local);
    Value shifted = mtp::ShiftOp::create(b, loc, layout, sharded, axis, /*offset=*/1,
                                         /*rotate=*/true);
    Value result = mtp::ToLocalOp::create(b, loc, layout.getLocalType(), shifted);
    layouts.set(result, layout);
    return result;
  }

private:
  /// The laid-out type of a block that travels: the key's or value's (their layouts are
  /// one), or the key positions'.
  ShardedTensorType layoutOf(Value local) const {
    if (layouts.contains(local))
      return layouts.lookup(local);
    return layouts.lookup(key);
  }

  /// The global positions of this rank's part of the sequence: an iota of the part whose
  /// `mtp.layout` makes the lowering start it where the part does. They are the query's,
  /// and its own key block's, which they travel with.
  void buildPositions() {
    ShardedTensorType keyLayout = layouts.lookup(key);
    NamedTensorType global = keyLayout.getGlobal();
    int64_t length = global.getDimSize(form.seq.getValue());
    Type element = global.getElementType();
    int64_t local = keyLayout.getLocalType().getDimSize(form.seq.getValue());
    mt::IotaOp iota = d.positions(form.seq, local, element, length);
    Layout split;
    split.split[form.seq.getValue()] = {axis.str()};
    ShardedTensorType layout = context.build(
        NamedTensorType::get({NamedDim{form.seq, length}}, iota.getType().getElementType()), split);
    mtp::setLocalLayout(iota, layout);
    layouts.set(iota, layout);
    positions = iota;
  }

  Decomposer &d;
  TensorBuilder &t;
  const PartitionContext &context;
  ValueLayouts &layouts;
  const AttentionForm &form;
  StringRef axis;
  Value key, value;
  Value positions;
  int64_t steps;
};

/// The axis splitting the query's sequence, if any.
template <typename AttentionLikeOp>
std::optional<std::string> ringAxis(AttentionLikeOp op, ValueLayouts &layouts) {
  SmallVector<StringRef> axes = layouts.lookup(op.getQuery()).getSplitAxes(op.getSeqDim());
  if (axes.empty())
    return std::nullopt;
  return axes.front().str();
}

/// Replaces `op`'s results by `replacements` (local values of the results' layouts).
void replace(Operation *op, ArrayRef<Value> replacements, ValueLayouts &layouts) {
  for (auto [result, replacement] : llvm::zip_equal(op->getResults(), replacements)) {
    layouts.set(replacement, layouts.lookup(result));
    result.replaceAllUsesWith(replacement);
  }
  op->erase();
}

//===----------------------------------------------------------------------===//
// The models
//===----------------------------------------------------------------------===//

struct AttentionModel : PartitionOpInterface::ExternalModel<AttentionModel, mt::AttentionOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *operation, const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    AttentionLayouts l = AttentionLayouts::of(cast<mt::AttentionOp>(operation), context, in);
    PartitionRule rule;
    rule.operands = {l.query, l.key, l.key};
    rule.results = {l.query};
    return rule;
  }

  LogicalResult buildLocalOp(Operation *operation, const PartitionContext &context,
                             ValueLayouts &layouts) const {
    auto op = cast<mt::AttentionOp>(operation);
    OpBuilder builder(op);
    DimNames names(op->getParentOfType<ModuleOp>());
    Decomposer d(builder, op.getLoc(), names);
    std::optional<std::string> axis = ringAxis(op, layouts);
    if (!axis) {
      replace(op, lowering::decomposeAttention(d, op), layouts);
      return success();
    }
    AttentionForm form = AttentionForm::of(d, op);
    Ring ring(d, context, layouts, form, *axis, op.getKey(), op.getValue());
    Ring::Softmax softmax = ring.forward();
    Value out = d.tensors().div(softmax.out, softmax.sum);
    replace(op, {d.conform(form.mergeHeads(d, out), op.getType())}, layouts);
    return success();
  }
};

struct AttentionGradModel
    : PartitionOpInterface::ExternalModel<AttentionGradModel, mt::AttentionGradOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *operation, const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    AttentionLayouts l = AttentionLayouts::of(cast<mt::AttentionGradOp>(operation), context, in);
    PartitionRule rule;
    rule.operands = {l.query, l.key, l.key, l.query};
    rule.results = {l.query, l.key, l.key};
    return rule;
  }

  LogicalResult buildLocalOp(Operation *operation, const PartitionContext &context,
                             ValueLayouts &layouts) const {
    auto op = cast<mt::AttentionGradOp>(operation);
    OpBuilder builder(op);
    DimNames names(op->getParentOfType<ModuleOp>());
    Decomposer d(builder, op.getLoc(), names);
    std::optional<std::string> axis = ringAxis(op, layouts);
    if (!axis) {
      replace(op, lowering::decomposeAttentionGrad(d, op), layouts);
      return success();
    }
    TensorBuilder &t = d.tensors();
    AttentionForm form = AttentionForm::of(d, op, {typeOf(op.getResultGrad())});
    Ring ring(d, context, layouts, form, *axis, op.getKey(), op.getValue());
    StringRef kvSeq = form.kvSeq.getValue();
    SmallVector<StringRef> perKeyHead = form.queryDimsPerKeyHead();

    // The forward's statistics: the log-sum-exp of every query row, and the output.
    Ring::Softmax softmax = ring.forward();
    Value logSumExp = t.add(softmax.max, t.log(softmax.sum));
    Value out = t.div(softmax.out, softmax.sum);
    Value dout = form.splitHeads(d, op.getResultGrad());
    Value rowDot = t.reduceSum(t.mul(dout, out), {form.headDim.getValue()});

    // A key or value gradient block as the key is laid out (it travels like it).
    NamedTensorType keyType = typeOf(op.getKey());
    auto asKeyBlock = [&](Value grad) {
      return d.conform(d.rename(grad, kvSeq, form.seq), keyType);
    };
    Value dq, dk, dv;
    Ring::Blocks blocks = ring.first();
    for (int64_t step = 0; step < ring.numSteps(); ++step) {
      if (step)
        blocks = ring.next(blocks);
      Value p = t.exp(t.sub(ring.scores(blocks), logSumExp));
      Value v = ring.asKeyValue(blocks.value);
      Value k = ring.asKeyValue(blocks.key);
      Value dvBlock = asKeyBlock(t.contract(p, dout, perKeyHead));
      Value dp = t.contract(dout, v, {form.headDim.getValue()});
      Value ds = t.mul(p, t.sub(dp, rowDot));
      ds = t.mul(ds, t.scalar(form.scale, ds));
      Value dqBlock = t.contract(ds, k, {kvSeq});
      Value dkBlock = asKeyBlock(t.contract(ds, form.q, perKeyHead));
      dq = step ? t.add(dq, dqBlock) : dqBlock;
      // The gradients of the block held here arrive from the rank that held it before.
      dk = step ? t.add(ring.shift(dk), dkBlock) : dkBlock;
      dv = step ? t.add(ring.shift(dv), dvBlock) : dvBlock;
    }
    // One more step takes each block's gradients to the rank that owns the block.
    dk = ring.shift(dk);
    dv = ring.shift(dv);
    replace(op,
            {d.conform(form.mergeHeads(d, dq), op.getQueryGrad().getType()),
             d.conform(dk, op.getKeyGrad().getType()), d.conform(dv, op.getValueGrad().getType())},
            layouts);
    return success();
  }
};

} // namespace

void mtc::sharding::registerAttentionPartitionRules(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, mt::MTDialect *) {
    mt::AttentionOp::attachInterface<AttentionModel>(*context);
    mt::AttentionGradOp::attachInterface<AttentionGradModel>(*context);
  });
}
