//===- Autodiff.cpp - reverse-mode differentiation of the training step ---===//
//
// Layer by layer: the layer body is cloned into a scratch function, differentiated there
// with the ops' VJP rules, and the scratch function is then cut in two along the recompute
// policy: what the backward reads from the forward is either saved (a result of @L.fwd,
// an argument of @L.bwd) or recomputed (cloned into @L.bwd). The entry function is
// differentiated the same way, with each mt.repeat of a layer replaced by the repeat of its
// @L.fwd and differentiated by a reversed repeat of its @L.bwd.
//
//===----------------------------------------------------------------------===//

#include "compiler/autodiff/DifferentiableOpInterface.h"
#include "compiler/autodiff/Passes.h"
#include "dialects/mt/Utils/ParameterRead.h"
#include "dialects/mt/Utils/TensorBuilder.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/FusedAttention.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace mtc::autodiff {
#define GEN_PASS_DEF_MTAUTODIFFPASS
#include "compiler/autodiff/Passes.h.inc"
} // namespace mtc::autodiff

using namespace mlir;
using namespace mtc;
using namespace mtc::autodiff;
using mtc::mt::TensorBuilder;

namespace {

constexpr StringLiteral kParamGradsAttr = "mt.param_grads";

enum class Recompute { None, Selective, Full };

mt::NamedTensorType tensorType(Value value) { return cast<mt::NamedTensorType>(value.getType()); }

/// `type` with the stacking dimension in front.
mt::NamedTensorType stacked(Type type, int64_t count, MLIRContext *context) {
  auto tensor = cast<mt::NamedTensorType>(type);
  SmallVector<mt::NamedDim> dims = {{StringAttr::get(context, mt::MTDialect::kLayersDimName), count}};
  llvm::append_range(dims, tensor.getDims());
  return tensor.withDims(dims);
}

/// The gradient the backward starts from, d(loss)/d(loss): 1, or under `precision fp16` the
/// runtime's loss scale (`mt.loss_scale`), so that gradients too small for f16 survive the
/// backward; the optimizer step divides it out again (dynamic loss scaling).
Value seed(OpBuilder &builder, Location loc, Value loss, ModuleOp module) {
  mt::TrainAttr train = mt::TrainAttr::lookup(module);
  if (!train || train.getPrecisionOrDefault() != mt::Precision::FP16)
    return TensorBuilder(builder, loc).scalar(1.0, loss);
  Value scale = mt::LossScaleOp::create(builder, loc);
  if (scale.getType() == loss.getType())
    return scale;
  return mt::CastOp::create(builder, loc, loss.getType(), scale);
}

/// Sums the gradient contributions each value receives.
class GradientMap {
public:
  void add(TensorBuilder &t, Value value, Value grad) {
    if (!grad)
      return;
    Value &slot = grads[value];
    grad = t.transposeTo(grad, tensorType(value));
    slot = slot ? t.add(slot, grad) : grad;
  }
  Value lookup(Value value) const { return grads.lookup(value); }
  Value getOrZeros(TensorBuilder &t, Value value) const {
    if (Value grad = lookup(value))
      return grad;
    return t.zeros(tensorType(value));
  }

private:
  DenseMap<Value, Value> grads;
};

/// The parameter gradients a layer backward returns, and how the entry folds them.
struct LayerGradients {
  func::FuncOp forward;  // @L.fwd
  func::FuncOp backward; // @L.bwd
  unsigned numSaved = 0;
  /// Symbols of the parameter gradients @L.bwd returns after the input gradients.
  SmallVector<FlatSymbolRefAttr> params;
};

class AutodiffPass : public mtc::autodiff::impl::MTAutodiffPassBase<AutodiffPass> {
public:
  using MTAutodiffPassBase::MTAutodiffPassBase;

  void runOnOperation() override;

private:
  FailureOr<Recompute> parsePolicy();
  LogicalResult reverseSweep(ArrayRef<Operation *> ops, GradientMap &grads, OpBuilder &builder);
  LogicalResult repeatVJP(mt::RepeatOp repeat, GradientMap &grads, OpBuilder &builder);
  FailureOr<LayerGradients> differentiateLayer(func::FuncOp layer, Recompute policy);
  LogicalResult differentiateEntry(func::FuncOp entry);
  Operation *cloneForward(OpBuilder &builder, Operation &op, IRMapping &mapping);

  SymbolTable *symbols = nullptr;
  /// Whether the forward's attention saves its softmax statistics for the backward
  /// (cloneForward): under ring attention (cp_comm_type p2p) and fused attention
  /// (`mt.fused_attention`, FlashAttention's backward reads the log-sum-exp).
  bool saveAttentionStatistics = false;
  llvm::StringMap<LayerGradients> layers;
  /// How many trailing arguments each layer's mt.repeat passes unchanged to every call
  /// (position ids): no gradient, and the backward receives them the same way.
  llvm::StringMap<unsigned> invariants;
  /// Gradients of parameters read directly (model parameters, outside repeats).
  llvm::MapVector<StringRef, Value> paramGrads;
};

} // namespace

/// Clones forward op `op` for differentiation. Under ring attention an `mt.attention`
/// saves its log-sum-exp (save_lse), which its VJP hands to `mt.attention_grad`: the
/// backward's ring then exchanges only the blocks the gradients need, rather than running
/// the forward's ring again for the softmax statistics. Fused attention saves it too: its
/// backward recomputes the probabilities block by block as exp(scores - lse).
Operation *AutodiffPass::cloneForward(OpBuilder &builder, Operation &op, IRMapping &mapping) {
  auto attention = dyn_cast<mt::AttentionOp>(op);
  if (!saveAttentionStatistics || !attention || attention.getSaveLse())
    return builder.clone(op, mapping);
  auto saving = mt::AttentionOp::create(
      builder, attention.getLoc(), mapping.lookup(attention.getQuery()),
      mapping.lookup(attention.getKey()), mapping.lookup(attention.getValue()),
      attention.getPositions() ? mapping.lookupOrDefault(attention.getPositions()) : Value(),
      attention.getSeqDimAttr(), attention.getHeadsDimAttr(), attention.getKvHeadsDimAttr(),
      attention.getHeadDimAttr(), attention.getCausalAttr(), attention.getScaleAttr(),
      builder.getUnitAttr());
  mapping.map(attention.getResult(), saving.getResult());
  return saving;
}

FailureOr<Recompute> AutodiffPass::parsePolicy() {
  if (recompute == "none")
    return Recompute::None;
  if (recompute == "selective")
    return Recompute::Selective;
  if (recompute == "full")
    return Recompute::Full;
  getOperation().emitError() << "unknown recompute policy '" << recompute
                             << "'; expected none, selective or full";
  return failure();
}

/// Walks `ops` (forward ops in program order) backwards and accumulates the gradient of
/// every operand that has one. Parameter reads keep theirs in `grads` under their result.
LogicalResult AutodiffPass::reverseSweep(ArrayRef<Operation *> ops, GradientMap &grads,
                                         OpBuilder &builder) {
  for (Operation *op : llvm::reverse(ops)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value result : op->getResults()) {
      resultGrads.push_back(grads.lookup(result));
      any |= static_cast<bool>(resultGrads.back());
    }
    if (!any || isa<mt::ParamRefOp>(op) || op->hasTrait<mt::OpTrait::CallConstant>())
      continue;
    if (auto repeat = dyn_cast<mt::RepeatOp>(op)) {
      if (failed(repeatVJP(repeat, grads, builder)))
        return failure();
      continue;
    }
    auto differentiable = dyn_cast<DifferentiableOpInterface>(op);
    if (!differentiable)
      return op->emitOpError("has no gradient rule (DifferentiableOpInterface)");
    SmallVector<Value> operandGrads;
    if (failed(differentiable.buildVJP(builder, resultGrads, operandGrads)))
      return failure();
    if (operandGrads.size() != op->getNumOperands())
      return op->emitOpError("gradient rule returned ")
             << operandGrads.size() << " operand gradients for " << op->getNumOperands()
             << " operands";
    TensorBuilder t(builder, op->getLoc());
    for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads))
      grads.add(t, operand, grad);
  }
  return success();
}

/// The gradient of `mt.repeat @L.fwd`: `mt.repeat @L.bwd` over the same instances in
/// reverse, carrying the input gradients and stacking the parameter gradients.
LogicalResult AutodiffPass::repeatVJP(mt::RepeatOp repeat, GradientMap &grads,
                                      OpBuilder &builder) {
  auto it = llvm::find_if(layers, [&](auto &entry) {
    func::FuncOp forward = entry.second.forward;
    return forward.getSymName() == repeat.getCallee();
  });
  if (it == layers.end())
    return repeat.emitOpError("repeats '") << repeat.getCallee()
                                           << "', which has no backward";
  LayerGradients &layer = it->second;
  TensorBuilder t(builder, repeat.getLoc());
  unsigned carried = repeat.getNumCarried();
  SmallVector<Value> operands;
  for (Value result : repeat.getResults().take_front(carried))
    operands.push_back(grads.getOrZeros(t, result));
  llvm::append_range(operands, repeat.getResults().drop_front(carried));
  llvm::append_range(operands, repeat.getInvariantInputs());

  SmallVector<Type> resultTypes;
  for (Value input : repeat.getInputs().take_front(carried))
    resultTypes.push_back(input.getType());
  FunctionType backwardType = layer.backward.getFunctionType();
  for (Type type : backwardType.getResults().drop_front(carried))
    resultTypes.push_back(stacked(type, repeat.getCount(), builder.getContext()));
  auto backward = mt::RepeatOp::create(
      builder, repeat.getLoc(), resultTypes, FlatSymbolRefAttr::get(layer.backward),
      operands, repeat.getCountAttr(), builder.getI64IntegerAttr(carried),
      StringAttr(), builder.getUnitAttr(), repeat.getInvariantAttr());

  for (auto [input, grad] : llvm::zip(repeat.getInputs().take_front(carried),
                                      backward.getResults().take_front(carried)))
    grads.add(t, input, grad);
  for (auto [symbol, grad] :
       llvm::zip(layer.params, backward.getResults().drop_front(carried))) {
    auto param = symbols->lookup<mt::ParamOp>(symbol.getValue());
    // A model parameter read inside the layer accumulates over the instances.
    Value folded = param.getLayer() ? grad : t.reduceSum(grad, {mt::MTDialect::kLayersDimName});
    Value &slot = paramGrads[param.getSymName()];
    slot = slot ? t.add(slot, folded) : folded;
  }
  return success();
}

FailureOr<LayerGradients> AutodiffPass::differentiateLayer(func::FuncOp layer,
                                                           Recompute policy) {
  MLIRContext *context = &getContext();
  OpBuilder builder(context);
  builder.setInsertionPointAfter(layer);
  FunctionType type = layer.getFunctionType();
  Location loc = layer.getLoc();
  // The trailing invariant arguments (integer ids) take no gradient; the backward
  // receives them as the forward does rather than saving them per instance.
  unsigned invariant = invariants.lookup(layer.getSymName());
  unsigned differentiable = type.getNumInputs() - invariant;

  // 1. Scratch function: the layer body followed by its reverse sweep.
  SmallVector<Type> scratchInputs(type.getInputs());
  llvm::append_range(scratchInputs, type.getResults());
  auto scratch = func::FuncOp::create(builder, loc, (layer.getSymName() + ".scratch").str(),
                                      builder.getFunctionType(scratchInputs, {}));
  Block *body = scratch.addEntryBlock();
  builder.setInsertionPointToStart(body);
  IRMapping mapping;
  for (auto [from, to] : llvm::zip(layer.getArguments(), body->getArguments()))
    mapping.map(from, to);
  SmallVector<Operation *> forwardOps;
  func::ReturnOp layerReturn;
  for (Operation &op : layer.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      layerReturn = ret;
      continue;
    }
    if (isa<mt::RepeatOp>(op))
      return op.emitOpError("layers cannot apply other layers"), failure();
    forwardOps.push_back(cloneForward(builder, op, mapping));
  }
  GradientMap grads;
  {
    TensorBuilder t(builder, loc);
    for (auto [result, grad] :
         llvm::zip(layerReturn.getOperands(), body->getArguments().drop_front(type.getNumInputs())))
      grads.add(t, mapping.lookup(result), grad);
  }
  if (failed(reverseSweep(forwardOps, grads, builder)))
    return failure();

  LayerGradients result;
  SmallVector<Value> returned;
  TensorBuilder t(builder, loc);
  for (BlockArgument arg : body->getArguments().take_front(differentiable))
    returned.push_back(grads.getOrZeros(t, arg));
  llvm::SetVector<StringRef> readParams;
  for (Operation *op : forwardOps)
    if (auto ref = dyn_cast<mt::ParamRefOp>(op))
      readParams.insert(ref.getParam());
  for (StringRef symbol : readParams) {
    Value grad;
    for (Operation *op : forwardOps)
      if (auto ref = dyn_cast<mt::ParamRefOp>(op); ref && ref.getParam() == symbol)
        if (Value g = grads.lookup(ref.getResult()))
          grad = grad ? t.add(grad, g) : g;
    auto param = symbols->lookup<mt::ParamOp>(symbol);
    returned.push_back(grad ? grad : t.zeros(param.getTensorType()));
    result.params.push_back(FlatSymbolRefAttr::get(context, symbol));
  }
  auto scratchReturn = func::ReturnOp::create(builder, loc, returned);

  // 2. Cut: forward ops the backward reads are saved, unless the policy recomputes them.
  llvm::DenseSet<Operation *> forwardSet(forwardOps.begin(), forwardOps.end());
  auto recomputed = [&](Operation *op) {
    if (isa<mt::ParamRefOp>(op) || op->hasTrait<mt::OpTrait::CallConstant>())
      return true;
    // Mixed precision's read of a parameter (the cast of its f32 master weight) is redone
    // in the backward like the read itself: saving it would keep a bf16 copy of the layer's
    // weights per instance and per micro-batch in flight.
    if (mt::getCastParameter(op))
      return true;
    return policy == Recompute::Full ||
           (policy == Recompute::Selective && isa<mt::AttentionOp>(op));
  };
  llvm::SetVector<Value> saved;
  llvm::DenseSet<Operation *> recomputeSet;
  SmallVector<Value> worklist;
  for (Operation &op : *body)
    if (!forwardSet.contains(&op))
      llvm::append_range(worklist, op.getOperands());
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    Operation *def = value.getDefiningOp();
    bool isForwardValue = def ? forwardSet.contains(def)
                              : cast<BlockArgument>(value).getArgNumber() < differentiable;
    if (!isForwardValue)
      continue;
    if (def && recomputed(def)) {
      if (recomputeSet.insert(def).second)
        llvm::append_range(worklist, def->getOperands());
      continue;
    }
    saved.insert(value);
  }

  // 3. @L.fwd: the layer plus the saved values as extra results.
  builder.setInsertionPointAfter(layer);
  SmallVector<Type> forwardResults(type.getResults());
  for (Value value : saved)
    forwardResults.push_back(value.getType());
  auto forward = func::FuncOp::create(builder, loc, (layer.getSymName() + ".fwd").str(),
                                      builder.getFunctionType(type.getInputs(), forwardResults));
  forward->setAttr(mt::MTDialect::kLayerOfAttrName, FlatSymbolRefAttr::get(layer));
  {
    OpBuilder::InsertionGuard guard(builder);
    Block *forwardBody = forward.addEntryBlock();
    builder.setInsertionPointToStart(forwardBody);
    IRMapping toForward;
    for (auto [from, to] : llvm::zip(body->getArguments().take_front(type.getNumInputs()),
                                     forwardBody->getArguments()))
      toForward.map(from, to);
    for (Operation *op : forwardOps)
      builder.clone(*op, toForward);
    SmallVector<Value> results;
    for (Value value : layerReturn.getOperands())
      results.push_back(toForward.lookup(mapping.lookup(value)));
    for (Value value : saved)
      results.push_back(toForward.lookup(value));
    func::ReturnOp::create(builder, loc, results);
  }

  // 4. @L.bwd: result gradients and saved values in, recomputation and the sweep inside.
  SmallVector<Type> backwardInputs(type.getResults());
  for (Value value : saved)
    backwardInputs.push_back(value.getType());
  llvm::append_range(backwardInputs, type.getInputs().drop_front(differentiable));
  builder.setInsertionPointAfter(forward);
  auto backward = func::FuncOp::create(
      builder, loc, (layer.getSymName() + ".bwd").str(),
      builder.getFunctionType(backwardInputs, scratchReturn.getOperandTypes()));
  backward->setAttr(mt::MTDialect::kLayerOfAttrName, FlatSymbolRefAttr::get(layer));
  SmallVector<Attribute> paramAttrs(result.params.begin(), result.params.end());
  backward->setAttr(kParamGradsAttr, builder.getArrayAttr(paramAttrs));
  {
    OpBuilder::InsertionGuard guard(builder);
    Block *backwardBody = backward.addEntryBlock();
    builder.setInsertionPointToStart(backwardBody);
    IRMapping toBackward;
    for (auto [from, to] : llvm::zip(body->getArguments().drop_front(type.getNumInputs()),
                                     backwardBody->getArguments()))
      toBackward.map(from, to);
    for (auto [value, arg] : llvm::zip(saved, backwardBody->getArguments().drop_front(
                                                  type.getNumResults())))
      toBackward.map(value, arg);
    for (auto [from, to] : llvm::zip_equal(
             body->getArguments().slice(differentiable, invariant),
             backwardBody->getArguments().take_back(invariant)))
      toBackward.map(from, to);
    for (Operation &op : *body)
      if (!forwardSet.contains(&op) || recomputeSet.contains(&op))
        builder.clone(op, toBackward);
  }
  scratch.erase();

  result.forward = forward;
  result.backward = backward;
  result.numSaved = saved.size();
  return result;
}

LogicalResult AutodiffPass::differentiateEntry(func::FuncOp entry) {
  MLIRContext *context = &getContext();
  OpBuilder builder(context);
  builder.setInsertionPointAfter(entry);
  Location loc = entry.getLoc();
  FunctionType type = entry.getFunctionType();
  if (type.getNumResults() != 1 || tensorType(entry.getBody().front().getTerminator()->getOperand(0)).getRank() != 0)
    return entry.emitOpError("must return one scalar, the loss");

  SmallVector<Type> results = {type.getResult(0)};
  SmallVector<Attribute> gradSymbols;
  for (auto param : getOperation().getOps<mt::ParamOp>()) {
    Type gradType = param.getType();
    if (std::optional<StringRef> layer = param.getLayer()) {
      int64_t count = 0;
      getOperation().walk([&](mt::RepeatOp repeat) {
        if (repeat.getCallee() == *layer)
          count += repeat.getCount();
      });
      gradType = stacked(gradType, count, context);
    }
    results.push_back(gradType);
    gradSymbols.push_back(FlatSymbolRefAttr::get(param.getSymNameAttr()));
  }
  auto step = func::FuncOp::create(builder, loc, "forward_backward",
                                   builder.getFunctionType(type.getInputs(), results));
  step->setAttr(mt::MTDialect::kGradsAttrName, builder.getArrayAttr(gradSymbols));
  // The data arguments keep their names (mt.input: the position ids of mt-reset-documents).
  if (ArrayAttr argAttrs = entry.getArgAttrsAttr())
    step.setArgAttrsAttr(argAttrs);
  Block *body = step.addEntryBlock();
  builder.setInsertionPointToStart(body);

  IRMapping mapping;
  for (auto [from, to] : llvm::zip(entry.getArguments(), body->getArguments()))
    mapping.map(from, to);
  SmallVector<Operation *> forwardOps;
  Value loss;
  for (Operation &op : entry.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      loss = mapping.lookup(ret.getOperand(0));
      continue;
    }
    auto repeat = dyn_cast<mt::RepeatOp>(op);
    if (!repeat) {
      forwardOps.push_back(cloneForward(builder, op, mapping));
      continue;
    }
    // The layer stack runs its @L.fwd, stacking every instance's saved values.
    auto it = layers.find(repeat.getCallee());
    if (it == layers.end())
      return repeat.emitOpError("repeats '") << repeat.getCallee() << "', which is not a layer";
    LayerGradients &layer = it->second;
    SmallVector<Type> forwardTypes(repeat.getResultTypes());
    for (Type savedType : layer.forward.getFunctionType().getResults().drop_front(
             repeat.getNumResults()))
      forwardTypes.push_back(stacked(savedType, repeat.getCount(), context));
    SmallVector<Value> inputs;
    for (Value input : repeat.getInputs())
      inputs.push_back(mapping.lookup(input));
    auto forward = mt::RepeatOp::create(
        builder, repeat.getLoc(), forwardTypes, FlatSymbolRefAttr::get(layer.forward), inputs,
        repeat.getCountAttr(), builder.getI64IntegerAttr(repeat.getNumCarried()),
        StringAttr(), UnitAttr(), repeat.getInvariantAttr());
    for (auto [from, to] : llvm::zip(repeat.getResults(), forward.getResults()))
      mapping.map(from, to);
    forwardOps.push_back(forward);
  }

  GradientMap grads;
  TensorBuilder t(builder, loc);
  grads.add(t, loss, seed(builder, loc, loss, getOperation()));
  paramGrads.clear();
  if (failed(reverseSweep(forwardOps, grads, builder)))
    return failure();

  // Direct parameter reads in the entry.
  for (Operation *op : forwardOps)
    if (auto ref = dyn_cast<mt::ParamRefOp>(op))
      if (Value grad = grads.lookup(ref.getResult())) {
        Value &slot = paramGrads[ref.getParam()];
        slot = slot ? t.add(slot, grad) : grad;
      }
  SmallVector<Value> returned = {loss};
  for (auto [symbol, gradType] : llvm::zip(gradSymbols, llvm::drop_begin(results))) {
    Value grad = paramGrads.lookup(cast<FlatSymbolRefAttr>(symbol).getValue());
    returned.push_back(grad ? t.transposeTo(grad, cast<mt::NamedTensorType>(gradType))
                            : t.zeros(cast<mt::NamedTensorType>(gradType)));
  }
  func::ReturnOp::create(builder, loc, returned);
  return success();
}

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<Recompute> policy = parsePolicy();
  if (failed(policy))
    return signalPassFailure();
  SymbolTable symbolTable(module);
  symbols = &symbolTable;
  mt::ParallelAttr parallel = mt::ParallelAttr::lookup(module);
  saveAttentionStatistics = (parallel && parallel.usesRingAttention()) ||
                            mt::getFusedAttentionBlock(module).has_value();

  auto entry = module.lookupSymbol<func::FuncOp>("forward");
  if (!entry) {
    module.emitError("autodiff needs the entry function 'forward'");
    return signalPassFailure();
  }
  if (module.lookupSymbol("forward_backward")) {
    module.emitError("module is already differentiated (it has 'forward_backward')");
    return signalPassFailure();
  }
  for (auto param : module.getOps<mt::ParamOp>())
    if (param.getTensorType().hasDim(mt::MTDialect::kLayersDimName)) {
      param.emitOpError("has a dimension named '")
          << mt::MTDialect::kLayersDimName << "', which autodiff reserves for the layer stack";
      return signalPassFailure();
    }

  llvm::StringMap<unsigned> applications;
  module.walk([&](mt::RepeatOp repeat) {
    ++applications[repeat.getCallee()];
    invariants[repeat.getCallee()] = repeat.getNumInvariant();
  });
  for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
    if (!func->hasAttr(mt::MTDialect::kLayerAttrName))
      continue;
    if (applications.lookup(func.getSymName()) > 1) {
      func.emitOpError("is applied by more than one mt.repeat; each layer owns its "
                       "parameter instances through one");
      return signalPassFailure();
    }
    FailureOr<LayerGradients> gradients = differentiateLayer(func, *policy);
    if (failed(gradients))
      return signalPassFailure();
    layers[func.getSymName()] = *gradients;
  }
  if (failed(differentiateEntry(entry)))
    return signalPassFailure();
}
