//===- MTDialect.cpp - mt dialect, types and attributes -------------------===//

#include "dialects/mt/IR/MTDialect.h"
#include "dialects/mt/IR/MTOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mtc::mt;

#include "dialects/mt/IR/MTDialect.cpp.inc"
#include "dialects/mt/IR/MTEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/mt/IR/MTTypes.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/mt/IR/MTAttrs.cpp.inc"

void MTDialect::initialize() {
  registerTypes();
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "dialects/mt/IR/MTOps.cpp.inc"
      >();
}

void MTDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/mt/IR/MTTypes.cpp.inc"
      >();
}

void MTDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/mt/IR/MTAttrs.cpp.inc"
      >();
}

bool mtc::mt::isValidElementType(Type type) {
  if (isa<Float64Type, Float32Type, Float16Type, BFloat16Type>(type))
    return true;
  if (auto intType = dyn_cast<IntegerType>(type))
    return intType.isSignless() && llvm::is_contained({1u, 8u, 32u, 64u}, intType.getWidth());
  return false;
}

//===----------------------------------------------------------------------===//
// NamedTensorType
//===----------------------------------------------------------------------===//

NamedTensorType NamedTensorType::get(ArrayRef<NamedDim> dims, Type elementType) {
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  for (const NamedDim &dim : dims) {
    names.push_back(dim.name);
    sizes.push_back(dim.size);
  }
  return get(elementType.getContext(), names, sizes, elementType);
}

NamedTensorType NamedTensorType::get(MLIRContext *ctx, ArrayRef<StringAttr> names,
                           ArrayRef<int64_t> sizes, Type elementType) {
  return Base::get(ctx, names, sizes, elementType);
}

NamedTensorType NamedTensorType::getChecked(function_ref<InFlightDiagnostic()> emitError,
                                  MLIRContext *ctx, ArrayRef<StringAttr> names,
                                  ArrayRef<int64_t> sizes, Type elementType) {
  return Base::getChecked(emitError, ctx, names, sizes, elementType);
}

NamedTensorType NamedTensorType::getScalar(Type elementType) {
  return get(elementType.getContext(), {}, {}, elementType);
}

LogicalResult NamedTensorType::verify(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayRef<StringAttr> names, ArrayRef<int64_t> sizes,
                                 Type elementType) {
  if (names.size() != sizes.size())
    return emitError() << "tensor type has " << names.size() << " dimension names but "
                       << sizes.size() << " sizes";
  llvm::StringSet<> seen;
  for (auto [name, size] : llvm::zip(names, sizes)) {
    if (!name || name.getValue().empty())
      return emitError() << "tensor dimension without a name";
    if (!seen.insert(name.getValue()).second)
      return emitError() << "duplicate dimension name '" << name.getValue()
                         << "' in tensor type";
    if (size <= 0)
      return emitError() << "dimension '" << name.getValue()
                         << "' must have a positive size, got " << size;
  }
  if (!isValidElementType(elementType))
    return emitError() << "unsupported tensor element type " << elementType
                       << "; expected f64, f32, f16, bf16, i1, i8, i32 or i64";
  return success();
}

SmallVector<NamedDim> NamedTensorType::getDims() const {
  SmallVector<NamedDim> dims;
  for (auto [name, size] : llvm::zip(getDimNames(), getDimSizes()))
    dims.push_back({name, size});
  return dims;
}

std::optional<unsigned> NamedTensorType::getDimIndex(StringRef name) const {
  for (auto [index, dimName] : llvm::enumerate(getDimNames()))
    if (dimName.getValue() == name)
      return index;
  return std::nullopt;
}

int64_t NamedTensorType::getDimSize(StringRef name) const {
  std::optional<unsigned> index = getDimIndex(name);
  assert(index && "no dimension of that name");
  return getDimSizes()[*index];
}

int64_t NamedTensorType::getNumElements() const {
  int64_t count = 1;
  for (int64_t size : getDimSizes())
    count *= size;
  return count;
}

NamedTensorType NamedTensorType::withElementType(Type elementType) const {
  return get(getContext(), getDimNames(), getDimSizes(), elementType);
}

NamedTensorType NamedTensorType::withDims(ArrayRef<NamedDim> dims) const {
  return get(dims, getElementType());
}

std::string NamedTensorType::dimsToString() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << '[';
  llvm::interleaveComma(getDims(), os, [&](const NamedDim &dim) {
    os << dim.name.getValue() << '=' << dim.size;
  });
  os << ']';
  return text;
}

// !mt.tensor<[batch=4, seq=256], f32>
Type NamedTensorType::parse(AsmParser &parser) {
  MLIRContext *ctx = parser.getContext();
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  Type elementType;
  SMLoc loc = parser.getCurrentLocation();
  auto parseDim = [&]() -> ParseResult {
    std::string name;
    int64_t size;
    if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
        parser.parseInteger(size))
      return failure();
    names.push_back(StringAttr::get(ctx, name));
    sizes.push_back(size);
    return success();
  };
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseDim) ||
      parser.parseComma() || parser.parseType(elementType) || parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, ctx, names, sizes, elementType);
}

void NamedTensorType::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(getDims(), printer, [&](const NamedDim &dim) {
    printer.printKeywordOrString(dim.name.getValue());
    printer << '=' << dim.size;
  });
  printer << "], " << getElementType() << '>';
}

//===----------------------------------------------------------------------===//
// Shape inference shared by verifiers and the frontend
//===----------------------------------------------------------------------===//

FailureOr<NamedTensorType>
mtc::mt::inferBroadcastType(NamedTensorType lhs, NamedTensorType rhs,
                            function_ref<InFlightDiagnostic()> emitError) {
  SmallVector<NamedDim> dims = lhs.getDims();
  for (const NamedDim &dim : rhs.getDims()) {
    std::optional<unsigned> index = lhs.getDimIndex(dim.name);
    if (!index) {
      dims.push_back(dim);
      continue;
    }
    if (dims[*index].size != dim.size) {
      emitError() << "dimension '" << dim.name.getValue() << "' has size "
                  << dims[*index].size << " in the lhs but " << dim.size << " in the rhs";
      return failure();
    }
  }
  return lhs.withDims(dims);
}

FailureOr<NamedTensorType>
mtc::mt::inferContractType(NamedTensorType lhs, NamedTensorType rhs, ArrayRef<StringRef> over,
                           function_ref<InFlightDiagnostic()> emitError) {
  if (over.empty()) {
    emitError() << "contraction needs at least one dimension to contract over";
    return failure();
  }
  llvm::StringSet<> contracted;
  for (StringRef name : over) {
    if (!contracted.insert(name).second) {
      emitError() << "dimension '" << name << "' is listed twice in 'over'";
      return failure();
    }
    for (auto [side, type] : {std::pair{"lhs", lhs}, std::pair{"rhs", rhs}}) {
      if (!type.hasDim(name)) {
        emitError() << "cannot contract over '" << name << "': the " << side
                    << " operand " << type.dimsToString() << " has no such dimension";
        return failure();
      }
    }
  }
  if (lhs.getElementType() != rhs.getElementType()) {
    emitError() << "operands have different element types " << lhs.getElementType()
                << " and " << rhs.getElementType();
    return failure();
  }
  SmallVector<NamedDim> dims;
  for (const NamedDim &dim : lhs.getDims())
    if (!contracted.contains(dim.name.getValue()))
      dims.push_back(dim);
  for (const NamedDim &dim : rhs.getDims()) {
    std::optional<unsigned> index = lhs.getDimIndex(dim.name);
    if (index && lhs.getDimSizes()[*index] != dim.size) {
      emitError() << "dimension '" << dim.name.getValue() << "' has size "
                  << lhs.getDimSizes()[*index] << " in the lhs but " << dim.size
                  << " in the rhs";
      return failure();
    }
    if (!index && !contracted.contains(dim.name.getValue()))
      dims.push_back(dim);
  }
  return lhs.withDims(dims);
}

FailureOr<NamedTensorType>
mtc::mt::inferReduceType(NamedTensorType input, ArrayRef<StringRef> over,
                         function_ref<InFlightDiagnostic()> emitError) {
  llvm::StringSet<> removed;
  for (StringRef name : over) {
    if (!input.hasDim(name)) {
      emitError() << "operand " << input.dimsToString() << " has no dimension '" << name
                  << "'";
      return failure();
    }
    if (!removed.insert(name).second) {
      emitError() << "dimension '" << name << "' is listed twice";
      return failure();
    }
  }
  SmallVector<NamedDim> dims;
  for (const NamedDim &dim : input.getDims())
    if (!removed.contains(dim.name.getValue()))
      dims.push_back(dim);
  return input.withDims(dims);
}

//===----------------------------------------------------------------------===//
// InitAttr
//===----------------------------------------------------------------------===//

static unsigned expectedInitArgs(InitKind kind, bool &optionalSecond) {
  optionalSecond = false;
  switch (kind) {
  case InitKind::Zeros:
  case InitKind::Ones:
    return 0;
  case InitKind::Normal:
    optionalSecond = true; // normal(std) or normal(std, mean)
    return 1;
  case InitKind::Uniform:
    return 2;
  case InitKind::Constant:
    return 1;
  }
  return 0;
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, DenseF64ArrayAttr args) {
  bool optionalSecond;
  unsigned expected = expectedInitArgs(kind, optionalSecond);
  size_t count = args ? args.size() : 0;
  if (count != expected && !(optionalSecond && count == expected + 1))
    return emitError() << "initialiser '" << stringifyInitKind(kind) << "' takes "
                       << expected << (optionalSecond ? " or " + std::to_string(expected + 1)
                                                      : std::string())
                       << (expected == 1 && !optionalSecond ? " argument" : " arguments")
                       << ", got " << count;
  if (kind == InitKind::Normal && args[0] < 0)
    return emitError() << "normal initialiser needs a non-negative standard deviation, got "
                       << args[0];
  if (kind == InitKind::Uniform && args[0] > args[1])
    return emitError() << "uniform initialiser needs low <= high, got (" << args[0] << ", "
                       << args[1] << ")";
  return success();
}

InitAttr mtc::mt::parseInitSpec(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown initialiser '" << keyword
                          << "'; expected zeros, ones, normal, uniform or constant";
    return {};
  }
  SmallVector<double> args;
  if (succeeded(parser.parseOptionalLParen())) {
    if (parser.parseCommaSeparatedList([&]() -> ParseResult {
          double value;
          if (parser.parseFloat(value))
            return failure();
          args.push_back(value);
          return success();
        }) ||
        parser.parseRParen())
      return {};
  }
  return InitAttr::getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                              *kind, DenseF64ArrayAttr::get(parser.getContext(), args));
}

void mtc::mt::printInitSpec(AsmPrinter &printer, InitAttr init) {
  printer << stringifyInitKind(init.getKind());
  if (init.getArgs().empty())
    return;
  printer << '(';
  llvm::interleaveComma(init.getArgs().asArrayRef(), printer,
                        [&](double value) { printer.printFloat(llvm::APFloat(value)); });
  printer << ')';
}

// #mt.init<normal(0.02)>
Attribute InitAttr::parse(AsmParser &parser, Type) {
  InitAttr init;
  if (parser.parseLess() || !(init = parseInitSpec(parser)) || parser.parseGreater())
    return {};
  return init;
}

void InitAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printInitSpec(printer, *this);
  printer << '>';
}
