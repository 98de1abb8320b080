//===- MTOps.cpp - mt dialect operations ----------------------------------===//
//
// Verifiers and type inference of the global graph. Each checks the dimension names an op
// refers to, that sizes agree, and that the declared result type is exactly the one the op
// implies; the messages name the dimension and the operand at fault. Where the result type
// follows from the operands, one function per op computes it and checks the operands, for
// both `inferReturnTypes` (errors at the builder's location) and the verifier (errors as
// the op's).
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

/// Emits a diagnostic: the op's own (prefixed with its name) in verifiers, one at the
/// builder's location (or none) during type inference, so both report the same rule.
using EmitErrorFn = llvm::function_ref<InFlightDiagnostic()>;

/// Errors reported as `op`'s.
static auto opErrors(Operation *op) {
  return [op] { return op->emitOpError(); };
}

/// Errors of type inference: at the builder's location, or nowhere when the caller gave
/// none (upstream's `emitOptionalError`), in which case every diagnostic of the inference
/// is dropped.
class InferenceErrors {
public:
  InferenceErrors(MLIRContext *context, std::optional<Location> location)
      : location(location.value_or(UnknownLoc::get(context))) {
    if (!location)
      silence.emplace(context, [](Diagnostic &) { return success(); });
  }
  InFlightDiagnostic operator()() const { return mlir::emitError(location); }

private:
  Location location;
  std::optional<ScopedDiagnosticHandler> silence;
};

static SmallVector<StringRef> namesOf(ArrayAttr dims) {
  return llvm::to_vector(
      llvm::map_range(dims.getAsRange<StringAttr>(), [](StringAttr s) { return s.getValue(); }));
}

static LogicalResult requireFloat(EmitErrorFn emitError, NamedTensorType type, StringRef what) {
  if (isa<FloatType>(type.getElementType()))
    return success();
  return emitError() << "expects floating-point " << what << ", got element type "
                     << type.getElementType();
}

static LogicalResult requireInteger(EmitErrorFn emitError, NamedTensorType type, StringRef what) {
  if (auto intType = dyn_cast<IntegerType>(type.getElementType());
      intType && intType.getWidth() > 1)
    return success();
  return emitError() << "expects integer " << what << ", got element type "
                     << type.getElementType();
}

static LogicalResult requireDim(EmitErrorFn emitError, NamedTensorType type, StringRef dim,
                                StringRef what) {
  if (type.hasDim(dim))
    return success();
  return emitError() << what << " " << type.dimsToString() << " has no dimension '" << dim << "'";
}

static LogicalResult requireAbsent(EmitErrorFn emitError, NamedTensorType type, StringRef dim,
                                   StringRef what) {
  if (!type.hasDim(dim))
    return success();
  return emitError() << "new dimension '" << dim << "' already exists in the " << what << " "
                     << type.dimsToString();
}

static LogicalResult checkResult(Operation *op, Type expected, Type actual,
                                 StringRef what = "result") {
  if (expected == actual)
    return success();
  return op->emitOpError() << what << " type " << actual << " does not match the expected "
                           << expected;
}

/// Completes the verifier of an op whose one result type `expected` was inferred (with
/// errors reported as the op's): the declared type must be exactly it.
static LogicalResult verifyInferredResult(Operation *op, FailureOr<NamedTensorType> expected) {
  if (failed(expected))
    return failure();
  return checkResult(op, *expected, op->getResult(0).getType());
}

/// The body of `inferReturnTypes` for an op with one inferred result.
static LogicalResult addInferred(FailureOr<NamedTensorType> type,
                                 SmallVectorImpl<Type> &inferredReturnTypes) {
  if (failed(type))
    return failure();
  inferredReturnTypes.push_back(*type);
  return success();
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
static LogicalResult verifyNormWeight(EmitErrorFn emitError, NamedTensorType input, StringRef dim,
                                      Value weight, StringRef what) {
  NamedTensorType expected =
      input.withDims({NamedDim{StringAttr::get(input.getContext(), dim), input.getDimSize(dim)}});
  if (weight.getType() == expected)
    return success();
  return emitError() << what << " type " << weight.getType() << " does not match the expected "
                     << expected;
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
  return requireFloat(opErrors(*this), type, "result");
}

LogicalResult LossScaleOp::inferReturnTypes(MLIRContext *context, std::optional<Location>,
                                            Adaptor, SmallVectorImpl<Type> &types) {
  types.push_back(NamedTensorType::getScalar(Float32Type::get(context)));
  return success();
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
  if (!isa<FloatType>(element) &&
      failed(requireInteger(opErrors(*this), type, "or floating-point result")))
    return failure();
  if (!holdsPositions(element, type.getNumElements()))
    return emitOpError() << "element type " << element << " cannot hold every position up to "
                         << type.getNumElements() - 1 << " exactly";
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// The result type of a binary elementwise op: equal element types (floating-point, named
/// `floatOperands` in messages, where that is not empty) and named broadcasting.
template <typename BinaryOpOrAdaptor>
static FailureOr<NamedTensorType> inferElementwiseType(BinaryOpOrAdaptor op, EmitErrorFn emitError,
                                                       StringRef floatOperands) {
  NamedTensorType lhs = tensorOf(op.getLhs()), rhs = tensorOf(op.getRhs());
  if (!floatOperands.empty() && failed(requireFloat(emitError, lhs, floatOperands)))
    return failure();
  if (lhs.getElementType() != rhs.getElementType())
    return emitError() << "operands have different element types " << lhs.getElementType()
                       << " and " << rhs.getElementType();
  return inferBroadcastType(lhs, rhs, emitError);
}

#define MT_ELEMENTWISE_TYPE_RULES(Op, floatOperands)                                               \
  LogicalResult Op::inferReturnTypes(MLIRContext *context, std::optional<Location> location,       \
                                     Adaptor adaptor, SmallVectorImpl<Type> &types) {              \
    return addInferred(                                                                            \
        inferElementwiseType(adaptor, InferenceErrors(context, location), floatOperands), types);  \
  }                                                                                                \
  LogicalResult Op::verify() {                                                                     \
    return verifyInferredResult(*this,                                                             \
                                inferElementwiseType(*this, opErrors(*this), floatOperands));      \
  }
MT_ELEMENTWISE_TYPE_RULES(AddOp, "")
MT_ELEMENTWISE_TYPE_RULES(SubOp, "")
MT_ELEMENTWISE_TYPE_RULES(MulOp, "")
MT_ELEMENTWISE_TYPE_RULES(DivOp, "")
MT_ELEMENTWISE_TYPE_RULES(MaxOp, "")
MT_ELEMENTWISE_TYPE_RULES(PowOp, "operand")
MT_ELEMENTWISE_TYPE_RULES(GreaterOp, "operands")
#undef MT_ELEMENTWISE_TYPE_RULES

#define MT_VERIFY_FLOAT_UNARY(Op)                                                                  \
  LogicalResult Op::verify() {                                                                     \
    return requireFloat(opErrors(*this), tensorOf(getInput()), "operand");                         \
  }
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

template <typename ContractOpOrAdaptor>
static FailureOr<NamedTensorType> inferContractResult(ContractOpOrAdaptor op,
                                                      EmitErrorFn emitError) {
  NamedTensorType lhs = tensorOf(op.getLhs()), rhs = tensorOf(op.getRhs());
  if (failed(requireFloat(emitError, lhs, "lhs")))
    return failure();
  return inferContractType(lhs, rhs, namesOf(op.getOver()), emitError);
}

LogicalResult ContractOp::inferReturnTypes(MLIRContext *context, std::optional<Location> location,
                                           Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return addInferred(inferContractResult(adaptor, InferenceErrors(context, location)), types);
}

LogicalResult ContractOp::verify() {
  return verifyInferredResult(*this, inferContractResult(*this, opErrors(*this)));
}

/// Reducing over no dimension is the identity (which the folder removes).
template <typename ReduceOpOrAdaptor>
static FailureOr<NamedTensorType> inferReduceResult(ReduceOpOrAdaptor op, EmitErrorFn emitError) {
  NamedTensorType input = tensorOf(op.getInput());
  if (failed(requireFloat(emitError, input, "operand")))
    return failure();
  return inferReduceType(input, namesOf(op.getOver()), emitError);
}

#define MT_REDUCE_TYPE_RULES(Op)                                                                   \
  LogicalResult Op::inferReturnTypes(MLIRContext *context, std::optional<Location> location,       \
                                     Adaptor adaptor, SmallVectorImpl<Type> &types) {              \
    return addInferred(inferReduceResult(adaptor, InferenceErrors(context, location)), types);     \
  }                                                                                                \
  LogicalResult Op::verify() {                                                                     \
    return verifyInferredResult(*this, inferReduceResult(*this, opErrors(*this)));                 \
  }
MT_REDUCE_TYPE_RULES(ReduceSumOp)
MT_REDUCE_TYPE_RULES(ReduceMeanOp)
MT_REDUCE_TYPE_RULES(ReduceMaxOp)
#undef MT_REDUCE_TYPE_RULES

//===----------------------------------------------------------------------===//
// Normalisation and attention
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  NamedTensorType input = tensorOf(getInput());
  if (failed(requireFloat(opErrors(*this), input, "operand")))
    return failure();
  return requireDim(opErrors(*this), input, getDim(), "operand");
}

/// The rules of mt.layer_norm (with `bias`) and mt.rms_norm (without); the result has the
/// input's type.
template <typename NormOpOrAdaptor>
static FailureOr<NamedTensorType> inferNormResult(NormOpOrAdaptor op, Value bias,
                                                  EmitErrorFn emitError) {
  NamedTensorType input = tensorOf(op.getInput());
  if (failed(requireFloat(emitError, input, "operand")) ||
      failed(requireDim(emitError, input, op.getDim(), "operand")) ||
      failed(verifyNormWeight(emitError, input, op.getDim(), op.getScale(), "scale")) ||
      (bias && failed(verifyNormWeight(emitError, input, op.getDim(), bias, "bias"))))
    return failure();
  if (op.getEpsilon().convertToDouble() <= 0)
    return emitError() << "epsilon must be positive";
  return input;
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *context, std::optional<Location> location,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return addInferred(
      inferNormResult(adaptor, adaptor.getBias(), InferenceErrors(context, location)), types);
}

LogicalResult LayerNormOp::verify() {
  return verifyInferredResult(*this, inferNormResult(*this, getBias(), opErrors(*this)));
}

LogicalResult RMSNormOp::inferReturnTypes(MLIRContext *context, std::optional<Location> location,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return addInferred(inferNormResult(adaptor, Value(), InferenceErrors(context, location)), types);
}

LogicalResult RMSNormOp::verify() {
  return verifyInferredResult(*this, inferNormResult(*this, Value(), opErrors(*this)));
}

LogicalResult RopeOp::verify() {
  NamedTensorType input = tensorOf(getInput());
  if (failed(requireFloat(opErrors(*this), input, "operand")) ||
      failed(requireDim(opErrors(*this), input, getDim(), "operand")) ||
      failed(requireDim(opErrors(*this), input, getPosition(), "operand")))
    return failure();
  if (getDim() == getPosition())
    return emitOpError() << "rotated dimension and position dimension must differ";
  if (input.getDimSize(getDim()) % 2 != 0)
    return emitOpError() << "rotated dimension '" << getDim()
                         << "' must have an even size, got " << input.getDimSize(getDim());
  if (getTheta().convertToDouble() <= 0)
    return emitOpError() << "theta must be positive";
  if (Value positions = getPositions()) {
    NamedTensorType ids = tensorOf(positions);
    if (!isa<IntegerType>(ids.getElementType()))
      return emitOpError() << "position ids must be integers, got " << ids.getElementType();
    if (!ids.hasDim(getPosition()))
      return emitOpError() << "position ids " << ids.dimsToString()
                           << " must have the position dimension '" << getPosition() << "'";
    if (ids.hasDim(getDim()))
      return emitOpError() << "position ids " << ids.dimsToString()
                           << " cannot have the rotated dimension '" << getDim() << "'";
    for (const NamedDim &dim : ids.getDims()) {
      std::optional<unsigned> at = input.getDimIndex(dim.name.getValue());
      if (!at || input.getDimSizes()[*at] != dim.size)
        return emitOpError() << "position ids " << ids.dimsToString()
                             << " must have dimensions of the operand "
                             << input.dimsToString();
    }
  }
  return success();
}

/// The rules of mt.attention on its operands and attributes, which mt.attention_grad
/// shares.
template <typename AttentionLikeOp>
static LogicalResult verifyAttentionOperands(AttentionLikeOp op, EmitErrorFn emitError) {
  NamedTensorType q = tensorOf(op.getQuery()), k = tensorOf(op.getKey()),
                  v = tensorOf(op.getValue());
  if (failed(requireFloat(emitError, q, "query")))
    return failure();
  for (StringRef dim : {op.getSeqDim(), op.getHeadsDim(), op.getHeadDim()})
    if (failed(requireDim(emitError, q, dim, "query")))
      return failure();
  if (op.getSeqDim() == op.getHeadsDim() || op.getSeqDim() == op.getHeadDim() ||
      op.getHeadsDim() == op.getHeadDim())
    return emitError() << "sequence, heads and head dimensions must be three different "
                          "dimensions, got ("
                       << op.getSeqDim() << ", " << op.getHeadsDim() << ", " << op.getHeadDim()
                       << ")";
  if (op.getKvHeadsDim() != op.getHeadsDim() && q.hasDim(op.getKvHeadsDim()))
    return emitError() << "key/value heads dimension '" << op.getKvHeadsDim() << "' must be '"
                       << op.getHeadsDim() << "' or a dimension the query lacks, but the query "
                       << q.dimsToString() << " has it";
  if (k != v)
    return emitError() << "key " << k << " and value " << v << " must have the same type";
  if (k.getElementType() != q.getElementType())
    return emitError() << "key element type " << k.getElementType() << " differs from the query's "
                       << q.getElementType();
  for (StringRef dim : {op.getSeqDim(), op.getKvHeadsDim(), op.getHeadDim()})
    if (failed(requireDim(emitError, k, dim, "key")))
      return failure();
  if (op.getKvHeadsDim() != op.getHeadsDim() && k.hasDim(op.getHeadsDim()))
    return emitError() << "key has both '" << op.getHeadsDim() << "' and '" << op.getKvHeadsDim()
                       << "'";
  // Every query dimension other than the head dimension is shared with the key.
  for (const NamedDim &dim : q.getDims()) {
    StringRef name = dim.name.getValue();
    StringRef keyName = name == op.getHeadsDim() ? op.getKvHeadsDim() : name;
    // Distinct names: the head counts only need to divide (checked below). One name: one
    // dimension, so the sizes agree.
    if (name == op.getHeadsDim() && op.getKvHeadsDim() != op.getHeadsDim())
      continue;
    if (!k.hasDim(keyName))
      return emitError() << "key " << k.dimsToString() << " lacks the query dimension '" << name
                         << "'";
    if (name != op.getSeqDim() && k.getDimSize(keyName) != dim.size)
      return emitError() << "dimension '" << name << "' has size " << dim.size
                         << " in the query but " << k.getDimSize(keyName) << " in the key";
  }
  if (k.getRank() != q.getRank())
    return emitError() << "key " << k.dimsToString() << " has dimensions that the query "
                       << q.dimsToString() << " lacks";
  if (op.getCausal() && k.getDimSize(op.getSeqDim()) != q.getDimSize(op.getSeqDim()))
    return emitError() << "causal attention needs equal query and key lengths, got "
                       << q.getDimSize(op.getSeqDim()) << " and " << k.getDimSize(op.getSeqDim());
  int64_t heads = q.getDimSize(op.getHeadsDim()), kvHeads = k.getDimSize(op.getKvHeadsDim());
  if (heads % kvHeads != 0)
    return emitError() << "query heads (" << heads << ") must be a multiple of key/value heads ("
                       << kvHeads << ")";
  if (op.getScale().convertToDouble() <= 0)
    return emitError() << "scale must be positive";
  if (!op.getPositions())
    return success();
  // The document positions: one id per query position of every batch point.
  NamedTensorType positions = tensorOf(op.getPositions());
  if (!op.getCausal())
    return emitError() << "document positions need causal attention (a key j is visible to "
                          "query i iff j <= i and i - j <= positions[i])";
  if (failed(requireInteger(emitError, positions, "positions")) ||
      failed(requireDim(emitError, positions, op.getSeqDim(), "positions")))
    return failure();
  for (const NamedDim &dim : positions.getDims()) {
    StringRef name = dim.name.getValue();
    if (name == op.getHeadsDim() || name == op.getKvHeadsDim() || name == op.getHeadDim())
      return emitError() << "positions " << positions.dimsToString() << " have the head "
                         << "dimension '" << name << "': one id per query position is shared "
                                                     "by every head";
    if (!q.hasDim(name) || q.getDimSize(name) != dim.size)
      return emitError() << "positions " << positions.dimsToString()
                         << " must have dimensions of the query " << q.dimsToString();
  }
  return success();
}

/// The type of attention's log-sum-exp: one value per query row and head, the query's
/// type without the head dimension.
static NamedTensorType logSumExpType(NamedTensorType query, StringRef headDim) {
  SmallVector<NamedDim> dims = query.getDims();
  llvm::erase_if(dims, [&](const NamedDim &dim) { return dim.name == headDim; });
  return query.withDims(dims);
}

/// The operands' rules are the verifier's, so that their errors name the op.
LogicalResult AttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto query = dyn_cast<NamedTensorType>(adaptor.getQuery().getType());
  if (!query)
    return failure();
  types.push_back(query);
  if (adaptor.getSaveLse())
    types.push_back(logSumExpType(query, adaptor.getHeadDim()));
  return success();
}

/// The results are named only where the log-sum-exp is saved, so attention without it
/// prints as an op of one result always has.
void AttentionOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  if (!getLse())
    return;
  setNameFn(getResult(), "result");
  setNameFn(getLse(), "lse");
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttentionOperands(*this, opErrors(*this))))
    return failure();
  if (failed(checkResult(*this, getQuery().getType(), getResult().getType())))
    return failure();
  if (static_cast<bool>(getLse()) != getSaveLse())
    return emitOpError() << "has a log-sum-exp result exactly when it has 'save_lse'";
  if (getLse())
    return checkResult(*this, logSumExpType(tensorOf(getQuery()), getHeadDim()),
                       getLse().getType(), "log-sum-exp");
  return success();
}

//===----------------------------------------------------------------------===//
// Embedding, loss, regularisation
//===----------------------------------------------------------------------===//

/// The rows of `table` (`what` in messages) that `indices` select along `dim`: the indices'
/// dimensions, then the table's others. mt.gather produces it; mt.embedding_grad scatters
/// a gradient of this type back.
static FailureOr<NamedTensorType> inferGatherType(EmitErrorFn emitError, NamedTensorType table,
                                                  NamedTensorType indices, StringRef dim,
                                                  StringRef what) {
  if (failed(requireFloat(emitError, table, what)) ||
      failed(requireInteger(emitError, indices, "indices")) ||
      failed(requireDim(emitError, table, dim, what)))
    return failure();
  SmallVector<NamedDim> dims = indices.getDims();
  for (const NamedDim &tableDim : table.getDims()) {
    if (tableDim.name.getValue() == dim)
      continue;
    if (indices.hasDim(tableDim.name))
      return emitError() << "dimension '" << tableDim.name.getValue()
                         << "' is in both the table and the indices";
    dims.push_back(tableDim);
  }
  return table.withDims(dims);
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *context, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return addInferred(inferGatherType(InferenceErrors(context, location),
                                     tensorOf(adaptor.getTable()), tensorOf(adaptor.getIndices()),
                                     adaptor.getDim(), "table"),
                     types);
}

LogicalResult GatherOp::verify() {
  return verifyInferredResult(*this, inferGatherType(opErrors(*this), tensorOf(getTable()),
                                                     tensorOf(getIndices()), getDim(), "table"));
}

/// The rules of mt.cross_entropy on its logits and labels, which mt.cross_entropy_grad
/// shares.
template <typename CrossEntropyLikeOp>
static LogicalResult verifyCrossEntropyOperands(CrossEntropyLikeOp op, EmitErrorFn emitError) {
  NamedTensorType logits = tensorOf(op.getLogits()), labels = tensorOf(op.getLabels());
  if (failed(requireFloat(emitError, logits, "logits")) ||
      failed(requireInteger(emitError, labels, "labels")) ||
      failed(requireDim(emitError, logits, op.getDim(), "logits")))
    return failure();
  FailureOr<NamedTensorType> positions = inferReduceType(logits, {op.getDim()}, emitError);
  if (failed(positions))
    return failure();
  if (!sameDimSet(*positions, labels))
    return emitError() << "labels " << labels.dimsToString()
                       << " must have the logits' dimensions without '" << op.getDim() << "', i.e. "
                       << positions->dimsToString();
  if (!op.getMask())
    return success();
  NamedTensorType mask = tensorOf(op.getMask());
  if (failed(requireFloat(emitError, mask, "mask")))
    return failure();
  if (mask.getDims() != labels.getDims())
    return emitError() << "mask " << mask.dimsToString() << " must have the labels' dimensions "
                       << labels.dimsToString();
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifyCrossEntropyOperands(*this, opErrors(*this))))
    return failure();
  NamedTensorType result = tensorOf(getResult());
  if (result.getRank() != 0 || !isa<FloatType>(result.getElementType()))
    return emitOpError() << "result must be a floating-point scalar, got " << result;
  return success();
}

LogicalResult DropoutOp::verify() {
  if (failed(requireFloat(opErrors(*this), tensorOf(getInput()), "operand")))
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
  if (failed(requireDim(opErrors(*this), input, getDim(), "operand")))
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
          failed(requireAbsent(opErrors(*this), input, name.getValue(), "operand")))
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

template <typename MergeOpOrAdaptor>
static FailureOr<NamedTensorType> inferMergeResult(MergeOpOrAdaptor op, EmitErrorFn emitError) {
  NamedTensorType input = tensorOf(op.getInput());
  if (op.getDims().size() < 2)
    return emitError() << "must merge at least two dimensions";
  llvm::StringSet<> merged;
  int64_t product = 1;
  for (StringAttr name : op.getDims().template getAsRange<StringAttr>()) {
    if (failed(requireDim(emitError, input, name.getValue(), "operand")))
      return failure();
    if (!merged.insert(name.getValue()).second)
      return emitError() << "dimension '" << name.getValue() << "' is listed twice";
    product *= input.getDimSize(name.getValue());
  }
  if (!merged.contains(op.getInto()) &&
      failed(requireAbsent(emitError, input, op.getInto(), "operand")))
    return failure();
  SmallVector<NamedDim> dims;
  StringRef first = cast<StringAttr>(op.getDims()[0]).getValue();
  for (const NamedDim &dim : input.getDims()) {
    if (dim.name.getValue() == first)
      dims.push_back({op.getIntoAttr(), product});
    else if (!merged.contains(dim.name.getValue()))
      dims.push_back(dim);
  }
  return input.withDims(dims);
}

LogicalResult MergeOp::inferReturnTypes(MLIRContext *context, std::optional<Location> location,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return addInferred(inferMergeResult(adaptor, InferenceErrors(context, location)), types);
}

LogicalResult MergeOp::verify() {
  return verifyInferredResult(*this, inferMergeResult(*this, opErrors(*this)));
}

template <typename RenameOpOrAdaptor>
static FailureOr<NamedTensorType> inferRenameResult(RenameOpOrAdaptor op, EmitErrorFn emitError) {
  NamedTensorType input = tensorOf(op.getInput());
  if (failed(requireDim(emitError, input, op.getDim(), "operand")))
    return failure();
  // Renaming a dimension to its own name is the identity (which the folder removes).
  if (op.getDim() != op.getTo() && failed(requireAbsent(emitError, input, op.getTo(), "operand")))
    return failure();
  SmallVector<NamedDim> dims = input.getDims();
  for (NamedDim &dim : dims)
    if (dim.name.getValue() == op.getDim())
      dim.name = op.getToAttr();
  return input.withDims(dims);
}

LogicalResult RenameOp::inferReturnTypes(MLIRContext *context, std::optional<Location> location,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return addInferred(inferRenameResult(adaptor, InferenceErrors(context, location)), types);
}

LogicalResult RenameOp::verify() {
  return verifyInferredResult(*this, inferRenameResult(*this, opErrors(*this)));
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
  if (failed(requireFloat(opErrors(op), input, what)) ||
      failed(requireDim(opErrors(op), input, dim, what)) ||
      failed(requireAbsent(opErrors(op), input, kDim, what)))
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
  if (failed(requireInteger(opErrors(*this), indices, "indices")))
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
  if (failed(requireInteger(opErrors(*this), indices, "indices")) ||
      failed(requireDim(opErrors(*this), indices, getKDim(), "indices")) ||
      failed(requireAbsent(opErrors(*this), input, getExpertDim(), "input")) ||
      failed(requireAbsent(opErrors(*this), input, getCapacityDim(), "input")))
    return failure();
  if (getExpertDim() == getCapacityDim())
    return emitOpError() << "expert and capacity dimensions must differ, got '"
                         << getExpertDim() << "' for both";
  std::optional<double> factor;
  if (getCapacityFactor())
    factor = getCapacityFactor()->convertToDouble();
  if (factor && (!(*factor > 0) || !std::isfinite(*factor)))
    return emitOpError() << "capacity factor must be positive and finite, got " << *factor;
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
  // Dropless routing sizes every expert for all the tokens.
  int64_t capacity = tokens.getNumElements();
  if (factor) {
    double exactCapacity =
        std::ceil(*factor * static_cast<double>(tokens.getNumElements() * k) / experts);
    if (exactCapacity >= 0x1p62)
      return emitOpError() << "capacity factor " << *factor << " gives a capacity too large "
                           << "to represent";
    capacity = static_cast<int64_t>(exactCapacity);
  }
  SmallVector<NamedDim> dims = {{getExpertDimAttr(), experts},
                                {getCapacityDimAttr(), capacity}};
  dims.append(features);
  return checkResult(*this, input.withDims(dims), result);
}

LogicalResult ExpertLoadOp::verify() {
  NamedTensorType indices = tensorOf(getIndices()), result = tensorOf(getResult());
  if (failed(requireInteger(opErrors(*this), indices, "indices")) ||
      failed(requireDim(opErrors(*this), indices, getKDim(), "indices")) ||
      failed(requireAbsent(opErrors(*this), indices, getExpertDim(), "indices")) ||
      failed(requireInteger(opErrors(*this), result, "result")))
    return failure();
  if (result.getRank() != 1 || !result.hasDim(getExpertDim()))
    return emitOpError() << "result " << result.dimsToString()
                         << " must have the expert dimension '" << getExpertDim()
                         << "' alone";
  return success();
}

/// The rules of mt.combine on its operands, which mt.combine_grad shares; the result type
/// they imply: the token dimensions, then the input's feature dimensions.
template <typename CombineLikeOp>
static FailureOr<NamedTensorType> inferCombineType(CombineLikeOp op, EmitErrorFn emitError) {
  NamedTensorType input = tensorOf(op.getInput()), indices = tensorOf(op.getIndices());
  NamedTensorType weights = tensorOf(op.getWeights());
  if (failed(requireInteger(emitError, indices, "indices")) ||
      failed(requireDim(emitError, indices, op.getKDim(), "indices")) ||
      failed(requireDim(emitError, input, op.getExpertDim(), "input")) ||
      failed(requireDim(emitError, input, op.getCapacityDim(), "input")) ||
      failed(requireFloat(emitError, weights, "weights")))
    return failure();
  if (op.getExpertDim() == op.getCapacityDim())
    return emitError() << "expert and capacity dimensions must differ, got '" << op.getExpertDim()
                       << "' for both";
  if (!sameDimSet(indices, weights))
    return emitError() << "weights " << weights.dimsToString()
                       << " must have the dimensions of the indices " << indices.dimsToString();
  if (weights.getElementType() != input.getElementType())
    return emitError() << "weights element type " << weights.getElementType()
                       << " differs from the input's " << input.getElementType();
  SmallVector<NamedDim> dims = tokenDimsOf(indices, op.getKDim()).getDims();
  for (const NamedDim &dim : input.getDims()) {
    StringRef name = dim.name.getValue();
    if (name == op.getExpertDim() || name == op.getCapacityDim())
      continue;
    if (indices.hasDim(name))
      return emitError() << "feature dimension '" << name
                         << "' of the input is also a dimension of the indices";
    dims.push_back(dim);
  }
  return input.withDims(dims);
}

LogicalResult CombineOp::inferReturnTypes(MLIRContext *context, std::optional<Location> location,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return addInferred(inferCombineType(adaptor, InferenceErrors(context, location)), types);
}

LogicalResult CombineOp::verify() {
  return verifyInferredResult(*this, inferCombineType(*this, opErrors(*this)));
}

/// The rules of mt.load_balancing_loss on its logits and indices, which
/// mt.load_balancing_loss_grad shares.
template <typename LoadBalancingLossLikeOp>
static LogicalResult verifyLoadBalancingOperands(LoadBalancingLossLikeOp op,
                                                 EmitErrorFn emitError) {
  NamedTensorType logits = tensorOf(op.getLogits()), indices = tensorOf(op.getIndices());
  if (failed(requireFloat(emitError, logits, "logits")) ||
      failed(requireInteger(emitError, indices, "indices")) ||
      failed(requireDim(emitError, logits, op.getExpertDim(), "logits")) ||
      failed(requireDim(emitError, indices, op.getKDim(), "indices")))
    return failure();
  NamedTensorType tokens = tokenDimsOf(indices, op.getKDim());
  NamedTensorType logitTokens =
      *inferReduceType(logits, {op.getExpertDim()}, [] { return InFlightDiagnostic(); });
  if (!sameDimSet(tokens, logitTokens))
    return emitError() << "logits " << logits.dimsToString() << " and indices "
                       << indices.dimsToString() << " must route the same tokens";
  return success();
}

/// A scalar of the logits' element type.
template <typename LoadBalancingLossOpOrAdaptor>
static FailureOr<NamedTensorType> inferLoadBalancingLossType(LoadBalancingLossOpOrAdaptor op,
                                                             EmitErrorFn emitError) {
  if (failed(verifyLoadBalancingOperands(op, emitError)))
    return failure();
  return NamedTensorType::getScalar(tensorOf(op.getLogits()).getElementType());
}

LogicalResult LoadBalancingLossOp::inferReturnTypes(MLIRContext *context,
                                                    std::optional<Location> location,
                                                    Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return addInferred(inferLoadBalancingLossType(adaptor, InferenceErrors(context, location)),
                     types);
}

LogicalResult LoadBalancingLossOp::verify() {
  return verifyInferredResult(*this, inferLoadBalancingLossType(*this, opErrors(*this)));
}

/// A scalar of the logits' element type; the logits are floating point with the dimension
/// `dim`.
template <typename ZLossOpOrAdaptor>
static FailureOr<NamedTensorType> inferZLossType(ZLossOpOrAdaptor op, EmitErrorFn emitError) {
  NamedTensorType logits = tensorOf(op.getLogits());
  if (failed(requireFloat(emitError, logits, "logits")) ||
      failed(requireDim(emitError, logits, op.getDim(), "logits")))
    return failure();
  return NamedTensorType::getScalar(logits.getElementType());
}

LogicalResult ZLossOp::inferReturnTypes(MLIRContext *context, std::optional<Location> location,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return addInferred(inferZLossType(adaptor, InferenceErrors(context, location)), types);
}

LogicalResult ZLossOp::verify() {
  return verifyInferredResult(*this, inferZLossType(*this, opErrors(*this)));
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
  if (getNumInvariant() > getInputs().size())
    return emitOpError() << "passes " << getNumInvariant() << " invariant operands but has only "
                         << getInputs().size() << " operands";
  unsigned sliced = getInputs().size() - getNumInvariant();
  StringRef besides = getNumInvariant() ? " besides the invariant ones" : "";
  if (getCarried() && *getCarried() > std::min<size_t>(sliced, getResults().size()))
    return emitOpError() << "carries " << *getCarried() << " values but has only " << sliced
                         << " operands" << besides << " and " << getResults().size()
                         << " results";
  unsigned carried = getNumCarried();
  if (!getCarried() && sliced != getResults().size())
    return emitOpError() << "without 'carried' every operand" << besides
                         << " is carried, so the op needs as many results as operands"
                         << besides;
  for (unsigned i = 0; i < carried; ++i)
    if (getInputs()[i].getType() != getResults()[i].getType())
      return emitOpError() << "carried value #" << i
                           << " must keep its type from call to call, since each call feeds "
                              "the next";
  for (Value value : getStackedInputs())
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
  unsigned sliced = getInputs().size() - getNumInvariant();
  SmallVector<Type> inputs, results;
  for (auto [i, value] : llvm::enumerate(getInputs()))
    inputs.push_back(i < carried || i >= sliced ? value.getType()
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

LogicalResult GeluGradOp::verify() {
  return requireFloat(opErrors(*this), tensorOf(getInput()), "operand");
}

/// The operand rules of mt.attention_grad; the gradients have the types of query, key and
/// value.
template <typename AttentionGradOpOrAdaptor>
static LogicalResult verifyAttentionGradOperands(AttentionGradOpOrAdaptor op,
                                                 EmitErrorFn emitError) {
  if (failed(verifyAttentionOperands(op, emitError)))
    return failure();
  if (op.getQuery().getType() != op.getResultGrad().getType())
    return emitError() << "output gradient must have the query's type";
  if (op.getSaved().empty())
    return success();
  if (op.getSaved().size() != 2)
    return emitError() << "saves the forward's output and log-sum-exp (2 values), got "
                       << op.getSaved().size();
  if (op.getSaved()[0].getType() != op.getQuery().getType())
    return emitError() << "saved output must have the query's type";
  NamedTensorType lse = logSumExpType(tensorOf(op.getQuery()), op.getHeadDim());
  if (op.getSaved()[1].getType() != lse)
    return emitError() << "saved log-sum-exp must have type " << lse << ", got "
                       << op.getSaved()[1].getType();
  return success();
}

LogicalResult AttentionGradOp::inferReturnTypes(MLIRContext *context,
                                                std::optional<Location> location, Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  if (failed(verifyAttentionGradOperands(adaptor, InferenceErrors(context, location))))
    return failure();
  llvm::append_range(types, TypeRange{adaptor.getQuery().getType(), adaptor.getKey().getType(),
                                      adaptor.getValue().getType()});
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttentionGradOperands(*this, opErrors(*this))))
    return failure();
  if (getQueryGrad().getType() != getQuery().getType() ||
      getKeyGrad().getType() != getKey().getType() ||
      getValueGrad().getType() != getValue().getType())
    return emitOpError() << "gradients must have the types of query, key and value";
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  FailureOr<NamedTensorType> gathered = inferGatherType(opErrors(*this), tensorOf(getResult()),
                                                        tensorOf(getIndices()), getDim(), "result");
  if (failed(gathered))
    return failure();
  return checkResult(*this, *gathered, getGrad().getType(), "gradient");
}

/// The logits' type.
template <typename CrossEntropyGradOpOrAdaptor>
static FailureOr<NamedTensorType> inferCrossEntropyGradType(CrossEntropyGradOpOrAdaptor op,
                                                            EmitErrorFn emitError) {
  if (failed(verifyCrossEntropyOperands(op, emitError)))
    return failure();
  NamedTensorType loss = tensorOf(op.getLossGrad());
  if (loss.getRank() != 0 || !isa<FloatType>(loss.getElementType()))
    return emitError() << "loss gradient must be a floating-point scalar, got " << loss;
  return tensorOf(op.getLogits());
}

LogicalResult CrossEntropyGradOp::inferReturnTypes(MLIRContext *context,
                                                   std::optional<Location> location,
                                                   Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return addInferred(inferCrossEntropyGradType(adaptor, InferenceErrors(context, location)), types);
}

LogicalResult CrossEntropyGradOp::verify() {
  return verifyInferredResult(*this, inferCrossEntropyGradType(*this, opErrors(*this)));
}

/// `result` is the forward op's input: the values gradient has the type mt.topk's values
/// had.
LogicalResult TopKGradOp::verify() {
  NamedTensorType grad = tensorOf(getValuesGrad()), indices = tensorOf(getIndices());
  if (failed(requireInteger(opErrors(*this), indices, "indices")) ||
      failed(requireDim(opErrors(*this), grad, getKDim(), "values gradient")))
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

/// The operand rules of mt.combine_grad: mt.combine's, and an output gradient of
/// mt.combine's result type. The gradients have the types of the input and the weights.
template <typename CombineGradOpOrAdaptor>
static LogicalResult verifyCombineGradOperands(CombineGradOpOrAdaptor op, EmitErrorFn emitError) {
  FailureOr<NamedTensorType> result = inferCombineType(op, emitError);
  if (failed(result))
    return failure();
  if (op.getResultGrad().getType() != *result)
    return emitError() << "output gradient type " << op.getResultGrad().getType()
                       << " does not match the expected " << *result;
  return success();
}

LogicalResult CombineGradOp::inferReturnTypes(MLIRContext *context,
                                              std::optional<Location> location, Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  if (failed(verifyCombineGradOperands(adaptor, InferenceErrors(context, location))))
    return failure();
  llvm::append_range(types,
                     TypeRange{adaptor.getInput().getType(), adaptor.getWeights().getType()});
  return success();
}

LogicalResult CombineGradOp::verify() {
  if (failed(verifyCombineGradOperands(*this, opErrors(*this))))
    return failure();
  if (getInputGrad().getType() != getInput().getType() ||
      getWeightsGrad().getType() != getWeights().getType())
    return emitOpError() << "gradients must have the types of the input and the weights";
  return success();
}

/// The logits' type.
template <typename LoadBalancingLossGradOpOrAdaptor>
static FailureOr<NamedTensorType>
inferLoadBalancingLossGradType(LoadBalancingLossGradOpOrAdaptor op, EmitErrorFn emitError) {
  if (failed(verifyLoadBalancingOperands(op, emitError)))
    return failure();
  NamedTensorType logits = tensorOf(op.getLogits()), loss = tensorOf(op.getLossGrad());
  if (loss != NamedTensorType::getScalar(logits.getElementType()))
    return emitError() << "loss gradient must be a scalar of " << logits.getElementType()
                       << ", got " << loss;
  return logits;
}

LogicalResult LoadBalancingLossGradOp::inferReturnTypes(MLIRContext *context,
                                                        std::optional<Location> location,
                                                        Adaptor adaptor,
                                                        SmallVectorImpl<Type> &types) {
  return addInferred(inferLoadBalancingLossGradType(adaptor, InferenceErrors(context, location)),
                     types);
}

LogicalResult LoadBalancingLossGradOp::verify() {
  return verifyInferredResult(*this, inferLoadBalancingLossGradType(*this, opErrors(*this)));
}
