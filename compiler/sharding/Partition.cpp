//===- Partition.cpp - one rank's program with derived collectives --------===//
//
// The driver of the partition rules (PartitionOpInterface, attached in
// PartitionRules.cpp). Layouts propagate forward through each function in program order;
// the function is rewritten as it goes: each op's rule says which layouts it computes on
// given its operands' layouts, every op keeps its kind and gets the local types of those
// layouts, and wherever an operand's layout differs from the one its consumer needs, the
// collectives between the two are inserted (`reshard`). Layer functions are partitioned
// for the layouts their `mt.repeat` passes them.
//
//===----------------------------------------------------------------------===//

#include "compiler/optimizer/OptimizerUpdate.h"
#include "compiler/sharding/Layout.h"
#include "compiler/sharding/PartitionOpInterface.h"
#include "compiler/sharding/Passes.h"
#include "compiler/transforms/Passes.h"
#include "dialects/mt/IR/MTOps.h"
#include "dialects/mtp/IR/MTPOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"

namespace mtc::sharding {
#define GEN_PASS_DEF_MTPPARTITIONPASS
#include "compiler/sharding/Passes.h.inc"
} // namespace mtc::sharding

using namespace mlir;
using namespace mtc;
using mtc::sharding::Layout;
using mtc::sharding::ValueLayouts;
using mt::NamedTensorType;
using mtp::ShardedTensorType;

namespace {

class Partitioner {
public:
  Partitioner(ModuleOp module, const sharding::ShardingSpec &spec)
      : module(module), spec(spec), context(module.getContext(), spec) {}
  ~Partitioner() {
    for (auto &entry : pristine)
      entry.second->erase();
  }

  LogicalResult run();

private:
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
        v = mtp::AllReduceOp::create(b, loc, next, v, b.getStrArrayAttr({axis}));
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
    // The dimension whose split the target extends by `axis` next, if any (not the one
    // `axis` leaves: that one's split is no prefix of its target's): the axis moves there
    // by one all_to_all, instead of an all_gather of the dimension it leaves and an
    // all_slice of the other.
    auto moveTarget = [&](StringRef axis) -> std::optional<StringRef> {
      for (NamedAttribute entry : to.getSplit()) {
        StringRef name = entry.getName().getValue();
        SmallVector<StringRef> target = to.getSplitAxes(name);
        SmallVector<StringRef> have = cur.getSplitAxes(name);
        if (have.size() < target.size() && target[have.size()] == axis &&
            llvm::equal(have, ArrayRef(target).take_front(have.size())))
          return name;
      }
      return std::nullopt;
    };
    // Then gather (or move) what the target does not split that way, and slice what it
    // splits more.
    for (const mt::NamedDim &dim : cur.getGlobal().getDims()) {
      StringRef name = dim.name.getValue();
      SmallVector<StringRef> target = to.getSplitAxes(name);
      SmallVector<StringRef> have = cur.getSplitAxes(name);
      while (!have.empty() && (have.size() > target.size() ||
                               !llvm::equal(have, ArrayRef(target).take_front(have.size())))) {
        StringRef axis = have.pop_back_val();
        ShardedTensorType next = cur.withSplit(name, have);
        if (std::optional<StringRef> into = moveTarget(axis)) {
          SmallVector<StringRef> axes = cur.getSplitAxes(*into);
          axes.push_back(axis);
          next = next.withSplit(*into, axes);
          v = mtp::AllToAllOp::create(b, loc, next, v, axis, name, *into);
        } else {
          v = mtp::AllGatherOp::create(b, loc, next, v, axis, name);
        }
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
  // Functions
  //===--------------------------------------------------------------------===//

  /// Partitions `func` for arguments laid out as `args`; arguments listed in `sliced` are
  /// brought to those layouts at the entry, results listed in `forced` to theirs at the
  /// exit. Returns the result layouts.
  FailureOr<SmallVector<ShardedTensorType>>
  partitionFunction(func::FuncOp func, ArrayRef<ShardedTensorType> args,
                    ArrayRef<std::optional<ShardedTensorType>> forced,
                    ArrayRef<std::optional<ShardedTensorType>> sliced = {});

  /// What partitioning one function tracks: every value's layout, and the values already
  /// brought to another layout (several consumers share one collective).
  struct FunctionState {
    ValueLayouts layouts;
    DenseMap<std::pair<Value, Type>, Value> resharded;
  };
  /// `operand` of `op` brought to `target` (inserted before `op`, or reused).
  Value reshardOperand(Operation *op, Value operand, ShardedTensorType target,
                       FunctionState &state);

  LogicalResult partitionOp(Operation *op, FunctionState &state);
  LogicalResult partitionRepeat(mt::RepeatOp op, FunctionState &state);

  /// `layout` (of data) as it enters or leaves the step: under ZeRO-3 the micro-batch is the
  /// data-parallel group's, and each rank loads (or passes between its pipeline stages) its
  /// own part, the sequences it would train on with ZeRO-1.
  ShardedTensorType dataParallelPart(ShardedTensorType layout) const {
    auto global = cast<NamedTensorType>(layout.getGlobal());
    if (!spec.shardParameters || !global.hasDim(mt::MTDialect::kBatchDimName))
      return layout;
    return layout.withSplit(mt::MTDialect::kBatchDimName, {spec.dataParallelAxis});
  }
  /// The layout an entry function's argument or result must have.
  ShardedTensorType entryLayout(Type type, DictionaryAttr attrs, bool grad, bool optimizer);
  /// The layout the step computes a data argument (`layout`, whole) on: the data's splits
  /// (batch over ep, seq over cp) of the dimensions it has; null when it keeps `layout`.
  /// Fails where an axis does not divide its dimension (of the argument, or of the result
  /// `index` where `result` is set).
  FailureOr<std::optional<ShardedTensorType>> dataLayout(func::FuncOp func, unsigned index,
                                                         ShardedTensorType layout,
                                                         bool result = false);

  ModuleOp module;
  const sharding::ShardingSpec &spec;
  sharding::PartitionContext context;
  /// Layer functions partitioned so far: their argument and result layouts.
  struct Done {
    SmallVector<ShardedTensorType> args, results;
  };
  llvm::StringMap<Done> partitioned;
  /// The layouts of the caches prefill returns, which decode_step takes and returns.
  llvm::StringMap<ShardedTensorType> cacheLayouts;
  /// Every repeated function as it was before partitioning, for the copies a second
  /// layout needs (the pipeline chunks call the layers with other layouts than the step).
  llvm::StringMap<func::FuncOp> pristine;
  unsigned clones = 0;
};

/// Whether a pipeline chunk's argument or result with attributes `attrs` is saved between a
/// chunk's functions on one rank (residuals, the stash): unlike the activations sent to the
/// next stage, and the data every rank loads, it never needs to be whole, so it keeps the
/// data's splits (batch over ep): gathering it would move every saved activation (the
/// routing's indices among them) for nothing.
static bool isSavedOnRank(DictionaryAttr attrs) {
  auto kind = attrs ? attrs.getAs<StringAttr>(mt::MTDialect::kBufferAttrName) : StringAttr();
  return kind && (kind.getValue() == "residual" || kind.getValue() == "stash");
}

/// The cache (`keys` or `values`) an entry function's argument or result with attributes
/// `attrs` is, mt-kv-cache's; empty when none. A cache stays on its rank between calls, in
/// the layout prefill computes it in (under tp each rank keeps its heads' part): gathering
/// it whole would move every cached position for each new token.
static StringRef cacheBuffer(DictionaryAttr attrs) {
  auto kind = attrs ? attrs.getAs<StringAttr>(mt::MTDialect::kBufferAttrName) : StringAttr();
  if (kind && (kind.getValue() == "keys" || kind.getValue() == "values"))
    return kind.getValue();
  return {};
}

/// Whether an entry function's argument or result with attributes `attrs` is model state:
/// a parameter, an optimizer state or a gradient (a pipeline chunk's backward names its
/// gradients by result attribute, mt-pipeline-chunks). Everything else is data.
static bool isModelState(DictionaryAttr attrs) {
  return attrs && (attrs.get(transforms::kParamAttrName) ||
                   attrs.get(transforms::kStateAttrName) ||
                   attrs.get(mt::MTDialect::kGradAttrName));
}

ShardedTensorType Partitioner::entryLayout(Type type, DictionaryAttr attrs, bool grad,
                                           bool optimizer) {
  auto named = cast<NamedTensorType>(type);
  auto emitError = [&] { return module.emitError(); };
  // Every layout was checked before partitioning (run()). The optimizer step takes
  // gradients and states in their optimizer layout (sharded over dp with the distributed
  // optimizer), parameters in theirs (whole over dp but under ZeRO-3).
  bool state = attrs && attrs.get(transforms::kStateAttrName);
  if ((grad || state) && optimizer)
    return *sharding::optimizerLayout(spec, named, emitError);
  if (grad || isModelState(attrs))
    return *sharding::parameterLayout(spec, named, emitError);
  return context.replicated(named);
}

FailureOr<std::optional<ShardedTensorType>>
Partitioner::dataLayout(func::FuncOp func, unsigned index, ShardedTensorType layout,
                        bool result) {
  auto global = cast<NamedTensorType>(layout.getGlobal());
  Layout data;
  for (const auto &entry : spec.activationAxes) {
    if (!global.hasDim(entry.first()))
      continue;
    ArrayRef<std::string> axes = entry.second;
    if (!context.splittable(global, entry.first(), axes)) {
      bool twoChunk = llvm::any_of(axes, [&](StringRef a) { return spec.mesh.isTwoChunk(a); });
      int64_t pieces = 1;
      for (StringRef axis : axes)
        pieces *= spec.mesh.getPieces(axis);
      InFlightDiagnostic diag = func.emitError();
      if (twoChunk)
        diag << "2 x ";
      diag << llvm::join(axes, " x ") << (twoChunk || axes.size() > 1 ? " = " : " ") << pieces
           << " does not divide " << entry.first() << " = " << global.getDimSize(entry.first())
           << (result ? " of result #" : " of argument #") << index << " of @"
           << func.getSymName();
      if (entry.first() == mt::MTDialect::kBatchDimName)
        diag << (llvm::is_contained(axes, spec.dataParallelAxis)
                     ? " (the micro-batch, which ZeRO-3 splits over the data-parallel ranks)"
                     : " (the micro-batch)");
      if (twoChunk)
        diag << " (ring attention's load balancing cuts it in 2 chunks per "
             << llvm::join(axes, " x ") << " rank)";
      return diag;
    }
    data.split[entry.first()] = sharding::Axes(axes.begin(), axes.end());
  }
  if (data.split.empty())
    return std::optional<ShardedTensorType>();
  return std::optional<ShardedTensorType>(context.build(global, data));
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
    state.layouts.set(local, target);
  }
  return local;
}

LogicalResult Partitioner::partitionOp(Operation *op, FunctionState &state) {
  ValueLayouts &layouts = state.layouts;
  if (auto repeat = dyn_cast<mt::RepeatOp>(op))
    return partitionRepeat(repeat, state);
  auto partitionable = dyn_cast<sharding::PartitionOpInterface>(op);
  if (!partitionable)
    return op->emitOpError() << "has no partition rule (PartitionOpInterface): it cannot be "
                                "laid out on the mesh";
  SmallVector<Layout> in;
  for (Value v : op->getOperands())
    in.push_back(Layout::of(layouts.lookup(v)));
  FailureOr<sharding::PartitionRule> rule = partitionable.getPartitionRule(context, in);
  if (failed(rule))
    return failure();
  if (rule->operands.size() != op->getNumOperands() ||
      rule->results.size() != op->getNumResults())
    return op->emitOpError() << "partition rule gives " << rule->operands.size()
                             << " operand and " << rule->results.size()
                             << " result layouts for " << op->getNumOperands() << " and "
                             << op->getNumResults();

  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    ShardedTensorType target = context.build(
        cast<NamedTensorType>(layouts.lookup(operand).getGlobal()), rule->operands[i]);
    op->setOperand(i, reshardOperand(op, operand, target, state));
  }
  for (auto [i, result] : llvm::enumerate(op->getResults())) {
    ShardedTensorType layout =
        context.build(cast<NamedTensorType>(result.getType()), rule->results[i]);
    if (failed(layout.verify([&] { return op->emitOpError(); }, layout.getGlobal(),
                             layout.getMesh(), layout.getSplit(), layout.getPartial())))
      return failure();
    result.setType(layout.getLocalType());
    layouts.set(result, layout);
  }
  return partitionable.buildLocalOp(context, layouts);
}

LogicalResult Partitioner::partitionRepeat(mt::RepeatOp op, FunctionState &state) {
  ValueLayouts &layouts = state.layouts;
  auto callee = module.lookupSymbol<func::FuncOp>(op.getCallee());
  if (!callee)
    return op.emitOpError() << "calls unknown function @" << op.getCallee();
  // Its global argument types: a callee partitioned for another call has local ones.
  func::FuncOp unpartitioned = pristine.lookup(op.getCallee());
  if (!unpartitioned)
    unpartitioned = callee;
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
      layout = context.resolvePartial(global, layout, {});
    if (i >= carried && i < op.getInputs().size() - op.getNumInvariant())
      layout.split.erase(stackDim);
    operandTargets.push_back(context.build(global, layout));
    args.push_back(context.build(cast<NamedTensorType>(unpartitioned.getArgumentTypes()[i]), layout));
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
        layout = context.resolvePartial(cast<NamedTensorType>((*natural)[i].getGlobal()), layout, {});
      args[i] = context.build(cast<NamedTensorType>(args[i].getGlobal()), layout);
      operandTargets[i] = context.build(cast<NamedTensorType>(operandTargets[i].getGlobal()), layout);
    }
  }
  auto it = partitioned.find(callee.getSymName());
  if (it != partitioned.end() && key(it->second.args) != key(args)) {
    // Called again with other layouts: partition a copy of the unpartitioned function.
    func::FuncOp copy = pristine.lookup(op.getCallee()).clone();
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
    ShardedTensorType type = context.build(cast<NamedTensorType>(result.getType()), layout);
    result.setType(type.getLocalType());
    layouts.set(result, type);
  }
  return success();
}

FailureOr<SmallVector<ShardedTensorType>>
Partitioner::partitionFunction(func::FuncOp func, ArrayRef<ShardedTensorType> args,
                               ArrayRef<std::optional<ShardedTensorType>> forced,
                               ArrayRef<std::optional<ShardedTensorType>> sliced) {
  if (!func.getBody().hasOneBlock())
    return func.emitOpError() << "has several blocks; the partitioner takes one";
  FunctionState state;
  ValueLayouts &layouts = state.layouts;
  Block &body = func.getBody().front();
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  OpBuilder entry = OpBuilder::atBlockBegin(&body);
  for (auto [i, arg, layout] : llvm::enumerate(body.getArguments(), args)) {
    arg.setType(layout.getLocalType());
    layouts.set(arg, layout);
    if (i >= sliced.size() || !sliced[i] || *sliced[i] == layout)
      continue;
    // The argument arrives in its layout (data whole, an optimizer step's parameter in
    // the parameter's); each rank computes on its part from here on.
    SmallVector<OpOperand *> uses =
        llvm::map_to_vector(arg.getUses(), [](OpOperand &use) { return &use; });
    Value local = reshard(entry, arg.getLoc(), arg, layout, *sliced[i]);
    layouts.set(local, *sliced[i]);
    for (OpOperand *use : uses)
      use->set(local);
  }
  for (Operation *op : ops) {
    for (Value v : op->getOperands())
      if (!layouts.contains(v))
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
  func.setFunctionType(FunctionType::get(module.getContext(), body.getArgumentTypes(), resultTypes));
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
  module.walk([&](mt::RepeatOp repeat) {
    if (auto callee = module.lookupSymbol<func::FuncOp>(repeat.getCallee());
        callee && !pristine.count(callee.getSymName()))
      pristine[callee.getSymName()] = callee.clone();
  });
  // The entry functions (prefill before decode_step, which takes its caches), the pipeline
  // chunk functions (mt-pipeline-chunks), whose activations, residuals and stash cross
  // function boundaries replicated, and the optimizer steps (`mt.optimizer`:
  // @optimizer_step and the pipeline stages' functions).
  SmallVector<func::FuncOp> entries;
  for (StringRef name : {"forward", "forward_backward", "logits", "prefill", "decode_step"})
    if (auto func = module.lookupSymbol<func::FuncOp>(name))
      entries.push_back(func);
  for (auto func : module.getOps<func::FuncOp>())
    if (func->hasAttr(mt::MTDialect::kPipelineChunkAttrName) || func->hasAttr(optimizer::kOptimizerAttrName))
      entries.push_back(func);
  for (func::FuncOp func : entries) {
    // Gradients: an optimizer step's arguments marked `mt.grad`, the results of
    // forward_backward after the loss, in `mt.grads` order (CallingConvention.cpp).
    auto grads = func->getAttrOfType<ArrayAttr>(mt::MTDialect::kGradsAttrName);
    size_t numGrads = grads ? grads.size() : 0;
    bool optimizer = func->hasAttr(optimizer::kOptimizerAttrName);
    SmallVector<ShardedTensorType> args;
    SmallVector<std::optional<ShardedTensorType>> sliced;
    for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
      bool grad = optimizer && func.getArgAttr(i, mt::MTDialect::kGradAttrName);
      args.push_back(entryLayout(type, func.getArgAttrDict(i), grad, optimizer));
      // Data: whole on every rank, and no parameter, state or gradient.
      sliced.emplace_back();
      DictionaryAttr attrs = func.getArgAttrDict(i);
      if (optimizer && attrs && attrs.get(transforms::kParamAttrName)) {
        // A parameter arrives in its own layout (whole over dp but under ZeRO-3); the step
        // computes on it in the optimizer layout of its gradient and states, so each rank
        // decays and updates its shard only, and the new parameter is all-gathered at the
        // exit (its result's layout). Not where the step only returns it.
        ShardedTensorType computed = *sharding::optimizerLayout(
            spec, cast<NamedTensorType>(type), [&] { return module.emitError(); });
        if (computed != args.back() &&
            llvm::any_of(func.getArgument(i).getUsers(), [](Operation *user) {
              return !user->hasTrait<OpTrait::IsTerminator>();
            }))
          sliced.back() = computed;
        continue;
      }
      if (optimizer || isModelState(attrs))
        continue;
      if (StringRef cache = cacheBuffer(attrs); !cache.empty()) {
        auto it = cacheLayouts.find(cache);
        if (it == cacheLayouts.end())
          return func.emitError() << "takes the " << cache << " cache, which no prefill returns";
        args.back() = it->second;
        continue;
      }
      FailureOr<std::optional<ShardedTensorType>> data = dataLayout(func, i, args.back());
      if (failed(data))
        return failure();
      // What a chunk saves for its backward stays on the rank: it arrives split already.
      if (*data && isSavedOnRank(attrs)) {
        args.back() = **data;
        continue;
      }
      args.back() = dataParallelPart(args.back());
      if (*data && **data != args.back())
        sliced.back() = *data;
    }
    SmallVector<std::optional<ShardedTensorType>> forced;
    for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
      bool grad = func.getSymName() == "forward_backward" && i >= 1 && i - 1 < numGrads;
      forced.push_back(entryLayout(type, func.getResultAttrDict(i), grad, optimizer));
      if (optimizer || grad || isModelState(func.getResultAttrDict(i)))
        continue;
      if (StringRef cache = cacheBuffer(func.getResultAttrDict(i)); !cache.empty()) {
        forced.back() = std::nullopt;
        if (auto it = cacheLayouts.find(cache); it != cacheLayouts.end())
          forced.back() = it->second;
        continue;
      }
      if (isSavedOnRank(func.getResultAttrDict(i))) {
        FailureOr<std::optional<ShardedTensorType>> data =
            dataLayout(func, i, *forced.back(), /*result=*/true);
        if (failed(data))
          return failure();
        if (*data)
          forced.back() = **data;
        continue;
      }
      // A pipeline chunk's activations (and their gradients) travel between the stages of
      // one data-parallel rank: under ZeRO-3 they are its part of the micro-batch (what the
      // entry functions return, the loss and the logits, is whole).
      if (func->hasAttr(mt::MTDialect::kPipelineChunkAttrName))
        forced.back() = dataParallelPart(*forced.back());
    }
    FailureOr<SmallVector<ShardedTensorType>> results =
        partitionFunction(func, args, forced, sliced);
    if (failed(results))
      return failure();
    for (auto [i, layout] : llvm::enumerate(*results))
      if (StringRef cache = cacheBuffer(func.getResultAttrDict(i)); !cache.empty())
        cacheLayouts.try_emplace(cache, layout);
  }
  cast<mtp::MTPDialect>(spec.mesh.getDialect()).getMeshAttrHelper().setAttr(module, spec.mesh);
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
    if (module->hasAttr(mtp::MTPDialect::MeshAttrHelper::getNameStr())) {
      module.emitError() << "module is already partitioned";
      return signalPassFailure();
    }
    if (failed(Partitioner(module, *spec).run()))
      signalPassFailure();
  }
};

} // namespace
