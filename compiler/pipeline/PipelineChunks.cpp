//===- PipelineChunks.cpp - per-chunk forward and backward functions ------===//
//
// Cuts the outlined @forward_backward into chunk functions (Passes.td describes the
// contract). The step's body is five parts in program order: the ops before the layer
// stack's forward repeat (the embedding: chunk 0's forward), the forward repeat (every
// chunk's forward, restricted to its layers), the ops between the two repeats (the loss
// and its gradient down to the layer stack: the last chunk's forward for what the loss
// depends on, its backward for the rest), the backward repeat (every chunk's backward)
// and the ops after it (the embedding's gradient: chunk 0's backward).
//
// Each function is built by cloning the ops its results need, part by part. A value the
// function reads but does not compute becomes an argument: a step argument keeps its
// attributes (a stacked layer parameter becomes its chunk's slice), a constant is cloned,
// and any other value is an *external*. A backward's externals must be values of the same
// chunk's forward (its residuals, which that forward then returns); anything else crosses
// chunks and is an error.
//
//===----------------------------------------------------------------------===//

#include "compiler/autodiff/SplitBackward.h"
#include "compiler/pipeline/Passes.h"
#include "compiler/pipeline/StageCut.h"
#include "compiler/transforms/DataInputs.h"
#include "compiler/transforms/Passes.h"
#include "compiler/transforms/ResetDocuments.h"

#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/ParameterRead.h"
#include "dialects/mt/Utils/TensorBuilder.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mtc::pipeline {
#define GEN_PASS_DEF_MTPIPELINECHUNKSPASS
#include "compiler/pipeline/Passes.h.inc"
} // namespace mtc::pipeline

using namespace mlir;
using namespace mtc;
using namespace mtc::pipeline;

namespace {


/// The buffer kind of mt-expert-load's counts.
constexpr StringLiteral kExpertLoadBuffer = "expert_load";
/// The buffer kind of a data input, named by its `mt.input` (the plan's input name).
constexpr StringLiteral kDataInputBuffer = "input";

/// Where an op of the step lies; between the repeats, the ops the loss depends on are the
/// last chunk's forward, the others its backward.
enum class Part { Before, ForwardRepeat, LossForward, LossBackward, BackwardRepeat, After };

/// `type` with its leading `layers` dimension resized to `count`.
Type sliceLayers(Type type, int64_t count) {
  auto tensor = cast<mt::NamedTensorType>(type);
  SmallVector<mt::NamedDim> dims(tensor.getDims());
  dims.front().size = count;
  return tensor.withDims(dims);
}

bool isStacked(Type type) {
  auto tensor = dyn_cast<mt::NamedTensorType>(type);
  return tensor && tensor.getRank() > 0 && tensor.getDims().front().name == mt::MTDialect::kLayersDimName;
}

/// One function under construction: its body, the map from step values to its values,
/// and the step values it reads as arguments.
class FunctionBuilder {
public:
  FunctionBuilder(func::FuncOp step, int64_t firstLayer, int64_t numLayers)
      : step(step), firstLayer(firstLayer), numLayers(numLayers), builder(step.getContext()) {
    builder.setInsertionPointToStart(&body);
  }

  /// Adds an argument standing for step value `value` (kind `kind` unless it is a step
  /// argument, which keeps its attributes).
  Value addArgument(Value value, StringRef kind) {
    Type type = value.getType();
    NamedAttrList attrs;
    if (auto arg = dyn_cast<BlockArgument>(value);
        arg && arg.getOwner() == &step.getBody().front()) {
      if (DictionaryAttr given = step.getArgAttrDict(arg.getArgNumber()))
        attrs.append(given.getValue());
      if (attrs.get(transforms::kParamAttrName) && isStacked(type))
        type = sliceLayers(type, numLayers);
    }
    // A value the layer stack saves is stacked over the step's layers: the chunk's are its.
    if (isa_and_nonnull<mt::RepeatOp>(value.getDefiningOp()) && isStacked(type))
      type = sliceLayers(type, numLayers);
    if (!kind.empty())
      attrs.set(mt::MTDialect::kBufferAttrName, builder.getStringAttr(kind));
    Value arg = body.addArgument(type, value.getLoc());
    argAttrs.push_back(attrs.getDictionary(step.getContext()));
    mapping.map(value, arg);
    return arg;
  }

  /// The function's value of step value `value`: mapped, a new argument, or a clone of a
  /// constant. A value that is none of these is an external (see the file comment).
  Value lookup(Value value) {
    if (Value mapped = mapping.lookupOrNull(value))
      return mapped;
    if (auto arg = dyn_cast<BlockArgument>(value);
        arg && arg.getOwner() == &step.getBody().front()) {
      if (isParameter(arg))
        return addArgument(value, "");
      // A data input (the token ids, the labels, the loss mask, the position ids): the
      // chunk takes it under the step's name for it, so that each chunk takes whichever it
      // reads and the runtime feeds it as it feeds the step.
      Value input = addArgument(value, kDataInputBuffer);
      NamedAttrList attrs(argAttrs.back());
      attrs.set(transforms::kInputNameAttrName,
                builder.getStringAttr(transforms::dataInputName(step, arg.getArgNumber())));
      argAttrs.back() = attrs.getDictionary(step.getContext());
      return input;
    }
    Operation *def = value.getDefiningOp();
    if (def->hasTrait<mt::OpTrait::CallConstant>()) {
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointToStart(&body);
      Operation *clone = builder.clone(*def);
      mapping.map(def->getResults(), clone->getResults());
      return mapping.lookup(value);
    }
    // A parameter read in the mixed precision (the cast of its f32 master weight) is
    // recomputed by each function that reads it, as the parameter itself is passed: a
    // tied embedding's bf16 copy is no activation between the first and last chunks.
    if (Value param =
            mt::getCastParameter(def, [&](BlockArgument arg) { return isParameter(arg); });
        param && !isStacked(param.getType())) {
      Value input = lookup(param);
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointAfterValue(input);
      Operation *clone = builder.clone(*def, mapping);
      mapping.map(value, clone->getResult(0));
      return clone->getResult(0);
    }
    externals.insert(value);
    return addArgument(value, "residual");
  }

  /// Whether `value` is one of the step's parameter arguments.
  bool isParameter(Value value) {
    auto arg = dyn_cast<BlockArgument>(value);
    if (!arg || arg.getOwner() != &step.getBody().front())
      return false;
    DictionaryAttr given = step.getArgAttrDict(arg.getArgNumber());
    return given && given.get(transforms::kParamAttrName);
  }

  SmallVector<Value> lookupAll(ArrayRef<Value> values) {
    SmallVector<Value> mapped;
    for (Value value : values)
      mapped.push_back(lookup(value));
    return mapped;
  }

  void clone(Operation *op) {
    for (Value operand : op->getOperands())
      lookup(operand);
    builder.clone(*op, mapping);
  }

  /// Clones the layer stack's repeat restricted to this chunk's layers.
  mt::RepeatOp cloneRepeat(mt::RepeatOp repeat) {
    SmallVector<Value> operands;
    for (Value operand : repeat.getInputs())
      operands.push_back(lookup(operand));
    SmallVector<Type> results;
    for (auto [index, result] : llvm::enumerate(repeat.getResults()))
      results.push_back(index < repeat.getNumCarried()
                            ? result.getType()
                            : sliceLayers(result.getType(), numLayers));
    auto clone = mt::RepeatOp::create(
        builder, repeat.getLoc(), results, repeat.getCalleeAttr(), operands,
        builder.getI64IntegerAttr(numLayers), repeat.getCarriedAttr(),
        repeat.getStackDimAttr(), repeat.getReverseAttr(), repeat.getInvariantAttr());
    clone->setAttr(mt::MTDialect::kFirstInstanceAttrName, builder.getI64IntegerAttr(firstLayer));
    mapping.map(repeat.getResults(), clone.getResults());
    return clone;
  }

  /// Adds an argument that stands for no step value.
  Value addArgument(Type type, DictionaryAttr attrs) {
    argAttrs.push_back(attrs);
    return body.addArgument(type, step.getLoc());
  }

  /// Marks the argument standing for external `value` as buffer `kind` number `index`.
  void annotate(Value value, StringRef kind, int64_t index) {
    auto arg = cast<BlockArgument>(mapping.lookup(value));
    NamedAttrList attrs(argAttrs[arg.getArgNumber()]);
    attrs.set(mt::MTDialect::kBufferAttrName, builder.getStringAttr(kind));
    attrs.set(mt::MTDialect::kIndexAttrName, builder.getI64IntegerAttr(index));
    argAttrs[arg.getArgNumber()] = attrs.getDictionary(step.getContext());
  }

  /// Creates `@name` before `step` returning `results` (values of this function) with
  /// result attributes `attrs`.
  func::FuncOp finish(StringRef name, ArrayRef<Value> mapped, ArrayRef<DictionaryAttr> attrs) {
    func::ReturnOp::create(builder, step.getLoc(), mapped);
    OpBuilder outer(step);
    auto func = func::FuncOp::create(
        outer, step.getLoc(), name,
        outer.getFunctionType(body.getArgumentTypes(), ValueRange(mapped).getTypes()));
    func.getBody().push_back(new Block());
    func.getBody().front().getOperations().splice(func.getBody().front().end(),
                                                  body.getOperations());
    for (BlockArgument arg : body.getArguments()) {
      BlockArgument moved = func.getBody().front().addArgument(arg.getType(), arg.getLoc());
      arg.replaceAllUsesWith(moved);
    }
    func.setAllArgAttrs(argAttrs);
    func.setAllResultAttrs(attrs);
    return func;
  }

  func::FuncOp step;
  int64_t firstLayer, numLayers;
  OpBuilder builder;
  Block body;
  IRMapping mapping;
  SmallVector<DictionaryAttr> argAttrs;
  llvm::SetVector<Value> externals;
};

class PipelineChunksPass : public mtc::pipeline::impl::MTPipelineChunksPassBase<PipelineChunksPass> {
public:
  void runOnOperation() override;

private:
  LogicalResult analyze(func::FuncOp step);
  /// Adds to `ops` the ops of the parts `allowed` that `roots` depend on (stopping at the
  /// repeats, which the caller clones).
  void addSlice(ArrayRef<Value> roots, ArrayRef<Part> allowed, llvm::DenseSet<Operation *> &ops);
  /// Splits returned gradient `grad` into the values whose sum it is, each computed by
  /// one chunk's backward (chunk -1: the backward repeat's stacked result, every chunk).
  void gradientParts(Value grad, int64_t lastChunk,
                     SmallVectorImpl<std::pair<int64_t, Value>> &parts);
  LogicalResult buildChunk(func::FuncOp step, const StageCut &cut, int64_t chunk,
                           llvm::StringMap<SmallVector<int64_t>> &paramChunks);
  /// Adds the chunk's backward_input and backward_weight to `funcs`.
  LogicalResult buildSplitBackward(func::FuncOp step, const StageCut &cut, int64_t chunk,
                                   ArrayRef<std::pair<Attribute, SmallVector<Value>>> gradientSums,
                                   const llvm::SetVector<Value> &residuals,
                                   SmallVectorImpl<func::FuncOp> &funcs);

  llvm::DenseMap<Operation *, Part> partOf;
  mt::RepeatOp forwardRepeat, backwardRepeat;
  /// The B/W split of the backward repeat's layer function.
  func::FuncOp inputPart, weightPart;
  Value loss;
  /// The step's `expert_load` results (mt-expert-load's tokens per expert, stacked over the
  /// layers by the forward repeat): each chunk's forward returns its layers' rows.
  SmallVector<Value> expertLoads;
};

LogicalResult PipelineChunksPass::analyze(func::FuncOp step) {
  if (!step.getBody().hasOneBlock())
    return step.emitOpError("must have one block to be cut into pipeline chunks");
  Block &body = step.getBody().front();
  for (auto repeat : body.getOps<mt::RepeatOp>()) {
    mt::RepeatOp &slot = repeat.getReverse() ? backwardRepeat : forwardRepeat;
    if (slot)
      return repeat.emitOpError("is a second layer stack; pipeline parallelism cuts one");
    slot = repeat;
  }
  if (!forwardRepeat || !backwardRepeat)
    return step.emitOpError("has no layer stack (a forward and a reverse mt.repeat) to cut "
                            "into pipeline chunks");
  Part part = Part::Before;
  for (Operation &op : body.without_terminator()) {
    if (&op == forwardRepeat.getOperation()) {
      partOf[&op] = Part::ForwardRepeat;
      part = Part::LossBackward;
    } else if (&op == backwardRepeat.getOperation()) {
      partOf[&op] = Part::BackwardRepeat;
      part = Part::After;
    } else {
      partOf[&op] = part;
    }
  }
  loss = body.getTerminator()->getOperand(0);
  for (OpOperand &result : body.getTerminator()->getOpOperands()) {
    auto kind = step.getResultAttrOfType<StringAttr>(result.getOperandNumber(),
                                                     mt::MTDialect::kBufferAttrName);
    if (!kind || kind.getValue() != kExpertLoadBuffer)
      continue;
    if (result.get().getDefiningOp() != forwardRepeat.getOperation())
      return step.emitOpError("returns tokens per expert (result ")
             << result.getOperandNumber()
             << ") that the layer stack's forward repeat does not stack, which pipeline "
                "parallelism cannot cut by layers";
    expertLoads.push_back(result.get());
  }
  llvm::DenseSet<Operation *> lossOps;
  addSlice({loss}, {Part::LossBackward}, lossOps);
  for (Operation *op : lossOps)
    partOf[op] = Part::LossForward;
  // Every stacked operand is a layer parameter: a model parameter broadcast along the
  // layers (read inside a layer) has a gradient summed over every chunk. The invariant
  // operands (position ids) reach every chunk as the data inputs they are.
  for (mt::RepeatOp repeat : {forwardRepeat, backwardRepeat})
    for (Value operand : repeat.getStackedInputs()) {
      auto arg = dyn_cast<BlockArgument>(operand);
      bool layerParam = arg && arg.getOwner() == &body &&
                        step.getArgAttrDict(arg.getArgNumber()) &&
                        step.getArgAttrDict(arg.getArgNumber()).get(transforms::kParamAttrName);
      Operation *def = operand.getDefiningOp();
      bool saved = def == forwardRepeat.getOperation();
      if (!layerParam && !saved)
        return repeat.emitOpError("passes a stacked operand that is neither a layer "
                                  "parameter nor a saved value (a model parameter read "
                                  "inside the layer?), which pipeline parallelism cannot "
                                  "cut by layers");
    }
  return success();
}

void PipelineChunksPass::addSlice(ArrayRef<Value> roots, ArrayRef<Part> allowed,
                                  llvm::DenseSet<Operation *> &ops) {
  SmallVector<Value> worklist(roots.begin(), roots.end());
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || !partOf.count(def) || !llvm::is_contained(allowed, partOf[def]) ||
        isa<mt::RepeatOp>(def) || !ops.insert(def).second)
      continue;
    llvm::append_range(worklist, def->getOperands());
  }
}

void PipelineChunksPass::gradientParts(Value grad, int64_t lastChunk,
                                       SmallVectorImpl<std::pair<int64_t, Value>> &parts) {
  Operation *def = grad.getDefiningOp();
  if (def == backwardRepeat.getOperation()) {
    parts.push_back({-1, grad});
    return;
  }
  // A sum in chunk 0's backward of parts from several chunks (a tied embedding's
  // gradient: its use in the head plus its use in the embedding).
  if (auto add = dyn_cast_or_null<mt::AddOp>(def);
      add && partOf.lookup(add) == Part::After &&
      llvm::any_of(add->getOperands(), [&](Value operand) {
        Operation *operandDef = operand.getDefiningOp();
        return operandDef && partOf.lookup(operandDef) != Part::After;
      })) {
    for (Value operand : add->getOperands())
      gradientParts(operand, lastChunk, parts);
    return;
  }
  // Between the repeats: the last chunk's backward; after them: chunk 0's.
  Part part = def ? partOf.lookup(def) : Part::After;
  bool between = part == Part::LossForward || part == Part::LossBackward;
  parts.push_back({between ? lastChunk : 0, grad});
}

LogicalResult PipelineChunksPass::buildChunk(func::FuncOp step, const StageCut &cut,
                                             int64_t chunk,
                                             llvm::StringMap<SmallVector<int64_t>> &paramChunks) {
  MLIRContext *context = step.getContext();
  Builder b(context);
  int64_t last = cut.numChunks() - 1;
  int64_t first = cut.chunkFirstLayer[chunk], count = cut.chunkLayers[chunk];
  unsigned carried = forwardRepeat.getNumCarried();
  auto returned = step.getBody().front().getTerminator()->getOperands();
  auto gradSymbols = step->getAttrOfType<ArrayAttr>(mt::MTDialect::kGradsAttrName);
  auto bufferAttrs = [&](StringRef kind) {
    return b.getDictionaryAttr(b.getNamedAttr(mt::MTDialect::kBufferAttrName, b.getStringAttr(kind)));
  };

  // The backward first: its externals are the residuals its forward returns.
  FunctionBuilder backward(step, first, count);
  if (chunk != last)
    for (Value grad : backwardRepeat.getInputs().take_front(carried))
      backward.addArgument(grad, "activation_grad");
  SmallVector<Value> backwardResults;
  SmallVector<DictionaryAttr> backwardResultAttrs;
  SmallVector<Attribute> grads;
  if (chunk != 0)
    for (Value grad : backwardRepeat.getResults().take_front(carried)) {
      backwardResults.push_back(grad);
      backwardResultAttrs.push_back(bufferAttrs("activation_grad"));
    }
  SmallVector<std::pair<Attribute, SmallVector<Value>>> gradientSums;
  for (auto [symbol, grad] : llvm::zip(gradSymbols, returned.drop_front())) {
    SmallVector<std::pair<int64_t, Value>> parts;
    gradientParts(grad, last, parts);
    SmallVector<Value> mine;
    bool sliced = false;
    for (auto [owner, part] : parts)
      if (owner == -1 || owner == chunk) {
        mine.push_back(part);
        sliced |= owner == -1;
      }
    if (mine.empty())
      continue;
    if (!sliced)
      paramChunks[cast<FlatSymbolRefAttr>(symbol).getValue()].push_back(chunk);
    gradientSums.push_back({symbol, std::move(mine)});
  }
  llvm::DenseSet<Operation *> backwardOps;
  {
    SmallVector<Value> roots(backwardRepeat.getInputs().take_front(carried));
    for (auto &[symbol, values] : gradientSums)
      llvm::append_range(roots, values);
    if (chunk == last)
      addSlice(roots, {Part::LossBackward}, backwardOps);
    if (chunk == 0)
      addSlice(roots, {Part::After}, backwardOps);
  }
  for (Operation &op : step.getBody().front().without_terminator()) {
    if (&op == backwardRepeat.getOperation())
      backward.cloneRepeat(backwardRepeat);
    else if (backwardOps.contains(&op))
      backward.clone(&op);
  }
  for (auto &[symbol, values] : gradientSums) {
    // The chunk's part of the gradient: the sum of its parts.
    Value sum = backward.lookup(values.front());
    mt::TensorBuilder t(backward.builder, step.getLoc());
    for (Value value : ArrayRef(values).drop_front())
      sum = t.add(sum, backward.lookup(value));
    backward.mapping.map(values.front(), sum);
    backwardResults.push_back(values.front());
    backwardResultAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(mt::MTDialect::kGradAttrName, cast<FlatSymbolRefAttr>(symbol))));
    grads.push_back(symbol);
  }
  // Residuals: what the backward reads from this chunk's forward.
  for (Value value : backward.externals) {
    Operation *def = value.getDefiningOp();
    Part part = partOf.lookup(def);
    bool inForward = part == Part::ForwardRepeat || (part == Part::Before && chunk == 0) ||
                     (part == Part::LossForward && chunk == last);
    if (!inForward)
      return def->emitOpError("computes a value that chunk ")
             << chunk << "'s backward reads but that another chunk computes; only the "
                         "activations and their gradients may cross chunks";
  }

  FunctionBuilder forward(step, first, count);
  if (chunk != 0)
    for (Value input : forwardRepeat.getInputs().take_front(carried))
      forward.addArgument(input, "activation");
  SmallVector<Value> forwardResults;
  SmallVector<DictionaryAttr> forwardResultAttrs;
  if (chunk == last) {
    forwardResults.push_back(loss);
    forwardResultAttrs.push_back(bufferAttrs("loss"));
  } else {
    for (Value output : forwardRepeat.getResults().take_front(carried)) {
      forwardResults.push_back(output);
      forwardResultAttrs.push_back(bufferAttrs("activation"));
    }
  }
  size_t residualsBegin = forwardResults.size();
  for (Value value : backward.externals) {
    forwardResults.push_back(value);
    forwardResultAttrs.push_back(bufferAttrs("residual"));
  }
  for (Value load : expertLoads) {
    forwardResults.push_back(load);
    forwardResultAttrs.push_back(bufferAttrs(kExpertLoadBuffer));
  }
  llvm::DenseSet<Operation *> forwardOps;
  {
    SmallVector<Value> roots(forwardResults);
    llvm::append_range(roots, forwardRepeat.getInputs().take_front(carried));
    if (chunk == 0)
      addSlice(roots, {Part::Before}, forwardOps);
    if (chunk == last)
      addSlice(roots, {Part::LossForward}, forwardOps);
  }
  for (Operation &op : step.getBody().front().without_terminator()) {
    if (&op == forwardRepeat.getOperation())
      forward.cloneRepeat(forwardRepeat);
    else if (forwardOps.contains(&op))
      forward.clone(&op);
  }
  if (!forward.externals.empty())
    return forward.externals.front().getDefiningOp()->emitOpError("computes a value that chunk ")
           << chunk << "'s forward reads but that another chunk computes";

  for (auto [index, value] : llvm::enumerate(backward.externals)) {
    backward.annotate(value, "residual", index);
    forwardResultAttrs[residualsBegin + index] =
        b.getDictionaryAttr({b.getNamedAttr(mt::MTDialect::kBufferAttrName, b.getStringAttr("residual")),
                             b.getNamedAttr(mt::MTDialect::kIndexAttrName, b.getI64IntegerAttr(index))});
  }

  std::string prefix = ("chunk" + Twine(chunk)).str();
  SmallVector<func::FuncOp> funcs;
  funcs.push_back(forward.finish(prefix + ".forward", forward.lookupAll(forwardResults),
                                 forwardResultAttrs));
  funcs.push_back(backward.finish(prefix + ".backward", backward.lookupAll(backwardResults),
                                  backwardResultAttrs));
  funcs.back()->setAttr(mt::MTDialect::kGradsAttrName, b.getArrayAttr(grads));
  if (failed(buildSplitBackward(step, cut, chunk, gradientSums, backward.externals, funcs)))
    return failure();
  for (func::FuncOp func : funcs) {
    func->setAttr(mt::MTDialect::kPipelineChunkAttrName, b.getI64IntegerAttr(chunk));
    func->setAttr(mt::MTDialect::kChunkLayersAttrName, b.getDenseI64ArrayAttr({first, count}));
  }
  return success();
}

LogicalResult PipelineChunksPass::buildSplitBackward(
    func::FuncOp step, const StageCut &cut, int64_t chunk,
    ArrayRef<std::pair<Attribute, SmallVector<Value>>> gradientSums,
    const llvm::SetVector<Value> &residuals, SmallVectorImpl<func::FuncOp> &funcs) {
  Builder b(step.getContext());
  int64_t last = cut.numChunks() - 1;
  int64_t first = cut.chunkFirstLayer[chunk], count = cut.chunkLayers[chunk];
  unsigned carried = backwardRepeat.getNumCarried();
  auto attrs = [&](StringRef kind, std::optional<int64_t> index = std::nullopt) {
    SmallVector<NamedAttribute> list = {b.getNamedAttr(mt::MTDialect::kBufferAttrName, b.getStringAttr(kind))};
    if (index)
      list.push_back(b.getNamedAttr(mt::MTDialect::kIndexAttrName, b.getI64IntegerAttr(*index)));
    return b.getDictionaryAttr(list);
  };
  auto stackedTypes = [&](TypeRange types) {
    SmallVector<Type> result;
    for (Type type : types) {
      auto tensor = cast<mt::NamedTensorType>(type);
      SmallVector<mt::NamedDim> dims = {{b.getStringAttr(mt::MTDialect::kLayersDimName), count}};
      llvm::append_range(dims, tensor.getDims());
      result.push_back(tensor.withDims(dims));
    }
    return result;
  };
  auto repeatAttrs = [&](Operation *op) {
    op->setAttr(mt::MTDialect::kFirstInstanceAttrName, b.getI64IntegerAttr(first));
  };
  TypeRange layerStash = inputPart.getResultTypes().drop_front(carried);

  // B: the ops the input gradient needs (none in chunk 0 but the layers').
  llvm::DenseSet<Operation *> inputOps;
  if (chunk == last)
    addSlice(SmallVector<Value>(backwardRepeat.getInputs().take_front(carried)),
             {Part::LossBackward}, inputOps);
  // W: the ops the parameter gradients need that B does not compute.
  llvm::DenseSet<Operation *> weightOps;
  {
    SmallVector<Value> roots;
    for (auto &[symbol, values] : gradientSums)
      llvm::append_range(roots, values);
    SmallVector<Part> allowed;
    if (chunk == last)
      allowed.push_back(Part::LossBackward);
    if (chunk == 0)
      allowed.push_back(Part::After);
    addSlice(roots, allowed, weightOps);
    for (Operation *op : inputOps)
      weightOps.erase(op);
  }

  FunctionBuilder weight(step, first, count);
  SmallVector<Value> layerStashArgs;
  for (auto [index, type] : llvm::enumerate(stackedTypes(layerStash)))
    layerStashArgs.push_back(weight.addArgument(type, attrs("stash", index)));
  for (Operation &op : step.getBody().front().without_terminator()) {
    if (&op == backwardRepeat.getOperation()) {
      // The layers' inputs, the stash, then the invariant operands (position ids).
      SmallVector<Value> operands;
      for (Value operand : backwardRepeat.getStackedInputs())
        operands.push_back(weight.lookup(operand));
      llvm::append_range(operands, layerStashArgs);
      for (Value operand : backwardRepeat.getInvariantInputs())
        operands.push_back(weight.lookup(operand));
      SmallVector<Type> results;
      for (Value result : backwardRepeat.getResults().drop_front(carried))
        results.push_back(sliceLayers(result.getType(), count));
      auto repeat = mt::RepeatOp::create(
          weight.builder, backwardRepeat.getLoc(), results,
          FlatSymbolRefAttr::get(weightPart), operands, b.getI64IntegerAttr(count),
          b.getI64IntegerAttr(0), backwardRepeat.getStackDimAttr(), backwardRepeat.getReverseAttr(),
          backwardRepeat.getInvariantAttr());
      repeatAttrs(repeat);
      weight.mapping.map(backwardRepeat.getResults().drop_front(carried), repeat.getResults());
    } else if (weightOps.contains(&op)) {
      weight.clone(&op);
    }
  }
  SmallVector<Value> weightResults;
  SmallVector<DictionaryAttr> weightResultAttrs;
  SmallVector<Attribute> grads;
  mt::TensorBuilder t(weight.builder, step.getLoc());
  for (auto &[symbol, values] : gradientSums) {
    Value sum = weight.lookup(values.front());
    for (Value value : ArrayRef(values).drop_front())
      sum = t.add(sum, weight.lookup(value));
    weightResults.push_back(sum);
    weightResultAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(mt::MTDialect::kGradAttrName, cast<FlatSymbolRefAttr>(symbol))));
    grads.push_back(symbol);
  }
  // W's externals: B's values (the stash after the layers') or the forward's residuals.
  llvm::SetVector<Value> stash;
  for (Value value : weight.externals) {
    Operation *def = value.getDefiningOp();
    if (def == backwardRepeat.getOperation() || inputOps.contains(def)) {
      weight.annotate(value, "stash", layerStash.size() + stash.size());
      stash.insert(value);
    } else if (residuals.contains(value)) {
      weight.annotate(value, "residual", llvm::find(residuals, value) - residuals.begin());
    } else {
      return def->emitOpError("is read by chunk ")
             << chunk << "'s weight gradients but is neither a residual nor computed by its "
                         "input gradient";
    }
  }

  FunctionBuilder input(step, first, count);
  if (chunk != last)
    for (Value grad : backwardRepeat.getInputs().take_front(carried))
      input.addArgument(grad, "activation_grad");
  SmallVector<Value> layerStashValues;
  for (Operation &op : step.getBody().front().without_terminator()) {
    if (&op == backwardRepeat.getOperation()) {
      SmallVector<Value> operands;
      for (Value operand : backwardRepeat.getInputs())
        operands.push_back(input.lookup(operand));
      SmallVector<Type> results(TypeRange(backwardRepeat.getResultTypes()).take_front(carried));
      llvm::append_range(results, stackedTypes(layerStash));
      auto repeat = mt::RepeatOp::create(
          input.builder, backwardRepeat.getLoc(), results, FlatSymbolRefAttr::get(inputPart),
          operands, b.getI64IntegerAttr(count), backwardRepeat.getCarriedAttr(),
          backwardRepeat.getStackDimAttr(), backwardRepeat.getReverseAttr(),
          backwardRepeat.getInvariantAttr());
      repeatAttrs(repeat);
      input.mapping.map(backwardRepeat.getResults().take_front(carried),
                        repeat.getResults().take_front(carried));
      llvm::append_range(layerStashValues, repeat.getResults().drop_front(carried));
    } else if (inputOps.contains(&op)) {
      input.clone(&op);
    }
  }
  SmallVector<Value> inputResults;
  SmallVector<DictionaryAttr> inputResultAttrs;
  if (chunk != 0)
    for (Value grad : backwardRepeat.getResults().take_front(carried)) {
      inputResults.push_back(input.lookup(grad));
      inputResultAttrs.push_back(attrs("activation_grad"));
    }
  for (Value value : layerStashValues) {
    inputResultAttrs.push_back(attrs("stash", inputResults.size() - (chunk != 0 ? carried : 0)));
    inputResults.push_back(value);
  }
  for (Value value : stash) {
    inputResultAttrs.push_back(attrs("stash", inputResults.size() - (chunk != 0 ? carried : 0)));
    inputResults.push_back(input.lookup(value));
  }
  for (Value value : input.externals) {
    if (!residuals.contains(value))
      return value.getDefiningOp()->emitOpError("is read by chunk ")
             << chunk << "'s input gradient but is not one of its residuals";
    input.annotate(value, "residual", llvm::find(residuals, value) - residuals.begin());
  }

  std::string prefix = ("chunk" + Twine(chunk)).str();
  funcs.push_back(input.finish(prefix + ".backward_input", inputResults, inputResultAttrs));
  funcs.push_back(weight.finish(prefix + ".backward_weight", weightResults, weightResultAttrs));
  funcs.back()->setAttr(mt::MTDialect::kGradsAttrName, b.getArrayAttr(grads));
  return success();
}

void PipelineChunksPass::runOnOperation() {
  ModuleOp module = getOperation();
  partOf.clear();
  forwardRepeat = backwardRepeat = nullptr;
  inputPart = weightPart = nullptr;
  expertLoads.clear();
  FailureOr<StageCut> cut = computeStageCut(module);
  if (failed(cut))
    return signalPassFailure();
  if (cut->numChunks() == 1)
    return;
  auto step = module.lookupSymbol<func::FuncOp>("forward_backward");
  if (!step || !module->hasAttr(transforms::kOutlinedAttrName) ||
      !step->getAttrOfType<ArrayAttr>(mt::MTDialect::kGradsAttrName)) {
    module.emitError("mt-pipeline-chunks cuts the outlined training step: run it after "
                     "mt-autodiff and mt-outline-parameters");
    return signalPassFailure();
  }
  if (failed(analyze(step)))
    return signalPassFailure();
  auto layerBackward = module.lookupSymbol<func::FuncOp>(backwardRepeat.getCallee());
  inputPart = module.lookupSymbol<func::FuncOp>((backwardRepeat.getCallee() + ".input").str());
  weightPart = module.lookupSymbol<func::FuncOp>((backwardRepeat.getCallee() + ".weight").str());
  if (!layerBackward) {
    backwardRepeat.emitOpError("repeats an unknown layer backward");
    return signalPassFailure();
  }
  if (!inputPart || !weightPart) {
    FailureOr<autodiff::BackwardParts> parts =
        autodiff::splitLayerBackward(layerBackward, backwardRepeat.getNumInvariant());
    if (failed(parts))
      return signalPassFailure();
    inputPart = parts->input;
    weightPart = parts->weight;
  }
  // The parts of the outlined layer backward: B takes its arguments, W those after the
  // result gradients and then the stash (a split made before outlining has other ones).
  unsigned carried = backwardRepeat.getNumCarried();
  unsigned invariant = backwardRepeat.getNumInvariant();
  ArrayRef<Type> backwardArgs = layerBackward.getArgumentTypes();
  SmallVector<Type> weightArgs(backwardArgs.drop_front(carried).drop_back(invariant));
  llvm::append_range(weightArgs, inputPart.getResultTypes().drop_front(carried));
  llvm::append_range(weightArgs, backwardArgs.take_back(invariant));
  if (inputPart.getArgumentTypes() != backwardArgs ||
      weightPart.getArgumentTypes() != ArrayRef<Type>(weightArgs)) {
    inputPart.emitOpError("and its weight part do not take the outlined layer backward's "
                          "arguments: run mt-split-backward after mt-outline-parameters, or "
                          "let mt-pipeline-chunks split the layer backward");
    return signalPassFailure();
  }
  llvm::StringMap<SmallVector<int64_t>> paramChunks;
  for (int64_t chunk = 0; chunk < cut->numChunks(); ++chunk)
    if (failed(buildChunk(step, *cut, chunk, paramChunks)))
      return signalPassFailure();

  Builder b(&getContext());
  SmallVector<NamedAttribute> shared;
  for (Attribute symbol : step->getAttrOfType<ArrayAttr>(mt::MTDialect::kGradsAttrName)) {
    StringRef name = cast<FlatSymbolRefAttr>(symbol).getValue();
    SmallVector<int64_t> chunks = paramChunks.lookup(name);
    llvm::SmallSetVector<int64_t, 4> stages;
    for (int64_t chunk : chunks)
      stages.insert(cut->chunkStages[chunk]);
    if (stages.size() > 1)
      shared.push_back(b.getNamedAttr(name, b.getDenseI64ArrayAttr(chunks)));
  }
  module->setAttr(mt::MTDialect::kPipelineAttrName,
                  b.getDictionaryAttr({
                      b.getNamedAttr("stages", b.getI64IntegerAttr(cut->options.stages)),
                      b.getNamedAttr("virtual_stages",
                                     b.getI64IntegerAttr(cut->options.virtualStages)),
                      b.getNamedAttr("chunk_layers", b.getDenseI64ArrayAttr(cut->chunkLayers)),
                      b.getNamedAttr("chunk_stages", b.getDenseI64ArrayAttr(cut->chunkStages)),
                      b.getNamedAttr("shared_params", b.getDictionaryAttr(shared)),
                  }));
}

} // namespace
