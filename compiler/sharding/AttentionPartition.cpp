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
//   backward  lse = m + log l and out saved by the forward (mt.attention save_lse, which
//             autodiff asks for under ring attention), else the forward's steps again;
//             D = sum_d(do * out); step t: p = exp(s - lse), dv_t += p^T do, ds = scale * p * (do
//             v_t^T - D), dq += ds k_t, dk_t += ds^T q; the dk and dv blocks travel with the key
//             and value blocks and take one more step home after the last.
//
// The positions of the causal mask are global: the query block's are an `mt.iota` of the
// sequence's part this rank holds (its `mtp.layout`: the lowering maps them), and each key
// block travels with its own positions. Under the two_chunk split (the mesh's cp under p2p)
// causal steps after the first compute only the halves of their blocks the causal mask
// leaves whole (Ring::isBalanced), and no positions travel, except for attention within
// documents (mt.attention's `positions`, --reset-attention-mask): its mask also hides the
// keys before each query's document, which a chunk pair can hold, so the key positions
// travel and every pair adds that mask (Ring::pairScores). Where the sequence is not split,
// the local op is the whole op's decomposition. Under mixed precision both are built in f32
// from mt-decompose's widened copy of the op (buildInF32), as mt-decompose builds
// attention.
//
//===----------------------------------------------------------------------===//

#include "compiler/lowering/Decomposer.h"
#include "compiler/sharding/PartitionOpInterface.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mtp/IR/MTPOps.h"
#include "dialects/mt/Utils/FusedAttention.h"
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
/// neither), partial sums summed first; and its log-sum-exp's (the query's rows).
struct AttentionLayouts {
  Layout query, key, rows;
  /// The document positions' (mt.attention's `positions`): split as the query's rows.
  std::optional<Layout> positions;

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
    NamedTensorType query = typeOf(op.getQuery());
    SmallVector<NamedDim> rowDims = query.getDims();
    llvm::erase_if(rowDims, [&](const NamedDim &dim) { return dim.name == op.getHeadDim(); });
    AttentionLayouts layouts = {Layout::restrict(split, query),
                                Layout::restrict(split, typeOf(op.getKey())),
                                Layout::restrict(split, query.withDims(rowDims)), std::nullopt};
    if (Value positions = op.getPositions())
      layouts.positions = Layout::restrict(split, typeOf(positions));
    return layouts;
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
    balanced = form.causal && steps > 1 && layouts.lookup(key).getMesh().isTwoChunk(axis);
    if (balanced)
      buildHalves();
  }

  /// Whether attention is masked to documents (the op's `positions`): the balanced steps'
  /// chunk pairs then take the mask too, from key positions that travel with the blocks.
  bool documents() const { return bool(form.positions); }

  /// Whether the steps after the first skip the masked halves of their blocks: causal
  /// attention over a two_chunk split (this rank's chunks c and 2n - 1 - c, h positions
  /// each). The block held at step t > 0 comes from s = (c - t) mod n: when s < c (c >= t)
  /// all of this rank's queries see the block's first chunk and none its second; when
  /// s > c only the second query chunk sees the block, all of it. Both cases are two
  /// [h, h] pairs of query and key chunks without the causal mask: (second query chunk, first key
  /// chunk), and (first, first) when s < c else (second, second). The second pair is
  /// chosen by a 0/1 weight w = [c >= t] blending the candidates (w x + (1 - w) y, exact
  /// on finite values), so every rank runs the same shapes.
  bool isBalanced() const { return balanced; }

  /// The blocks held at step `step` (0: this rank's own) in `key`, `value` and `positions`,
  /// shifted one further from those of the step before.
  struct Blocks {
    Value key, value, positions;
  };
  Blocks first() const { return {key, value, positions}; }
  Blocks next(const Blocks &blocks) {
    return {shiftWidened(blocks.key), shiftWidened(blocks.value),
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
    Blocks blocks = first();
    Softmax state = start(scores(blocks), asKeyValue(blocks.value));
    for (int64_t step = 1; step < steps; ++step) {
      blocks = next(blocks);
      update(state, scores(blocks), asKeyValue(blocks.value), kvSeq);
    }
    return state;
  }

  /// The balanced ring's online softmax (isBalanced), by query chunk: after the whole
  /// first block, each further step's two chunk pairs.
  struct HalvedSoftmax {
    Softmax first, second;
  };
  HalvedSoftmax balancedForward() {
    Blocks blocks = first();
    Softmax whole = start(scores(blocks), asKeyValue(blocks.value));
    HalvedSoftmax state = {pickState(whole, firstChunk), pickState(whole, secondChunk)};
    if (!documents())
      blocks.positions = Value(); // the chunk pairs need no mask
    for (int64_t step = 1; step < steps; ++step) {
      blocks = next(blocks);
      StepChunks c = chunksAt(step, blocks);
      update(state.second, pairScores(c, 1, 0), c.v[0], kvHalf);
      Softmax chosen = blendState(state.first, state.second, c.w);
      update(chosen, pairScores(c, 2, 2), c.v[2], kvHalf);
      state.first = blendState(chosen, state.first, c.w);
      state.second = blendState(state.second, chosen, c.w);
    }
    return state;
  }

  /// The chunks a balanced step works on: the query's (first, second, chosen) and the
  /// held block's keys and values (first, second, chosen), and the weight w choosing;
  /// within documents also the query's positions and document ids and the keys' positions
  /// by chunk (first, second, chosen).
  struct StepChunks {
    Value q[3], k[3], v[3], w;
    Value queryPositions[3], documentIds[3], keyPositions[3];
  };
  StepChunks chunksAt(int64_t step, const Blocks &blocks) {
    StepChunks c;
    c.w = weightAt(step);
    c.q[0] = queryChunks[0];
    c.q[1] = queryChunks[1];
    c.q[2] = blend(c.q[0], c.q[1], c.w);
    Value k = asKeyValue(blocks.key), v = asKeyValue(blocks.value);
    StringRef kvSeq = form.kvSeq.getValue();
    c.k[0] = pick(k, kvSeq, kvHalf, firstChunk);
    c.k[1] = pick(k, kvSeq, kvHalf, secondChunk);
    c.k[2] = blend(c.k[0], c.k[1], c.w);
    c.v[0] = pick(v, kvSeq, kvHalf, firstChunk);
    c.v[1] = pick(v, kvSeq, kvHalf, secondChunk);
    c.v[2] = blend(c.v[0], c.v[1], c.w);
    if (documents()) {
      Value keyPositions = form.asKeyValue(d, blocks.positions);
      for (unsigned which : {0u, 1u}) {
        c.queryPositions[which] = queryPositionChunks[which];
        c.documentIds[which] = documentIdChunks[which];
        c.keyPositions[which] = pick(keyPositions, kvSeq, kvHalf, chunkMask(which));
      }
      c.queryPositions[2] = blend(c.queryPositions[0], c.queryPositions[1], c.w);
      c.documentIds[2] = blend(c.documentIds[0], c.documentIds[1], c.w);
      c.keyPositions[2] = blend(c.keyPositions[0], c.keyPositions[1], c.w);
    }
    return c;
  }

  /// scale * q.k of query chunk `query` and key chunk `key` of `c` (0, 1: first, second;
  /// 2: chosen). Every key of a pair comes before every query of it, so only attention
  /// within documents masks: the keys before a query's document.
  Value pairScores(const StepChunks &c, unsigned query, unsigned key) {
    Value s = t.contract(c.q[query], c.k[key], {form.headDim.getValue()});
    s = t.mul(s, t.scalar(form.scale, s));
    if (!documents())
      return s;
    Type element = Decomposer::typeOf(s).getElementType();
    return t.add(s, form.causalBias(d, c.queryPositions[query], c.keyPositions[key], element,
                                    c.documentIds[query]));
  }

  /// Chunk `mask` (firstChunk or secondChunk) of `x` along `dim`, as dimension `half`.
  Value pick(Value x, StringRef dim, StringAttr half, Value mask) {
    int64_t size = Decomposer::typeOf(x).getDimSize(dim);
    Value split = d.split(x, dim, {NamedDim{chunk, 2}, NamedDim{half, size / 2}});
    return t.reduceSum(t.mul(split, mask), {chunk.getValue()});
  }
  /// The inverse of pick: `first` and `second` (chunks along `half`) side by side along
  /// `into`.
  Value stack(Value first, Value second, StringAttr half, StringAttr into) {
    Value both = t.add(t.mul(first, firstChunk), t.mul(second, secondChunk));
    SmallVector<NamedDim> dims;
    for (const NamedDim &dim : Decomposer::typeOf(first).getDims()) {
      if (dim.name == half)
        dims.push_back({chunk, 2});
      dims.push_back(dim);
    }
    both = d.conform(both, Decomposer::typeOf(both).withDims(dims));
    return d.merge(both, {chunk.getValue(), half.getValue()}, into);
  }
  /// w x + (1 - w) y.
  Value blend(Value x, Value y, Value w) {
    return t.add(t.mul(x, w), t.mul(y, t.sub(t.scalar(1.0, w), w)));
  }

  /// The 0/1 mask of chunk `which` (0: the first) along the chunks' dimension.
  Value chunkMask(unsigned which) const { return which ? secondChunk : firstChunk; }

  /// The query chunks' dimension, and the key and value chunks'.
  StringAttr queryHalf, kvHalf;
  /// The query's chunks (form.q's, as queryHalf); within documents also its positions' and
  /// document ids' (in the positions' type: blends and picks are exact on them).
  Value queryChunks[2], queryPositionChunks[2], documentIdChunks[2];

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
  /// A key or value block one step on. A block computed in f32 from bf16/f16 values (its
  /// `mt.cast` up, buildInF32's) travels as those values and is cast up again on arrival:
  /// exact, in half the bytes.
  Value shiftWidened(Value block) {
    auto widened = block.getDefiningOp<mt::CastOp>();
    if (!widened || !lowering::widenedType(widened.getInput().getType()))
      return shift(block);
    Value shifted = shift(widened.getInput());
    return mt::CastOp::create(d.builder(), d.location(), block.getType(), shifted);
  }

  /// The online softmax after a first block's scores `s` with values `v`.
  Softmax start(Value s, Value v) {
    StringRef kvSeq = form.kvSeq.getValue();
    Value blockMax = t.reduceMax(s, {kvSeq});
    Value p = t.exp(t.sub(s, blockMax));
    return {blockMax, t.reduceSum(p, {kvSeq}), t.contract(p, v, {kvSeq})};
  }
  /// `state` merged with a further block's scores `s` and values `v` (keys along `kvDim`).
  void update(Softmax &state, Value s, Value v, StringRef kvDim) {
    Value max = t.max(state.max, t.reduceMax(s, {kvDim}));
    Value rescale = t.exp(t.sub(state.max, max));
    Value p = t.exp(t.sub(s, max));
    state.sum = t.add(t.mul(state.sum, rescale), t.reduceSum(p, {kvDim}));
    state.out = t.add(t.mul(state.out, rescale), t.contract(p, v, {kvDim}));
    state.max = max;
  }
  Softmax pickState(const Softmax &whole, Value mask) {
    StringRef seq = form.seq.getValue();
    return {pick(whole.max, seq, queryHalf, mask), pick(whole.sum, seq, queryHalf, mask),
            pick(whole.out, seq, queryHalf, mask)};
  }
  Softmax blendState(const Softmax &x, const Softmax &y, Value w) {
    return {blend(x.max, y.max, w), blend(x.sum, y.sum, w), blend(x.out, y.out, w)};
  }
  /// w = 1 when the block held at `step` comes from a rank before this one (c >= step),
  /// from this rank's first position c h (the least of its part).
  Value weightAt(int64_t step) {
    double firstOfStep = static_cast<double>(step * chunkSize) - 0.5;
    Value w = t.greater(firstPosition, t.scalar(firstOfStep, firstPosition));
    return d.conform(w, Decomposer::typeOf(w).withElementType(
                            Decomposer::typeOf(form.q).getElementType()));
  }

  /// The names and masks of the balanced steps.
  void buildHalves() {
    NamedTensorType qType = Decomposer::typeOf(form.q), kType = Decomposer::typeOf(form.k);
    chunkSize = qType.getDimSize(form.seq.getValue()) / 2;
    DimNames &names = d.dimNames();
    chunk = names.fresh(d.context(), form.seq.getValue() + "_chunk", 2, {qType, kType});
    queryHalf = names.fresh(d.context(), form.seq.getValue() + "_half", chunkSize,
                            {qType, kType}, {chunk.getValue()});
    kvHalf = names.fresh(d.context(), form.kvSeq.getValue() + "_half", chunkSize,
                         {qType, kType}, {chunk.getValue(), queryHalf.getValue()});
    Type element = qType.getElementType();
    Value index = d.positions(chunk, 2, element);
    secondChunk = d.conform(index, Decomposer::typeOf(index).withElementType(element));
    firstChunk = t.sub(t.scalar(1.0, secondChunk), secondChunk);
    queryChunks[0] = pick(form.q, form.seq.getValue(), queryHalf, firstChunk);
    queryChunks[1] = pick(form.q, form.seq.getValue(), queryHalf, secondChunk);
    firstPosition = t.neg(t.reduceMax(t.neg(positions), {form.seq.getValue()}));
    if (documents()) {
      NamedTensorType ids = Decomposer::typeOf(form.positions);
      Value exactIds = d.conform(
          form.positions, ids.withElementType(Decomposer::typeOf(positions).getElementType()));
      for (unsigned which : {0u, 1u}) {
        queryPositionChunks[which] =
            pick(positions, form.seq.getValue(), queryHalf, chunkMask(which));
        documentIdChunks[which] = pick(exactIds, form.seq.getValue(), queryHalf, chunkMask(which));
      }
    }
  }

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
  bool balanced = false;
  /// Positions per chunk, the chunks' dimension and its 0/1 masks, this rank's first
  /// position (balanced only).
  int64_t chunkSize = 0;
  StringAttr chunk;
  Value firstChunk, secondChunk, firstPosition;
};

/// The forward's results on this rank: the log-sum-exp (m + log l) of every query row
/// when `withLogSumExp`, and the output, heads split as `form`'s, from one run of the ring.
struct Statistics {
  Value logSumExp, out;
};
Statistics forwardStatistics(Ring &ring, TensorBuilder &t, const AttentionForm &form,
                             bool withLogSumExp) {
  auto logSumExpOf = [&](const Ring::Softmax &softmax) {
    return t.add(softmax.max, t.log(softmax.sum));
  };
  Statistics statistics;
  if (!ring.isBalanced()) {
    Ring::Softmax softmax = ring.forward();
    if (withLogSumExp)
      statistics.logSumExp = logSumExpOf(softmax);
    statistics.out = t.div(softmax.out, softmax.sum);
    return statistics;
  }
  // Each half is built before the stack: the order of the ops emitted must not depend on
  // the compiler's order of evaluating a call's arguments.
  Ring::HalvedSoftmax halves = ring.balancedForward();
  if (withLogSumExp) {
    Value first = logSumExpOf(halves.first);
    Value second = logSumExpOf(halves.second);
    statistics.logSumExp = ring.stack(first, second, ring.queryHalf, form.seq);
  }
  Value firstOut = t.div(halves.first.out, halves.first.sum);
  Value secondOut = t.div(halves.second.out, halves.second.sum);
  statistics.out = ring.stack(firstOut, secondOut, ring.queryHalf, form.seq);
  return statistics;
}

/// Under fused attention (`mt.fused_attention`) the local op stays whole for mt-to-linalg's
/// block loops, which need the whole sequence on the rank: a sequence split (context
/// parallelism, which mt-decompose already refuses) is reported. Returns whether `op` is
/// left to them (success) or failed; nothing when attention is not fused.
template <typename AttentionLikeOp>
std::optional<LogicalResult> keepFused(AttentionLikeOp op, ValueLayouts &layouts) {
  if (!mt::getFusedAttentionBlock(op))
    return std::nullopt;
  SmallVector<StringRef> axes = layouts.lookup(op.getQuery()).getSplitAxes(op.getSeqDim());
  if (axes.empty())
    return success();
  return op.emitOpError() << "fused attention (--fused-attention) needs the whole sequence on "
                             "each rank, but '"
                          << op.getSeqDim() << "' is split over " << axes.front()
                          << ": compile without --fused-attention";
}

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

/// Builds `op`'s local steps with `buildSteps` (which replaces the op it is given) in f32
/// where `op` reads or produces bf16/f16, as mt-decompose computes the whole op: on
/// mt-decompose's widened copy of `op` (its operands cast up, laid out as `op`'s), whose
/// results are cast down once to `op`'s. So the ring's online softmax, log-sum-exp and
/// rescaling do not round to the low type at every step; the key and value blocks (and
/// their gradients) travel in f32.
template <typename AttentionLikeOp>
LogicalResult buildInF32(AttentionLikeOp op, const PartitionContext &context, ValueLayouts &layouts,
                         LogicalResult (*buildSteps)(AttentionLikeOp, const PartitionContext &,
                                                     ValueLayouts &)) {
  OpBuilder builder(op);
  Operation *wide = lowering::widenedClone(builder, op);
  if (!wide)
    return buildSteps(op, context, layouts);
  auto widenedLayout = [&](Value value) {
    ShardedTensorType layout = layouts.lookup(value);
    NamedTensorType global = lowering::widenedType(layout.getGlobal());
    return global ? context.build(global, Layout::of(layout)) : layout;
  };
  for (auto [operand, wideOperand] : llvm::zip_equal(op->getOperands(), wide->getOperands()))
    if (wideOperand != operand)
      layouts.set(wideOperand, widenedLayout(operand));
  builder.setInsertionPointAfter(wide);
  for (auto [result, wideResult] : llvm::zip_equal(op->getResults(), wide->getResults())) {
    layouts.set(wideResult, widenedLayout(result));
    Value replacement = wideResult;
    if (wideResult.getType() != result.getType()) {
      replacement = mt::CastOp::create(builder, op.getLoc(), result.getType(), wideResult);
      layouts.set(replacement, layouts.lookup(result));
    }
    result.replaceAllUsesWith(replacement);
  }
  op->erase();
  return buildSteps(cast<AttentionLikeOp>(wide), context, layouts);
}

//===----------------------------------------------------------------------===//
// The models
//===----------------------------------------------------------------------===//

struct AttentionModel : PartitionOpInterface::ExternalModel<AttentionModel, mt::AttentionOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *operation, const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto op = cast<mt::AttentionOp>(operation);
    AttentionLayouts l = AttentionLayouts::of(op, context, in);
    PartitionRule rule;
    rule.operands = {l.query, l.key, l.key};
    if (l.positions)
      rule.operands.push_back(*l.positions);
    rule.results = {l.query};
    if (op.getLse())
      rule.results.push_back(l.rows);
    return rule;
  }

  LogicalResult buildLocalOp(Operation *operation, const PartitionContext &context,
                             ValueLayouts &layouts) const {
    return buildInF32(cast<mt::AttentionOp>(operation), context, layouts, buildSteps);
  }

  static LogicalResult buildSteps(mt::AttentionOp op, const PartitionContext &context,
                                  ValueLayouts &layouts) {
    OpBuilder builder(op);
    DimNames names(op->getParentOfType<ModuleOp>());
    Decomposer d(builder, op.getLoc(), names);
    if (std::optional<LogicalResult> fused = keepFused(op, layouts))
      return *fused;
    std::optional<std::string> axis = ringAxis(op, layouts);
    if (!axis) {
      replace(op, lowering::decomposeAttention(d, op), layouts);
      return success();
    }
    AttentionForm form = AttentionForm::of(d, op);
    Ring ring(d, context, layouts, form, *axis, op.getKey(), op.getValue());
    Statistics forward =
        forwardStatistics(ring, d.tensors(), form, /*withLogSumExp=*/bool(op.getLse()));
    SmallVector<Value> results = {
        d.conform(form.mergeHeads(d, forward.out), op.getResult().getType())};
    if (op.getLse())
      results.push_back(d.conform(form.mergeHeads(d, forward.logSumExp), op.getLse().getType()));
    replace(op, results, layouts);
    return success();
  }
};

struct AttentionGradModel
    : PartitionOpInterface::ExternalModel<AttentionGradModel, mt::AttentionGradOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *operation, const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto op = cast<mt::AttentionGradOp>(operation);
    AttentionLayouts l = AttentionLayouts::of(op, context, in);
    PartitionRule rule;
    rule.operands = {l.query, l.key, l.key, l.query};
    if (!op.getSaved().empty()) // the forward's output and log-sum-exp
      rule.operands.append({l.query, l.rows});
    if (l.positions)
      rule.operands.push_back(*l.positions);
    rule.results = {l.query, l.key, l.key};
    return rule;
  }

  LogicalResult buildLocalOp(Operation *operation, const PartitionContext &context,
                             ValueLayouts &layouts) const {
    return buildInF32(cast<mt::AttentionGradOp>(operation), context, layouts, buildSteps);
  }

  static LogicalResult buildSteps(mt::AttentionGradOp op, const PartitionContext &context,
                                  ValueLayouts &layouts) {
    OpBuilder builder(op);
    DimNames names(op->getParentOfType<ModuleOp>());
    Decomposer d(builder, op.getLoc(), names);
    if (std::optional<LogicalResult> fused = keepFused(op, layouts))
      return *fused;
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

    // The forward's statistics: the output and the log-sum-exp of every query row, saved
    // by the forward (save_lse) or else from its ring run again.
    Statistics forward;
    if (op.getSaved().empty())
      forward = forwardStatistics(ring, t, form, /*withLogSumExp=*/true);
    else
      forward = {form.splitHeads(d, op.getSaved()[1]), form.splitHeads(d, op.getSaved()[0])};
    Value logSumExp = forward.logSumExp, out = forward.out;
    Value dout = form.splitHeads(d, op.getResultGrad());
    Value rowDot = t.reduceSum(t.mul(dout, out), {form.headDim.getValue()});

    // The gradients from the scores `s` of query rows `q` (with their output gradient,
    // log-sum-exp and row dot) against keys `k` and values `v` along `kvDim`.
    struct Gradients {
      Value dq, dk, dv;
    };
    auto gradients = [&](Value s, Value q, Value k, Value v, Value doutRows, Value lseRows,
                         Value rowDotRows, StringRef kvDim,
                         ArrayRef<StringRef> perKey) -> Gradients {
      Value p = t.exp(t.sub(s, lseRows));
      Value dp = t.contract(doutRows, v, {form.headDim.getValue()});
      Value ds = t.mul(p, t.sub(dp, rowDotRows));
      ds = t.mul(ds, t.scalar(form.scale, ds));
      return {t.contract(ds, k, {kvDim}), t.contract(ds, q, perKey),
              t.contract(p, doutRows, perKey)};
    };

    // A key or value gradient block as the key is laid out (it travels like it).
    NamedTensorType keyType = typeOf(op.getKey());
    auto asKeyBlock = [&](Value grad) {
      return d.conform(d.rename(grad, kvSeq, form.seq), keyType);
    };
    Value dq, dk, dv;
    Ring::Blocks blocks = ring.first();
    int64_t wholeSteps = ring.isBalanced() ? 1 : ring.numSteps();
    for (int64_t step = 0; step < wholeSteps; ++step) {
      if (step)
        blocks = ring.next(blocks);
      Gradients g = gradients(ring.scores(blocks), form.q, ring.asKeyValue(blocks.key),
                              ring.asKeyValue(blocks.value), dout, logSumExp, rowDot, kvSeq,
                              perKeyHead);
      dq = step ? t.add(dq, g.dq) : g.dq;
      // The gradients of the block held here arrive from the rank that held it before.
      dk = step ? t.add(ring.shift(dk), asKeyBlock(g.dk)) : asKeyBlock(g.dk);
      dv = step ? t.add(ring.shift(dv), asKeyBlock(g.dv)) : asKeyBlock(g.dv);
    }
    if (ring.isBalanced()) {
      // The further steps by chunk pairs (Ring::isBalanced): the query gradient by query
      // chunk, the key and value gradients of the held block by key chunk, stacked to
      // travel.
      StringRef seq = form.seq.getValue();
      SmallVector<StringRef> perKeyHalf = {ring.queryHalf.getValue()};
      if (form.isGrouped())
        perKeyHalf.push_back(form.group.getValue());
      auto chunksOf = [&](Value rows, unsigned which) {
        return ring.pick(rows, seq, ring.queryHalf, ring.chunkMask(which));
      };
      Value doutChunks[] = {chunksOf(dout, 0), chunksOf(dout, 1)};
      Value lseChunks[] = {chunksOf(logSumExp, 0), chunksOf(logSumExp, 1)};
      Value rowDotChunks[] = {chunksOf(rowDot, 0), chunksOf(rowDot, 1)};
      Value dqChunks[2];
      if (!ring.documents())
        blocks.positions = Value(); // the chunk pairs need no mask
      for (int64_t step = 1; step < ring.numSteps(); ++step) {
        blocks = ring.next(blocks);
        Ring::StepChunks c = ring.chunksAt(step, blocks);
        StringRef kvHalf = ring.kvHalf.getValue();
        Gradients always =
            gradients(ring.pairScores(c, 1, 0), c.q[1], c.k[0], c.v[0], doutChunks[1], lseChunks[1],
                      rowDotChunks[1], kvHalf, perKeyHalf);
        Gradients chosen =
            gradients(ring.pairScores(c, 2, 2), c.q[2], c.k[2], c.v[2],
                      ring.blend(doutChunks[0], doutChunks[1], c.w),
                      ring.blend(lseChunks[0], lseChunks[1], c.w),
                      ring.blend(rowDotChunks[0], rowDotChunks[1], c.w), kvHalf, perKeyHalf);
        Value notW = t.sub(t.scalar(1.0, c.w), c.w);
        Value dqFirst = t.mul(chosen.dq, c.w);
        Value dqSecond = t.add(always.dq, t.mul(chosen.dq, notW));
        dqChunks[0] = step > 1 ? t.add(dqChunks[0], dqFirst) : dqFirst;
        dqChunks[1] = step > 1 ? t.add(dqChunks[1], dqSecond) : dqSecond;
        auto keyBlock = [&](Value alwaysGrad, Value chosenGrad) {
          return asKeyBlock(ring.stack(t.add(alwaysGrad, t.mul(chosenGrad, c.w)),
                                       t.mul(chosenGrad, notW), ring.kvHalf, form.kvSeq));
        };
        dk = t.add(ring.shift(dk), keyBlock(always.dk, chosen.dk));
        dv = t.add(ring.shift(dv), keyBlock(always.dv, chosen.dv));
      }
      dq = t.add(dq, ring.stack(dqChunks[0], dqChunks[1], ring.queryHalf, form.seq));
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
