//===- KVCache.cpp - prefill and decode_step for cached generation --------===//
//
// The window path of generation (mt-logits) scores every position again for each new token.
// With the keys and values of the positions already seen kept (a KV cache), one new token
// costs one position's work. Both functions added here are derived from `logits` (so from the
// training forward), not written per model: `prefill` is `logits` that also returns what its
// one attention per layer took as keys and values, and `decode_step` is `logits` on one
// position, whose attention reads the cache instead of the sequence's keys. What depends on
// where a token is (a learned position table, rope, the causal mask) reads the absolute
// position from an argument. Every op stays one the later passes already lower; Passes.td
// describes the contract.
//
// The cache is f32 whatever the plan's precision: the runtime holds f32 keys and values, and
// a bf16 or f16 key widens exactly. decode_step's attention computes in f32 from them, as
// mt-decompose computes a low-precision plan's attention, and rounds its output once; the
// positions are compared in f32, where every position of a window is exact (bf16 is not
// beyond 256).
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

#include "compiler/sharding/Layout.h"
#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mt/IR/MTOps.h"
#include "dialects/mt/Utils/TensorBuilder.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>

namespace mtc::transforms {
#define GEN_PASS_DEF_MTKVCACHEPASS
#include "compiler/transforms/Passes.h.inc"
} // namespace mtc::transforms

using namespace mlir;
using namespace mtc;
using mt::NamedDim;
using mt::NamedTensorType;
using mt::TensorBuilder;

namespace {

// The buffer kinds of the plan (CallingConvention.cpp).
constexpr StringLiteral kTokensBuffer = "tokens", kPositionBuffer = "position",
                        kKeysBuffer = "keys", kValuesBuffer = "values", kLogitsBuffer = "logits";

NamedTensorType typeOf(Value value) { return cast<NamedTensorType>(value.getType()); }

/// What the cache needs of the model: `logits` whose one `mt.repeat` runs a layer with one
/// causal attention, the sequence dimension the tokens and that attention share.
struct CachedModel {
  func::FuncOp logits;
  mt::RepeatOp repeat;
  func::FuncOp layer;
  StringAttr seq;
  int64_t window = 0;
  /// The name of the cache's position dimension (`seq` is the new tokens' in decode_step).
  StringAttr cacheSeq;
};

/// Whether each rank of `module`'s layout can score one sequence: on one rank, over tensor
/// parallelism (with or without sequence parallelism: mtp-partition lays the two functions
/// out over tp as it does `logits`, each rank keeping its heads' part of the cache), and
/// over data parallelism up to ZeRO-2 (the distributed optimizer splits only the optimizer
/// step over dp; every data-parallel rank scores the sequence whole). Other layouts leave
/// generation to the window path: ZeRO-3 and expert parallelism split the micro-batch,
/// which one sequence does not fill, a pipeline's stages have no functions to cut the
/// cache into, and ring attention would need it split by positions.
bool scoresOneSequencePerRank(ModuleOp module) {
  if (sharding::zeroStage(module) >= 3)
    return false;
  mt::ParallelAttr parallel = mt::ParallelAttr::lookup(module);
  if (!parallel)
    return true;
  if (parallel.getAutoSearch())
    return false;
  for (StringRef axis : {"pp", "cp", "ep"})
    if (parallel.getDegree(axis) > 1)
      return false;
  return true;
}

template <typename OpT> SmallVector<OpT> opsOf(func::FuncOp func) {
  SmallVector<OpT> ops;
  func.walk([&](OpT op) { ops.push_back(op); });
  return ops;
}

std::optional<CachedModel> analyse(ModuleOp module, func::FuncOp logits) {
  CachedModel model;
  model.logits = logits;
  if (!logits.getBody().hasOneBlock() || !opsOf<mt::AttentionOp>(logits).empty() ||
      !opsOf<func::CallOp>(logits).empty())
    return std::nullopt;
  SmallVector<mt::RepeatOp> repeats = opsOf<mt::RepeatOp>(logits);
  if (repeats.size() != 1 || repeats.front().getNumCarried() != repeats.front().getInputs().size())
    return std::nullopt;
  model.repeat = repeats.front();
  model.layer = module.lookupSymbol<func::FuncOp>(model.repeat.getCallee());
  if (!model.layer || !model.layer.getBody().hasOneBlock() ||
      !opsOf<mt::RepeatOp>(model.layer).empty() || !opsOf<func::CallOp>(model.layer).empty())
    return std::nullopt;
  SmallVector<mt::AttentionOp> attentions = opsOf<mt::AttentionOp>(model.layer);
  if (attentions.size() != 1 || !attentions.front().getCausal() || attentions.front().getLse() ||
      attentions.front().getPositions())
    return std::nullopt;
  model.seq = attentions.front().getSeqDimAttr();
  NamedTensorType tokens = typeOf(logits.getArgument(0));
  if (logits.getNumArguments() < 1 || !tokens.hasDim(model.seq.getValue()))
    return std::nullopt;
  model.window = tokens.getDimSize(model.seq.getValue());
  model.cacheSeq = StringAttr::get(module.getContext(), model.seq.getValue() + "_cache");
  return model;
}

//===----------------------------------------------------------------------===//
// Resizing a function's dimensions
//===----------------------------------------------------------------------===//

using DimSizes = llvm::StringMap<int64_t>;

Type resize(Type type, const DimSizes &sizes) {
  auto tensor = dyn_cast<NamedTensorType>(type);
  if (!tensor)
    return type;
  SmallVector<NamedDim> dims = tensor.getDims();
  for (NamedDim &dim : dims)
    if (auto it = sizes.find(dim.name.getValue()); it != sizes.end())
      dim.size = it->second;
  return tensor.withDims(dims);
}

/// Gives every value of `func` but the parameters the sizes `sizes` names (the batch of one
/// sequence, one position). A dispatch sizes its capacity by the tokens it routes, so its
/// capacity dimension follows (the verifier's formula).
void resizeFunction(func::FuncOp func, DimSizes sizes) {
  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments())
    arg.setType(resize(arg.getType(), sizes));
  for (Operation &op : body) {
    if (isa<mt::ParamRefOp>(op))
      continue;
    if (auto dispatch = dyn_cast<mt::DispatchOp>(op)) {
      NamedTensorType indices = typeOf(dispatch.getIndices());
      int64_t k = indices.getDimSize(dispatch.getKDim());
      int64_t tokens = indices.getNumElements() / k;
      int64_t experts = typeOf(dispatch.getResult()).getDimSize(dispatch.getExpertDim());
      int64_t capacity = tokens;
      if (auto factor = dispatch.getCapacityFactor())
        capacity = static_cast<int64_t>(
            std::ceil(factor->convertToDouble() * static_cast<double>(tokens * k) / experts));
      sizes[dispatch.getCapacityDim()] = capacity;
    }
    for (OpResult result : op.getResults())
      result.setType(resize(result.getType(), sizes));
  }
  func.setFunctionType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                         body.getTerminator()->getOperandTypes()));
}

/// Sizes 1 for every dimension of the tokens but `seq`, which gets `seqSize`: one sequence.
DimSizes oneSequence(const CachedModel &model, int64_t seqSize) {
  DimSizes sizes;
  func::FuncOp logits = model.logits;
  for (const NamedDim &dim : typeOf(logits.getArgument(0)).getDims())
    sizes[dim.name.getValue()] = dim.name == model.seq ? seqSize : 1;
  return sizes;
}

//===----------------------------------------------------------------------===//
// Cloning the entry and layer functions
//===----------------------------------------------------------------------===//

func::FuncOp cloneAfter(SymbolTable &symbols, func::FuncOp func, StringRef name, Operation *after) {
  auto clone = cast<func::FuncOp>(func->clone());
  clone.setSymName(name);
  symbols.insert(clone, std::next(after->getIterator()));
  return clone;
}

/// A copy of the layer, derived from it as the autodiff's layer forwards are (it keeps the
/// layer's parameters: mt-outline-parameters passes it the stacked instances).
func::FuncOp cloneLayer(SymbolTable &symbols, func::FuncOp layer, StringRef suffix,
                        Operation *after) {
  func::FuncOp clone = cloneAfter(symbols, layer, (layer.getSymName() + suffix).str(), after);
  if (!clone->hasAttr(mt::MTDialect::kLayerOfAttrName)) {
    clone->removeAttr(mt::MTDialect::kLayerAttrName);
    clone->setAttr(mt::MTDialect::kLayerOfAttrName, FlatSymbolRefAttr::get(layer.getSymNameAttr()));
  }
  return clone;
}

void appendResults(func::FuncOp func, ValueRange values, ArrayRef<StringRef> buffers) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  Builder b(func.getContext());
  for (auto [value, buffer] : llvm::zip_equal(values, buffers)) {
    unsigned index = func.getNumResults();
    DictionaryAttr attrs;
    if (!buffer.empty())
      attrs = b.getDictionaryAttr(
          b.getNamedAttr(mt::MTDialect::kBufferAttrName, b.getStringAttr(buffer)));
    (void)func.insertResult(index, value.getType(), attrs);
    ret->insertOperands(ret->getNumOperands(), value);
  }
}

void setBuffer(func::FuncOp func, unsigned arg, StringRef buffer) {
  Builder b(func.getContext());
  func.setArgAttr(arg, mt::MTDialect::kBufferAttrName, b.getStringAttr(buffer));
}

/// `type` with dimension `from` replaced by `to` of `size`, in place.
NamedTensorType replaceDim(NamedTensorType type, StringRef from, StringAttr to, int64_t size) {
  SmallVector<NamedDim> dims = type.getDims();
  for (NamedDim &dim : dims)
    if (dim.name.getValue() == from)
      dim = {to, size};
  return type.withDims(dims);
}

/// `type` stacked over the repeat's calls (the stacking dimension first).
NamedTensorType stacked(mt::RepeatOp repeat, NamedTensorType type) {
  SmallVector<NamedDim> dims = {{StringAttr::get(repeat.getContext(), repeat.getStackDimName()),
                                 static_cast<int64_t>(repeat.getCount())}};
  llvm::append_range(dims, type.getDims());
  return type.withDims(dims);
}

/// Replaces `func`'s repeat of the layer by one of `layer` with `extraInputs` stacked after
/// the carried inputs and `extraResults` stacked results after the carried ones; returns the
/// new stacked results.
SmallVector<Value> repeatWith(mt::RepeatOp repeat, func::FuncOp layer, ValueRange extraInputs,
                              TypeRange extraResults) {
  OpBuilder b(repeat);
  SmallVector<Value> inputs(repeat.getInputs());
  llvm::append_range(inputs, extraInputs);
  SmallVector<Type> resultTypes(repeat.getResultTypes());
  for (Type type : extraResults)
    resultTypes.push_back(stacked(repeat, cast<NamedTensorType>(type)));
  auto replacement =
      mt::RepeatOp::create(b, repeat.getLoc(), resultTypes, inputs, repeat->getAttrs());
  replacement.setCalleeAttr(FlatSymbolRefAttr::get(layer.getSymNameAttr()));
  replacement.setCarriedAttr(b.getI64IntegerAttr(static_cast<int64_t>(repeat.getInputs().size())));
  unsigned numResults = repeat.getNumResults();
  repeat.replaceAllUsesWith(replacement.getResults().take_front(numResults));
  repeat.erase();
  return SmallVector<Value>(replacement.getResults().drop_front(numResults));
}

//===----------------------------------------------------------------------===//
// prefill
//===----------------------------------------------------------------------===//

/// Returns the prefill layer and entry.
std::pair<func::FuncOp, func::FuncOp> buildPrefill(SymbolTable &symbols, const CachedModel &model) {
  func::FuncOp layer = cloneLayer(symbols, model.layer, ".prefill", model.layer);
  mt::AttentionOp attention = opsOf<mt::AttentionOp>(layer).front();
  OpBuilder b(layer.getBody().front().getTerminator());
  TensorBuilder t(b, attention.getLoc());
  // The cache holds the keys and values as attention takes them (after rope, per kv head),
  // in f32.
  SmallVector<Value> cached;
  for (Value kv : {attention.getKey(), attention.getValue()})
    cached.push_back(mt::RenameOp::create(b, attention.getLoc(), t.castTo(kv, b.getF32Type()),
                                          model.seq, model.cacheSeq));
  appendResults(layer, cached, {"", ""});

  func::FuncOp prefill = cloneAfter(symbols, model.logits, "prefill", model.logits);
  mt::RepeatOp repeat = opsOf<mt::RepeatOp>(prefill).front();
  SmallVector<Value> stacks =
      repeatWith(repeat, layer, {}, {cached[0].getType(), cached[1].getType()});
  appendResults(prefill, stacks, {kKeysBuffer, kValuesBuffer});
  setBuffer(prefill, 0, kTokensBuffer);
  DimSizes sizes = oneSequence(model, model.window);
  resizeFunction(layer, sizes);
  resizeFunction(prefill, sizes);
  return {layer, prefill};
}

//===----------------------------------------------------------------------===//
// decode_step
//===----------------------------------------------------------------------===//

/// Builds the ops that read the absolute position in a function of one new position.
class PositionReader {
public:
  PositionReader(OpBuilder &b, Location loc, const CachedModel &model, Value position)
      : b(b), t(b, loc), loc(loc), model(model), position(position) {}

  /// Where the cache's position j is the new token's (1) or not (0): [seq, seq_cache], of
  /// type `element` (compared in f32).
  Value isNewPosition(Type element) {
    Value keys = cachePositions(), query = position32();
    Value one = t.scalar(1.0, keys);
    return t.castTo(t.sub(t.sub(one, t.greater(keys, query)), t.greater(query, keys)), element);
  }
  /// Where the cache's position j comes after the new token's (1) or not (0).
  Value isFuture(Type element) {
    return t.castTo(t.greater(cachePositions(), position32()), element);
  }
  /// `value` (with a `seq` of one position) at the absolute position, for an op that reads
  /// positions by index along `positionDim`: `build` applies it over the whole window,
  /// whose row at the position is selected (exactly: the other rows are multiplied by 0).
  Value atPosition(Value value, function_ref<Value(Value, StringAttr)> build) {
    Value row = t.reduceSum(value, {model.seq.getValue()});
    SmallVector<NamedDim> dims = typeOf(row).getDims();
    dims.push_back({model.cacheSeq, model.window});
    Value window = t.broadcastTo(row, typeOf(row).withDims(dims));
    Value applied = build(window, model.cacheSeq);
    Value picked = t.reduceSum(t.mul(applied, isNewPosition(typeOf(applied).getElementType())),
                               {model.cacheSeq.getValue()});
    return t.transposeTo(picked, typeOf(value));
  }

  TensorBuilder &tensors() { return t; }

private:
  Value cachePositions() {
    auto type =
        NamedTensorType::get(b.getContext(), {model.cacheSeq}, {model.window}, b.getF32Type());
    return mt::IotaOp::create(b, loc, type, model.cacheSeq);
  }
  Value position32() { return t.castTo(position, b.getF32Type()); }

  OpBuilder &b;
  TensorBuilder t;
  Location loc;
  const CachedModel &model;
  Value position;
};

/// Where a parameter has the sequence dimension (a learned position table), the rows of the
/// new positions.
void gatherPositionParams(func::FuncOp func, const CachedModel &model, Value position) {
  for (auto ref : opsOf<mt::ParamRefOp>(func)) {
    if (!typeOf(ref.getResult()).hasDim(model.seq.getValue()))
      continue;
    OpBuilder b(ref->getContext());
    b.setInsertionPointAfter(ref);
    auto rows = mt::GatherOp::create(b, ref.getLoc(), ref.getResult(), position, model.seq);
    ref.getResult().replaceAllUsesExcept(rows, rows);
  }
}

/// rope of a new position rotates by its absolute position: rope over the whole window,
/// the position's row selected. Bit for bit the window path's rotation.
void ropeAtPosition(func::FuncOp func, const CachedModel &model, Value position) {
  for (auto rope : opsOf<mt::RopeOp>(func)) {
    if (rope.getPosition() != model.seq.getValue())
      continue;
    OpBuilder b(rope);
    PositionReader reader(b, rope.getLoc(), model, position);
    Value rotated = reader.atPosition(rope.getInput(), [&](Value window, StringAttr positions) {
      return mt::RopeOp::create(b, rope.getLoc(), window, rope.getDimAttr(), positions,
                                rope.getThetaAttr(), rope.getInverseAttr(), Value())
          .getResult();
    });
    rope.replaceAllUsesWith(rotated);
    rope.erase();
  }
}

/// The attention of the new position over the cache, with the new keys and values written
/// at the position first; returns the output and the written caches. The same algebra as
/// mt-decompose's attention (scores scaled, the causal mask's large negative bias, softmax
/// over the keys' positions), the query's heads grouped per kv head, in f32: the output is
/// rounded to the attention's type once.
std::tuple<Value, Value, Value> cachedAttention(mt::AttentionOp attention, const CachedModel &model,
                                                Value position, Value keys, Value values) {
  OpBuilder b(attention);
  Location loc = attention.getLoc();
  PositionReader reader(b, loc, model, position);
  TensorBuilder &t = reader.tensors();
  Type element = b.getF32Type();
  StringRef seq = model.seq.getValue(), cacheSeq = model.cacheSeq.getValue();

  Value isNew = reader.isNewPosition(element);
  Value keep = t.sub(t.scalar(1.0, isNew), t.reduceSum(isNew, {seq}));
  auto write = [&](Value cache, Value fresh) {
    Value placed = t.reduceSum(t.mul(t.castTo(fresh, element), isNew), {seq});
    return t.add(t.mul(cache, keep), t.transposeTo(placed, typeOf(cache)));
  };
  Value k = write(keys, attention.getKey()), v = write(values, attention.getValue());

  Value q = t.castTo(attention.getQuery(), element);
  NamedTensorType qType = typeOf(q);
  StringAttr heads = attention.getHeadsDimAttr(), kvHeads = attention.getKvHeadsDimAttr();
  StringAttr group;
  if (heads != kvHeads) {
    int64_t kvCount = typeOf(keys).getDimSize(kvHeads.getValue());
    int64_t groupSize = qType.getDimSize(heads.getValue()) / kvCount;
    group = b.getStringAttr(heads.getValue() + "_group");
    SmallVector<NamedDim> dims;
    for (const NamedDim &dim : qType.getDims()) {
      if (dim.name != heads) {
        dims.push_back(dim);
        continue;
      }
      dims.push_back({kvHeads, kvCount});
      dims.push_back({group, groupSize});
    }
    q = mt::SplitOp::create(b, loc, qType.withDims(dims), q, heads,
                            b.getArrayAttr({kvHeads, group}));
  }
  Value scores = t.contract(q, k, {attention.getHeadDim()});
  scores = t.mul(scores, t.scalar(attention.getScale().convertToDouble(), scores));
  const llvm::fltSemantics &semantics = cast<FloatType>(element).getFloatSemantics();
  double large = llvm::APFloat::getLargest(semantics).convertToDouble() / 2;
  Value future = reader.isFuture(element);
  scores = t.add(scores, t.mul(future, t.scalar(-large, future)));
  Value probabilities =
      mt::SoftmaxOp::create(b, loc, scores, b.getStringAttr(cacheSeq)).getResult();
  Value out = t.contract(probabilities, v, {cacheSeq});
  if (group)
    out = mt::MergeOp::create(b, loc, out,
                              b.getStrArrayAttr({kvHeads.getValue(), group.getValue()}), heads);
  Type outElement = typeOf(attention.getResult()).getElementType();
  return {t.castTo(t.transposeTo(out, qType), outElement), k, v};
}

void buildDecodeStep(SymbolTable &symbols, const CachedModel &model, Operation *layerAfter,
                     Operation *after, Type cacheKeys, Type cacheValues) {
  MLIRContext *context = model.layer->getContext();
  DimSizes sizes = oneSequence(model, 1);
  auto positionType =
      NamedTensorType::get(context, {model.seq}, {1}, IntegerType::get(context, 32));

  // The layer: (carried..., position, keys, values) -> (carried..., keys, values).
  func::FuncOp layer = cloneLayer(symbols, model.layer, ".decode", layerAfter);
  resizeFunction(layer, sizes);
  Block &layerBody = layer.getBody().front();
  Value position = layerBody.addArgument(positionType, layer.getLoc());
  Value keys = layerBody.addArgument(cast<NamedTensorType>(cacheKeys), layer.getLoc());
  Value values = layerBody.addArgument(cast<NamedTensorType>(cacheValues), layer.getLoc());
  gatherPositionParams(layer, model, position);
  ropeAtPosition(layer, model, position);
  mt::AttentionOp attention = opsOf<mt::AttentionOp>(layer).front();
  auto [out, newKeys, newValues] = cachedAttention(attention, model, position, keys, values);
  attention.getResult().replaceAllUsesWith(out);
  attention.erase();
  auto ret = cast<func::ReturnOp>(layerBody.getTerminator());
  ret->insertOperands(ret->getNumOperands(), {newKeys, newValues});
  layer.setFunctionType(
      FunctionType::get(context, layerBody.getArgumentTypes(), ret->getOperandTypes()));

  // The entry: (tokens, position, keys, values) -> (logits, keys, values).
  func::FuncOp decode = cloneAfter(symbols, model.logits, "decode_step", after);
  resizeFunction(decode, sizes);
  Block &body = decode.getBody().front();
  mt::RepeatOp repeat = opsOf<mt::RepeatOp>(decode).front();
  Value entryPosition = body.addArgument(positionType, decode.getLoc());
  Value entryKeys =
      body.addArgument(stacked(repeat, cast<NamedTensorType>(cacheKeys)), decode.getLoc());
  Value entryValues =
      body.addArgument(stacked(repeat, cast<NamedTensorType>(cacheValues)), decode.getLoc());
  gatherPositionParams(decode, model, entryPosition);
  ropeAtPosition(decode, model, entryPosition);
  OpBuilder b(repeat);
  // Every call reads the same position: one copy per layer, as a stacked operand.
  Value positions =
      mt::BroadcastOp::create(b, repeat.getLoc(), stacked(repeat, positionType), entryPosition);
  SmallVector<Value> caches =
      repeatWith(repeat, layer, {positions, entryKeys, entryValues}, {cacheKeys, cacheValues});
  appendResults(decode, caches, {kKeysBuffer, kValuesBuffer});
  decode.setFunctionType(
      FunctionType::get(context, body.getArgumentTypes(), body.getTerminator()->getOperandTypes()));
  setBuffer(decode, 0, kTokensBuffer);
  setBuffer(decode, 1, kPositionBuffer);
  setBuffer(decode, 2, kKeysBuffer);
  setBuffer(decode, 3, kValuesBuffer);
}

struct KVCachePass : transforms::impl::MTKVCachePassBase<KVCachePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    auto logits = symbols.lookup<func::FuncOp>(kLogitsBuffer);
    if (!logits || symbols.lookup("prefill") || symbols.lookup("decode_step") ||
        !scoresOneSequencePerRank(module))
      return;
    std::optional<CachedModel> model = analyse(module, logits);
    if (!model)
      return;
    auto [prefillLayer, prefill] = buildPrefill(symbols, *model);
    unsigned numResults = prefill.getNumResults();
    Type keys = cast<NamedTensorType>(prefill.getResultTypes()[numResults - 2]);
    Type values = cast<NamedTensorType>(prefill.getResultTypes()[numResults - 1]);
    // The per-layer cache types: the stacked ones without the stacking dimension.
    auto perLayer = [](Type type) {
      NamedTensorType tensor = cast<NamedTensorType>(type);
      SmallVector<NamedDim> dims = tensor.getDims();
      return tensor.withDims(ArrayRef(dims).drop_front());
    };
    // decode_step takes one sequence's cache: keys and values as prefill returns them.
    buildDecodeStep(symbols, *model, prefillLayer, prefill, perLayer(keys), perLayer(values));
  }
};

} // namespace
