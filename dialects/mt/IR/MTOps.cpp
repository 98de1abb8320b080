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
#include "llvm/ADT/APFloat.h"
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

/// Whether `stacked` is `instance` with a leading `layers` dimension: how all the
/// instances of a layer parameter (and its optimizer state) are held.
static bool isStackedOf(NamedTensorType stacked, Type instance) {
  return stacked.getRank() != 0 && stacked.getDimNames().front().getValue() == "layers" &&
         stacked.withDims(ArrayRef(stacked.getDims()).drop_front()) == instance;
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
  if (!isStackedOf(cast<NamedTensorType>(type), param.getType()))
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

/// A state has its parameter's storage type: the parameter's type, with a leading `layers`
/// dimension for a layer parameter.
LogicalResult StateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param = symbolTable.lookupNearestSymbolFrom<ParamOp>(*this, getOfAttr());
  if (!param)
    return emitOpError() << "'" << getOf() << "' does not name an mt.param";
  auto type = cast<NamedTensorType>(getType());
  if (!param.getLayer()) {
    if (type != param.getType())
      return emitOpError() << "state '" << getSymName() << "' of parameter '" << getOf()
                           << "' must have its type " << param.getType() << ", got " << type;
    return success();
  }
  if (!isStackedOf(type, param.getType()))
    return emitOpError() << "state '" << getSymName() << "' of layer parameter '" << getOf()
                         << "' holds all its instances: expected its type " << param.getType()
                         << " with a leading 'layers' dimension, got " << type;
  return success();
}

LogicalResult ConstantOp::verify() {
  NamedTensorType type = tensorOf(getResult());
  if (type.getRank() != 0)
    return emitOpError() << "must produce a scalar (no dimensions), got "
                         << type.dimsToString();
  return requireFloat(*this, type, "result");
}

bool IotaOp::holdsPositions(Type elementType, int64_t size) {
  // The largest position is size - 1; a float of p significand bits holds every integer
  // up to 2^p exactly.
  if (auto floatType = dyn_cast<FloatType>(elementType)) {
    unsigned bits = llvm::APFloat::semanticsPrecision(floatType.getFloatSemantics());
    return bits >= 63 || size - 1 <= (int64_t(1) << bits);
  }
  if (auto intType = dyn_cast<IntegerType>(elementType); intType && intType.getWidth() > 1)
    return intType.getWidth() >= 64 || size - 1 <= (int64_t(1) << (intType.getWidth() - 1)) - 1;
  return false;
}

LogicalResult IotaOp::verify() {
  NamedTensorType type = tensorOf(getResult());
  if (type.getRank() != 1 || type.getDimNames().front().getValue() != getDim())
    return emitOpError() << "result must have exactly the one dimension '" << getDim()
                         << "', got " << type.dimsToString();
  Type element = type.getElementType();
  if (!isa<FloatType>(element) && failed(requireInteger(*this, type, "or floating-point result")))
    return failure();
  if (!holdsPositions(element, type.getNumElements()))
    return emitOpError() << "element type " << element << " cannot hold every position up to "
                         << type.getNumElements() - 1 << " exactly";
  return success();
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

/// The rules of mt.attention on its operands and attributes, which mt.attention_grad
/// shares.
template <typename AttentionLikeOp>
static LogicalResult verifyAttentionOperands(AttentionLikeOp op) {
  NamedTensorType q = tensorOf(op.getQuery()), k = tensorOf(op.getKey()),
                  v = tensorOf(op.getValue());
  if (failed(requireFloat(op, q, "query")))
    return failure();
  for (StringRef dim : {op.getSeqDim(), op.getHeadsDim(), op.getHeadDim()})
    if (failed(requireDim(op, q, dim, "query")))
      return failure();
  if (op.getSeqDim() == op.getHeadsDim() || op.getSeqDim() == op.getHeadDim() ||
      op.getHeadsDim() == op.getHeadDim())
    return op.emitOpError() << "sequence, heads and head dimensions must be three different "
                               "dimensions, got ("
                            << op.getSeqDim() << ", " << op.getHeadsDim() << ", " << op.getHeadDim()
                            << ")";
  if (op.getKvHeadsDim() != op.getHeadsDim() && q.hasDim(op.getKvHeadsDim()))
    return op.emitOpError() << "key/value heads dimension '" << op.getKvHeadsDim() << "' must be '"
                            << op.getHeadsDim()
                            << "' or a dimension the query lacks, but the query "
                            << q.dimsToString() << " has it";
  if (k != v)
    return op.emitOpError() << "key " << k << " and value " << v << " must have the same type";
  if (k.getElementType() != q.getElementType())
    return op.emitOpError() << "key element type " << k.getElementType()
                            << " differs from the query's " << q.getElementType();
  for (StringRef dim : {op.getSeqDim(), op.getKvHeadsDim(), op.getHeadDim()})
    if (failed(requireDim(op, k, dim, "key")))
      return failure();
  if (op.getKvHeadsDim() != op.getHeadsDim() && k.hasDim(op.getHeadsDim()))
    return op.emitOpError() << "key has both '" << op.getHeadsDim() << "' and '"
                            << op.getKvHeadsDim() << "'";
  // Every query dimension other than the head dimension is shared with the key.
  for (const NamedDim &dim : q.getDims()) {
    StringRef name = dim.name.getValue();
    StringRef keyName = name == op.getHeadsDim() ? op.getKvHeadsDim() : name;
    // Distinct names: the head counts only need to divide (checked below). One name: one
    // dimension, so the sizes agree.
    if (name == op.getHeadsDim() && op.getKvHeadsDim() != op.getHeadsDim())
      continue;
    if (!k.hasDim(keyName))
      return op.emitOpError() << "key " << k.dimsToString() << " lacks the query dimension '"
                              << name << "'";
    if (name != op.getSeqDim() && k.getDimSize(keyName) != dim.size)
      return op.emitOpError() << "dimension '" << name << "' has size " << dim.size
                              << " in the query but " << k.getDimSize(keyName) << " in the key";
  }
  if (k.getRank() != q.getRank())
    return op.emitOpError() << "key " << k.dimsToString() << " has dimensions that the query "
                            << q.dimsToString() << " lacks";
  if (op.getCausal() && k.getDimSize(op.getSeqDim()) != q.getDimSize(op.getSeqDim()))
    return op.emitOpError() << "causal attention needs equal query and key lengths, got "
                            << q.getDimSize(op.getSeqDim()) << " and "
                            << k.getDimSize(op.getSeqDim());
  int64_t heads = q.getDimSize(op.getHeadsDim()), kvHeads = k.getDimSize(op.getKvHeadsDim());
  if (heads % kvHeads != 0)
    return op.emitOpError() << "query heads (" << heads
                            << ") must be a multiple of key/value heads (" << kvHeads << ")";
  if (op.getScale().convertToDouble() <= 0)
    return op.emitOpError() << "scale must be positive";
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttentionOperands(*this)))
    return failure();
  return checkResult(*this, getQuery().getType(), getResult().getType());
}

//===----------------------------------------------------------------------===//
// Embedding, loss, regularisation
//===----------------------------------------------------------------------===//

/// The rows of `table` (`what` in messages) that `indices` select along `dim`: the indices'
/// dimensions, then the table's others. mt.gather produces it; mt.embedding_grad scatters
/// a gradient of this type back.
static FailureOr<NamedTensorType> inferGatherType(Operation *op, NamedTensorType table,
                                                  NamedTensorType indices, StringRef dim,
                                                  StringRef what) {
  if (failed(requireFloat(op, table, what)) ||
      failed(requireInteger(op, indices, "indices")) ||
      failed(requireDim(op, table, dim, what)))
    return failure();
  SmallVector<NamedDim> dims = indices.getDims();
  for (const NamedDim &tableDim : table.getDims()) {
    if (tableDim.name.getValue() == dim)
      continue;
    if (indices.hasDim(tableDim.name))
      return op->emitOpError() << "dimension '" << tableDim.name.getValue()
                               << "' is in both the table and the indices";
    dims.push_back(tableDim);
  }
  return table.withDims(dims);
}

LogicalResult GatherOp::verify() {
  FailureOr<NamedTensorType> expected =
      inferGatherType(*this, tensorOf(getTable()), tensorOf(getIndices()), getDim(), "table");
  if (failed(expected))
    return failure();
  return checkResult(*this, *expected, getResult().getType());
}

/// The rules of mt.cross_entropy on its logits and labels, which mt.cross_entropy_grad
/// shares.
template <typename CrossEntropyLikeOp>
static LogicalResult verifyCrossEntropyOperands(CrossEntropyLikeOp op) {
  NamedTensorType logits = tensorOf(op.getLogits()), labels = tensorOf(op.getLabels());
  if (failed(requireFloat(op, logits, "logits")) ||
      failed(requireInteger(op, labels, "labels")) ||
      failed(requireDim(op, logits, op.getDim(), "logits")))
    return failure();
  FailureOr<NamedTensorType> positions =
      inferReduceType(logits, {op.getDim()}, [&] { return op.emitOpError(); });
  if (failed(positions))
    return failure();
  if (!sameDimSet(*positions, labels))
    return op.emitOpError() << "labels " << labels.dimsToString()
                            << " must have the logits' dimensions without '" << op.getDim()
                            << "', i.e. " << positions->dimsToString();
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifyCrossEntropyOperands(*this)))
    return failure();
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

/// The values type of mt.topk taking the `k` largest entries of `input` (`what` in
/// messages) along `dim`: `kDim` of size k replaces `dim`. mt.topk_grad checks its
/// gradient against it.
static FailureOr<NamedTensorType> inferTopKType(Operation *op, NamedTensorType input,
                                                StringRef dim, StringAttr kDim, int64_t k,
                                                StringRef what) {
  if (failed(requireFloat(op, input, what)) || failed(requireDim(op, input, dim, what)) ||
      failed(requireAbsent(op, input, kDim, what)))
    return failure();
  if (k > input.getDimSize(dim))
    return op->emitOpError() << "k = " << k << " exceeds the size " << input.getDimSize(dim)
                             << " of '" << dim << "'";
  SmallVector<NamedDim> dims = input.getDims();
  for (NamedDim &d : dims)
    if (d.name.getValue() == dim)
      d = {kDim, k};
  return input.withDims(dims);
}

LogicalResult TopKOp::verify() {
  NamedTensorType values = tensorOf(getValues()), indices = tensorOf(getIndices());
  if (failed(requireInteger(*this, indices, "indices")))
    return failure();
  if (!values.hasDim(getKDim()))
    return emitOpError() << "values " << values.dimsToString() << " lack the dimension '"
                         << getKDim() << "'";
  FailureOr<NamedTensorType> expected =
      inferTopKType(*this, tensorOf(getInput()), getDim(), getKDimAttr(),
                    values.getDimSize(getKDim()), "operand");
  if (failed(expected) || failed(checkResult(*this, *expected, values, "values")))
    return failure();
  return checkResult(*this, expected->withElementType(indices.getElementType()), indices,
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

/// The rules of mt.combine on its operands, which mt.combine_grad shares; the result type
/// they imply: the token dimensions, then the input's feature dimensions.
template <typename CombineLikeOp>
static FailureOr<NamedTensorType> inferCombineType(CombineLikeOp op) {
  NamedTensorType input = tensorOf(op.getInput()), indices = tensorOf(op.getIndices());
  NamedTensorType weights = tensorOf(op.getWeights());
  if (failed(requireInteger(op, indices, "indices")) ||
      failed(requireDim(op, indices, op.getKDim(), "indices")) ||
      failed(requireDim(op, input, op.getExpertDim(), "input")) ||
      failed(requireDim(op, input, op.getCapacityDim(), "input")) ||
      failed(requireFloat(op, weights, "weights")))
    return failure();
  if (op.getExpertDim() == op.getCapacityDim())
    return op.emitOpError() << "expert and capacity dimensions must differ, got '"
                            << op.getExpertDim() << "' for both";
  if (!sameDimSet(indices, weights))
    return op.emitOpError() << "weights " << weights.dimsToString()
                            << " must have the dimensions of the indices "
                            << indices.dimsToString();
  if (weights.getElementType() != input.getElementType())
    return op.emitOpError() << "weights element type " << weights.getElementType()
                            << " differs from the input's " << input.getElementType();
  SmallVector<NamedDim> dims = tokenDimsOf(indices, op.getKDim()).getDims();
  for (const NamedDim &dim : input.getDims()) {
    StringRef name = dim.name.getValue();
    if (name == op.getExpertDim() || name == op.getCapacityDim())
      continue;
    if (indices.hasDim(name))
      return op.emitOpError() << "feature dimension '" << name
                              << "' of the input is also a dimension of the indices";
    dims.push_back(dim);
  }
  return input.withDims(dims);
}

LogicalResult CombineOp::verify() {
  FailureOr<NamedTensorType> expected = inferCombineType(*this);
  if (failed(expected))
    return failure();
  return checkResult(*this, *expected, getResult().getType());
}

/// The rules of mt.load_balancing_loss on its logits and indices, which
/// mt.load_balancing_loss_grad shares.
template <typename LoadBalancingLossLikeOp>
static LogicalResult verifyLoadBalancingOperands(LoadBalancingLossLikeOp op) {
  NamedTensorType logits = tensorOf(op.getLogits()), indices = tensorOf(op.getIndices());
  if (failed(requireFloat(op, logits, "logits")) ||
      failed(requireInteger(op, indices, "indices")) ||
      failed(requireDim(op, logits, op.getExpertDim(), "logits")) ||
      failed(requireDim(op, indices, op.getKDim(), "indices")))
    return failure();
  NamedTensorType tokens = tokenDimsOf(indices, op.getKDim());
  NamedTensorType logitTokens =
      *inferReduceType(logits, {op.getExpertDim()}, [] { return InFlightDiagnostic(); });
  if (!sameDimSet(tokens, logitTokens))
    return op.emitOpError() << "logits " << logits.dimsToString() << " and indices "
                            << indices.dimsToString() << " must route the same tokens";
  return success();
}

LogicalResult LoadBalancingLossOp::verify() {
  if (failed(verifyLoadBalancingOperands(*this)))
    return failure();
  NamedTensorType logits = tensorOf(getLogits());
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
  if (failed(verifyAttentionOperands(*this)))
    return failure();
  if (getQuery().getType() != getResultGrad().getType())
    return emitOpError() << "output gradient must have the query's type";
  if (getQueryGrad().getType() != getQuery().getType() ||
      getKeyGrad().getType() != getKey().getType() ||
      getValueGrad().getType() != getValue().getType())
    return emitOpError() << "gradients must have the types of query, key and value";
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  FailureOr<NamedTensorType> gathered =
      inferGatherType(*this, tensorOf(getResult()), tensorOf(getIndices()), getDim(), "result");
  if (failed(gathered))
    return failure();
  return checkResult(*this, *gathered, getGrad().getType(), "gradient");
}

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(verifyCrossEntropyOperands(*this)))
    return failure();
  NamedTensorType loss = tensorOf(getLossGrad());
  if (loss.getRank() != 0 || !isa<FloatType>(loss.getElementType()))
    return emitOpError() << "loss gradient must be a floating-point scalar, got " << loss;
  return checkResult(*this, getLogits().getType(), getResult().getType());
}

/// `result` is the forward op's input: the values gradient has the type mt.topk's values
/// had.
LogicalResult TopKGradOp::verify() {
  NamedTensorType grad = tensorOf(getValuesGrad()), indices = tensorOf(getIndices());
  if (failed(requireInteger(*this, indices, "indices")) ||
      failed(requireDim(*this, grad, getKDim(), "values gradient")))
    return failure();
  if (!sameDimSet(grad, indices))
    return emitOpError() << "values gradient " << grad.dimsToString() << " and indices "
                         << indices.dimsToString() << " must have the same dimensions";
  FailureOr<NamedTensorType> values =
      inferTopKType(*this, tensorOf(getResult()), getDim(), getKDimAttr(),
                    grad.getDimSize(getKDim()), "result");
  if (failed(values))
    return failure();
  return checkResult(*this, *values, grad, "values gradient");
}

LogicalResult CombineGradOp::verify() {
  FailureOr<NamedTensorType> result = inferCombineType(*this);
  if (failed(result) ||
      failed(checkResult(*this, *result, getResultGrad().getType(), "output gradient")))
    return failure();
  if (getInputGrad().getType() != getInput().getType() ||
      getWeightsGrad().getType() != getWeights().getType())
    return emitOpError() << "gradients must have the types of the input and the weights";
  return success();
}

LogicalResult LoadBalancingLossGradOp::verify() {
  if (failed(verifyLoadBalancingOperands(*this)))
    return failure();
  NamedTensorType logits = tensorOf(getLogits()), loss = tensorOf(getLossGrad());
  if (loss != NamedTensorType::getScalar(logits.getElementType()))
    return emitOpError() << "loss gradient must be a scalar of " << logits.getElementType()
                         << ", got " << loss;
  return checkResult(*this, logits, getResult().getType());
}
