//===- MTPDialect.cpp - mtp dialect, attributes and types -----------------===//

#include "dialects/mtp/IR/MTPDialect.h"
#include "dialects/mtp/IR/MTPOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mtc;
using namespace mtc::mtp;

#include "dialects/mtp/IR/MTPDialect.cpp.inc"

#include "dialects/mtp/IR/MTPEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/mtp/IR/MTPAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/mtp/IR/MTPTypes.cpp.inc"

void MTPDialect::initialize() {
  registerAttributes();
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "dialects/mtp/IR/MTPOps.cpp.inc"
      >();
}

void MTPDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/mtp/IR/MTPAttrs.cpp.inc"
      >();
}

void MTPDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/mtp/IR/MTPTypes.cpp.inc"
      >();
}

LogicalResult MTPDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  if (attr.getName() == getMeshAttrHelper().getName()) {
    if (!isa<MeshAttr>(attr.getValue()))
      return op->emitError() << "'" << attr.getName().getValue() << "' must be a mesh (#mtp.mesh<...>), not "
                             << attr.getValue();
    return success();
  }
  if (attr.getName() == getLayoutAttrHelper().getName()) {
    auto layout = dyn_cast<TypeAttr>(attr.getValue());
    if (!layout || !isa<ShardedTensorType>(layout.getValue()))
      return op->emitError() << "'" << attr.getName().getValue()
                             << "' must be a laid-out tensor type (!mtp.tensor<...>), not "
                             << attr.getValue();
    return success();
  }
  return op->emitError() << "the mtp dialect has no attribute '" << attr.getName().getValue()
                         << "' (it has '" << getLayoutAttrHelper().getName().getValue()
                         << "' and '" << getMeshAttrHelper().getName().getValue() << "')";
}

// Passes may not load dialects: a context without mtp loaded has no laid-out types.
ShardedTensorType mtc::mtp::getLocalLayout(Operation *op) {
  auto *dialect = op->getContext()->getLoadedDialect<MTPDialect>();
  if (!dialect)
    return {};
  if (TypeAttr layout = dialect->getLayoutAttrHelper().getAttr(op))
    return dyn_cast<ShardedTensorType>(layout.getValue());
  return {};
}

void mtc::mtp::setLocalLayout(Operation *op, ShardedTensorType layout) {
  cast<MTPDialect>(layout.getDialect()).getLayoutAttrHelper().setAttr(op, TypeAttr::get(layout));
}

//===----------------------------------------------------------------------===//
// MeshAttr
//===----------------------------------------------------------------------===//

/// `[a = 2, b = 4]`.
static ParseResult parseAxisList(AsmParser &parser, SmallVectorImpl<StringAttr> &names,
                                 SmallVectorImpl<int64_t> &sizes) {
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
    std::string name;
    int64_t size;
    if (parser.parseKeywordOrString(&name) || parser.parseEqual() || parser.parseInteger(size))
      return failure();
    names.push_back(parser.getBuilder().getStringAttr(name));
    sizes.push_back(size);
    return success();
  });
}

/// `<[a = 2, b = 4 two_chunk]>`: a mesh's body, as a mesh attribute or inside a sharded
/// tensor type.
static MeshAttr parseMesh(AsmParser &parser) {
  SmallVector<StringAttr> names, twoChunk;
  SmallVector<int64_t> sizes;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
        std::string name;
        int64_t size;
        if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
            parser.parseInteger(size))
          return failure();
        names.push_back(parser.getBuilder().getStringAttr(name));
        sizes.push_back(size);
        if (succeeded(parser.parseOptionalKeyword("two_chunk")))
          twoChunk.push_back(names.back());
        return success();
      }) ||
      parser.parseGreater())
    return {};
  return MeshAttr::getChecked([&] { return parser.emitError(loc); }, parser.getContext(), names,
                              sizes, twoChunk);
}

Attribute MeshAttr::parse(AsmParser &parser, Type) { return parseMesh(parser); }

void MeshAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(llvm::zip_equal(getAxisNames(), getAxisSizes()), printer,
                        [&](auto axis) {
                          printer.printKeywordOrString(std::get<0>(axis).getValue());
                          printer << " = " << std::get<1>(axis);
                          if (isTwoChunk(std::get<0>(axis).getValue()))
                            printer << " two_chunk";
                        });
  printer << "]>";
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<StringAttr> names, ArrayRef<int64_t> sizes,
                               ArrayRef<StringAttr> twoChunk) {
  if (names.size() != sizes.size())
    return emitError() << "a mesh needs one size per axis";
  if (names.empty())
    return emitError() << "a mesh needs at least one axis";
  llvm::StringSet<> seen;
  for (auto [name, size] : llvm::zip_equal(names, sizes)) {
    if (!seen.insert(name.getValue()).second)
      return emitError() << "mesh axis '" << name.getValue() << "' appears twice";
    if (size < 1)
      return emitError() << "mesh axis '" << name.getValue() << "' has size " << size
                         << "; sizes are positive";
  }
  // In mesh order and without repeats, so that equal meshes are one attribute.
  ptrdiff_t previous = -1;
  for (StringAttr name : twoChunk) {
    ptrdiff_t position = llvm::find(names, name) - names.begin();
    if (position == static_cast<ptrdiff_t>(names.size()))
      return emitError() << "two_chunk axis '" << name.getValue() << "' is not a mesh axis";
    if (position <= previous)
      return emitError() << "two_chunk axes must be listed once each in mesh order, found '"
                         << name.getValue() << "' again or out of order";
    previous = position;
  }
  return success();
}

int64_t MeshAttr::getPieces(StringRef name) const {
  return *getAxisSize(name) * (isTwoChunk(name) ? 2 : 1);
}

bool MeshAttr::isTwoChunk(StringRef name) const {
  return llvm::any_of(getTwoChunkAxes(), [&](StringAttr axis) { return axis.getValue() == name; });
}

std::optional<int64_t> MeshAttr::getAxisSize(StringRef name) const {
  for (auto [axis, size] : llvm::zip_equal(getAxisNames(), getAxisSizes()))
    if (axis.getValue() == name)
      return size;
  return std::nullopt;
}

int64_t MeshAttr::getNumDevices() const {
  int64_t devices = 1;
  for (int64_t size : getAxisSizes())
    devices *= size;
  return devices;
}

//===----------------------------------------------------------------------===//
// ShardedTensorType
//===----------------------------------------------------------------------===//

static SmallVector<StringRef> axisNames(ArrayAttr axes) {
  SmallVector<StringRef> names;
  for (Attribute axis : axes)
    if (auto name = dyn_cast<StringAttr>(axis))
      names.push_back(name.getValue());
  return names;
}

static ArrayAttr axisArray(MLIRContext *ctx, ArrayRef<StringRef> names) {
  SmallVector<Attribute> attrs;
  for (StringRef name : names)
    attrs.push_back(StringAttr::get(ctx, name));
  return ArrayAttr::get(ctx, attrs);
}

/// `[a, b]`.
static ParseResult parseAxisNames(AsmParser &parser, SmallVectorImpl<std::string> &storage) {
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
    storage.emplace_back();
    return parser.parseKeywordOrString(&storage.back());
  });
}

static void printAxisNames(AsmPrinter &printer, ArrayRef<StringRef> names) {
  printer << '[';
  llvm::interleaveComma(names, printer, [&](StringRef name) { printer.printKeywordOrString(name); });
  printer << ']';
}

Type ShardedTensorType::parse(AsmParser &parser) {
  MLIRContext *ctx = parser.getContext();
  SMLoc loc = parser.getCurrentLocation();
  // The global tensor is written as mt.tensor's body: `[dims], elementType`.
  SmallVector<StringAttr> dimNames;
  SmallVector<int64_t> dimSizes;
  Type elementType;
  if (parser.parseLess() || parseAxisList(parser, dimNames, dimSizes) || parser.parseComma() ||
      parser.parseType(elementType) || parser.parseComma())
    return {};
  auto global = mt::NamedTensorType::getChecked([&] { return parser.emitError(loc); }, ctx,
                                                ArrayRef<StringAttr>(dimNames),
                                                ArrayRef<int64_t>(dimSizes), elementType);
  MeshAttr mesh = parseMesh(parser);
  if (!global || !mesh)
    return {};
  SmallVector<NamedAttribute> split;
  SmallVector<std::string> partial;
  while (succeeded(parser.parseOptionalComma())) {
    if (succeeded(parser.parseOptionalKeyword("split"))) {
      if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Braces, [&]() -> ParseResult {
            std::string dim;
            SmallVector<std::string> names;
            if (parser.parseKeywordOrString(&dim) || parser.parseEqual() ||
                parseAxisNames(parser, names))
              return failure();
            SmallVector<StringRef> refs(names.begin(), names.end());
            split.emplace_back(StringAttr::get(ctx, dim), axisArray(ctx, refs));
            return success();
          }))
        return {};
    } else if (succeeded(parser.parseOptionalKeyword("partial"))) {
      if (parseAxisNames(parser, partial))
        return {};
    } else {
      parser.emitError(parser.getCurrentLocation(), "expected 'split' or 'partial'");
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  SmallVector<StringRef> partialNames(partial.begin(), partial.end());
  return getChecked([&] { return parser.emitError(loc); }, ctx, global, mesh,
                    DictionaryAttr::get(ctx, split), axisArray(ctx, partialNames));
}

void ShardedTensorType::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(getGlobal().getDims(), printer, [&](const mt::NamedDim &dim) {
    printer.printKeywordOrString(dim.name.getValue());
    printer << '=' << dim.size;
  });
  printer << "], " << getGlobal().getElementType() << ", ";
  printer.printStrippedAttrOrType(getMesh());
  if (!getSplit().empty()) {
    printer << ", split {";
    llvm::interleaveComma(getSplit(), printer, [&](NamedAttribute entry) {
      printer.printKeywordOrString(entry.getName().getValue());
      printer << " = ";
      printAxisNames(printer, axisNames(cast<ArrayAttr>(entry.getValue())));
    });
    printer << '}';
  }
  if (!getPartial().empty()) {
    printer << ", partial ";
    printAxisNames(printer, getPartialAxes());
  }
  printer << '>';
}

LogicalResult ShardedTensorType::verify(function_ref<InFlightDiagnostic()> emitError,
                                        mt::NamedTensorType global, MeshAttr mesh,
                                        DictionaryAttr split, ArrayAttr partial) {
  if (!global || !mesh || !split || !partial)
    return emitError() << "a sharded tensor needs a global type, a mesh, a split and a partial list";
  llvm::StringSet<> used;
  auto use = [&](Attribute axisAttr, StringRef what) -> LogicalResult {
    auto axis = dyn_cast<StringAttr>(axisAttr);
    if (!axis)
      return emitError() << what << ": mesh axes are strings";
    if (!mesh.getAxisSize(axis.getValue()))
      return emitError() << what << ": the mesh has no axis '" << axis.getValue() << "'";
    if (!used.insert(axis.getValue()).second)
      return emitError() << "mesh axis '" << axis.getValue()
                         << "' is used twice in one tensor";
    return success();
  };
  for (NamedAttribute entry : split) {
    StringRef dim = entry.getName().getValue();
    if (!global.hasDim(dim))
      return emitError() << "split of dimension '" << dim << "', which the tensor "
                         << global.dimsToString() << " does not have";
    auto axes = dyn_cast<ArrayAttr>(entry.getValue());
    if (!axes)
      return emitError() << "split of '" << dim << "': expected a list of mesh axes";
    int64_t parts = 1;
    bool twoChunk = false;
    for (Attribute axis : axes) {
      if (failed(use(axis, ("split of '" + dim + "'").str())))
        return failure();
      StringRef name = cast<StringAttr>(axis).getValue();
      twoChunk |= mesh.isTwoChunk(name);
      parts *= mesh.getPieces(name);
    }
    int64_t size = global.getDimSize(dim);
    if (size % parts != 0)
      return emitError() << "dimension '" << dim << "' of size " << size
                         << " cannot be split into " << parts << " equal "
                         << (twoChunk ? "chunks (two per coordinate of a two_chunk axis)"
                                      : "parts");
  }
  for (Attribute axis : partial)
    if (failed(use(axis, "partial")))
      return failure();
  return success();
}

SmallVector<StringRef> ShardedTensorType::getSplitAxes(StringRef dim) const {
  if (auto axes = getSplit().getAs<ArrayAttr>(dim))
    return axisNames(axes);
  return {};
}

bool ShardedTensorType::isPartialOver(StringRef axis) const {
  return llvm::is_contained(getPartialAxes(), axis);
}

SmallVector<StringRef> ShardedTensorType::getPartialAxes() const {
  return axisNames(getPartial());
}

mt::NamedTensorType ShardedTensorType::getLocalType() const {
  SmallVector<mt::NamedDim> dims = getGlobal().getDims();
  for (mt::NamedDim &dim : dims)
    for (StringRef axis : getSplitAxes(dim.name.getValue()))
      dim.size /= *getMesh().getAxisSize(axis);
  return getGlobal().withDims(dims);
}

ShardedTensorType ShardedTensorType::withSplit(StringRef dim, ArrayRef<StringRef> axes) const {
  MLIRContext *ctx = getContext();
  NamedAttrList split(getSplit());
  if (axes.empty())
    split.erase(dim);
  else
    split.set(dim, axisArray(ctx, axes));
  return get(ctx, getGlobal(), getMesh(), split.getDictionary(ctx), getPartial());
}

ShardedTensorType ShardedTensorType::withPartial(ArrayRef<StringRef> axes) const {
  return get(getContext(), getGlobal(), getMesh(), getSplit(), axisArray(getContext(), axes));
}
