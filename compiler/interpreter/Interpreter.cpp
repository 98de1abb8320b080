//===- Interpreter.cpp - float64 reference interpreter of mt --------------===//
//
// Runs a function op by op over a map from SSA values to host tensors. The stateless ops
// are in the other files of this folder (see OpEval.h); this one holds what needs the
// interpreter's state: parameters and their layer instances, dropout, mt.repeat and calls.
//
//===----------------------------------------------------------------------===//

#include "compiler/interpreter/Interpreter.h"
#include "compiler/interpreter/OpEval.h"
#include "runtime/support/Philox.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <utility>

using namespace mlir;
using namespace mtc;
using namespace mtc::interp;
using namespace mtc::interp::eval;

/// Calls nest no deeper than this (mt.repeat and func.call), so that a recursive program
/// is an error rather than a stack overflow.
static constexpr unsigned kMaxCallDepth = 64;

/// The name of the dimension that stacks the instances of a layer parameter.

static llvm::Error makeError(const Twine &message) {
  return llvm::createStringError(message.str());
}

/// "a tensor of <type> with <n> elements", for messages about a caller's tensor.
static std::string describe(const Tensor &tensor) {
  std::string type = "no type";
  if (tensor.type)
    type = llvm::formatv("{0}", tensor.type).str();
  return llvm::formatv("a tensor of {0} with {1} elements", type, tensor.getNumElements());
}

Interpreter::Interpreter(ModuleOp module) : module(module), symbols(module) {
  module.walk([&](mt::RepeatOp repeat) {
    auto callee = symbols.lookup<func::FuncOp>(repeat.getCallee());
    if (std::optional<StringRef> layer = callee ? mt::MTDialect::getLayerOf(callee) : std::nullopt)
      layerInstances[*layer] =
          std::max(layerInstances.lookup(*layer), static_cast<int64_t>(repeat.getCount()));
  });
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

int64_t Interpreter::getLayerInstances(StringRef layer) const {
  return layerInstances.lookup(layer);
}

Expected<mt::NamedTensorType> Interpreter::getParamValueType(StringRef name) const {
  Operation *symbol = symbols.lookup(name);
  if (auto state = dyn_cast_or_null<mt::StateOp>(symbol))
    return cast<mt::NamedTensorType>(state.getType());
  auto param = dyn_cast_or_null<mt::ParamOp>(symbol);
  if (!param)
    return makeError(llvm::formatv("no parameter or state '@{0}' in the module", name));
  mt::NamedTensorType type = param.getTensorType();
  std::optional<StringRef> layer = param.getLayer();
  if (!layer)
    return type;
  int64_t instances = getLayerInstances(*layer);
  if (instances == 0)
    return makeError(llvm::formatv("parameter '@{0}' belongs to layer '@{1}', which no "
                                   "mt.repeat calls, so it has no instances",
                                   name, *layer));
  if (type.hasDim(mt::MTDialect::kLayersDimName))
    return makeError(llvm::formatv("layer parameter '@{0}' {1} already has a dimension "
                                   "'{2}', which its instances need",
                                   name, type.dimsToString(), mt::MTDialect::kLayersDimName));
  SmallVector<mt::NamedDim> dims = {{StringAttr::get(type.getContext(), mt::MTDialect::kLayersDimName), instances}};
  dims.append(type.getDims());
  return type.withDims(dims);
}

llvm::Error Interpreter::setParam(StringRef name, Tensor value) {
  Expected<mt::NamedTensorType> type = getParamValueType(name);
  if (!type)
    return type.takeError();
  if (value.type != *type || value.getNumElements() != type->getNumElements())
    return makeError(llvm::formatv("value of parameter '@{0}' must be a tensor of {1} with "
                                   "{2} elements, got {3}",
                                   name, *type, type->getNumElements(), describe(value)));
  params[name] = std::move(value);
  return llvm::Error::success();
}

const Tensor *Interpreter::getParam(StringRef name) const {
  auto it = params.find(name);
  return it == params.end() ? nullptr : &it->second;
}

void Interpreter::setDropoutMode(DropoutMode mode, DropoutKeepFn keep) {
  dropoutMode = mode;
  dropoutKeep = std::move(keep);
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

Expected<std::vector<Tensor>> Interpreter::call(StringRef name, ArrayRef<Tensor> args) {
  auto func = symbols.lookup<func::FuncOp>(name);
  if (!func)
    return makeError(llvm::formatv("no function '@{0}' in the module", name));
  return run(func, args);
}

Expected<std::vector<Tensor>> Interpreter::callLayer(StringRef name, int64_t instance,
                                                     ArrayRef<Tensor> args) {
  auto func = symbols.lookup<func::FuncOp>(name);
  if (!func)
    return makeError(llvm::formatv("no function '@{0}' in the module", name));
  std::optional<StringRef> layer = mt::MTDialect::getLayerOf(func);
  if (!layer)
    return makeError(llvm::formatv("function '@{0}' is not a layer (marked '{1}' or '{2}')", name,
                                   mt::MTDialect::kLayerAttrName, mt::MTDialect::kLayerOfAttrName));
  int64_t instances = getLayerInstances(*layer);
  if (instance < 0 || instance >= instances)
    return makeError(llvm::formatv("instance {0} of layer '@{1}' is out of range [0, {2})",
                                   instance, *layer, instances));
  return callWithInstance(func, instance, args);
}

Expected<std::vector<Tensor>> Interpreter::callWithInstance(func::FuncOp func, int64_t instance,
                                                            ArrayRef<Tensor> args) {
  std::optional<StringRef> layer = mt::MTDialect::getLayerOf(func);
  if (!layer)
    return run(func, args);
  std::optional<int64_t> outer;
  if (auto it = currentInstance.find(*layer); it != currentInstance.end())
    outer = it->second;
  currentInstance[*layer] = instance;
  Expected<std::vector<Tensor>> results = run(func, args);
  if (outer)
    currentInstance[*layer] = *outer;
  else
    currentInstance.erase(*layer);
  return results;
}

Expected<std::vector<Tensor>> Interpreter::run(func::FuncOp func, ArrayRef<Tensor> args) {
  StringRef name = func.getSymName();
  if (func.isExternal() || !func.getBody().hasOneBlock())
    return makeError(llvm::formatv("function '@{0}' has no body of one block to run", name));
  ArrayRef<Type> argTypes = func.getArgumentTypes();
  if (args.size() != argTypes.size())
    return makeError(llvm::formatv("function '@{0}' takes {1} arguments, got {2}", name,
                                   argTypes.size(), args.size()));
  for (auto [index, arg, type] : llvm::enumerate(args, argTypes))
    if (arg.type != type || arg.getNumElements() != arg.type.getNumElements())
      return makeError(llvm::formatv("argument #{0} of '@{1}' must be a tensor of {2}, got {3}",
                                     index, name, type, describe(arg)));
  if (callDepth >= kMaxCallDepth)
    return makeError(llvm::formatv("calls nested deeper than {0} at '@{1}'", kMaxCallDepth, name));
  ++callDepth;
  llvm::scope_exit leave([&] { --callDepth; });

  ValueMap values;
  for (auto [arg, value] : llvm::zip_equal(func.getArguments(), args))
    values[arg] = value;
  for (Operation &op : func.getBody().front()) {
    SmallVector<const Tensor *> operands;
    for (Value operand : op.getOperands()) {
      auto it = values.find(operand);
      if (it == values.end())
        return opError(&op, "operand is not a value the interpreter computed");
      operands.push_back(&it->second);
    }
    if (isa<func::ReturnOp>(op)) {
      std::vector<Tensor> results;
      for (const Tensor *operand : operands)
        results.push_back(*operand);
      return results;
    }
    Expected<Results> results = evalOp(&op, operands);
    if (!results)
      return results.takeError();
    if (results->size() != op.getNumResults())
      return opError(&op, "internal error: wrong number of results");
    for (auto [result, tensor] : llvm::zip_equal(op.getResults(), *results)) {
      if (tensor.type != result.getType() ||
          tensor.getNumElements() != tensor.type.getNumElements())
        return opError(&op, llvm::formatv("internal error: computed a {0} for a result of {1}",
                                          tensor.type, result.getType()));
      values[result] = std::move(tensor);
    }
  }
  return makeError(llvm::formatv("function '@{0}' ends without func.return", name));
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

Expected<Results> Interpreter::evalOp(Operation *op, ArrayRef<const Tensor *> operands) {
  if (!isa_and_nonnull<mt::MTDialect>(op->getDialect()) && !isa<func::CallOp>(op))
    return opError(op, "unknown op: the interpreter runs the mt dialect, func.call and "
                       "func.return");
  for (Type type : op->getResultTypes())
    if (!isa<mt::NamedTensorType>(type))
      return opError(op, llvm::formatv("result of type {0} is not an !mt.tensor", type));
  return llvm::TypeSwitch<Operation *, Expected<Results>>(op)
      .Case<mt::ConstantOp, mt::IotaOp, mt::LossScaleOp, mt::AddOp, mt::SubOp, mt::MulOp, mt::DivOp, mt::MaxOp,
            mt::PowOp, mt::GreaterOp, mt::NegOp, mt::ExpOp, mt::LogOp, mt::SqrtOp, mt::RsqrtOp,
            mt::TanhOp, mt::SigmoidOp, mt::CosOp, mt::ReluOp, mt::SiluOp, mt::GeluOp,
            mt::GeluGradOp, mt::CastOp, mt::TransposeOp, mt::BroadcastOp, mt::SplitOp, mt::MergeOp,
            mt::RenameOp, mt::ContractOp, mt::ReduceSumOp, mt::ReduceMeanOp, mt::ReduceMaxOp,
            mt::SoftmaxOp, mt::LayerNormOp, mt::RMSNormOp, mt::RopeOp, mt::AttentionOp,
            mt::AttentionGradOp, mt::GatherOp, mt::EmbeddingGradOp, mt::CrossEntropyOp,
            mt::CrossEntropyGradOp, mt::TopKOp, mt::TopKGradOp, mt::DispatchOp, mt::ExpertLoadOp,
            mt::CombineOp, mt::CombineGradOp, mt::LoadBalancingLossOp,
            mt::LoadBalancingLossGradOp, mt::ZLossOp>(
          [&](auto typed) { return eval::evalOp(typed, operands); })
      .Case<mt::ParamRefOp>([&](auto) { return evalParamRef(op); })
      .Case<mt::AssignOp>([&](auto) { return evalAssign(op, *operands[0]); })
      .Case<mt::DropoutOp>([&](auto) { return evalDropout(op, *operands[0]); })
      .Case<mt::RepeatOp>([&](auto) { return evalRepeat(op, operands); })
      .Case<func::CallOp>([&](auto) { return evalCall(op, operands); })
      .Default([&](Operation *) -> Expected<Results> {
        return opError(op, "no interpreter semantics for this op");
      });
}

//===----------------------------------------------------------------------===//
// Stateful ops
//===----------------------------------------------------------------------===//

/// Whether `op` accesses one instance of layer parameter `param`: it is in the layer's
/// function or one derived from it (elsewhere it accesses all instances, stacked).
static bool accessesInstance(Operation *op, mt::ParamOp param) {
  std::optional<StringRef> layer = param.getLayer();
  auto func = op->getParentOfType<func::FuncOp>();
  return layer && func && mt::MTDialect::getLayerOf(func) == *layer;
}

Expected<int64_t> Interpreter::instanceFor(Operation *op, mt::ParamOp param, const Tensor &value) {
  StringRef layer = *param.getLayer();
  auto it = currentInstance.find(layer);
  if (it == currentInstance.end())
    return opError(op, llvm::formatv("layer parameter '@{0}' is accessed outside a call of its "
                                     "layer '@{1}' by mt.repeat (use Interpreter::callLayer to "
                                     "run one instance)",
                                     param.getSymName(), layer));
  int64_t instances = value.type.getDimSizes().front();
  if (it->second < 0 || it->second >= instances)
    return opError(op, llvm::formatv("instance {0} of layer parameter '@{1}' is out of range "
                                     "[0, {2})",
                                     it->second, param.getSymName(), instances));
  return it->second;
}

/// A parameter's or state's value; inside its layer, a layer parameter's current instance.
/// A state nobody has set reads as zeros, its initial value.
Expected<Results> Interpreter::evalParamRef(Operation *op) {
  StringRef name = cast<mt::ParamRefOp>(op).getParam();
  mt::NamedTensorType resultType = typeOf(op->getResult(0));
  Operation *symbol = symbols.lookup(name);
  auto param = dyn_cast_or_null<mt::ParamOp>(symbol);
  if (!param && !isa_and_nonnull<mt::StateOp>(symbol))
    return opError(op, llvm::formatv("no parameter or state '@{0}'", name));
  const Tensor *value = getParam(name);
  if (!value && !param)
    return Results{Tensor(resultType)};
  if (!value)
    return opError(op, llvm::formatv("parameter '@{0}' has no value (set it with "
                                     "Interpreter::setParam)",
                                     name));
  if (!param || !accessesInstance(op, param)) {
    if (value->type != resultType)
      return opError(op, llvm::formatv("'@{0}' holds a {1}, but the op reads a {2}", name,
                                       value->type, resultType));
    return Results{*value};
  }
  Expected<int64_t> instance = instanceFor(op, param, *value);
  if (!instance)
    return instance.takeError();
  int64_t size = resultType.getNumElements();
  auto begin = value->data.begin() + *instance * size;
  return Results{Tensor(resultType, std::vector<double>(begin, begin + size))};
}

/// Overwrites a parameter or state: all of it, or inside its layer the current instance of
/// a layer parameter.
Expected<Results> Interpreter::evalAssign(Operation *op, const Tensor &value) {
  StringRef name = cast<mt::AssignOp>(op).getTarget();
  Expected<mt::NamedTensorType> storage = getParamValueType(name);
  if (!storage)
    return opError(op, llvm::toString(storage.takeError()));
  auto param = symbols.lookup<mt::ParamOp>(name);
  if (!param || !accessesInstance(op, param)) {
    if (value.type != *storage)
      return opError(
          op, llvm::formatv("cannot assign a {0} to '@{1}' of {2}", value.type, name, *storage));
    params[name] = value;
    return Results{};
  }
  auto it = params.find(name);
  if (it == params.end())
    return opError(op, llvm::formatv("parameter '@{0}' has no value (set it with "
                                     "Interpreter::setParam)",
                                     name));
  Expected<int64_t> instance = instanceFor(op, param, it->second);
  if (!instance)
    return instance.takeError();
  llvm::copy(value.data, it->second.data.begin() + *instance * value.getNumElements());
  return Results{};
}

Expected<Results> Interpreter::evalDropout(Operation *op, const Tensor &input) {
  auto dropout = cast<mt::DropoutOp>(op);
  if (dropoutMode == DropoutMode::Identity)
    return Results{input};
  if (!dropoutKeep)
    return opError(op, "dropout mode 'deterministic masks' needs a keep-mask function");
  double scale = 1 / (1 - dropout.getRate().convertToDouble());
  int64_t tensorId = mtc_dropout_tensor_id(static_cast<int64_t>(dropout.getStream()),
                                           dropoutLayerInstance);
  // The counter of an element: its sample (its `batch` coordinate) in the high bits, its
  // row-major offset over the other dimensions below (Philox.h, MTC_DROPOUT_SAMPLE_STRIDE).
  int64_t samples = 1, inner = 1; // the batch's size, the elements after it per sample
  bool seenBatch = false;
  for (const mt::NamedDim &dim : input.type.getDims()) {
    if (dim.name.getValue() == mt::MTDialect::kBatchDimName) {
      samples = dim.size;
      seenBatch = true;
    } else if (seenBatch) {
      inner *= dim.size;
    }
  }
  Tensor result(input.type);
  for (auto [element, value] : llvm::enumerate(input.data)) {
    auto e = static_cast<int64_t>(element);
    int64_t sample = e / inner % samples;
    int64_t rest = e / (inner * samples) * inner + e % inner;
    int64_t counter = sample * MTC_DROPOUT_SAMPLE_STRIDE + rest;
    result.data[element] = dropoutKeep(tensorId, counter) ? value * scale : 0.0;
  }
  return Results{std::move(result)};
}

/// A scan: carried values thread through the calls, stacked operands and results are
/// sliced and assembled along their leading dimension, invariant operands are passed to
/// every call; call i (run in descending order
/// with `reverse`) is layer instance i, or first + i in a pipeline chunk's repeat
/// (`mt.first_instance = first`, mt-pipeline-chunks): the parameter instance it reads and
/// the instance that keys its dropout masks.
Expected<Results> Interpreter::evalRepeat(Operation *op, ArrayRef<const Tensor *> operands) {
  auto repeat = cast<mt::RepeatOp>(op);
  auto callee = symbols.lookup<func::FuncOp>(repeat.getCallee());
  if (!callee)
    return opError(op, llvm::formatv("no function '@{0}'", repeat.getCallee()));
  int64_t count = static_cast<int64_t>(repeat.getCount());
  int64_t firstInstance = 0;
  if (auto first = op->getAttrOfType<IntegerAttr>(mt::MTDialect::kFirstInstanceAttrName))
    firstInstance = first.getInt();
  unsigned carried = repeat.getNumCarried();
  ArrayRef<Type> argTypes = callee.getArgumentTypes();
  if (argTypes.size() != operands.size())
    return opError(op, llvm::formatv("'@{0}' takes {1} arguments, not {2}", repeat.getCallee(),
                                     argTypes.size(), operands.size()));

  Results state;
  for (unsigned i = 0; i < carried; ++i)
    state.push_back(*operands[i]);
  Results stacked;
  for (Value result : repeat.getResults().drop_front(carried))
    stacked.emplace_back(typeOf(result));

  for (int64_t step = 0; step < count; ++step) {
    int64_t call = repeat.getReverse() ? count - 1 - step : step;
    std::vector<Tensor> args(state.begin(), state.end());
    unsigned invariant = repeat.getNumInvariant();
    for (auto [pos, operand] :
         llvm::enumerate(operands.drop_front(carried).drop_back(invariant))) {
      auto type = cast<mt::NamedTensorType>(argTypes[carried + pos]);
      int64_t size = type.getNumElements();
      if (operand->getNumElements() != size * count)
        return opError(op, llvm::formatv("stacked operand #{0} does not hold {1} slices of {2}",
                                         carried + pos, count, type));
      auto begin = operand->data.begin() + call * size;
      args.emplace_back(type, std::vector<double>(begin, begin + size));
    }
    // Invariant operands: every call receives them whole.
    for (const Tensor *operand : operands.take_back(invariant))
      args.push_back(*operand);
    int64_t outerInstance = std::exchange(dropoutLayerInstance, firstInstance + call);
    Expected<std::vector<Tensor>> results = callWithInstance(callee, firstInstance + call, args);
    dropoutLayerInstance = outerInstance;
    if (!results)
      return opError(op, llvm::formatv("in call {0} of '@{1}':\n{2}", call, repeat.getCallee(),
                                       llvm::toString(results.takeError())));
    if (results->size() != op->getNumResults())
      return opError(op, llvm::formatv("'@{0}' returned {1} values, not {2}", repeat.getCallee(),
                                       results->size(), op->getNumResults()));
    for (unsigned i = 0; i < carried; ++i)
      state[i] = std::move((*results)[i]);
    for (auto [slices, slice] : llvm::zip_equal(stacked, llvm::drop_begin(*results, carried))) {
      int64_t size = slice.getNumElements();
      if (size * count != slices.getNumElements())
        return opError(op, llvm::formatv("a stacked result of '@{0}' has {1} elements, not "
                                         "1/{2} of {3}",
                                         repeat.getCallee(), size, count, slices.type));
      llvm::copy(slice.data, slices.data.begin() + call * size);
    }
  }
  for (Tensor &slices : stacked)
    state.push_back(std::move(slices));
  return state;
}

Expected<Results> Interpreter::evalCall(Operation *op, ArrayRef<const Tensor *> operands) {
  auto call = cast<func::CallOp>(op);
  auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
  if (!callee)
    return opError(op, llvm::formatv("no function '@{0}'", call.getCallee()));
  std::vector<Tensor> args;
  for (const Tensor *operand : operands)
    args.push_back(*operand);
  Expected<std::vector<Tensor>> results = run(callee, args);
  if (!results)
    return opError(op, llvm::formatv("in '@{0}':\n{1}", call.getCallee(),
                                     llvm::toString(results.takeError())));
  return Results(std::make_move_iterator(results->begin()),
                 std::make_move_iterator(results->end()));
}
