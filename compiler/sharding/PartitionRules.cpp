//===- PartitionRules.cpp - the partition rules of the mt ops -------------===//
//
// One external model of PartitionOpInterface per rule family, attached to the ops it
// serves: elementwise ops (by how they treat partial sums), contractions, reductions,
// ops that only move or add dimensions, reshapes, the embedding lookup and its gradient,
// the mixture-of-experts routing, and the ops that run replicated. Passes.td
// (`mtp-partition`) describes the rules.
//
//===----------------------------------------------------------------------===//

#include "compiler/sharding/PartitionOpInterface.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mtp/IR/MTPOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::sharding;
using mt::NamedTensorType;
using mtp::ShardedTensorType;

namespace {

SmallVector<StringRef> names(ArrayAttr dims) {
  return llvm::to_vector(llvm::map_range(dims.getAsRange<StringAttr>(),
                                         [](StringAttr s) { return s.getValue(); }));
}

NamedTensorType typeOf(Value value) { return cast<NamedTensorType>(value.getType()); }

//===----------------------------------------------------------------------===//
// Elementwise ops (with named broadcasting)
//===----------------------------------------------------------------------===//

/// How an elementwise op treats partial sums: `Sum` (add, sub) keeps them when every
/// operand is partial over the same axes, or, for a scalar result, when the others are
/// whole (they become partial); `Unary` (neg) keeps a partial operand; `None` sums them
/// first. Products are linear in one factor too, but keeping their partial sums would
/// defer the sum past the norm backward, where a split sequence or the norm's weights
/// need it: summing at the first product gives Megatron's collectives.
enum class Linearity { None, Sum, Unary };

PartitionRule elementwise(Operation *op, const PartitionContext &context, ArrayRef<Layout> in,
                          Linearity linearity) {
  NamedTensorType resultType = typeOf(op->getResult(0));
  SmallVector<StringRef> dims = dimNames(resultType);
  SmallVector<std::string, 1> partialAxes;
  unsigned numPartial = 0;
  bool sameAxes = true;
  for (const Layout &layout : in) {
    if (!layout.isPartial())
      continue;
    if (numPartial++ && partialAxes != layout.partial)
      sameAxes = false;
    partialAxes = layout.partial;
  }
  bool keep = false;
  switch (linearity) {
  case Linearity::None:
    break;
  case Linearity::Sum:
    // A scalar sum (of squared norms, of a loss's terms) also keeps its partial operands
    // when others are whole: those become partial (to_partial, no communication), and
    // one all-reduce sums the total instead of one per partial term.
    keep = sameAxes &&
           (numPartial == in.size() || (numPartial > 0 && resultType.getRank() == 0));
    break;
  case Linearity::Unary:
    keep = numPartial == 1;
    break;
  }
  // A kept partial axis may not also split a dimension of an operand.
  if (keep)
    for (const Layout &layout : in)
      for (const std::string &axis : partialAxes)
        if (layout.splits(axis))
          keep = false;
  SmallVector<Layout> operands(in.begin(), in.end());
  if (!keep) {
    // The splits the operands have (the last operand's where two disagree).
    llvm::StringMap<Axes> wanted;
    for (const Layout &layout : in)
      for (const auto &entry : layout.split) {
        Axes &want = wanted[entry.first()];
        if (!extends(want, entry.second))
          want = entry.second;
      }
    for (auto [i, layout] : llvm::enumerate(operands))
      if (layout.isPartial())
        layout = context.resolvePartial(typeOf(op->getOperand(i)), layout, wanted);
    partialAxes.clear();
  }
  llvm::StringMap<Axes> split = context.unionSplits(operands, dims, partialAxes);
  PartitionRule rule;
  for (Value operand : op->getOperands()) {
    Layout target = Layout::restrict(split, typeOf(operand));
    if (keep)
      target.partial = partialAxes;
    rule.operands.push_back(target);
  }
  Layout result = Layout::restrict(split, resultType);
  result.partial = partialAxes;
  rule.results.push_back(result);
  return rule;
}

template <typename OpTy, Linearity linearity>
struct ElementwiseModel
    : PartitionOpInterface::ExternalModel<ElementwiseModel<OpTy, linearity>, OpTy> {
  FailureOr<PartitionRule> getPartitionRule(Operation *op, const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    return elementwise(op, context, in, linearity);
  }
};
template <typename OpTy>
using SumModel = ElementwiseModel<OpTy, Linearity::Sum>;
template <typename OpTy>
using UnaryLinearModel = ElementwiseModel<OpTy, Linearity::Unary>;
template <typename OpTy>
using NonlinearModel = ElementwiseModel<OpTy, Linearity::None>;

/// dropout: elementwise; on a split tensor the lowering numbers the mask's elements
/// globally (from the input's laid-out type), so the mask does not depend on the layout.
struct DropoutModel : PartitionOpInterface::ExternalModel<DropoutModel, mt::DropoutOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *op, const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    return elementwise(op, context, in, Linearity::None);
  }
  LogicalResult buildLocalOp(Operation *op, const PartitionContext &,
                             ValueLayouts &layouts) const {
    ShardedTensorType layout = layouts.lookup(cast<mt::DropoutOp>(op).getInput());
    if (!layout.getSplit().empty())
      mtp::setLocalLayout(op, layout);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Contraction
//===----------------------------------------------------------------------===//

/// A contracted split becomes a partial sum of the result; the result keeps the splits of
/// its operands' other dimensions. At most one operand stays partial, and its axes split
/// nothing of the other; partial sums over a data axis are reduce-scattered first
/// (scatterDataPartials).
struct ContractModel : PartitionOpInterface::ExternalModel<ContractModel, mt::ContractOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *operation,
                                            const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto op = cast<mt::ContractOp>(operation);
    NamedTensorType lhsType = typeOf(op.getLhs()), rhsType = typeOf(op.getRhs());
    NamedTensorType resultType = typeOf(op.getResult());
    SmallVector<StringRef> over = names(op.getOver());
    Layout lhs = context.scatterDataPartials(lhsType, in[0]);
    Layout rhs = context.scatterDataPartials(rhsType, in[1]);
    auto clashes = [](const Layout &partial, const Layout &other) {
      return other.isPartial() || llvm::any_of(partial.partial, [&](const std::string &axis) {
               return other.splits(axis);
             });
    };
    if (rhs.isPartial() && clashes(rhs, lhs))
      rhs = context.resolvePartial(rhsType, rhs, lhs.split);
    if (lhs.isPartial() && clashes(lhs, rhs))
      lhs = context.resolvePartial(lhsType, lhs, rhs.split);
    SmallVector<std::string, 1> partial = lhs.isPartial() ? lhs.partial : rhs.partial;

    // Every dimension of either operand: result dimensions, then contracted ones (whose
    // split becomes a partial sum of the result).
    SmallVector<StringRef> dims = dimNames(resultType);
    llvm::append_range(dims, over);
    llvm::StringMap<Axes> split;
    while (true) {
      split = context.unionSplits({lhs, rhs}, dims, partial);
      // A contracted split and a result split on the same axis clash (split and partial
      // in one tensor): gather the lower-priority one from that axis inwards.
      std::optional<std::pair<StringRef, std::string>> loser;
      for (StringRef c : over) {
        auto it = split.find(c);
        if (it == split.end())
          continue;
        for (StringRef r : dimNames(resultType)) {
          auto jt = split.find(r);
          if (jt == split.end())
            continue;
          for (const std::string &axis : jt->second)
            if (llvm::is_contained(it->second, axis))
              loser = {context.priority(c, axis) < context.priority(r, axis) ? c : r, axis};
        }
      }
      if (!loser)
        break;
      lhs.truncate(loser->first, loser->second);
      rhs.truncate(loser->first, loser->second);
    }
    PartitionRule rule;
    Layout lhsTarget = Layout::restrict(split, lhsType);
    Layout rhsTarget = Layout::restrict(split, rhsType);
    if (lhs.isPartial())
      lhsTarget.partial = lhs.partial;
    if (rhs.isPartial())
      rhsTarget.partial = rhs.partial;
    rule.operands = {lhsTarget, rhsTarget};
    Layout result = Layout::restrict(split, resultType);
    result.partial = partial;
    for (StringRef c : over)
      if (auto it = split.find(c); it != split.end())
        llvm::append_range(result.partial, it->second);
    rule.results.push_back(result);
    return rule;
  }
};

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// `value` times `factor`, built at `b`'s insertion point, in `value`'s layout: the local
/// part of a mean over parts the layout splits.
Value scaleBy(OpBuilder &b, Location loc, Value value, double factor,
              const PartitionContext &context, ValueLayouts &layouts) {
  NamedTensorType type = typeOf(value);
  Value scale = mt::ConstantOp::create(b, loc, NamedTensorType::getScalar(type.getElementType()),
                                       b.getF64FloatAttr(factor));
  layouts.set(scale, context.replicated(scale.getType()));
  Value scaled = mt::MulOp::create(b, loc, type, value, scale);
  layouts.set(scaled, layouts.lookup(value));
  return scaled;
}

/// reduce_sum / reduce_mean (linear: partial sums stay, a reduced split becomes one) and
/// reduce_max (sums partial operands first; a reduced split leaves partial maxima).
PartitionRule reduce(Operation *op, const PartitionContext &context, ArrayAttr over,
                     const Layout &in, bool isMax) {
  NamedTensorType resultType = typeOf(op->getResult(0));
  Layout operand = in;
  if (isMax && operand.isPartial())
    operand = context.resolvePartial(typeOf(op->getOperand(0)), operand, {});
  Layout result;
  result.partial = operand.partial;
  for (StringRef dim : names(over))
    llvm::append_range(result.partial, operand.axesOf(dim));
  for (const auto &entry : operand.split)
    if (resultType.hasDim(entry.first()))
      result.split[entry.first()] = entry.second;
  PartitionRule rule;
  rule.operands.push_back(operand);
  rule.results.push_back(result);
  return rule;
}

struct ReduceSumModel : PartitionOpInterface::ExternalModel<ReduceSumModel, mt::ReduceSumOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *op, const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    return reduce(op, context, cast<mt::ReduceSumOp>(op).getOver(), in[0], /*isMax=*/false);
  }
};

/// reduce_mean over a split dimension: the local mean, scaled by local / global count, is
/// this rank's share of the global mean (a partial sum).
struct ReduceMeanModel
    : PartitionOpInterface::ExternalModel<ReduceMeanModel, mt::ReduceMeanOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *op, const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    return reduce(op, context, cast<mt::ReduceMeanOp>(op).getOver(), in[0], /*isMax=*/false);
  }
  LogicalResult buildLocalOp(Operation *op, const PartitionContext &context,
                             ValueLayouts &layouts) const {
    auto mean = cast<mt::ReduceMeanOp>(op);
    Layout input = Layout::of(layouts.lookup(mean.getInput()));
    int64_t parts = 1;
    for (StringRef dim : names(mean.getOver()))
      for (const std::string &axis : input.axesOf(dim))
        parts *= context.axisSize(axis);
    if (parts == 1)
      return success();
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    Value scaled = scaleBy(b, op->getLoc(), mean.getResult(), 1.0 / static_cast<double>(parts),
                           context, layouts);
    mean.getResult().replaceAllUsesExcept(scaled, scaled.getDefiningOp());
    return success();
  }
};

/// reduce_max over a split dimension leaves partial maxima, which are not a layout values
/// may keep (partial means sums): a max all-reduce right after the op combines them
/// (vocabulary-parallel cross-entropy).
struct ReduceMaxModel : PartitionOpInterface::ExternalModel<ReduceMaxModel, mt::ReduceMaxOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *op, const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    return reduce(op, context, cast<mt::ReduceMaxOp>(op).getOver(), in[0], /*isMax=*/true);
  }
  LogicalResult buildLocalOp(Operation *op, const PartitionContext &,
                             ValueLayouts &layouts) const {
    Value local = op->getResult(0);
    ShardedTensorType partial = layouts.lookup(local);
    if (partial.getPartialAxes().empty())
      return success();
    ShardedTensorType whole = partial.withPartial({});
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    Value viewed = mtp::FromLocalOp::create(b, op->getLoc(), partial, local);
    SmallVector<StringRef> axes = partial.getPartialAxes();
    Value combined = mtp::AllReduceOp::create(b, op->getLoc(), whole, viewed,
                                              b.getStrArrayAttr(axes), mtp::Reduction::Max);
    Value result = mtp::ToLocalOp::create(b, op->getLoc(), whole.getLocalType(), combined);
    local.replaceAllUsesExcept(result, viewed.getDefiningOp());
    layouts.set(result, whole);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Ops that move, rename or add dimensions, and reshapes
//===----------------------------------------------------------------------===//

/// The layout follows the dimensions' names (`from` renamed `to`); partial sums stay (all
/// these ops are linear).
PartitionRule carry(const Layout &in, StringRef from = {}, StringRef to = {}) {
  Layout result;
  result.partial = in.partial;
  for (const auto &entry : in.split)
    result.split[entry.first() == from ? to : entry.first()] = entry.second;
  PartitionRule rule;
  rule.operands.push_back(in);
  rule.results.push_back(result);
  return rule;
}

/// transpose, broadcast: the dimensions keep their names.
template <typename OpTy>
struct CarryModel : PartitionOpInterface::ExternalModel<CarryModel<OpTy>, OpTy> {
  FailureOr<PartitionRule> getPartitionRule(Operation *, const PartitionContext &,
                                            ArrayRef<Layout> in) const {
    return carry(in[0]);
  }
};

struct RenameModel : PartitionOpInterface::ExternalModel<RenameModel, mt::RenameOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *op, const PartitionContext &,
                                            ArrayRef<Layout> in) const {
    auto rename = cast<mt::RenameOp>(op);
    return carry(in[0], rename.getDim(), rename.getTo());
  }
};

/// split `dim` into `into`: its split goes to the first (slowest) part when that part
/// divides; merge: the split of the first merged dimension goes to the merged one when the
/// others are whole. Otherwise the dimension is gathered first.
PartitionRule reshape(Operation *op, const PartitionContext &context, const Layout &in,
                      ArrayRef<StringRef> from, ArrayRef<StringRef> to) {
  NamedTensorType resultType = typeOf(op->getResult(0));
  Layout operand = in, result;
  result.partial = in.partial;
  Axes axes(operand.axesOf(from.front()));
  bool innerSplit =
      llvm::any_of(from.drop_front(), [&](StringRef d) { return !operand.axesOf(d).empty(); });
  bool kept = !axes.empty() && !innerSplit && context.splittable(resultType, to.front(), axes);
  if (!kept)
    for (StringRef d : from)
      operand.split.erase(d);
  for (const auto &entry : operand.split)
    if (!llvm::is_contained(from, entry.first()))
      result.split[entry.first()] = entry.second;
  if (kept)
    result.split[to.front()] = axes;
  PartitionRule rule;
  rule.operands.push_back(operand);
  rule.results.push_back(result);
  return rule;
}

struct SplitModel : PartitionOpInterface::ExternalModel<SplitModel, mt::SplitOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *op, const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto split = cast<mt::SplitOp>(op);
    return reshape(op, context, in[0], {split.getDim()}, names(split.getInto()));
  }
};

struct MergeModel : PartitionOpInterface::ExternalModel<MergeModel, mt::MergeOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *op, const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto merge = cast<mt::MergeOp>(op);
    return reshape(op, context, in[0], names(merge.getDims()), {merge.getInto()});
  }
};

//===----------------------------------------------------------------------===//
// Rotary position embedding
//===----------------------------------------------------------------------===//

/// rope: rows rotate independently, so splits (and partial sums: the rotation is linear;
/// those over a data axis are reduce-scattered first) carry, except on the rotated
/// dimension, whose pairs (2i, 2i+1) and angles need it whole. A split position dimension
/// (the sequence under cp) rotates by the global positions: the lowering offsets them by
/// this rank's part (the input's laid-out type).
struct RopeModel : PartitionOpInterface::ExternalModel<RopeModel, mt::RopeOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *op, const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto rope = cast<mt::RopeOp>(op);
    NamedTensorType inputType = typeOf(rope.getInput());
    Layout input = context.scatterDataPartials(inputType, in[0]);
    input.split.erase(rope.getDim());
    if (!rope.getPositions())
      return carry(input);
    // Position ids (packed documents) are sliced as the input is along the dimensions they
    // share (batch, the sequence), so that each element reads its own token's id.
    llvm::StringMap<Axes> split =
        context.unionSplits({input, in[1]}, dimNames(inputType), {});
    split.erase(rope.getDim());
    PartitionRule rule;
    rule.operands = {Layout::restrict(split, inputType),
                     Layout::restrict(split, typeOf(rope.getPositions()))};
    rule.results.push_back(Layout::restrict(split, inputType));
    return rule;
  }
  LogicalResult buildLocalOp(Operation *operation, const PartitionContext &,
                             ValueLayouts &layouts) const {
    auto op = cast<mt::RopeOp>(operation);
    ShardedTensorType input = layouts.lookup(op.getInput());
    if (!input.getSplitAxes(op.getPosition()).empty())
      mtp::setLocalLayout(op, input);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Embedding lookup and its gradient
//===----------------------------------------------------------------------===//

/// gather: the table whole along the indexed dimension; the indices' splits and the table's
/// other splits carry to the result. Vocabulary parallelism: a table split along the
/// indexed dimension stays split; each rank looks up the rows it holds (0 elsewhere) and
/// the sum over the axis is the lookup. The indices must not use the axis.
struct GatherModel : PartitionOpInterface::ExternalModel<GatherModel, mt::GatherOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *operation,
                                            const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto op = cast<mt::GatherOp>(operation);
    NamedTensorType tableType = typeOf(op.getTable());
    NamedTensorType indicesType = typeOf(op.getIndices());
    NamedTensorType resultType = typeOf(op.getResult());
    const Layout &indices = in[1];
    Layout table = in[0].isPartial() ? context.resolvePartial(tableType, in[0], {}) : in[0];
    Axes rowsAxes(table.axesOf(op.getDim()));
    PartitionRule rule;
    if (!rowsAxes.empty() &&
        llvm::none_of(rowsAxes, [&](const std::string &a) { return indices.splits(a); })) {
      Layout others = table;
      others.split.erase(op.getDim());
      llvm::StringMap<Axes> split =
          context.unionSplits({indices, others}, dimNames(resultType), rowsAxes);
      rule.operands = {Layout::restrict(split, tableType), Layout::restrict(split, indicesType)};
      rule.operands[0].split[op.getDim()] = rowsAxes;
      Layout result = Layout::restrict(split, resultType);
      llvm::append_range(result.partial, rowsAxes);
      rule.results.push_back(result);
      return rule;
    }
    table.split.erase(op.getDim());
    llvm::StringMap<Axes> split = context.unionSplits({indices, table}, dimNames(resultType), {});
    rule.operands = {Layout::restrict(split, tableType), Layout::restrict(split, indicesType)};
    rule.results.push_back(Layout::restrict(split, resultType));
    return rule;
  }
  /// A table split along the indexed dimension: the lowering offsets the rows by this
  /// rank's part (the table's laid-out type).
  LogicalResult buildLocalOp(Operation *operation, const PartitionContext &,
                             ValueLayouts &layouts) const {
    auto op = cast<mt::GatherOp>(operation);
    ShardedTensorType table = layouts.lookup(op.getTable());
    if (!table.getSplitAxes(op.getDim()).empty())
      mtp::setLocalLayout(op, table);
    return success();
  }
};

/// embedding_grad: a sum over the index positions, so splits of the positions become
/// partial sums; the table's other dimensions keep the gradient's splits, the indexed one
/// is whole. Vocabulary parallelism: when the layout splits the table's indexed dimension
/// and the gradient does not use that axis, each rank accumulates only the rows it holds
/// (from its positions: split positions leave partial sums there too).
struct EmbeddingGradModel
    : PartitionOpInterface::ExternalModel<EmbeddingGradModel, mt::EmbeddingGradOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *operation,
                                            const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto op = cast<mt::EmbeddingGradOp>(operation);
    NamedTensorType indicesType = typeOf(op.getIndices());
    NamedTensorType resultType = typeOf(op.getResult());
    const Layout &grad = in[1];
    const llvm::StringMap<std::string> &dimAxis = context.getSpec().dimAxis;
    auto mapped = dimAxis.find(op.getDim());
    PartitionRule rule;
    if (mapped != dimAxis.end() && context.divisible(resultType, op.getDim(), mapped->second) &&
        !llvm::is_contained(grad.partial, mapped->second) && !grad.splits(mapped->second)) {
      // Split positions (the sequence under cp; never over the table's axis, checked
      // above) make this rank's rows partial sums over their axis, as below.
      Layout result;
      result.partial = grad.partial;
      for (const auto &entry : grad.split) {
        if (indicesType.hasDim(entry.first()))
          llvm::append_range(result.partial, entry.second);
        else if (resultType.hasDim(entry.first()))
          result.split[entry.first()] = entry.second;
      }
      result.split[op.getDim()] = {mapped->second};
      rule.operands = {Layout::restrict(grad.split, indicesType), grad};
      rule.results.push_back(result);
      return rule;
    }
    Layout g = grad;
    Layout result;
    result.partial = g.partial;
    llvm::StringSet<> usedAxes;
    for (const std::string &a : g.partial)
      usedAxes.insert(a);
    // Position splits first (they become partial), then the table's dimensions; a split
    // over an axis already used is gathered from that axis inwards.
    for (StringRef dim : dimNames(indicesType))
      for (const std::string &axis : Axes(g.axesOf(dim))) {
        if (!usedAxes.insert(axis).second) {
          g.truncate(dim, axis);
          break;
        }
        result.partial.push_back(axis);
      }
    for (StringRef dim : dimNames(resultType)) {
      if (indicesType.hasDim(dim))
        continue;
      for (const std::string &axis : Axes(g.axesOf(dim)))
        if (usedAxes.count(axis)) {
          g.truncate(dim, axis);
          break;
        }
      if (ArrayRef<std::string> axes = g.axesOf(dim); !axes.empty())
        result.split[dim] = Axes(axes.begin(), axes.end());
    }
    rule.operands = {Layout::restrict(g.split, indicesType), g};
    rule.results.push_back(result);
    return rule;
  }
  /// A gradient split along the indexed dimension: the lowering offsets the rows by this
  /// rank's part (the result's laid-out type).
  LogicalResult buildLocalOp(Operation *operation, const PartitionContext &,
                             ValueLayouts &layouts) const {
    auto op = cast<mt::EmbeddingGradOp>(operation);
    ShardedTensorType result = layouts.lookup(op.getResult());
    if (!result.getSplitAxes(op.getDim()).empty())
      mtp::setLocalLayout(op, result);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

/// `layout` with its partial sums summed (reduce-scattered along a dimension of `wanted`
/// where one fits).
Layout summed(const PartitionContext &context, Value value, const Layout &layout,
              const llvm::StringMap<Axes> &wanted = {}) {
  return layout.isPartial() ? context.resolvePartial(typeOf(value), layout, wanted) : layout;
}

/// The routing group of a rank under expert parallelism: the token dimension of `indices`
/// (whose other dimension is `kDim`) that the spec splits over the expert axis in the data
/// (batch), and all the data's axes splitting it (`[ep]`, `[dp, ep]` under ZeRO-3). Each
/// rank routes its own tokens, within the capacity its own tokens give (Megatron's
/// semantics, and the reference's: one rank whose micro-batch is a rank's part). The group
/// is the spec's, not whatever split the operands arrive with, so that topk, dispatch,
/// combine and the balancing loss agree on it; any other token split (seq over tp under
/// sequence parallelism) would change which tokens compete for an expert's slots, so the
/// rules gather it.
struct RoutingGroup {
  std::string tokenDim;
  Axes axes;
  /// The number of ranks sharing a routing of the whole (global) tokens: the product of
  /// the axes' sizes.
  int64_t ranks(const PartitionContext &context) const {
    int64_t n = 1;
    for (const std::string &axis : axes)
      n *= context.axisSize(axis);
    return n;
  }
  bool has(StringRef axis) const { return llvm::is_contained(axes, axis); }
};

/// (`indices` may be the operand's local type: only its dimension names are read.)
std::optional<RoutingGroup> routingGroup(const PartitionContext &context,
                                         NamedTensorType indices, StringRef kDim) {
  const ShardingSpec &spec = context.getSpec();
  if (spec.expertAxis.empty())
    return std::nullopt;
  for (const auto &entry : spec.activationAxes)
    if (llvm::is_contained(entry.second, spec.expertAxis) && entry.first() != kDim &&
        indices.hasDim(entry.first()))
      return RoutingGroup{entry.first().str(), entry.second};
  return std::nullopt;
}

/// topk, topk_grad: every row (a point of the other dimensions) picks its k alone, so the
/// other dimensions' splits could all carry; the dimension the k are picked from, and k,
/// are whole. topk computes on the routing group's split alone (routingGroup), which the
/// routing ops after it take: any other split is gathered here, on the scores, rather than
/// later on the integer indices. The values are not linear in the input: partial sums are
/// summed first.
struct TopKModel : PartitionOpInterface::ExternalModel<TopKModel, mt::TopKOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *op, const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto topk = cast<mt::TopKOp>(op);
    Layout operand = summed(context, topk.getInput(), in[0]);
    operand.split.clear();
    if (std::optional<RoutingGroup> group =
            routingGroup(context, typeOf(topk.getIndices()), topk.getKDim()))
      operand.split[group->tokenDim] = group->axes;
    Layout result;
    result.split = operand.split;
    PartitionRule rule;
    rule.operands.push_back(operand);
    rule.results = {result, result};
    return rule;
  }
};

/// topk_grad carries every row split (the indices are sliced, never gathered, where the
/// values' gradient is split further).
struct TopKGradModel : PartitionOpInterface::ExternalModel<TopKGradModel, mt::TopKGradOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *op, const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto grad = cast<mt::TopKGradOp>(op);
    Layout values = summed(context, grad.getValuesGrad(), in[0], in[1].split);
    SmallVector<StringRef> rows = dimNames(typeOf(grad.getResult()));
    llvm::erase(rows, grad.getDim());
    llvm::StringMap<Axes> split = context.unionSplits({values, in[1]}, rows, {});
    PartitionRule rule;
    rule.operands = {Layout::restrict(split, typeOf(grad.getValuesGrad())),
                     Layout::restrict(split, typeOf(grad.getIndices()))};
    rule.results.push_back(Layout::restrict(split, typeOf(grad.getResult())));
    return rule;
  }
};

/// Fails, on `op`, where the ranks of `group` cannot share each expert's capacity (of
/// `slots`, a dispatched tensor: a result's global type, or an operand's local type laid out
/// as `layout`) evenly: their capacities would not add up to it.
LogicalResult checkGroupCapacity(Operation *op, const PartitionContext &context,
                                 const RoutingGroup &group, NamedTensorType slots,
                                 StringRef capacityDim, const Layout &layout = {}) {
  int64_t capacity = slots.getDimSize(capacityDim);
  for (const std::string &axis : layout.axesOf(capacityDim))
    capacity *= context.axisSize(axis);
  if (capacity % group.ranks(context) == 0)
    return success();
  return op->emitOpError() << "cannot split the capacity " << capacity
                           << " of each expert evenly over the " << group.ranks(context)
                           << " ranks of '" << llvm::join(group.axes, " x ")
                           << "' that route their own tokens; choose a micro-batch or "
                              "capacity factor whose capacity they divide";
}

/// The splits of `layout` on feature dimensions (those `indices` lacks, other than `skip`),
/// except over `axes` (the routing group's).
void carryFeatureSplits(const Layout &layout, NamedTensorType indices, ArrayRef<StringRef> skip,
                        ArrayRef<std::string> axes, llvm::StringMap<Axes> &split) {
  for (const auto &entry : layout.split)
    if (!indices.hasDim(entry.first()) && !llvm::is_contained(skip, entry.first()) &&
        llvm::none_of(entry.second,
                      [&](const std::string &a) { return llvm::is_contained(axes, a); }) &&
        !split.count(entry.first()))
      split[entry.first()] = entry.second;
}

/// dispatch: each rank of a routing group fills its own share of every expert's slots with
/// its own tokens: the token dimension's split becomes the capacity dimension's split over
/// the same axes (no communication here; the expert contraction then moves the slots to the
/// ranks holding their experts, as Megatron's all-to-all). Other token splits are gathered;
/// feature splits carry. The local op computes each rank's capacity from its own tokens:
/// with n ranks and a capacity ceil(n * a) the axis divides, ceil(a) is exactly its share
/// (ceil(n * a) = n * m implies m - 1/n < a <= m), so the split capacity is the local one
/// wherever n divides it; where it does not, the ranks' capacities cannot add up to it.
struct DispatchModel : PartitionOpInterface::ExternalModel<DispatchModel, mt::DispatchOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *operation,
                                            const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto op = cast<mt::DispatchOp>(operation);
    NamedTensorType indicesType = typeOf(op.getIndices());
    NamedTensorType resultType = typeOf(op.getResult());
    Layout input = summed(context, op.getInput(), in[0]);
    std::optional<RoutingGroup> group = routingGroup(context, indicesType, op.getKDim());
    if (group &&
        failed(checkGroupCapacity(op, context, *group, resultType, op.getCapacityDim())))
      return failure();
    llvm::StringMap<Axes> features;
    carryFeatureSplits(input, indicesType, {},
                       group ? ArrayRef(group->axes) : ArrayRef<std::string>(), features);
    PartitionRule rule;
    Layout inputTarget = Layout::restrict(features, typeOf(op.getInput()));
    Layout indicesTarget, result = Layout::restrict(features, resultType);
    if (group) {
      inputTarget.split[group->tokenDim] = group->axes;
      indicesTarget.split[group->tokenDim] = group->axes;
      result.split[op.getCapacityDim()] = group->axes;
    }
    rule.operands = {inputTarget, indicesTarget};
    rule.results.push_back(result);
    return rule;
  }
};

/// combine: the inverse of dispatch. The tokens' split over the routing group's axes becomes
/// the capacity's split of the expert outputs (each rank combines the slots its tokens
/// filled: the expert outputs come back from the experts' ranks); other token splits are
/// gathered, feature splits carry. The result is linear in the expert outputs: their
/// partial sums stay (summed once on the tokens, not on every slot).
struct CombineModel : PartitionOpInterface::ExternalModel<CombineModel, mt::CombineOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *operation,
                                            const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto op = cast<mt::CombineOp>(operation);
    NamedTensorType inputType = typeOf(op.getInput());
    NamedTensorType indicesType = typeOf(op.getIndices());
    NamedTensorType resultType = typeOf(op.getResult());
    std::optional<RoutingGroup> group = routingGroup(context, indicesType, op.getKDim());
    if (group && failed(checkGroupCapacity(op, context, *group, inputType, op.getCapacityDim(),
                                           in[0])))
      return failure();
    SmallVector<std::string, 1> partial = in[0].partial;
    if (group && llvm::any_of(partial, [&](StringRef a) { return group->has(a); }))
      partial.clear();
    llvm::StringMap<Axes> features;
    carryFeatureSplits(in[0], indicesType, {op.getExpertDim(), op.getCapacityDim()},
                       group ? ArrayRef(group->axes) : ArrayRef<std::string>(), features);
    for (auto it = features.begin(); it != features.end();)
      if (llvm::any_of(it->second,
                       [&](const std::string &a) { return llvm::is_contained(partial, a); }))
        features.erase(it++);
      else
        ++it;
    Layout input = Layout::restrict(features, inputType);
    input.partial = partial;
    Layout tokens, result = Layout::restrict(features, resultType);
    result.partial = partial;
    if (group) {
      input.split[op.getCapacityDim()] = group->axes;
      tokens.split[group->tokenDim] = group->axes;
      result.split[group->tokenDim] = group->axes;
    }
    PartitionRule rule;
    rule.operands = {input, tokens, tokens};
    rule.results.push_back(result);
    return rule;
  }
};

/// combine_grad: combine's layouts, the output gradient laid out as combine's result; each
/// gradient in its operand's layout. Partial sums are summed first.
struct CombineGradModel
    : PartitionOpInterface::ExternalModel<CombineGradModel, mt::CombineGradOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *operation,
                                            const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto op = cast<mt::CombineGradOp>(operation);
    NamedTensorType inputType = typeOf(op.getInput());
    NamedTensorType indicesType = typeOf(op.getIndices());
    std::optional<RoutingGroup> group = routingGroup(context, indicesType, op.getKDim());
    if (group && failed(checkGroupCapacity(op, context, *group, inputType, op.getCapacityDim(),
                                           in[0])))
      return failure();
    ArrayRef<std::string> axes = group ? ArrayRef(group->axes) : ArrayRef<std::string>();
    llvm::StringMap<Axes> features;
    SmallVector<StringRef, 2> slots = {op.getExpertDim(), op.getCapacityDim()};
    carryFeatureSplits(summed(context, op.getInput(), in[0]), indicesType, slots, axes,
                       features);
    carryFeatureSplits(summed(context, op.getResultGrad(), in[3]), indicesType, slots, axes,
                       features);
    Layout input = Layout::restrict(features, inputType);
    Layout tokens, resultGrad = Layout::restrict(features, typeOf(op.getResultGrad()));
    if (group) {
      input.split[op.getCapacityDim()] = group->axes;
      tokens.split[group->tokenDim] = group->axes;
      resultGrad.split[group->tokenDim] = group->axes;
    }
    // The weights' gradient sums over the features: a feature split leaves partial sums.
    Layout weightsGrad = tokens;
    for (const auto &entry : features)
      for (const std::string &axis : entry.second)
        if (!llvm::is_contained(weightsGrad.partial, axis))
          weightsGrad.partial.push_back(axis);
    PartitionRule rule;
    rule.operands = {input, tokens, tokens, resultGrad};
    rule.results = {input, weightsGrad};
    return rule;
  }
};

/// load_balancing_loss and its gradient: each rank of a routing group balances its own
/// tokens (the routing fractions and mean probabilities of its part, as it routed them):
/// the loss is partial over the group's axes, each rank's loss scaled by 1 / parts so that
/// the sum is the mean over the groups (the reference's mean over micro-batches); the
/// gradient's is scaled alike. Other token splits are gathered (the loss is not linear in
/// the tokens).
PartitionRule loadBalancing(const PartitionContext &context, NamedTensorType indices,
                            StringRef kDim, std::optional<RoutingGroup> &group) {
  group = routingGroup(context, indices, kDim);
  Layout tokens;
  if (group)
    tokens.split[group->tokenDim] = group->axes;
  PartitionRule rule;
  rule.operands = {tokens, tokens};
  return rule;
}

struct LoadBalancingLossModel
    : PartitionOpInterface::ExternalModel<LoadBalancingLossModel, mt::LoadBalancingLossOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *operation,
                                            const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto op = cast<mt::LoadBalancingLossOp>(operation);
    std::optional<RoutingGroup> group;
    PartitionRule rule =
        loadBalancing(context, typeOf(op.getIndices()), op.getKDim(), group);
    Layout result;
    if (group)
      result.partial.append(group->axes.begin(), group->axes.end());
    rule.results.push_back(result);
    return rule;
  }
  LogicalResult buildLocalOp(Operation *op, const PartitionContext &context,
                             ValueLayouts &layouts) const {
    Value loss = op->getResult(0);
    SmallVector<StringRef> axes = layouts.lookup(loss).getPartialAxes();
    if (axes.empty())
      return success();
    int64_t parts = 1;
    for (StringRef axis : axes)
      parts *= context.axisSize(axis);
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    Value scaled =
        scaleBy(b, op->getLoc(), loss, 1.0 / static_cast<double>(parts), context, layouts);
    loss.replaceAllUsesExcept(scaled, scaled.getDefiningOp());
    return success();
  }
};

struct LoadBalancingLossGradModel
    : PartitionOpInterface::ExternalModel<LoadBalancingLossGradModel,
                                          mt::LoadBalancingLossGradOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *operation,
                                            const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto op = cast<mt::LoadBalancingLossGradOp>(operation);
    std::optional<RoutingGroup> group;
    PartitionRule rule =
        loadBalancing(context, typeOf(op.getIndices()), op.getKDim(), group);
    rule.operands.push_back(Layout{}); // the loss's gradient, whole
    rule.results.push_back(rule.operands.front());
    return rule;
  }
  LogicalResult buildLocalOp(Operation *operation, const PartitionContext &context,
                             ValueLayouts &layouts) const {
    auto op = cast<mt::LoadBalancingLossGradOp>(operation);
    std::optional<RoutingGroup> group =
        routingGroup(context, typeOf(op.getIndices()), op.getKDim());
    if (!group)
      return success();
    OpBuilder b(op);
    Value scaled = scaleBy(b, op.getLoc(), op.getLossGrad(),
                           1.0 / static_cast<double>(group->ranks(context)), context,
                           layouts);
    op.getLossGradMutable().assign(scaled);
    return success();
  }
};

/// expert_load: each rank of a routing group counts the choices of its own tokens, so the
/// counts are partial over the group's axes (a sum: the derived all-reduce totals them
/// where a consumer needs them whole). Other token splits are gathered, as for the loss.
struct ExpertLoadModel
    : PartitionOpInterface::ExternalModel<ExpertLoadModel, mt::ExpertLoadOp> {
  FailureOr<PartitionRule> getPartitionRule(Operation *operation,
                                            const PartitionContext &context,
                                            ArrayRef<Layout> in) const {
    auto op = cast<mt::ExpertLoadOp>(operation);
    std::optional<RoutingGroup> group =
        routingGroup(context, typeOf(op.getIndices()), op.getKDim());
    Layout tokens, counts;
    if (group) {
      tokens.split[group->tokenDim] = group->axes;
      counts.partial.append(group->axes.begin(), group->axes.end());
    }
    PartitionRule rule;
    rule.operands.push_back(tokens);
    rule.results.push_back(counts);
    return rule;
  }
};

//===----------------------------------------------------------------------===//
// Ops without a sharded form
//===----------------------------------------------------------------------===//

/// Whole operands, whole results: constants, iota, and the ops whose sharded form is not
/// written yet (the composite ops mt-decompose rewrites before partitioning).
template <typename OpTy>
struct ReplicatedModel : PartitionOpInterface::ExternalModel<ReplicatedModel<OpTy>, OpTy> {
  FailureOr<PartitionRule> getPartitionRule(Operation *op, const PartitionContext &,
                                            ArrayRef<Layout>) const {
    return PartitionRule::replicated(op);
  }
};

template <template <typename> class Model, typename... OpTys>
void attach(MLIRContext *context) {
  (OpTys::template attachInterface<Model<OpTys>>(*context), ...);
}

} // namespace

void mtc::sharding::registerPartitionRules(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, mt::MTDialect *) {
    attach<SumModel, mt::AddOp, mt::SubOp>(context);
    attach<UnaryLinearModel, mt::NegOp>(context);
    attach<NonlinearModel, mt::MulOp, mt::DivOp, mt::MaxOp, mt::PowOp, mt::GreaterOp,
           mt::ExpOp, mt::LogOp, mt::SqrtOp, mt::RsqrtOp, mt::TanhOp, mt::SigmoidOp,
           mt::CosOp, mt::ReluOp, mt::SiluOp, mt::GeluOp, mt::GeluGradOp, mt::CastOp>(context);
    mt::DropoutOp::attachInterface<DropoutModel>(*context);
    mt::ContractOp::attachInterface<ContractModel>(*context);
    mt::ReduceSumOp::attachInterface<ReduceSumModel>(*context);
    mt::ReduceMeanOp::attachInterface<ReduceMeanModel>(*context);
    mt::ReduceMaxOp::attachInterface<ReduceMaxModel>(*context);
    attach<CarryModel, mt::TransposeOp, mt::BroadcastOp>(context);
    mt::RenameOp::attachInterface<RenameModel>(*context);
    mt::SplitOp::attachInterface<SplitModel>(*context);
    mt::MergeOp::attachInterface<MergeModel>(*context);
    mt::GatherOp::attachInterface<GatherModel>(*context);
    mt::EmbeddingGradOp::attachInterface<EmbeddingGradModel>(*context);
    mt::RopeOp::attachInterface<RopeModel>(*context);
    mt::TopKOp::attachInterface<TopKModel>(*context);
    mt::TopKGradOp::attachInterface<TopKGradModel>(*context);
    mt::DispatchOp::attachInterface<DispatchModel>(*context);
    mt::CombineOp::attachInterface<CombineModel>(*context);
    mt::CombineGradOp::attachInterface<CombineGradModel>(*context);
    mt::LoadBalancingLossOp::attachInterface<LoadBalancingLossModel>(*context);
    mt::LoadBalancingLossGradOp::attachInterface<LoadBalancingLossGradModel>(*context);
    mt::ExpertLoadOp::attachInterface<ExpertLoadModel>(*context);
    attach<ReplicatedModel, mt::ConstantOp, mt::IotaOp, mt::LossScaleOp, mt::SoftmaxOp,
           mt::LayerNormOp, mt::RMSNormOp, mt::CrossEntropyOp, mt::CrossEntropyGradOp>(context);
  });
  registerAttentionPartitionRules(registry);
}
