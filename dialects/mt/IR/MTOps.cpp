//===- MTOps.cpp - mt dialect operations ----------------------------------===//
//
// Verifiers of the global graph. Each checks the dimension names an op refers to, that
// sizes agree, and that the declared result type is exactly the one the op implies; the
// messages name the dimension and the operand at fault.
//
//===----------------------------------------------------------------------===//

#include "dialects/mt/IR/MTOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

using namespace mlir;
using namespace mtc::mt;

//===----------------------------------------------------------------------===//
// Custom assembly directives
//===----------------------------------------------------------------------===//

static ParseResult parseDimName(OpAsmParser &parser, StringAttr &dim) {
  std::string name;
  if (parser.parseKeywordOrString(&name))
    return failure();
  dim = parser.getBuilder().getStringAttr(name);
  return success();
}

static void printDimName(OpAsmPrinter &printer, Operation *, StringAttr dim) {
  printer.printKeywordOrString(dim.getValue());
}

static ParseResult parseDimList(OpAsmParser &parser, ArrayAttr &dims) {
  SmallVector<Attribute> names;
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, [&]() -> ParseResult {
        StringAttr name;
        if (parseDimName(parser, name))
          return failure();
        names.push_back(name);
        return success();
      }))
    return failure();
  dims = parser.getBuilder().getArrayAttr(names);
  return success();
}

static void printDimList(OpAsmPrinter &printer, Operation *op, ArrayAttr dims) {
  printer << '[';
  llvm::interleaveComma(dims.getAsRange<StringAttr>(), printer,
                        [&](StringAttr name) { printDimName(printer, op, name); });
  printer << ']';
}

static ParseResult parseInitValue(OpAsmParser &parser, InitAttr &init) {
  init = parseInitSpec(parser);
  return success(static_cast<bool>(init));
}

static void printInitValue(OpAsmPrinter &printer, Operation *, InitAttr init) {
  printInitSpec(printer, init);
}

#define GET_OP_CLASSES
#include "dialects/mt/IR/MTOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Verification helpers
//===----------------------------------------------------------------------===//

static NamedTensorType tensorOf(Value value) { return cast<NamedTensorType>(value.getType()); }

static SmallVector<StringRef> namesOf(ArrayAttr dims) {
  return llvm::to_vector(
      llvm::map_range(dims.getAsRange<StringAttr>(), [](StringAttr s) { return s.getValue(); }));
}

static LogicalResult requireFloat(Operation *op, NamedTensorType type, StringRef what) {
  if (isa<FloatType>(type.getElementType()))
    return success();
  return op->emitOpError() << "expects floating-point " << what << ", got element type "
                           << type.getElementType();
}

static LogicalResult requireInteger(Operation *op, NamedTensorType type, StringRef what) {
  if (auto intType = dyn_cast<IntegerType>(type.getElementType());
      intType && intType.getWidth() > 1)
    return success();
  return op->emitOpError() << "expects integer " << what << ", got element type "
                           << type.getElementType();
}

static LogicalResult requireDim(Operation *op, NamedTensorType type, StringRef dim,
                                StringRef what) {
  if (type.hasDim(dim))
    return success();
  return op->emitOpError() << what << " " << type.dimsToString() << " has no dimension '"
                           << dim << "'";
}

static LogicalResult requireAbsent(Operation *op, NamedTensorType type, StringRef dim,
                                   StringRef what) {
  if (!type.hasDim(dim))
    return success();
  return op->emitOpError() << "new dimension '" << dim << "' already exists in the " << what
                           << " " << type.dimsToString();
}

static LogicalResult checkResult(Operation *op, Type expected, Type actual,
                                 StringRef what = "result") {
  if (expected == actual)
    return success();
  return op->emitOpError() << what << " type " << actual << " does not match the expected "
                           << expected;
}

/// True when `a` and `b` have the same named dimensions with the same sizes, in any order.
static bool sameDimSet(NamedTensorType a, NamedTensorType b) {
  if (a.getRank() != b.getRank())
    return false;
  for (const NamedDim &dim : a.getDims()) {
    std::optional<unsigned> index = b.getDimIndex(dim.name);
    if (!index || b.getDimSizes()[*index] != dim.size)
      return false;
  }
  return true;
}

/// `norm`'s scale and bias: exactly the normalised dimension, the input's element type.
static LogicalResult verifyNormWeight(Operation *op, NamedTensorType input, StringRef dim,
                                      Value weight, StringRef what) {
  NamedTensorType expected = input.withDims({NamedDim{
      StringAttr::get(op->getContext(), dim), input.getDimSize(dim)}});
  return checkResult(op, expected, weight.getType(), what);
}

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  if (!isa<FloatType>(getTensorType().getElementType()))
    return emitOpError() << "parameter '" << getSymName()
                         << "' must have a floating-point element type, got "
                         << getTensorType().getElementType();
  return success();
}

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FlatSymbolRefAttr layer = getLayerAttr();
  if (!layer)
    return success();
  auto func = symbolTable.lookupNearestSymbolFrom<func::FuncOp>(*this, layer);
  if (!func)
    return emitOpError() << "layer '" << layer.getValue() << "' of parameter '" << getSymName()
                         << "' does not name a function";
  if (!func->hasAttr(MTDialect::kLayerAttrName))
    return emitOpError() << "layer '" << layer.getValue() << "' of parameter '" << getSymName()
                         << "' is not a layer (a func.func marked '"
                         << MTDialect::kLayerAttrName << "')";
  return success();
}

/// The type `op` sees when it reads or writes parameter or state `symbol`: a layer
/// parameter's instance inside its layer, all its instances stacked along a leading
/// `layers` dimension elsewhere; a state's storage type.
static LogicalResult verifyParameterAccess(Operation *op, SymbolTableCollection &symbolTable,
                                           FlatSymbolRefAttr symbol, Type type) {
  Operation *target = symbolTable.lookupNearestSymbolFrom(op, symbol);
  if (auto state = dyn_cast_or_null<StateOp>(target)) {
    if (state.getType() != type)
      return op->emitOpError() << "type " << type << " does not match state '"
                               << symbol.getValue() << "' of type " << state.getType();
    return success();
  }
  auto param = dyn_cast_or_null<ParamOp>(target);
  if (!param)
    return op->emitOpError() << "'" << symbol.getValue()
                             << "' does not name an mt.param or mt.state";
  std::optional<StringRef> layer = param.getLayer();
  auto func = op->getParentOfType<func::FuncOp>();
  bool instance = !layer || (func && MTDialect::getLayerOf(func) == *layer);
  if (instance) {
    if (param.getType() != type)
      return op->emitOpError() << "type " << type << " does not match parameter '"
                               << symbol.getValue() << "' of type " << param.getType();
    return success();
  }
  if (func && MTDialect::getLayerOf(func))
    return op->emitOpError() << "parameter '" << symbol.getValue() << "' belongs to layer '"
                             << *layer << "' and can only be read inside it";
  auto tensor = cast<NamedTensorType>(type);
  if (tensor.getRank() == 0 || tensor.getDimNames().front().getValue() != "layers" ||
      tensor.withDims(ArrayRef(tensor.getDims()).drop_front()) != param.getType())
    return op->emitOpError() << "outside layer '" << *layer << "', parameter '"
                             << symbol.getValue()
                             << "' is read with all its instances: expected its type "
                             << param.getType() << " with a leading 'layers' dimension, got "
                             << type;
  return success();
}

LogicalResult ParamRefOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyParameterAccess(*this, symbolTable, getParamAttr(), getResult().getType());
}

LogicalResult AssignOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyParameterAccess(*this, symbolTable, getTargetAttr(), getValue().getType());
}

LogicalResult ConstantOp::verify() {
  NamedTensorType type = tensorOf(getResult());
  if (type.getRank() != 0)
    return emitOpError() << "must produce a scalar (no dimensions), got "
                         << type.dimsToString();
  return requireFloat(*this, type, "result");
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename BinaryOp>
static LogicalResult verifyBinary(BinaryOp op) {
  NamedTensorType lhs = tensorOf(op.getLhs()), rhs = tensorOf(op.getRhs());
  if (lhs.getElementType() != rhs.getElementType())
    return op.emitOpError() << "operands have different element types "
                            << lhs.getElementType() << " and " << rhs.getElementType();
  FailureOr<NamedTensorType> expected =
      inferBroadcastType(lhs, rhs, [&] { return op.emitOpError(); });
  if (failed(expected))
    return failure();
  return checkResult(op, *expected, op.getResult().getType());
}

LogicalResult AddOp::verify() { return verifyBinary(*this); }
LogicalResult SubOp::verify() { return verifyBinary(*this); }
LogicalResult MulOp::verify() { return verifyBinary(*this); }
LogicalResult DivOp::verify() { return verifyBinary(*this); }
LogicalResult MaxOp::verify() { return verifyBinary(*this); }
LogicalResult PowOp::verify() {
  if (failed(requireFloat(*this, tensorOf(getLhs()), "operand")))
    return failure();
  return verifyBinary(*this);
}

#define MT_VERIFY_FLOAT_UNARY(Op)                                                       \
  LogicalResult Op::verify() { return requireFloat(*this, tensorOf(getInput()), "operand"); }
MT_VERIFY_FLOAT_UNARY(NegOp)
MT_VERIFY_FLOAT_UNARY(ExpOp)
MT_VERIFY_FLOAT_UNARY(LogOp)
MT_VERIFY_FLOAT_UNARY(SqrtOp)
MT_VERIFY_FLOAT_UNARY(RsqrtOp)
MT_VERIFY_FLOAT_UNARY(TanhOp)
MT_VERIFY_FLOAT_UNARY(SigmoidOp)
MT_VERIFY_FLOAT_UNARY(CosOp)
MT_VERIFY_FLOAT_UNARY(ReluOp)
MT_VERIFY_FLOAT_UNARY(SiluOp)
MT_VERIFY_FLOAT_UNARY(GeluOp)
#undef MT_VERIFY_FLOAT_UNARY

LogicalResult CastOp::verify() {
  NamedTensorType input = tensorOf(getInput());
  return checkResult(*this, input.withElementType(tensorOf(getResult()).getElementType()),
                     getResult().getType());
}

LogicalResult TransposeOp::verify() {
  NamedTensorType input = tensorOf(getInput()), result = tensorOf(getResult());
  if (input.getElementType() != result.getElementType() || !sameDimSet(input, result))
    return emitOpError() << "result " << result.dimsToString() << " of " << result.getElementType()
                         << " is not a reordering of the operand " << input.dimsToString()
                         << " of " << input.getElementType();
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions and reductions
//===----------------------------------------------------------------------===//

LogicalResult ContractOp::verify() {
  NamedTensorType lhs = tensorOf(getLhs()), rhs = tensorOf(getRhs());
  if (failed(requireFloat(*this, lhs, "lhs")))
    return failure();
  FailureOr<NamedTensorType> expected =
      inferContractType(lhs, rhs, namesOf(getOver()), [&] { return emitOpError(); });
  if (failed(expected))
    return failure();
  return checkResult(*this, *expected, getResult().getType());
}

template <typename ReduceOp>
static LogicalResult verifyReduce(ReduceOp op) {
  if (op.getOver().empty())
    return op.emitOpError() << "needs at least one dimension to reduce over";
  NamedTensorType input = tensorOf(op.getInput());
  if (failed(requireFloat(op, input, "operand")))
    return failure();
  FailureOr<NamedTensorType> expected =
      inferReduceType(input, namesOf(op.getOver()), [&] { return op.emitOpError(); });
  if (failed(expected))
    return failure();
  return checkResult(op, *expected, op.getResult().getType());
}

LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMaxOp::verify() { return verifyReduce(*this); }

//===----------------------------------------------------------------------===//
// Normalisation and attention
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  NamedTensorType input = tensorOf(getInput());
  if (failed(requireFloat(*this, input, "operand")))
    return failure();
  return requireDim(*this, input, getDim(), "operand");
}

LogicalResult LayerNormOp::verify() {
  NamedTensorType input = tensorOf(getInput());
  if (failed(requireFloat(*this, input, "operand")) ||
      failed(requireDim(*this, input, getDim(), "operand")) ||
      failed(verifyNormWeight(*this, input, getDim(), getScale(), "scale")) ||
      (getBias() && failed(verifyNormWeight(*this, input, getDim(), getBias(), "bias"))))
    return failure();
  if (getEpsilon().convertToDouble() <= 0)
    return emitOpError() << "epsilon must be positive";
  return checkResult(*this, input, getResult().getType());
}

LogicalResult RMSNormOp::verify() {
  NamedTensorType input = tensorOf(getInput());
  if (failed(requireFloat(*this, input, "operand")) ||
      failed(requireDim(*this, input, getDim(), "operand")) ||
      failed(verifyNormWeight(*this, input, getDim(), getScale(), "scale")))
    return failure();
  if (getEpsilon().convertToDouble() <= 0)
    return emitOpError() << "epsilon must be positive";
  return checkResult(*this, input, getResult().getType());
}

LogicalResult RopeOp::verify() {
  NamedTensorType input = tensorOf(getInput());
  if (failed(requireFloat(*this, input, "operand")) ||
      failed(requireDim(*this, input, getDim(), "operand")) ||
      failed(requireDim(*this, input, getPosition(), "operand")))
    return failure();
  if (getDim() == getPosition())
    return emitOpError() << "rotated dimension and position dimension must differ";
  if (input.getDimSize(getDim()) % 2 != 0)
    return emitOpError() << "rotated dimension '" << getDim()
                         << "' must have an even size, got " << input.getDimSize(getDim());
  if (getTheta().convertToDouble() <= 0)
    return emitOpError() << "theta must be positive";
  return success();
}

LogicalResult AttentionOp::verify() {
  NamedTensorType q = tensorOf(getQuery()), k = tensorOf(getKey()), v = tensorOf(getValue());
  if (failed(requireFloat(*this, q, "query")))
    return failure();
  for (StringRef dim : {getSeqDim(), getHeadsDim(), getHeadDim()})
    if (failed(requireDim(*this, q, dim, "query")))
      return failure();
  if (getSeqDim() == getHeadsDim() || getSeqDim() == getHeadDim() ||
      getHeadsDim() == getHeadDim())
    return emitOpError() << "sequence, heads and head dimensions must be three different "
                            "dimensions, got ("
                         << getSeqDim() << ", " << getHeadsDim() << ", " << getHeadDim() << ")";
  if (getKvHeadsDim() != getHeadsDim() && q.hasDim(getKvHeadsDim()))
    return emitOpError() << "key/value heads dimension '" << getKvHeadsDim()
                         << "' must be '" << getHeadsDim()
                         << "' or a dimension the query lacks, but the query "
                         << q.dimsToString() << " has it";
  if (k != v)
    return emitOpError() << "key " << k << " and value " << v << " must have the same type";
  if (k.getElementType() != q.getElementType())
    return emitOpError() << "key element type " << k.getElementType()
                         << " differs from the query's " << q.getElementType();
  for (StringRef dim : {getSeqDim(), getKvHeadsDim(), getHeadDim()})
    if (failed(requireDim(*this, k, dim, "key")))
      return failure();
  if (getKvHeadsDim() != getHeadsDim() && k.hasDim(getHeadsDim()))
    return emitOpError() << "key has both '" << getHeadsDim() << "' and '" << getKvHeadsDim()
                         << "'";
  // Every query dimension other than the head dimension is shared with the key.
  for (const NamedDim &dim : q.getDims()) {
    StringRef name = dim.name.getValue();
    StringRef keyName = name == getHeadsDim() ? getKvHeadsDim() : name;
    // Distinct names: the head counts only need to divide (checked below). One name: one
    // dimension, so the sizes agree.
    if (name == getHeadsDim() && getKvHeadsDim() != getHeadsDim())
      continue;
    if (!k.hasDim(keyName))
      return emitOpError() << "key " << k.dimsToString() << " lacks the query dimension '"
                           << name << "'";
    if (name != getSeqDim() && k.getDimSize(keyName) != dim.size)
      return emitOpError() << "dimension '" << name << "' has size " << dim.size
                           << " in the query but " << k.getDimSize(keyName) << " in the key";
  }
  if (k.getRank() != q.getRank())
    return emitOpError() << "key " << k.dimsToString()
                         << " has dimensions that the query " << q.dimsToString()
                         << " lacks";
  if (getCausal() && k.getDimSize(getSeqDim()) != q.getDimSize(getSeqDim()))
    return emitOpError() << "causal attention needs equal query and key lengths, got "
                         << q.getDimSize(getSeqDim()) << " and "
                         << k.getDimSize(getSeqDim());
  int64_t heads = q.getDimSize(getHeadsDim()), kvHeads = k.getDimSize(getKvHeadsDim());
  if (heads % kvHeads != 0)
    return emitOpError() << "query heads (" << heads
                         << ") must be a multiple of key/value heads (" << kvHeads << ")";
  if (getScale().convertToDouble() <= 0)
    return emitOpError() << "scale must be positive";
  return checkResult(*this, q, getResult().getType());
}

//===----------------------------------------------------------------------===//
// Embedding, loss, regularisation
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::verify() {
  NamedTensorType table = tensorOf(getTable()), indices = tensorOf(getIndices());
  if (failed(requireFloat(*this, table, "table")) ||
      failed(requireInteger(*this, indices, "indices")) ||
      failed(requireDim(*this, table, getDim(), "table")))
    return failure();
  SmallVector<NamedDim> dims = indices.getDims();
  for (const NamedDim &dim : table.getDims()) {
    if (dim.name.getValue() == getDim())
      continue;
    if (indices.hasDim(dim.name))
      return emitOpError() << "dimension '" << dim.name.getValue()
                           << "' is in both the table and the indices";
    dims.push_back(dim);
  }
  return checkResult(*this, table.withDims(dims), getResult().getType());
}

LogicalResult CrossEntropyOp::verify() {
  NamedTensorType logits = tensorOf(getLogits()), labels = tensorOf(getLabels());
  if (failed(requireFloat(*this, logits, "logits")) ||
      failed(requireInteger(*this, labels, "labels")) ||
      failed(requireDim(*this, logits, getDim(), "logits")))
    return failure();
  FailureOr<NamedTensorType> positions =
      inferReduceType(logits, {getDim()}, [&] { return emitOpError(); });
  if (failed(positions))
    return failure();
  if (!sameDimSet(*positions, labels))
    return emitOpError() << "labels " << labels.dimsToString()
                         << " must have the logits' dimensions without '" << getDim()
                         << "', i.e. " << positions->dimsToString();
  NamedTensorType result = tensorOf(getResult());
  if (result.getRank() != 0 || !isa<FloatType>(result.getElementType()))
    return emitOpError() << "result must be a floating-point scalar, got " << result;
  return success();
}

LogicalResult DropoutOp::verify() {
  if (failed(requireFloat(*this, tensorOf(getInput()), "operand")))
    return failure();
  double rate = getRate().convertToDouble();
  if (!(rate >= 0 && rate < 1))
    return emitOpError() << "rate must be in [0, 1), got " << rate;
  return success();
}

//===----------------------------------------------------------------------===//
// Dimension manipulation
//===----------------------------------------------------------------------===//

LogicalResult SplitOp::verify() {
  NamedTensorType input = tensorOf(getInput()), result = tensorOf(getResult());
  if (failed(requireDim(*this, input, getDim(), "operand")))
    return failure();
  if (getInto().size() < 2)
    return emitOpError() << "must split into at least two dimensions";
  SmallVector<NamedDim> dims;
  int64_t product = 1;
  llvm::StringSet<> seen;
  for (const NamedDim &dim : input.getDims()) {
    if (dim.name.getValue() != getDim()) {
      dims.push_back(dim);
      continue;
    }
    for (StringAttr name : getInto().getAsRange<StringAttr>()) {
      if (!seen.insert(name.getValue()).second)
        return emitOpError() << "dimension '" << name.getValue() << "' is listed twice";
      if (name.getValue() != getDim() &&
          failed(requireAbsent(*this, input, name.getValue(), "operand")))
        return failure();
      if (!result.hasDim(name))
        return emitOpError() << "result " << result.dimsToString()
                             << " lacks the new dimension '" << name.getValue() << "'";
      int64_t size = result.getDimSize(name.getValue());
      product *= size;
      dims.push_back({name, size});
    }
  }
  if (product != input.getDimSize(getDim()))
    return emitOpError() << "sizes of the new dimensions multiply to " << product
                         << ", not to the size " << input.getDimSize(getDim()) << " of '"
                         << getDim() << "'";
  return checkResult(*this, input.withDims(dims), result);
}

LogicalResult MergeOp::verify() {
  NamedTensorType input = tensorOf(getInput());
  if (getDims().size() < 2)
    return emitOpError() << "must merge at least two dimensions";
  llvm::StringSet<> merged;
  int64_t product = 1;
  for (StringAttr name : getDims().getAsRange<StringAttr>()) {
    if (failed(requireDim(*this, input, name.getValue(), "operand")))
      return failure();
    if (!merged.insert(name.getValue()).second)
      return emitOpError() << "dimension '" << name.getValue() << "' is listed twice";
    product *= input.getDimSize(name.getValue());
  }
  if (!merged.contains(getInto()) &&
      failed(requireAbsent(*this, input, getInto(), "operand")))
    return failure();
  SmallVector<NamedDim> dims;
  StringRef first = cast<StringAttr>(getDims()[0]).getValue();
  for (const NamedDim &dim : input.getDims()) {
    if (dim.name.getValue() == first)
      dims.push_back({getIntoAttr(), product});
    else if (!merged.contains(dim.name.getValue()))
      dims.push_back(dim);
  }
  return checkResult(*this, input.withDims(dims), getResult().getType());
}

LogicalResult RenameOp::verify() {
  NamedTensorType input = tensorOf(getInput());
  if (failed(requireDim(*this, input, getDim(), "operand")) ||
      failed(requireAbsent(*this, input, getTo(), "operand")))
    return failure();
  SmallVector<NamedDim> dims = input.getDims();
  for (NamedDim &dim : dims)
    if (dim.name.getValue() == getDim())
      dim.name = getToAttr();
  return checkResult(*this, input.withDims(dims), getResult().getType());
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

/// Token dimensions of a routing tensor: all but the `k` dimension.
static NamedTensorType tokenDimsOf(NamedTensorType routing, StringRef kDim) {
  return *inferReduceType(routing, {kDim}, [] { return InFlightDiagnostic(); });
}

LogicalResult TopKOp::verify() {
  NamedTensorType input = tensorOf(getInput());
  NamedTensorType values = tensorOf(getValues()), indices = tensorOf(getIndices());
  if (failed(requireFloat(*this, input, "operand")) ||
      failed(requireDim(*this, input, getDim(), "operand")) ||
      failed(requireAbsent(*this, input, getKDim(), "operand")) ||
      failed(requireInteger(*this, indices, "indices")))
    return failure();
  if (!values.hasDim(getKDim()))
    return emitOpError() << "values " << values.dimsToString() << " lack the dimension '"
                         << getKDim() << "'";
  int64_t k = values.getDimSize(getKDim());
  if (k > input.getDimSize(getDim()))
    return emitOpError() << "k = " << k << " exceeds the size "
                         << input.getDimSize(getDim()) << " of '" << getDim() << "'";
  SmallVector<NamedDim> dims = input.getDims();
  for (NamedDim &dim : dims)
    if (dim.name.getValue() == getDim())
      dim = {getKDimAttr(), k};
  NamedTensorType expected = input.withDims(dims);
  if (failed(checkResult(*this, expected, values, "values")))
    return failure();
  return checkResult(*this, expected.withElementType(indices.getElementType()), indices,
                     "indices");
}

LogicalResult DispatchOp::verify() {
  NamedTensorType input = tensorOf(getInput()), indices = tensorOf(getIndices());
  NamedTensorType result = tensorOf(getResult());
  if (failed(requireInteger(*this, indices, "indices")) ||
      failed(requireDim(*this, indices, getKDim(), "indices")) ||
      failed(requireAbsent(*this, input, getExpertDim(), "input")) ||
      failed(requireAbsent(*this, input, getCapacityDim(), "input")))
    return failure();
  if (getExpertDim() == getCapacityDim())
    return emitOpError() << "expert and capacity dimensions must differ, got '"
                         << getExpertDim() << "' for both";
  double factor = getCapacityFactor().convertToDouble();
  if (!(factor > 0) || !std::isfinite(factor))
    return emitOpError() << "capacity factor must be positive and finite, got " << factor;
  NamedTensorType tokens = tokenDimsOf(indices, getKDim());
  SmallVector<NamedDim> features;
  for (const NamedDim &dim : input.getDims()) {
    std::optional<unsigned> index = tokens.getDimIndex(dim.name);
    if (!index) {
      features.push_back(dim);
      continue;
    }
    if (tokens.getDimSizes()[*index] != dim.size)
      return emitOpError() << "token dimension '" << dim.name.getValue() << "' has size "
                           << dim.size << " in the input but " << tokens.getDimSizes()[*index]
                           << " in the indices";
  }
  for (const NamedDim &dim : tokens.getDims())
    if (!input.hasDim(dim.name))
      return emitOpError() << "input " << input.dimsToString()
                           << " lacks the token dimension '" << dim.name.getValue() << "'";
  if (!result.hasDim(getExpertDim()))
    return emitOpError() << "result " << result.dimsToString()
                         << " lacks the expert dimension '" << getExpertDim() << "'";
  int64_t experts = result.getDimSize(getExpertDim());
  int64_t k = indices.getDimSize(getKDim());
  double exactCapacity =
      std::ceil(factor * static_cast<double>(tokens.getNumElements() * k) / experts);
  if (exactCapacity >= 0x1p62)
    return emitOpError() << "capacity factor " << factor << " gives a capacity too large "
                         << "to represent";
  int64_t capacity = static_cast<int64_t>(exactCapacity);
  SmallVector<NamedDim> dims = {{getExpertDimAttr(), experts},
                                {getCapacityDimAttr(), capacity}};
  dims.append(features);
  return checkResult(*this, input.withDims(dims), result);
}

LogicalResult CombineOp::verify() {
  NamedTensorType input = tensorOf(getInput()), indices = tensorOf(getIndices());
  NamedTensorType weights = tensorOf(getWeights());
  if (failed(requireInteger(*this, indices, "indices")) ||
      failed(requireDim(*this, indices, getKDim(), "indices")) ||
      failed(requireDim(*this, input, getExpertDim(), "input")) ||
      failed(requireDim(*this, input, getCapacityDim(), "input")) ||
      failed(requireFloat(*this, weights, "weights")))
    return failure();
  if (getExpertDim() == getCapacityDim())
    return emitOpError() << "expert and capacity dimensions must differ, got '"
                         << getExpertDim() << "' for both";
  if (!sameDimSet(indices, weights))
    return emitOpError() << "weights " << weights.dimsToString()
                         << " must have the dimensions of the indices "
                         << indices.dimsToString();
  if (weights.getElementType() != input.getElementType())
    return emitOpError() << "weights element type " << weights.getElementType()
                         << " differs from the input's " << input.getElementType();
  SmallVector<NamedDim> dims = tokenDimsOf(indices, getKDim()).getDims();
  for (const NamedDim &dim : input.getDims()) {
    StringRef name = dim.name.getValue();
    if (name == getExpertDim() || name == getCapacityDim())
      continue;
    if (indices.hasDim(name))
      return emitOpError() << "feature dimension '" << name
                           << "' of the input is also a dimension of the indices";
    dims.push_back(dim);
  }
  return checkResult(*this, input.withDims(dims), getResult().getType());
}

LogicalResult LoadBalancingLossOp::verify() {
  NamedTensorType logits = tensorOf(getLogits()), indices = tensorOf(getIndices());
  if (failed(requireFloat(*this, logits, "logits")) ||
      failed(requireInteger(*this, indices, "indices")) ||
      failed(requireDim(*this, logits, getExpertDim(), "logits")) ||
      failed(requireDim(*this, indices, getKDim(), "indices")))
    return failure();
  NamedTensorType tokens = tokenDimsOf(indices, getKDim());
  NamedTensorType logitTokens =
      *inferReduceType(logits, {getExpertDim()}, [] { return InFlightDiagnostic(); });
  if (!sameDimSet(tokens, logitTokens))
    return emitOpError() << "logits " << logits.dimsToString() << " and indices "
                         << indices.dimsToString() << " must route the same tokens";
  NamedTensorType result = tensorOf(getResult());
  if (result.getRank() != 0 || result.getElementType() != logits.getElementType())
    return emitOpError() << "result must be a scalar of " << logits.getElementType()
                         << ", got " << result;
  return success();
}

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

std::optional<StringRef> MTDialect::getLayerOf(func::FuncOp func) {
  if (func->hasAttr(kLayerAttrName))
    return func.getSymName();
  if (auto of = func->getAttrOfType<FlatSymbolRefAttr>(kLayerOfAttrName))
    return of.getValue();
  return std::nullopt;
}

/// `stacked` without its stacking dimension, which must be the leading one of size `count`.
static FailureOr<NamedTensorType> unstack(Operation *op, Type stacked, StringRef stackDim,
                                          int64_t count, StringRef what) {
  auto type = cast<NamedTensorType>(stacked);
  if (type.getRank() == 0 || type.getDimNames().front().getValue() != stackDim ||
      type.getDimSizes().front() != count)
    return op->emitOpError() << what << " " << type.dimsToString()
                             << " must lead with the stacking dimension '" << stackDim
                             << "' of size " << count;
  return type.withDims(ArrayRef(type.getDims()).drop_front());
}

LogicalResult RepeatOp::verify() {
  if (getCarried() && *getCarried() > std::min(getInputs().size(), getResults().size()))
    return emitOpError() << "carries " << *getCarried() << " values but has only "
                         << getInputs().size() << " operands and " << getResults().size()
                         << " results";
  unsigned carried = getNumCarried();
  if (!getCarried() && getInputs().size() != getResults().size())
    return emitOpError() << "without 'carried' every operand is carried, so the op needs as "
                            "many results as operands";
  for (unsigned i = 0; i < carried; ++i)
    if (getInputs()[i].getType() != getResults()[i].getType())
      return emitOpError() << "carried value #" << i
                           << " must keep its type from call to call, since each call feeds "
                              "the next";
  for (Value value : getInputs().drop_front(carried))
    if (failed(unstack(*this, value.getType(), getStackDimName(), getCount(), "stacked operand")))
      return failure();
  for (Value value : getResults().drop_front(carried))
    if (failed(unstack(*this, value.getType(), getStackDimName(), getCount(), "stacked result")))
      return failure();
  return success();
}

LogicalResult RepeatOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto callee = symbolTable.lookupNearestSymbolFrom<func::FuncOp>(*this, getCalleeAttr());
  if (!callee)
    return emitOpError() << "'" << getCallee() << "' does not name a function";
  if (!MTDialect::getLayerOf(callee))
    return emitOpError() << "'" << getCallee() << "' is not a layer (a func.func marked '"
                         << MTDialect::kLayerAttrName << "' or '"
                         << MTDialect::kLayerOfAttrName << "')";
  // The callee sees one slice of each stacked operand and produces one slice of each
  // stacked result.
  unsigned carried = getNumCarried();
  SmallVector<Type> inputs, results;
  for (auto [i, value] : llvm::enumerate(getInputs()))
    inputs.push_back(i < carried ? value.getType()
                                 : Type(*unstack(*this, value.getType(), getStackDimName(),
                                                 getCount(), "stacked operand")));
  for (auto [i, value] : llvm::enumerate(getResults()))
    results.push_back(i < carried ? value.getType()
                                  : Type(*unstack(*this, value.getType(), getStackDimName(),
                                                  getCount(), "stacked result")));
  FunctionType type = callee.getFunctionType();
  if (type.getInputs() != ArrayRef<Type>(inputs) || type.getResults() != ArrayRef<Type>(results))
    return emitOpError() << "operand and result types do not match layer '" << getCallee()
                         << "' of type " << type;
  return success();
}

//===----------------------------------------------------------------------===//
// Helpers of the backward pass
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::verify() {
  NamedTensorType input = tensorOf(getInput()), result = tensorOf(getResult());
  if (input.getElementType() != result.getElementType())
    return emitOpError() << "cannot change the element type";
  for (const NamedDim &dim : input.getDims())
    if (!result.hasDim(dim.name) || result.getDimSize(dim.name.getValue()) != dim.size)
      return emitOpError() << "result " << result.dimsToString()
                           << " must keep the operand's dimension '" << dim.name.getValue()
                           << "' of size " << dim.size;
  return success();
}

LogicalResult GreaterOp::verify() {
  if (failed(requireFloat(*this, tensorOf(getLhs()), "operands")))
    return failure();
  return verifyBinary(*this);
}

LogicalResult GeluGradOp::verify() {
  return requireFloat(*this, tensorOf(getInput()), "operand");
}

LogicalResult AttentionGradOp::verify() {
  // The forward op's rules, checked on a temporary forward op's operands.
  if (getQuery().getType() != getResultGrad().getType())
    return emitOpError() << "output gradient must have the query's type";
  if (getQueryGrad().getType() != getQuery().getType() ||
      getKeyGrad().getType() != getKey().getType() ||
      getValueGrad().getType() != getValue().getType())
    return emitOpError() << "gradients must have the types of query, key and value";
  OpBuilder builder(getContext());
  OperationState state(getLoc(), AttentionOp::getOperationName());
  AttentionOp::build(builder, state, getQuery().getType(), getQuery(), getKey(), getValue(),
                     getSeqDimAttr(), getHeadsDimAttr(), getKvHeadsDimAttr(), getHeadDimAttr(),
                     getCausalAttr(), getScaleAttr());
  Operation *forward = Operation::create(state);
  LogicalResult result = cast<AttentionOp>(forward).verify();
  forward->destroy();
  return result;
}

LogicalResult EmbeddingGradOp::verify() {
  NamedTensorType table = tensorOf(getResult()), indices = tensorOf(getIndices());
  if (failed(requireFloat(*this, table, "result")) ||
      failed(requireInteger(*this, indices, "indices")) ||
      failed(requireDim(*this, table, getDim(), "result")))
    return failure();
  SmallVector<NamedDim> dims = indices.getDims();
  for (const NamedDim &dim : table.getDims())
    if (dim.name.getValue() != getDim())
      dims.push_back(dim);
  return checkResult(*this, table.withDims(dims), getGrad().getType(), "gradient");
}

LogicalResult CrossEntropyGradOp::verify() {
  NamedTensorType loss = tensorOf(getLossGrad());
  if (loss.getRank() != 0)
    return emitOpError() << "loss gradient must be a scalar";
  if (failed(checkResult(*this, getLogits().getType(), getResult().getType())))
    return failure();
  NamedTensorType logits = tensorOf(getLogits()), labels = tensorOf(getLabels());
  if (failed(requireInteger(*this, labels, "labels")) ||
      failed(requireDim(*this, logits, getDim(), "logits")))
    return failure();
  if (!sameDimSet(*inferReduceType(logits, {getDim()}, [] { return InFlightDiagnostic(); }),
                  labels))
    return emitOpError() << "labels " << labels.dimsToString()
                         << " must have the logits' dimensions without '" << getDim() << "'";
  return success();
}

LogicalResult TopKGradOp::verify() {
  NamedTensorType grad = tensorOf(getValuesGrad()), indices = tensorOf(getIndices());
  NamedTensorType result = tensorOf(getResult());
  if (failed(requireInteger(*this, indices, "indices")) ||
      failed(requireDim(*this, grad, getKDim(), "values gradient")) ||
      failed(requireDim(*this, result, getDim(), "result")))
    return failure();
  if (!sameDimSet(grad, indices))
    return emitOpError() << "values gradient and indices must have the same dimensions";
  SmallVector<NamedDim> dims = grad.getDims();
  for (NamedDim &dim : dims)
    if (dim.name.getValue() == getKDim())
      dim = {getDimAttr(), result.getDimSize(getDim())};
  return checkResult(*this, grad.withDims(dims), result);
}

LogicalResult CombineGradOp::verify() {
  if (getInputGrad().getType() != getInput().getType() ||
      getWeightsGrad().getType() != getWeights().getType())
    return emitOpError() << "gradients must have the types of the input and the weights";
  return success();
}

LogicalResult LoadBalancingLossGradOp::verify() {
  if (tensorOf(getLossGrad()).getRank() != 0)
    return emitOpError() << "loss gradient must be a scalar";
  return checkResult(*this, getLogits().getType(), getResult().getType());
}
