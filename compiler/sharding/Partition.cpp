//===- Partition.cpp - one rank's program with derived collectives --------===//
//
// Layouts propagate forward through each function in program order (Passes.td describes
// the rules); the function is rewritten as it goes: every op keeps its kind and gets the
// local types of the layouts chosen for its operands and results, and wherever an operand's
// layout differs from the one its consumer needs, the collectives between the two are
// inserted (`reshard`). Layer functions are partitioned for the layouts their `mt.repeat`
// passes them.
//
//===----------------------------------------------------------------------===//

#include "compiler/sharding/Layout.h"
#include "compiler/sharding/Passes.h"
#include "compiler/transforms/Passes.h"
#include "dialects/mt/IR/MTOps.h"
#include "dialects/mtp/IR/MTPOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace mtc::sharding {
#define GEN_PASS_DEF_MTPPARTITIONPASS
#include "compiler/sharding/Passes.h.inc"
} // namespace mtc::sharding

using namespace mlir;
using namespace mtc;
using mt::NamedTensorType;
using mtp::ShardedTensorType;

namespace {

/// A layout being decided: the axis splitting each dimension (at most one per dimension:
/// the specs never split one dimension over both `dp` and `tp`) and the axes over which
/// values are partial sums.
struct Layout {
  llvm::StringMap<std::string> split;
  llvm::SmallVector<std::string, 1> partial;

  static Layout of(ShardedTensorType type) {
    Layout layout;
    for (NamedAttribute entry : type.getSplit()) {
      SmallVector<StringRef> axes = type.getSplitAxes(entry.getName());
      if (!axes.empty())
        layout.split[entry.getName().getValue()] = axes.back().str();
    }
    for (StringRef axis : type.getPartialAxes())
      layout.partial.push_back(axis.str());
    return layout;
  }
  std::optional<StringRef> axisOf(StringRef dim) const {
    auto it = split.find(dim);
    if (it == split.end())
      return std::nullopt;
    return StringRef(it->second);
  }
  bool isPartial() const { return !partial.empty(); }
};

class Partitioner {
public:
  Partitioner(ModuleOp module, const sharding::ShardingSpec &spec)
      : module(module), spec(spec), ctx(module.getContext()) {}

  LogicalResult run();

private:
  //===--------------------------------------------------------------------===//
  // Layout construction
  //===--------------------------------------------------------------------===//

  ShardedTensorType build(NamedTensorType global, const Layout &layout) {
    NamedAttrList split;
    for (const mt::NamedDim &dim : global.getDims())
      if (auto axis = layout.axisOf(dim.name.getValue()))
        split.set(dim.name, ArrayAttr::get(ctx, {StringAttr::get(ctx, *axis)}));
    SmallVector<Attribute> partial;
    for (const std::string &axis : layout.partial)
      partial.push_back(StringAttr::get(ctx, axis));
    return ShardedTensorType::get(ctx, global, spec.mesh, split.getDictionary(ctx),
                                  ArrayAttr::get(ctx, partial));
  }
  ShardedTensorType replicated(Type global) {
    return build(cast<NamedTensorType>(global), Layout{});
  }
  int64_t axisSize(StringRef axis) { return *spec.mesh.getAxisSize(axis); }
  /// Which split survives when one axis would split two dimensions of a tensor.
  int priority(StringRef dim) const {
    if (spec.dimAxis.count(dim))
      return 2;
    return dim == spec.sequenceDim ? 1 : 0;
  }
  bool divisible(NamedTensorType type, StringRef dim, StringRef axis) {
    return type.hasDim(dim) && type.getDimSize(dim) % axisSize(axis) == 0;
  }

  /// How a partial operand of global type `type` is summed when its consumer cannot take
  /// partial sums: reduce-scatter along a dimension of `wanted` (the splits the consumer's
  /// other operands have) or, with sequence parallelism, along `seq`; all-reduce otherwise.
  Layout resolvePartial(NamedTensorType type, const Layout &layout,
                        const llvm::StringMap<std::string> &wanted) {
    Layout result = layout;
    result.partial.clear();
    for (const std::string &axis : layout.partial) {
      std::optional<StringRef> along;
      for (const auto &entry : wanted)
        if (entry.second == axis && !layout.axisOf(entry.first()) &&
            divisible(type, entry.first(), axis))
          along = entry.first();
      if (!along && !spec.sequenceDim.empty() && axis == "tp" &&
          !layout.axisOf(spec.sequenceDim) &&
          divisible(type, spec.sequenceDim, axis))
        along = spec.sequenceDim;
      bool used = llvm::any_of(result.split, [&](const auto &e) { return e.second == axis; });
      if (along && !used)
        result.split[*along] = axis;
    }
    return result;
  }

  //===--------------------------------------------------------------------===//
  // Resharding: the collectives from one layout to another
  //===--------------------------------------------------------------------===//

  Value reshard(OpBuilder &b, Location loc, Value local, ShardedTensorType from,
                ShardedTensorType to) {
    if (from == to)
      return local;
    Value v = mtp::FromLocalOp::create(b, loc, from, local);
    ShardedTensorType cur = from;
    // Partial sums first: into the split the target wants, or whole.
    for (StringRef axis : from.getPartialAxes()) {
      if (to.isPartialOver(axis))
        continue;
      std::optional<StringRef> along;
      for (NamedAttribute entry : to.getSplit()) {
        SmallVector<StringRef> target = to.getSplitAxes(entry.getName());
        SmallVector<StringRef> have = cur.getSplitAxes(entry.getName());
        if (!target.empty() && target.back() == axis && have.size() + 1 == target.size() &&
            llvm::equal(have, ArrayRef(target).drop_back()))
          along = entry.getName().getValue();
      }
      SmallVector<StringRef> rest;
      for (StringRef a : cur.getPartialAxes())
        if (a != axis)
          rest.push_back(a);
      if (along) {
        SmallVector<StringRef> axes = cur.getSplitAxes(*along);
        axes.push_back(axis);
        ShardedTensorType next = cur.withPartial(rest).withSplit(*along, axes);
        v = mtp::ReduceScatterOp::create(b, loc, next, v, axis, *along);
        cur = next;
      } else {
        ShardedTensorType next = cur.withPartial(rest);
        v = mtp::AllReduceOp::create(b, loc, next, v, b.getStrArrayAttr({axis}),
                                     /*reduction=*/nullptr);
        cur = next;
      }
    }
    // A whole value becomes partial where the target is (coordinate 0 keeps it).
    for (StringRef axis : to.getPartialAxes()) {
      if (cur.isPartialOver(axis))
        continue;
      SmallVector<StringRef> partial = cur.getPartialAxes();
      partial.push_back(axis);
      ShardedTensorType next = cur.withPartial(partial);
      v = mtp::ToPartialOp::create(b, loc, next, v, axis);
      cur = next;
    }
    // Then gather what the target does not split that way, and slice what it splits more.
    for (const mt::NamedDim &dim : cur.getGlobal().getDims()) {
      StringRef name = dim.name.getValue();
      SmallVector<StringRef> target = to.getSplitAxes(name);
      SmallVector<StringRef> have = cur.getSplitAxes(name);
      while (!have.empty() && (have.size() > target.size() ||
                               !llvm::equal(have, ArrayRef(target).take_front(have.size())))) {
        StringRef axis = have.pop_back_val();
        ShardedTensorType next = cur.withSplit(name, have);
        v = mtp::AllGatherOp::create(b, loc, next, v, axis, name);
        cur = next;
      }
    }
    for (const mt::NamedDim &dim : cur.getGlobal().getDims()) {
      StringRef name = dim.name.getValue();
      SmallVector<StringRef> target = to.getSplitAxes(name);
      SmallVector<StringRef> have = cur.getSplitAxes(name);
      while (have.size() < target.size()) {
        have.push_back(target[have.size()]);
        ShardedTensorType next = cur.withSplit(name, have);
        v = mtp::AllSliceOp::create(b, loc, next, v, have.back(), name);
        cur = next;
      }
    }
    return mtp::ToLocalOp::create(b, loc, to.getLocalType(), v);
  }

  //===--------------------------------------------------------------------===//
  // Rules: the layouts an op computes on
  //===--------------------------------------------------------------------===//

  /// What a rule decides: the layout each operand is brought to and each result's.
  struct Decision {
    SmallVector<Layout> operands;
    SmallVector<Layout> results;
    /// The op computes on a part whose place in the whole it needs (kLocalLayoutAttrName):
    /// the layout of this operand, or of the result.
    std::optional<unsigned> localLayoutOperand;
    bool localLayoutResult = false;
    /// The result holds partial maxima (reduce_max over a split dimension).
    bool partialMaximum = false;
  };

  /// Splits of the union of `layouts` restricted to the dimensions `dims` (first operand
  /// first), one axis per tensor: on a clash the lower-priority dimension loses. Axes in
  /// `reserved` (partial sums the result keeps) split nothing.
  llvm::StringMap<std::string> unionSplits(ArrayRef<Layout> layouts, ArrayRef<StringRef> dims,
                                           ArrayRef<std::string> reserved) {
    llvm::StringMap<std::string> split;
    for (const Layout &layout : layouts)
      for (const auto &entry : layout.split)
        if (llvm::is_contained(dims, entry.first()) && !split.count(entry.first()))
          split[entry.first()] = entry.second;
    for (const std::string &axis : reserved)
      for (auto it = split.begin(); it != split.end();)
        if (it->second == axis)
          split.erase(it++);
        else
          ++it;
    // One dimension per axis: keep the highest priority (the first on ties).
    llvm::StringMap<std::string> winner; // axis -> dim
    for (StringRef dim : dims) {
      auto it = split.find(dim);
      if (it == split.end())
        continue;
      auto [w, inserted] = winner.try_emplace(it->second, dim.str());
      if (!inserted && priority(dim) > priority(w->second))
        w->second = dim.str();
    }
    llvm::StringMap<std::string> result;
    for (StringRef dim : dims)
      if (auto it = split.find(dim); it != split.end() && winner[it->second] == dim)
        result[dim] = it->second;
    return result;
  }

  static SmallVector<StringRef> dimNames(NamedTensorType type) {
    SmallVector<StringRef> names;
    for (StringAttr name : type.getDimNames())
      names.push_back(name.getValue());
    return names;
  }

  static Layout restrict(const llvm::StringMap<std::string> &split, NamedTensorType type) {
    Layout layout;
    for (const auto &entry : split)
      if (type.hasDim(entry.first()))
        layout.split[entry.first()] = entry.second;
    return layout;
  }

  /// How an elementwise op treats partial sums: `Sum` (add, sub) keeps them when every
  /// operand is partial over the same axes, or, for a scalar result, when the others are
  /// whole (they become partial); `Unary` (neg) keeps a partial operand; `None` sums them
  /// first. Products are linear in one factor too, but keeping their partial
  /// sums would defer the sum past the norm backward, where a split sequence or the
  /// norm's weights need it: summing at the first product gives Megatron's collectives.
  enum class Linearity { None, Sum, Unary };

  /// Elementwise ops (with named broadcasting).
  Decision elementwise(Operation *op, ArrayRef<Layout> in, Linearity linearity) {
    auto resultType = cast<NamedTensorType>(op->getResult(0).getType());
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
      keep = sameAxes && (numPartial == in.size() ||
                          (numPartial > 0 && resultType.getRank() == 0));
      break;
    case Linearity::Unary:
      keep = numPartial == 1;
      break;
    }
    // A kept partial axis may not also split a dimension of an operand.
    if (keep)
      for (const Layout &layout : in)
        for (const auto &entry : layout.split)
          if (llvm::is_contained(partialAxes, entry.second))
            keep = false;
    SmallVector<Layout> operands(in.begin(), in.end());
    if (!keep) {
      llvm::StringMap<std::string> wanted;
      for (const Layout &layout : in)
        for (const auto &entry : layout.split)
          wanted[entry.first()] = entry.second;
      for (auto [i, layout] : llvm::enumerate(operands))
        if (layout.isPartial())
          layout = resolvePartial(cast<NamedTensorType>(op->getOperand(i).getType()), layout,
                                  wanted);
      partialAxes.clear();
    }
    llvm::StringMap<std::string> split = unionSplits(operands, dims, partialAxes);
    Decision d;
    for (auto [i, layout] : llvm::enumerate(operands)) {
      Layout target = restrict(split, cast<NamedTensorType>(op->getOperand(i).getType()));
      if (keep)
        target.partial = partialAxes;
      d.operands.push_back(target);
    }
    Layout result = restrict(split, resultType);
    result.partial = partialAxes;
    d.results.push_back(result);
    return d;
  }

  /// Whole operands, whole results: the rule of ops without a sharded form.
  Decision replicatedRule(Operation *op) {
    Decision d;
    d.operands.resize(op->getNumOperands());
    d.results.resize(op->getNumResults());
    return d;
  }

  Decision contract(mt::ContractOp op, const Layout &lhsIn, const Layout &rhsIn) {
    auto lhsType = cast<NamedTensorType>(op.getLhs().getType());
    auto rhsType = cast<NamedTensorType>(op.getRhs().getType());
    auto resultType = cast<NamedTensorType>(op.getResult().getType());
    SmallVector<StringRef> over;
    for (Attribute a : op.getOver())
      over.push_back(cast<StringAttr>(a).getValue());
    Layout lhs = lhsIn, rhs = rhsIn;
    // At most one partial operand, and its axes split nothing of the other.
    auto clashes = [](const Layout &partial, const Layout &other) {
      for (const auto &entry : other.split)
        if (llvm::is_contained(partial.partial, entry.second))
          return true;
      return other.isPartial();
    };
    if (rhs.isPartial() && clashes(rhs, lhs))
      rhs = resolvePartial(rhsType, rhs, lhs.split);
    if (lhs.isPartial() && clashes(lhs, rhs))
      lhs = resolvePartial(lhsType, lhs, rhs.split);
    SmallVector<std::string, 1> partial = lhs.isPartial() ? lhs.partial : rhs.partial;

    // Every dimension of either operand: result dimensions, then contracted ones (whose
    // split becomes a partial sum of the result).
    SmallVector<StringRef> dims = dimNames(resultType);
    for (StringRef d : over)
      dims.push_back(d);
    llvm::StringMap<std::string> split;
    while (true) {
      split = unionSplits({lhs, rhs}, dims, partial);
      // A contracted split and a result split on the same axis clash (split and partial
      // in one tensor): gather the lower-priority one.
      std::optional<StringRef> loser;
      for (StringRef c : over) {
        auto it = split.find(c);
        if (it == split.end())
          continue;
        for (StringRef r : dimNames(resultType))
          if (auto jt = split.find(r); jt != split.end() && jt->second == it->second)
            loser = priority(c) < priority(r) ? c : r;
      }
      if (!loser)
        break;
      lhs.split.erase(*loser);
      rhs.split.erase(*loser);
    }
    Decision d;
    Layout lhsTarget = restrict(split, lhsType), rhsTarget = restrict(split, rhsType);
    if (lhs.isPartial())
      lhsTarget.partial = lhs.partial;
    if (rhs.isPartial())
      rhsTarget.partial = rhs.partial;
    d.operands = {lhsTarget, rhsTarget};
    Layout result = restrict(split, resultType);
    result.partial = partial;
    for (StringRef c : over)
      if (auto it = split.find(c); it != split.end())
        result.partial.push_back(it->second);
    d.results.push_back(result);
    return d;
  }

  /// reduce_sum / reduce_mean (linear: partial sums stay, a reduced split becomes one)
  /// and reduce_max (sums partial operands first; a reduced split leaves partial maxima,
  /// combined by a max all-reduce right after the op: vocabulary-parallel cross-entropy).
  Decision reduce(Operation *op, ArrayAttr overAttr, const Layout &in) {
    auto inType = cast<NamedTensorType>(op->getOperand(0).getType());
    auto resultType = cast<NamedTensorType>(op->getResult(0).getType());
    Layout operand = in;
    bool isMax = isa<mt::ReduceMaxOp>(op);
    if (isMax && operand.isPartial())
      operand = resolvePartial(inType, operand, {});
    Layout result;
    result.partial = operand.partial;
    for (Attribute a : overAttr) {
      StringRef dim = cast<StringAttr>(a).getValue();
      if (auto axis = operand.axisOf(dim))
        result.partial.push_back(axis->str());
    }
    for (const auto &entry : operand.split)
      if (resultType.hasDim(entry.first()))
        result.split[entry.first()] = entry.second;
    Decision d{{operand}, {result}};
    d.partialMaximum = isMax && result.isPartial();
    return d;
  }

  /// Ops that only rename or reorder dimensions or add new ones: the layout follows the
  /// names; partial sums stay (all are linear).
  Decision carry(Operation *op, const Layout &in, StringRef from = {}, StringRef to = {}) {
    Layout result;
    result.partial = in.partial;
    for (const auto &entry : in.split)
      result.split[entry.first() == from ? to : entry.first()] = entry.second;
    return Decision{{in}, {result}};
  }

  /// split `dim` into `into`: its split goes to the first (slowest) part when that part
  /// divides; merge: the split of the first merged dimension goes to the merged one when
  /// the others are whole. Otherwise the dimension is gathered first.
  Decision reshape(Operation *op, const Layout &in, ArrayRef<StringRef> from,
                   ArrayRef<StringRef> to) {
    auto resultType = cast<NamedTensorType>(op->getResult(0).getType());
    Layout operand = in, result;
    result.partial = in.partial;
    std::optional<StringRef> axis = operand.axisOf(from.front());
    bool innerSplit = llvm::any_of(from.drop_front(),
                                   [&](StringRef d) { return operand.axisOf(d).has_value(); });
    bool ok = axis && !innerSplit && divisible(resultType, to.front(), *axis);
    for (StringRef d : from)
      if (!ok)
        operand.split.erase(d);
    for (const auto &entry : operand.split)
      if (!llvm::is_contained(from, entry.first()))
        result.split[entry.first()] = entry.second;
    if (ok)
      result.split[to.front()] = axis->str();
    return Decision{{operand}, {result}};
  }

  /// gather: the table whole along the indexed dimension; the indices' splits and the
  /// table's other splits carry to the result.
  Decision gather(mt::GatherOp op, const Layout &table, const Layout &indices) {
    auto tableType = cast<NamedTensorType>(op.getTable().getType());
    auto resultType = cast<NamedTensorType>(op.getResult().getType());
    Layout t = table.isPartial() ? resolvePartial(tableType, table, {}) : table;
    // Vocabulary parallelism: a table split along the indexed dimension stays split; each
    // rank looks up the rows it holds (0 elsewhere) and the sum over the axis is the
    // lookup. The indices must not use the axis.
    std::optional<StringRef> rowsAxis = t.axisOf(op.getDim());
    if (rowsAxis && llvm::none_of(indices.split, [&](const auto &e) {
          return e.second == *rowsAxis;
        })) {
      Layout tableTarget = t;
      tableTarget.split.erase(op.getDim());
      llvm::StringMap<std::string> split =
          unionSplits({indices, tableTarget}, dimNames(resultType), {rowsAxis->str()});
      Decision d;
      d.operands = {restrict(split, tableType),
                    restrict(split, cast<NamedTensorType>(op.getIndices().getType()))};
      d.operands[0].split[op.getDim()] = rowsAxis->str();
      Layout result = restrict(split, resultType);
      result.partial.push_back(rowsAxis->str());
      d.results.push_back(result);
      d.localLayoutOperand = 0;
      return d;
    }
    t.split.erase(op.getDim());
    llvm::StringMap<std::string> split =
        unionSplits({indices, t}, dimNames(resultType), {});
    Decision d;
    d.operands = {restrict(split, tableType),
                  restrict(split, cast<NamedTensorType>(op.getIndices().getType()))};
    d.results.push_back(restrict(split, resultType));
    return d;
  }

  /// embedding_grad: a sum over the index positions, so splits of the positions become
  /// partial sums; the table's other dimensions keep the gradient's splits, the indexed
  /// one is whole.
  Decision embeddingGrad(mt::EmbeddingGradOp op, const Layout &grad) {
    auto indicesType = cast<NamedTensorType>(op.getIndices().getType());
    auto resultType = cast<NamedTensorType>(op.getResult().getType());
    // Vocabulary parallelism: when the layout splits the table's indexed dimension and the
    // gradient does not use that axis, each rank accumulates only the rows it holds.
    auto mapped = spec.dimAxis.find(op.getDim());
    if (mapped != spec.dimAxis.end() && divisible(resultType, op.getDim(), mapped->second) &&
        !llvm::is_contained(grad.partial, mapped->second) &&
        llvm::none_of(grad.split, [&](const auto &e) { return e.second == mapped->second; })) {
      Layout result;
      result.partial = grad.partial;
      for (const auto &entry : grad.split)
        if (!indicesType.hasDim(entry.first()) && resultType.hasDim(entry.first()))
          result.split[entry.first()] = entry.second;
      result.split[op.getDim()] = mapped->second;
      Decision d;
      // Positions are whole here (their splits would make the result partial over an
      // axis the table might also use): gather them.
      Layout g;
      g.partial = grad.partial;
      for (const auto &entry : grad.split)
        if (!indicesType.hasDim(entry.first()))
          g.split[entry.first()] = entry.second;
      d.operands = {Layout{}, g};
      d.results.push_back(result);
      d.localLayoutResult = true;
      return d;
    }
    Layout g = grad;
    Layout result;
    result.partial = g.partial;
    llvm::StringSet<> usedAxes;
    for (const std::string &a : g.partial)
      usedAxes.insert(a);
    // Position splits first (they become partial), then the table's dimensions.
    for (StringRef dim : dimNames(indicesType))
      if (auto axis = g.axisOf(dim)) {
        if (usedAxes.insert(*axis).second)
          result.partial.push_back(axis->str());
        else
          g.split.erase(dim);
      }
    for (StringRef dim : dimNames(resultType))
      if (auto axis = g.axisOf(dim); axis && !indicesType.hasDim(dim)) {
        if (usedAxes.count(*axis))
          g.split.erase(dim);
        else
          result.split[dim] = axis->str();
      }
    Decision d;
    d.operands = {restrict(g.split, indicesType), g};
    d.results.push_back(result);
    return d;
  }

  //===--------------------------------------------------------------------===//
  // Functions
  //===--------------------------------------------------------------------===//

  /// Partitions `func` for arguments laid out as `args`; results listed in `forced` are
  /// brought to those layouts. Returns the result layouts.
  FailureOr<SmallVector<ShardedTensorType>>
  partitionFunction(func::FuncOp func, ArrayRef<ShardedTensorType> args,
                    ArrayRef<std::optional<ShardedTensorType>> forced);

  /// What partitioning one function tracks: every value's layout, and the values already
  /// brought to another layout (several consumers share one collective).
  struct FunctionState {
    DenseMap<Value, ShardedTensorType> layouts;
    DenseMap<std::pair<Value, Type>, Value> resharded;
  };
  /// `operand` of `op` brought to `target` (inserted before `op`, or reused).
  Value reshardOperand(Operation *op, Value operand, ShardedTensorType target,
                       FunctionState &state);

  LogicalResult partitionOp(Operation *op, FunctionState &state);
  LogicalResult partitionRepeat(mt::RepeatOp op, FunctionState &state);

  /// The layout an entry function's argument or result must have.
  ShardedTensorType entryLayout(Type type, DictionaryAttr attrs, bool grad, bool optimizer);

  ModuleOp module;
  const sharding::ShardingSpec &spec;
  MLIRContext *ctx;
  /// Layer functions partitioned so far: their argument and result layouts.
  struct Done {
    SmallVector<ShardedTensorType> args, results;
  };
  llvm::StringMap<Done> partitioned;
  unsigned clones = 0;
};

ShardedTensorType Partitioner::entryLayout(Type type, DictionaryAttr attrs, bool grad,
                                           bool optimizer) {
  auto named = cast<NamedTensorType>(type);
  auto emitError = [&] { return module.emitError(); };
  // Every layout was checked before partitioning (run()). The optimizer step takes
  // gradients and states in their optimizer layout (sharded over dp with the distributed
  // optimizer), parameters whole over dp.
  bool state = attrs && attrs.get(transforms::kStateAttrName);
  bool param = attrs && attrs.get(transforms::kParamAttrName);
  if ((grad || state) && optimizer)
    return *sharding::optimizerLayout(spec, named, emitError);
  if (grad || state || param)
    return *sharding::parameterLayout(spec, named, emitError);
  return replicated(named);
}

Value Partitioner::reshardOperand(Operation *op, Value operand, ShardedTensorType target,
                                  FunctionState &state) {
  ShardedTensorType from = state.layouts.lookup(operand);
  if (from == target)
    return operand;
  Value &local = state.resharded[{operand, target}];
  if (!local) {
    OpBuilder b(op);
    local = reshard(b, op->getLoc(), operand, from, target);
    state.layouts[local] = target;
  }
  return local;
}

LogicalResult Partitioner::partitionOp(Operation *op, FunctionState &state) {
  DenseMap<Value, ShardedTensorType> &layouts = state.layouts;
  if (auto repeat = dyn_cast<mt::RepeatOp>(op))
    return partitionRepeat(repeat, state);
  SmallVector<Layout> in;
  for (Value v : op->getOperands())
    in.push_back(Layout::of(layouts.lookup(v)));
  Decision d;
  if (isa<mt::AddOp, mt::SubOp>(op))
    d = elementwise(op, in, Linearity::Sum);
  else if (isa<mt::NegOp>(op))
    d = elementwise(op, in, Linearity::Unary);
  else if (isa<mt::MulOp, mt::DivOp, mt::MaxOp, mt::PowOp, mt::GreaterOp, mt::ExpOp, mt::LogOp, mt::SqrtOp,
               mt::RsqrtOp, mt::TanhOp, mt::SigmoidOp, mt::CosOp, mt::ReluOp, mt::SiluOp,
               mt::GeluOp, mt::GeluGradOp, mt::CastOp, mt::DropoutOp>(op))
    d = elementwise(op, in, Linearity::None);
  else if (auto c = dyn_cast<mt::ContractOp>(op))
    d = contract(c, in[0], in[1]);
  else if (auto r = dyn_cast<mt::ReduceSumOp>(op))
    d = reduce(op, r.getOver(), in[0]);
  else if (auto r = dyn_cast<mt::ReduceMeanOp>(op))
    d = reduce(op, r.getOver(), in[0]);
  else if (auto r = dyn_cast<mt::ReduceMaxOp>(op))
    d = reduce(op, r.getOver(), in[0]);
  else if (isa<mt::TransposeOp, mt::BroadcastOp>(op))
    d = carry(op, in[0]);
  else if (auto r = dyn_cast<mt::RenameOp>(op))
    d = carry(op, in[0], r.getDim(), r.getTo());
  else if (auto s = dyn_cast<mt::SplitOp>(op)) {
    SmallVector<StringRef> into;
    for (Attribute a : s.getInto())
      into.push_back(cast<StringAttr>(a).getValue());
    d = reshape(op, in[0], {s.getDim()}, into);
  } else if (auto m = dyn_cast<mt::MergeOp>(op)) {
    SmallVector<StringRef> from;
    for (Attribute a : m.getDims())
      from.push_back(cast<StringAttr>(a).getValue());
    d = reshape(op, in[0], from, {m.getInto()});
  } else if (auto g = dyn_cast<mt::GatherOp>(op))
    d = gather(g, in[0], in[1]);
  else if (auto e = dyn_cast<mt::EmbeddingGradOp>(op))
    d = embeddingGrad(e, in[1]);
  else
    d = replicatedRule(op); // constants, iota and the ops without a sharded form

  OpBuilder b(op);
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    ShardedTensorType target =
        build(cast<NamedTensorType>(layouts.lookup(operand).getGlobal()), d.operands[i]);
    op->setOperand(i, reshardOperand(op, operand, target, state));
  }
  for (auto [i, result] : llvm::enumerate(op->getResults())) {
    ShardedTensorType layout = build(cast<NamedTensorType>(result.getType()), d.results[i]);
    if (failed(layout.verify([&] { return op->emitOpError(); }, layout.getGlobal(),
                             layout.getMesh(), layout.getSplit(), layout.getPartial())))
      return failure();
    result.setType(layout.getLocalType());
    layouts[result] = layout;
  }
  // Partial maxima are not a layout values may keep (partial means sums): combined here.
  if (d.partialMaximum) {
    Value local = op->getResult(0);
    ShardedTensorType partial = layouts.lookup(local);
    ShardedTensorType whole = partial.withPartial({});
    b.setInsertionPointAfter(op);
    Value viewed = mtp::FromLocalOp::create(b, op->getLoc(), partial, local);
    SmallVector<StringRef> axes = partial.getPartialAxes();
    Value combined = mtp::AllReduceOp::create(b, op->getLoc(), whole, viewed,
                                              b.getStrArrayAttr(axes), b.getStringAttr("max"));
    Value result = mtp::ToLocalOp::create(b, op->getLoc(), whole.getLocalType(), combined);
    local.replaceAllUsesExcept(result, viewed.getDefiningOp());
    layouts[result] = whole;
  }
  // reduce_mean over a split dimension: the local mean, scaled by local / global count,
  // is this rank's share of the global mean.
  if (auto mean = dyn_cast<mt::ReduceMeanOp>(op)) {
    int64_t parts = 1;
    for (Attribute a : mean.getOver())
      if (auto axis = d.operands[0].axisOf(cast<StringAttr>(a).getValue()))
        parts *= axisSize(*axis);
    if (parts > 1) {
      b.setInsertionPointAfter(op);
      auto type = cast<NamedTensorType>(mean.getResult().getType());
      Value scale = mt::ConstantOp::create(
          b, op->getLoc(), NamedTensorType::getScalar(type.getElementType()),
          b.getF64FloatAttr(1.0 / static_cast<double>(parts)));
      layouts[scale] = replicated(scale.getType());
      auto scaled = mt::MulOp::create(b, op->getLoc(), type, mean.getResult(), scale);
      mean.getResult().replaceAllUsesExcept(scaled.getResult(), scaled);
      layouts[scaled.getResult()] = layouts.lookup(mean.getResult());
    }
  }
  if (auto dropout = dyn_cast<mt::DropoutOp>(op)) {
    ShardedTensorType layout = layouts.lookup(dropout.getInput());
    if (!layout.getSplit().empty())
      op->setAttr(sharding::kLocalLayoutAttrName, TypeAttr::get(layout));
  }
  if (d.localLayoutOperand)
    op->setAttr(sharding::kLocalLayoutAttrName,
                TypeAttr::get(layouts.lookup(op->getOperand(*d.localLayoutOperand))));
  if (d.localLayoutResult)
    op->setAttr(sharding::kLocalLayoutAttrName,
                TypeAttr::get(layouts.lookup(op->getResult(0))));
  return success();
}

LogicalResult Partitioner::partitionRepeat(mt::RepeatOp op, FunctionState &state) {
  DenseMap<Value, ShardedTensorType> &layouts = state.layouts;
  auto callee = module.lookupSymbol<func::FuncOp>(op.getCallee());
  if (!callee)
    return op.emitOpError() << "calls unknown function @" << op.getCallee();
  unsigned carried = op.getNumCarried();
  StringRef stackDim = op.getStackDimName();
  // The callee's argument layouts: carried values as they are (summed), stacked ones
  // without their (whole) stacking dimension.
  SmallVector<ShardedTensorType> args;
  SmallVector<ShardedTensorType> operandTargets;
  for (auto [i, operand] : llvm::enumerate(op.getInputs())) {
    Layout layout = Layout::of(layouts.lookup(operand));
    auto global = cast<NamedTensorType>(layouts.lookup(operand).getGlobal());
    if (layout.isPartial())
      layout = resolvePartial(global, layout, {});
    if (i >= carried)
      layout.split.erase(stackDim);
    operandTargets.push_back(build(global, layout));
    args.push_back(build(cast<NamedTensorType>(callee.getArgumentTypes()[i]), layout));
  }
  auto key = [&](ArrayRef<ShardedTensorType> a) {
    std::string s;
    llvm::raw_string_ostream os(s);
    for (ShardedTensorType t : a)
      os << t << ";";
    return s;
  };
  // First pass on a copy: the layouts the layer gives its carried values. Consecutive
  // calls need no resharding when the carried arguments start out that way.
  if (!partitioned.count(callee.getSymName())) {
    func::FuncOp trial = callee.clone();
    module.push_back(trial);
    trial.setPrivate();
    trial.setSymName((callee.getSymName() + ".layout-trial").str());
    FailureOr<SmallVector<ShardedTensorType>> natural =
        partitionFunction(trial, args, SmallVector<std::optional<ShardedTensorType>>(
                                           callee.getNumResults()));
    trial.erase();
    if (failed(natural))
      return failure();
    for (unsigned i = 0; i < carried; ++i) {
      Layout layout = Layout::of((*natural)[i]);
      if (layout.isPartial())
        layout = resolvePartial(cast<NamedTensorType>((*natural)[i].getGlobal()), layout, {});
      args[i] = build(cast<NamedTensorType>(args[i].getGlobal()), layout);
      operandTargets[i] = build(cast<NamedTensorType>(operandTargets[i].getGlobal()), layout);
    }
  }
  auto it = partitioned.find(callee.getSymName());
  if (it != partitioned.end() && key(it->second.args) != key(args)) {
    // Called again with other layouts: partition a copy.
    func::FuncOp copy = callee.clone();
    copy.setSymName((callee.getSymName() + ".p" + Twine(++clones)).str());
    module.push_back(copy);
    op.setCallee(copy.getSymName());
    callee = copy;
    it = partitioned.end();
  }
  if (it == partitioned.end()) {
    SmallVector<std::optional<ShardedTensorType>> forced(callee.getNumResults());
    for (unsigned i = 0; i < carried; ++i)
      forced[i] = args[i];
    FailureOr<SmallVector<ShardedTensorType>> results = partitionFunction(callee, args, forced);
    if (failed(results))
      return failure();
    it = partitioned.insert({callee.getSymName(), Done{args, *results}}).first;
  }
  for (auto [i, operand] : llvm::enumerate(op.getInputs()))
    op->setOperand(i, reshardOperand(op, operand, operandTargets[i], state));
  for (auto [i, result] : llvm::enumerate(op.getResults())) {
    Layout layout = Layout::of(it->second.results[i]);
    ShardedTensorType type = build(cast<NamedTensorType>(result.getType()), layout);
    result.setType(type.getLocalType());
    layouts[result] = type;
  }
  return success();
}

FailureOr<SmallVector<ShardedTensorType>>
Partitioner::partitionFunction(func::FuncOp func, ArrayRef<ShardedTensorType> args,
                               ArrayRef<std::optional<ShardedTensorType>> forced) {
  if (!func.getBody().hasOneBlock())
    return func.emitOpError() << "has several blocks; the partitioner takes one";
  FunctionState state;
  DenseMap<Value, ShardedTensorType> &layouts = state.layouts;
  Block &body = func.getBody().front();
  for (auto [arg, layout] : llvm::zip(body.getArguments(), args)) {
    arg.setType(layout.getLocalType());
    layouts[arg] = layout;
  }
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : ops) {
    for (Value v : op->getOperands())
      if (!layouts.count(v))
        return op->emitOpError() << "uses a value the partitioner did not lay out";
    if (failed(partitionOp(op, state)))
      return failure();
  }
  Operation *ret = body.getTerminator();
  SmallVector<ShardedTensorType> results;
  OpBuilder b(ret);
  for (auto [i, operand] : llvm::enumerate(ret->getOperands())) {
    ShardedTensorType layout = layouts.lookup(operand);
    if (forced[i] && *forced[i] != layout) {
      Value local = reshard(b, ret->getLoc(), operand, layout, *forced[i]);
      ret->setOperand(i, local);
      layout = *forced[i];
    }
    results.push_back(layout);
  }
  SmallVector<Type> resultTypes;
  for (ShardedTensorType t : results)
    resultTypes.push_back(t.getLocalType());
  func.setFunctionType(FunctionType::get(ctx, body.getArgumentTypes(), resultTypes));
  return results;
}

LogicalResult Partitioner::run() {
  // Every parameter's layout must be possible (flags can ask for any degree).
  for (auto param : module.getOps<mt::ParamOp>())
    if (failed(sharding::optimizerLayout(spec, cast<NamedTensorType>(param.getType()), [&] {
          return param.emitError() << "parameter @" << param.getSymName()
                                   << " cannot be laid out on the mesh: ";
        })))
      return failure();
  for (StringRef name : {"forward", "forward_backward", "optimizer_step"}) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      continue;
    // Gradients: the optimizer step's arguments after (step, grad_scale), the results of
    // forward_backward after the loss, in `mt.grads` order (CallingConvention.cpp).
    auto grads = func->getAttrOfType<ArrayAttr>("mt.grads");
    size_t numGrads = grads ? grads.size() : 0;
    bool optimizer = name == "optimizer_step";
    SmallVector<ShardedTensorType> args;
    for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
      bool grad = optimizer && i >= 2 && i - 2 < numGrads;
      args.push_back(entryLayout(type, func.getArgAttrDict(i), grad, optimizer));
    }
    SmallVector<std::optional<ShardedTensorType>> forced;
    for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
      bool grad = name == "forward_backward" && i >= 1 && i - 1 < numGrads;
      forced.push_back(entryLayout(type, func.getResultAttrDict(i), grad, optimizer));
    }
    if (failed(partitionFunction(func, args, forced)))
      return failure();
  }
  module->setAttr(sharding::kMeshAttrName, spec.mesh);
  return success();
}

struct MTPPartitionPass : sharding::impl::MTPPartitionPassBase<MTPPartitionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<sharding::ShardingSpec> spec = sharding::getShardingSpec(module);
    if (failed(spec))
      return signalPassFailure();
    if (!spec->mesh)
      return; // nothing to partition
    if (!module->hasAttr(transforms::kOutlinedAttrName)) {
      module.emitError() << "mtp-partition needs an outlined module (run "
                            "-mt-outline-parameters first)";
      return signalPassFailure();
    }
    if (module->hasAttr(sharding::kMeshAttrName)) {
      module.emitError() << "module is already partitioned";
      return signalPassFailure();
    }
    if (failed(Partitioner(module, *spec).run()))
      signalPassFailure();
  }
};

} // namespace
