//===- Decomposer.cpp - building composite mt ops from core ops -----------===//

#include "compiler/lowering/Decomposer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/APFloat.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::lowering;
using mt::NamedDim;
using mt::NamedTensorType;
using mt::TensorBuilder;

//===----------------------------------------------------------------------===//
// DimNames
//===----------------------------------------------------------------------===//

DimNames::DimNames(ModuleOp module) {
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

StringAttr DimNames::fresh(MLIRContext *ctx, const Twine &base, int64_t size,
                           ArrayRef<NamedTensorType> avoid, ArrayRef<StringRef> avoidNames) {
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

//===----------------------------------------------------------------------===//
// Decomposer
//===----------------------------------------------------------------------===//

Value Decomposer::rename(Value value, StringRef from, StringAttr to) {
  return mt::RenameOp::create(b, loc, value, b.getStringAttr(from), to);
}

Value Decomposer::split(Value value, StringRef dim, ArrayRef<NamedDim> into) {
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

Value Decomposer::merge(Value value, ArrayRef<StringRef> merged, StringAttr into) {
  return mt::MergeOp::create(b, loc, value, b.getStrArrayAttr(merged), into);
}

Value Decomposer::meanOverPositions(Value value) {
  SmallVector<StringRef> positions;
  for (StringAttr name : typeOf(value).getDimNames())
    positions.push_back(name.getValue());
  return positions.empty() ? value : t.reduceMean(value, positions);
}

Value Decomposer::softmax(Value x, StringRef dim) {
  Value e = t.exp(t.sub(x, t.reduceMax(x, {dim})));
  return t.div(e, t.reduceSum(e, {dim}));
}

Value Decomposer::oneHot(Value logits, Value labels, StringRef dim) {
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

mt::IotaOp Decomposer::positions(StringAttr dim, int64_t size, Type elementType, int64_t extent) {
  if (!mt::IotaOp::holdsPositions(elementType, extent ? extent : size))
    elementType = b.getF32Type();
  return mt::IotaOp::create(b, loc, NamedTensorType::get({NamedDim{dim, size}}, elementType), dim);
}

//===----------------------------------------------------------------------===//
// AttentionForm
//===----------------------------------------------------------------------===//

void AttentionForm::init(Decomposer &d, Value query, Value key, Value value,
                         ArrayRef<NamedTensorType> others) {
  NamedTensorType qType = Decomposer::typeOf(query);
  NamedTensorType kType = Decomposer::typeOf(key);
  SmallVector<NamedTensorType> avoid = {qType, kType};
  avoid.append(others.begin(), others.end());
  kvSeq = d.dimNames().fresh(d.context(), seq.getValue() + "_kv", kType.getDimSize(seq), avoid);
  k = asKeyValue(d, key);
  v = asKeyValue(d, value);
  q = query;
  if (isGrouped()) {
    groupSize = qType.getDimSize(heads) / kType.getDimSize(kvHeads);
    group = d.dimNames().fresh(d.context(), heads.getValue() + "_group", groupSize, avoid,
                               {kvSeq.getValue()});
    q = splitHeads(d, q);
  }
}

Value AttentionForm::splitHeads(Decomposer &d, Value value) const {
  if (!isGrouped())
    return value;
  NamedTensorType type = Decomposer::typeOf(value);
  return d.split(value, heads, {{kvHeads, type.getDimSize(heads) / groupSize}, {group, groupSize}});
}

Value AttentionForm::mergeHeads(Decomposer &d, Value value) const {
  if (!isGrouped())
    return value;
  return d.merge(value, {kvHeads.getValue(), group.getValue()}, heads);
}

SmallVector<StringRef> AttentionForm::queryDimsPerKeyHead() const {
  SmallVector<StringRef> dims = {seq.getValue()};
  if (isGrouped())
    dims.push_back(group.getValue());
  return dims;
}

Value AttentionForm::scores(Decomposer &d, Value key) const {
  TensorBuilder &t = d.tensors();
  Value scores = t.contract(q, key, {headDim.getValue()});
  return t.mul(scores, t.scalar(scale, scores));
}

Value AttentionForm::probabilities(Decomposer &d) const {
  return d.softmax(maskedScores(d), kvSeq.getValue());
}

Value AttentionForm::maskedScores(Decomposer &d) const {
  TensorBuilder &t = d.tensors();
  Value s = scores(d, k);
  if (causal) {
    Type element = Decomposer::typeOf(s).getElementType();
    Value queryPos = d.positions(seq, Decomposer::typeOf(s).getDimSize(seq.getValue()), element);
    Value keyPos = d.rename(queryPos, seq.getValue(), kvSeq);
    s = t.add(s, causalBias(d, queryPos, keyPos, element));
  }
  return s;
}

Value AttentionForm::causalBias(Decomposer &d, Value queryPositions, Value keyPositions,
                                Type element, Value documentIds) const {
  TensorBuilder &t = d.tensors();
  Value mask = t.greater(keyPositions, queryPositions);
  if (documentIds) {
    // Document masking (mt.attention's positions): key j is also hidden from query i when
    // it lies before the query's document, j < i - positions[i]. The two masks are
    // disjoint (the document starts at or before i), so their sum is 0/1 and one large
    // negative bias covers both. The ids are in the positions' exact type, as i and j are.
    Type exact = Decomposer::typeOf(queryPositions).getElementType();
    NamedTensorType ids = Decomposer::typeOf(documentIds);
    Value documentStart = t.sub(queryPositions, d.conform(documentIds, ids.withElementType(exact)));
    mask = t.add(mask, t.greater(documentStart, keyPositions));
  }
  mask = d.conform(mask, Decomposer::typeOf(mask).withElementType(element));
  const llvm::fltSemantics &semantics = cast<FloatType>(element).getFloatSemantics();
  double large = llvm::APFloat::getLargest(semantics).convertToDouble() / 2;
  return t.mul(mask, t.scalar(-large, mask));
}

//===----------------------------------------------------------------------===//
// Attention and its backward
//===----------------------------------------------------------------------===//

SmallVector<Value> lowering::decomposeAttention(Decomposer &d, mt::AttentionOp op) {
  AttentionForm form = AttentionForm::of(d, op);
  if (!op.getLse()) {
    Value p = form.probabilities(d);
    Value out = d.tensors().contract(p, form.v, {form.kvSeq.getValue()});
    return {d.conform(form.mergeHeads(d, out), op.getResult().getType())};
  }
  // save_lse: the softmax's pieces, whose maximum and sum give the log-sum-exp.
  TensorBuilder &t = d.tensors();
  StringRef kvSeq = form.kvSeq.getValue();
  Value s = form.maskedScores(d);
  Value max = t.reduceMax(s, {kvSeq});
  Value e = t.exp(t.sub(s, max));
  Value sum = t.reduceSum(e, {kvSeq});
  Value out = t.div(t.contract(e, form.v, {kvSeq}), sum);
  Value logSumExp = t.add(max, t.log(sum));
  return {d.conform(form.mergeHeads(d, out), op.getResult().getType()),
          d.conform(form.mergeHeads(d, logSumExp), op.getLse().getType())};
}

/// With s = scale * q.k (masked), p = softmax(s) and the output gradient do:
///   dv = p^T do,  dp = do v^T,  ds = p * (dp - sum_kv(dp * p)),
///   dq = scale * ds k,  dk = scale * ds^T q,
/// where contracting over the query's sequence and group sums the key and value
/// gradients over the query heads that share a key/value head.
SmallVector<Value> lowering::decomposeAttentionGrad(Decomposer &d, mt::AttentionGradOp op) {
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
// Low precision
//===----------------------------------------------------------------------===//

NamedTensorType lowering::widenedType(Type type) {
  auto tensor = dyn_cast<NamedTensorType>(type);
  if (!tensor)
    return {};
  auto element = dyn_cast<FloatType>(tensor.getElementType());
  if (!element || element.getWidth() >= 32)
    return {};
  return tensor.withElementType(Float32Type::get(type.getContext()));
}

Operation *lowering::widenedClone(OpBuilder &builder, Operation *op) {
  bool low = llvm::any_of(op->getOperandTypes(), widenedType) ||
             llvm::any_of(op->getResultTypes(), widenedType);
  if (!low)
    return nullptr;
  IRMapping mapping;
  for (Value operand : op->getOperands())
    if (NamedTensorType wide = widenedType(operand.getType()); wide && !mapping.contains(operand))
      mapping.map(operand, mt::CastOp::create(builder, op->getLoc(), wide, operand));
  Operation *clone = builder.clone(*op, mapping);
  for (OpResult result : clone->getResults())
    if (NamedTensorType wide = widenedType(result.getType()))
      result.setType(wide);
  return clone;
}
